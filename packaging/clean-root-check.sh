#!/usr/bin/env bash
# clean-root-check.sh [ROOT]: does what the README tells a newcomer, in a
# clean Debian 12 root (debootstrap --variant=minbase; made in ROOT, by
# default /tmp/cicada-clean-root, when ROOT is missing), as a container
# would hold it: its own mount and pid namespaces with the root pivoted.
# It installs build/deb's package with apt, checks the systemd unit
# (systemd-analyze verify), starts the server as the unit does (no
# systemd runs there), runs a CUDA program as a member of group cicada,
# then checkpoints a run mid-way with cicada-criu and restores it; both
# outputs must equal the native run's. The driver is the CPU stand-in
# (tests/fakecuda). Needs root, debootstrap, Debian's mirror, and
# `make all bundle deb`. Prints "N passed, N failed".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
R=${1:-/tmp/cicada-clean-root}
B=$ROOT/build
deb=$(ls "$B"/deb/cicada_*.deb 2>/dev/null | tail -n1)
[ -n "$deb" ] || { echo "clean-root-check: no package in $B/deb: run 'make deb'"; exit 2; }
if [ ! -x "$R/bin/sh" ]; then
	timeout 900 debootstrap --variant=minbase bookworm "$R" http://deb.debian.org/debian >/tmp/debootstrap.log 2>&1 ||
		{ echo "clean-root-check: debootstrap failed (/tmp/debootstrap.log)"; exit 2; }
fi
cp "$deb" "$R/root/" && cp /etc/resolv.conf "$R/etc/resolv.conf"
mkdir -p "$R/stage" "$R/opt/app"
cp "$B/tests/fakecuda/libcuda.so.1" "$R/stage/"
cp "$B/tests/programs/cr_pattern" "$R/opt/app/" && cp -r "$B/tests/kernels" "$R/opt/app/"
cat >"$R/stage/inner.sh" <<'INNER'
set -u
PASS=0 FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }
for fd in $(ls /proc/$$/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done 2>/dev/null
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
APP="/opt/app/cr_pattern /opt/app/kernels 64 10 150"
U=/usr/lib/systemd/system/gpu-server.service
apt-get -qq update >/tmp/apt.log 2>&1
if apt-get -y -qq install /root/cicada_*.deb >>/tmp/apt.log 2>&1; then ok "apt install of the package"
else bad "apt install of the package"; tail -3 /tmp/apt.log; fi
cp /stage/libcuda.so.1 /usr/lib/x86_64-linux-gnu/ && ldconfig        # the driver: the CPU stand-in
id newcomer >/dev/null 2>&1 || useradd -m newcomer
adduser newcomer cicada >/dev/null                                     # README: sudo adduser $USER cicada
apt-get -y -qq install systemd man-db >>/tmp/apt.log 2>&1
v=$(systemd-analyze verify $U 2>&1 | grep -v "sysinit.target\|Failed to \(create\|setup\|initialize\)")
if [ -z "$v" ]; then ok "systemd-analyze verify gpu-server.service"; else bad "systemd-analyze: $v"; fi
# The service as its unit starts it (the root's systemd is not running).
ARGS=$(sed -n '/^ExecStart=/,/[^\\]$/p' $U | sed 's/^ExecStart=//; s/\\$//' | tr -d '\n' | sed 's/\$GPU_SERVER_OPTS//')
mkdir -p /run/cicada /var/cache/cicada
(CUDA_CACHE_PATH=/var/cache/cicada/compute exec timeout 300 setpriv \
	--regid="$(getent group cicada | cut -d: -f3)" --clear-groups $ARGS >/tmp/server.log 2>&1) &
for _ in $(seq 100); do [ -S /run/cicada/gpu.sock ] && break; sleep 0.1; done
[ "$(stat -c %G:%a /run/cicada/gpu.sock 2>/dev/null)" = cicada:660 ] && ok "the socket: group cicada, 0660" ||
	bad "the socket: $(stat -c %G:%a /run/cicada/gpu.sock 2>&1)"
su newcomer -c "timeout 60 $APP" >/tmp/native 2>&1
su newcomer -c "LD_LIBRARY_PATH=/usr/lib/cicada timeout 120 $APP" >/tmp/user.out 2>&1
cmp -s /tmp/native /tmp/user.out && ok "a member of group cicada runs a program through it: output as native" ||
	bad "through Cicada as newcomer: $(tail -1 /tmp/user.out)"
# Checkpoint and restore, as the README. (criu dumps another user's process
# only with CAP_SYS_RESOURCE, which some sandboxes withhold: root's run.)
rm -rf /ckpt/job42 && mkdir -p /ckpt/job42 /home/run
(cd /home/run && LD_LIBRARY_PATH=/usr/lib/cicada timeout 120 setsid $APP >/home/run/out 2>&1 </dev/null &)
for _ in $(seq 100); do grep -q "^step 2 " /home/run/out 2>/dev/null && break; sleep 0.1; done
PID=""
for d in /proc/[0-9]*; do tr '\0' ' ' <"$d/cmdline" 2>/dev/null | grep -q "^/opt/app/cr_pattern " && PID=${d#/proc/}; done
timeout 60 cicada-criu dump -t "$PID" -D /ckpt/job42 -L /usr/lib/criu --shell-job -o dump.log &&
	ok "cicada-criu dump mid-run" || { bad "cicada-criu dump"; grep Error /ckpt/job42/dump.log | tail -3; }
gpu-snapshot inspect /ckpt/job42 >/tmp/inspect 2>&1 && ok "gpu-snapshot inspect" || bad "gpu-snapshot inspect: $(tail -1 /tmp/inspect)"
timeout 120 cicada-criu restore -D /ckpt/job42 -L /usr/lib/criu --shell-job -o restore.log &&
	ok "cicada-criu restore" || { bad "cicada-criu restore"; grep Error /ckpt/job42/restore.log | tail -3; }
cmp -s /tmp/native /home/run/out && ok "the restored run's output equals the native run's" ||
	{ bad "the restored run's output differs"; diff /tmp/native /home/run/out | head -3; }
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
INNER
timeout 900 unshare -m -p -f --propagation private bash -c "
mount --bind '$R' '$R' && cd '$R' && mkdir -p oldroot && pivot_root . oldroot &&
mount -t proc proc /proc && mount -t tmpfs -o mode=755 tmpfs /dev &&
mknod -m 666 /dev/null c 1 3 && mknod -m 666 /dev/zero c 1 5 && mknod -m 666 /dev/urandom c 1 9 &&
mknod -m 666 /dev/random c 1 8 && mkdir /dev/shm && mount -t tmpfs tmpfs /dev/shm &&
mount -t tmpfs tmpfs /run && mount -t tmpfs tmpfs /tmp &&
mount --make-rprivate /oldroot && umount -l /oldroot && exec bash /stage/inner.sh"

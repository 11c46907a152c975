# tests/containers/run.sh: containers checkpointed on one node and
# restored on another, sourced by tests/run-tests.sh after cr-tests.sh
# (whose wait_for and $CRIU it uses; run-tests.sh defines ok/bad,
# deadline, $T, $B, $PROGS, $DRIVER_ENV, $MODE, $SERVER_DEADLINE).
#
# A node is a network namespace with its own gpu-server (the CPU
# stand-in, or the GPU), and a mount namespace in which $CT/node is the
# node's own folder, $CT/A or $CT/B: what /run/cicada is on a real node.
# Every container mounts $CT/node at the same path and reaches its
# node's server through the socket there (CICADA_SERVER), from a network
# namespace of its own with no network. The image holds cr_pattern, the
# libraries ldd names, build/lib (libcicada.so as libcuda.so.1) and the
# kernels, from this build: no registry. CRIU loads Cicada's plugin from
# the configuration file the container's annotation org.criu.config
# names (runc reads it; $CT/criu.conf: libdir). Each node has its own
# podman storage and runc state: the checkpoint (and the image, by podman
# save and load) is all that passes from A to B.
#
#   containers       podman (runc under it): run on A, checkpoint
#                    --leave-running (it goes on), checkpoint --export
#                    (it stops; A ends its session), restore --import on
#                    B; the log is what an undisturbed run prints
#   containers-runc  the same with runc and CRIU directly: runc
#                    checkpoint --image-path, the images copied, runc
#                    restore on B
#
# On a GPU node (run-tests.sh --gpu containers-runc) the servers drive
# the GPU; runc is the system's or the one `make bundle` copied into the
# build (podman cannot be carried: containers says so and is not run).

CT=""
CT_STEPS=16
CT_STEP_MS=250
CT_ULIMITS="--ulimit nofile=1024:1024 --ulimit nproc=1024:1024"
RUNC=${RUNC:-$(command -v runc || echo "$B/bin/runc")}

# ct_rootfs DIR: the image's files: cr_pattern, build/lib and the
# kernels under /opt/cicada, and every library ldd names at its path.
ct_rootfs() {
	local r=$1 f lib
	mkdir -p "$r"/{proc,dev,sys,tmp,opt/cicada/bin,opt/cicada/lib} "$r$CT/node" || return 1
	cp "$PROGS/cr_pattern" "$r/opt/cicada/bin/" &&
		cp -a "$B/lib/libcicada.so" "$B/lib/libcuda.so.1" "$B/lib/deps" "$r/opt/cicada/lib/" &&
		cp -r "$CICADA_KERNELS" "$r/opt/cicada/kernels" || return 1
	for f in "$PROGS/cr_pattern" "$B/lib/libcicada.so"; do
		LD_LIBRARY_PATH=$B/lib ldd "$f" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }'
	done | sort -u | while read -r lib; do
		case $lib in "$B"/*) continue ;; esac
		mkdir -p "$r$(dirname "$lib")" && cp -L "$lib" "$r$lib" || exit 1
	done
}

# ct_on NODE CMD...: CMD on NODE (its network namespace; $CT/node is
# $CT/NODE), within 120 s.
ct_on() {
	local n=$1
	shift
	timeout -k 5 120 nsenter --net="/run/netns/cicada-ct$n-$$" unshare --mount --propagation private \
		sh -c 'mount --bind "$0" "$1" && shift && exec "$@"' "$CT/$n" "$CT/node" "$@"
}

# ct_podman NODE ARGS...: podman of NODE (its own storage; runc, whose
# CRIU is the build's; no systemd here: cgroupfs, a file for events).
ct_podman() {
	local n=$1
	shift
	PATH=$B/bin:$PATH ct_on "$n" podman --root "$CT/$n/storage" --runroot "$CT/$n/run" --tmpdir "$CT/$n/tmp" \
		--storage-driver vfs --runtime runc --cgroup-manager cgroupfs --events-backend file "$@"
}

# ct_runc NODE ARGS...: runc of NODE (its own state), with the build's CRIU.
ct_runc() {
	local n=$1
	shift
	ct_on "$n" "$RUNC" --root "$CT/$n/runc" --criu "$CRIU" "$@"
}

# ct_node NODE: NODE's namespace and gpu-server, its socket in $CT/NODE.
ct_node() {
	local n=$1 pid
	mkdir -p "$CT/$n" && ip netns add "cicada-ct$n-$$" && ip -n "cicada-ct$n-$$" link set lo up || return 1
	nsenter --net="/run/netns/cicada-ct$n-$$" env $DRIVER_ENV timeout -k 5 "$SERVER_DEADLINE" \
		"$B/bin/gpu-server" --listen "unix:$CT/$n/gpu.sock" --cache-dir "$CT/$n/cache" \
		--run-dir "$CT/$n/sessions" --workers 1 >>"$CT/$n.log" 2>&1 &
	pid=$!
	SERVERS="$SERVERS $pid"
	disown $pid
	wait_for_server $pid "$CT/$n/gpu.sock" "$CT/$n.log" containers
}

# ct_runc_bundle NODE: NODE's bundle: config.json over the shared rootfs.
ct_runc_bundle() {
	local n=$1 args a netns='{ "type": "network" }, '
	args=""
	# criu locks a container's own network namespace with iptables-restore
	# (this criu knows no other way): on a node without it, as a GPU node
	# may be, the container shares its node's network namespace.
	command -v iptables-restore >/dev/null ||
		{ netns=""; echo "     (no iptables-restore here: the runc container shares the node's network namespace)"; }
	for a in /opt/cicada/bin/cr_pattern /opt/cicada/kernels $CT_ARGS; do args="$args\"$a\", "; done
	mkdir -p "$CT/$n/bundle" && cat >"$CT/$n/bundle/config.json" <<-EOF
	{
	  "ociVersion": "1.0.2",
	  "process": {
	    "terminal": false, "user": { "uid": 0, "gid": 0 }, "cwd": "/", "noNewPrivileges": true,
	    "args": [ ${args%, } ],
	    "env": [ "LD_LIBRARY_PATH=/opt/cicada/lib", "CICADA_SERVER=unix:$CT/node/gpu.sock" ],
	    "capabilities": { "bounding": [ "CAP_KILL" ], "effective": [ "CAP_KILL" ], "permitted": [ "CAP_KILL" ] }
	  },
	  "root": { "path": "$CT/rootfs", "readonly": true },
	  "hostname": "cicada-ct",
	  "annotations": { "org.criu.config": "$CT/criu.conf" },
	  "mounts": [
	    { "destination": "/proc", "type": "proc", "source": "proc" },
	    { "destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": [ "nosuid", "mode=755", "size=1m" ] },
	    { "destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": [ "nosuid", "nodev", "mode=1777" ] },
	    { "destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": [ "nosuid", "nodev", "mode=1777" ] },
	    { "destination": "$CT/node", "type": "bind", "source": "$CT/node", "options": [ "rbind", "rw" ] }
	  ],
	  "linux": {
	    "namespaces": [ { "type": "pid" }, $netns{ "type": "ipc" }, { "type": "uts" }, { "type": "mount" } ],
	    "maskedPaths": [ "/proc/kcore", "/proc/keys", "/proc/timer_list" ],
	    "readonlyPaths": [ "/proc/sys", "/proc/sysrq-trigger" ]
	  }
	}
	EOF
}

# ct_sessions_end NODE: NODE's server holds no session within 15 s
# (the dumped container's ended with it).
ct_sessions_end() {
	for _ in $(seq 20); do
		[ "$(timeout 10 "$B/bin/cicadactl" --run-dir "$CT/$1/sessions" list --json 2>&1)" = "[]" ] && return 0
		sleep 0.2
	done
	echo "     node $1 still holds a session after the container's checkpoint:"
	timeout 10 "$B/bin/cicadactl" --run-dir "$CT/$1/sessions" list | sed 's/^/     | /'
	return 1
}

# ct_criu_errors NODE: what criu said went wrong on NODE (podman keeps
# the log of a failed dump or restore in the container's folder).
ct_criu_errors() {
	find "$CT/$1" -name 'dump.log' -o -name 'restore.log' 2>/dev/null | xargs -r grep -h "Error\|cicada:" |
		grep -v "RLIMIT_NOFILE" | tail -5 | sed 's/^/     criu | /'
}

# ct_same OUT: OUT is the undisturbed run's output, and node B restored
# the GPU state.
ct_same() {
	cmp -s "$CT/native" "$1" && grep -q "restored snapshot" "$CT/B.log" && return 0
	diff "$CT/native" "$1" | head -5 | sed 's/^/     | /'
	tail -3 "$CT/B.log" | sed 's/^/     B | /'
	return 1
}

# podman: the image made on A from the rootfs, saved and loaded on B.
ct_podman_case() {
	local log err=$CT/podman.err id=cicada-ct-$$-p
	tar -C "$CT/rootfs" -c . | ct_podman A import -q - localhost/cicada-ct:test >/dev/null 2>"$err" &&
		ct_podman A save -q -o "$CT/image.tar" localhost/cicada-ct:test 2>>"$err" &&
		ct_podman B load -q -i "$CT/image.tar" >/dev/null 2>>"$err" || { sed 's/^/     | /' "$err"; return 1; }
	# shellcheck disable=SC2086  # the options' words
	ct_podman A run -d --name "$id" --network none $CT_ULIMITS --annotation "org.criu.config=$CT/criu.conf" \
		-v "$CT/node:$CT/node" -e CICADA_SERVER="unix:$CT/node/gpu.sock" -e LD_LIBRARY_PATH=/opt/cicada/lib \
		--log-driver k8s-file localhost/cicada-ct:test /opt/cicada/bin/cr_pattern /opt/cicada/kernels $CT_ARGS \
		>/dev/null 2>"$err" || { echo "     podman cannot run a container here:"; sed 's/^/     | /' "$err"; return 1; }
	log=$(ct_podman A inspect --format '{{.HostConfig.LogConfig.Path}}' "$id")
	wait_for " step 2 " "$log" 60 || { echo "     the container never reached step 2"; return 1; }
	ct_podman A container checkpoint --leave-running "$id" >/dev/null 2>"$err" &&
		wait_for " step 5 " "$log" 60 &&
		ct_podman A container checkpoint --export "$CT/ckpt.tar" "$id" >/dev/null 2>>"$err" ||
		{ sed 's/^/     | /' "$err"; tail -3 "$log"; ct_criu_errors A; return 1; }
	ct_sessions_end A || return 1
	mkdir -p "$CT/B/in" && cp "$CT/ckpt.tar" "$CT/B/in/" &&
		ct_podman B container restore --import "$CT/B/in/ckpt.tar" >/dev/null 2>"$err" &&
		ct_podman B wait "$id" >/dev/null 2>>"$err" &&
		ct_podman B logs "$id" >"$CT/podman.out" 2>>"$err" || { sed 's/^/     | /' "$err"; ct_criu_errors B; return 1; }
	ct_same "$CT/podman.out"
}

# runc: the container's output is a pipe (criu restores a pipe from
# outside as the restoring runc's own stdout).
ct_runc_case() {
	local out=$CT/A/runc.out err=$CT/runc.err id=cicada-ct-$$-r
	ct_runc_bundle A && ct_runc_bundle B || return 1
	{ ct_runc A run -d --bundle "$CT/A/bundle" "$id" </dev/null 2> >(cat >"$err") | cat >"$out"; } &
	disown $!
	wait_for "^step 2 " "$out" 60 || { echo "     runc cannot run the container here:"; sed 's/^/     | /' "$err"; return 1; }
	ct_runc A checkpoint --leave-running --image-path "$CT/A/lr" --work-path "$CT/A/lr" "$id" 2>>"$err" &&
		wait_for "^step 5 " "$out" 60 &&
		ct_runc A checkpoint --image-path "$CT/A/ckpt" --work-path "$CT/A/ckpt" "$id" 2>>"$err" ||
		{ sed 's/^/     | /' "$err"; ct_criu_errors A; return 1; }
	ct_sessions_end A || return 1
	cp -a "$CT/A/ckpt" "$CT/B/ckpt" || return 1
	{ ct_runc B restore -d --image-path "$CT/B/ckpt" --work-path "$CT/B/ckpt" --bundle "$CT/B/bundle" "$id" \
		</dev/null 2> >(cat >>"$err") | cat >"$CT/B/runc.out"; } &
	disown $!
	wait_for "^done" "$CT/B/runc.out" 60 ||
		{ sed 's/^/     | /' "$err"; ct_criu_errors B; return 1; }
	cat "$out" "$CT/B/runc.out" >"$CT/runc.all"
	ct_same "$CT/runc.all"
}

# ct_clear: no container of these tests left on either node.
ct_clear() {
	local n
	for n in A B; do
		[ -d "$CT/$n/storage" ] && ct_podman "$n" rm -f -t 0 "cicada-ct-$$-p" >/dev/null 2>&1
		[ -d "$CT/$n/runc" ] && ct_runc "$n" delete -f "cicada-ct-$$-r" >/dev/null 2>&1
	done
	pkill -9 -f "conmon .*$CT/" 2>/dev/null
	kill_ours "^/opt/cicada/bin/cr_pattern"
}

ct_down() {
	local n
	[ -n "$CT" ] || return 0
	ct_clear
	for n in A B; do
		pkill -9 -f "gpu-server --listen unix:$CT/$n/gpu.sock" 2>/dev/null
		ip netns del "cicada-ct$n-$$" 2>/dev/null
	done
	[ -n "${KEEP_T:-}" ] || rm -rf "$CT"
	CT=""
}

ct_case() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else bad "$what"; fi
	ct_clear
}

# ct_up: the nodes, the rootfs and the native reference.
ct_up() {
	local native
	CT=$T/ct
	CT_ARGS="$CR_MIB $CT_STEPS $CT_STEP_MS"
	mkdir -p "$CT/node" && echo "libdir $B/lib/criu" >"$CT/criu.conf" || return 1
	# shellcheck disable=SC2086  # the arguments' words
	env $DRIVER_ENV timeout 120 "$PROGS/cr_pattern" "$CICADA_KERNELS" $CT_ARGS >"$CT/native" 2>&1 &
	native=$!
	ct_rootfs "$CT/rootfs" && ct_node A && ct_node B || { wait $native; return 1; }
	wait $native
}

run_container_tests() {
	want containers || want containers-runc || return
	if ! deadline 60 "$CRIU" check >/dev/null 2>&1; then
		bad "criu check fails here ($CRIU); container tests not run"
		return
	fi
	ct_up || { bad "containers: cannot set up the nodes"; ct_down; return; }
	if want containers && ! command -v podman >/dev/null && [ "$MODE" = gpu ]; then
		echo "note containers: no podman on this node (it cannot be carried); containers-runc runs the same path"
	elif want containers && ! command -v podman >/dev/null; then
		bad "containers: podman is not installed (make deps installs it)"
	elif want containers; then
		ct_case "a podman container checkpointed (--leave-running: it goes on; --export: A ends its session) and restored (--import) on another node: output identical" \
			ct_podman_case
	fi
	if want containers-runc && [ ! -x "$RUNC" ]; then
		bad "containers-runc: no runc here (make deps installs it; make bundle copies it into the build)"
	elif want containers-runc; then
		ct_case "a runc container checkpointed (--leave-running, then not) and restored on another node: output identical" \
			ct_runc_case
	fi
	ct_down
}

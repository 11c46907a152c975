#!/usr/bin/env bash
# demo.sh: `make demo`, the whole mission in one command. Installs the
# build tools if one is missing and builds Cicada; then an unmodified CUDA
# program runs through a local gpu-server and, while it runs, is
#   1. checkpointed with CRIU (its GPU state with it),
#   2. left without its server, which is killed,
#   3. restored into a new gpu-server,
#   4. moved with gpu-migrate to a second server (another node: a network
#      and pid namespace, where iproute2 is here),
# and its output is compared with a run that was never interrupted. On a
# machine without a GPU the same flow runs against the CPU stand-in for
# the driver (tests/fakecuda), and the first line says so. Every process
# it starts is bounded by a deadline.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
. scripts/lib.sh
TMP="" PIDS="" NS="" BR="" APP=""

cleanup() {
	set +e
	local p
	[ -n "$APP" ] && kill -9 "$APP" 2>/dev/null
	for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
	[ -n "$TMP" ] && pkill -9 -f "cache-dir $TMP/" 2>/dev/null
	[ -n "$NS" ] && ip netns del "$NS" 2>/dev/null
	[ -n "$BR" ] && ip link del "$BR" 2>/dev/null
	[ -n "$TMP" ] && [ -z "${KEEP_T:-}" ] && rm -rf "$TMP"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

tools_missing() {
	command -v rpcgen >/dev/null 2>&1 || return 0
	[ -f /usr/include/tirpc/rpc/rpc.h ] || return 0
	[ -f /usr/include/xxhash.h ] || return 0
	command -v criu >/dev/null 2>&1 || return 0
	return 1
}

build() {
	local log
	log=$(mktemp /tmp/cicada-demo-build.XXXXXX)
	if ! make -j2 all bundle >"$log" 2>&1; then
		echo "demo: the build failed:" >&2
		grep -E 'error|Error|\*\*\*' "$log" | tail -n 30 >&2 || tail -n 30 "$log" >&2
		rm -f "$log"
		exit 1
	fi
	rm -f "$log"
}

have_gpu() {
	if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
		return 0
	fi
	ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '
}

prebuilt() {
	[ -x build/bin/gpu-server ] && [ -e build/lib/libcicada.so ] && [ -x build/tests/programs/cr_pattern ]
}

fail() {
	echo "demo: $*" >&2
	for f in "$TMP"/*.log "$TMP"/app.err; do
		[ -s "$f" ] && { echo "--- $(basename "$f")" >&2; tail -n 5 "$f" >&2; }
	done
	exit 1
}

# server NAME [ns command...]: a gpu-server on unix:$TMP/NAME.sock and TCP.
server() {
	local name=$1 port=$2 ip=$3 pid
	shift 3
	env $DRIVER "$@" timeout -k 5 600 "$ROOT/build/bin/gpu-server" --listen "unix:$TMP/$name.sock" \
		--listen "tcp:$ip:$port" --token-file "$TMP/token" --cache-dir "$TMP/cache-$name" \
		--run-dir "$TMP/run-$name" --workers 1 --accept-migrations --migration-token-file "$TMP/mtoken" \
		>"$TMP/$name.log" 2>&1 &
	pid=$!
	disown $pid
	PIDS="$PIDS $pid"
	wait_for_server "$pid" "$TMP/$name.sock" "$TMP/$name.log" demo || exit 1
	eval "SERVER_$name=$pid"
}

wait_step() {
	for _ in $(seq 600); do
		grep -q "^step $1 " "$TMP/app.out" 2>/dev/null && return 0
		sleep 0.05
	done
	fail "the program did not reach step $1"
}

# The second node: a network namespace on a bridge and a pid namespace,
# with its own gpu-server; without iproute2, a pid namespace on loopback.
second_node() {
	local port=$1 ip=127.0.0.1 in_ns=""
	if command -v ip >/dev/null && [ "$(id -u)" = 0 ]; then
		NS=cicada-demo-$$ BR=cicdemo$$ net=10.231.$(($$ % 250))
		ip link add "$BR" type bridge && ip addr add "$net.1/24" dev "$BR" && ip link set "$BR" up &&
			ip netns add "$NS" && ip -n "$NS" link set lo up &&
			ip link add "vd$$" type veth peer name eth0 netns "$NS" && ip link set "vd$$" master "$BR" up &&
			ip -n "$NS" addr add "$net.2/24" dev eth0 && ip -n "$NS" link set eth0 up ||
			fail "cannot make the second node's namespace"
		ip=$net.2 in_ns="ip netns exec $NS"
		NODE="another node (network namespace $NS, $ip)"
	else
		NODE="a second gpu-server (pid namespace, loopback)"
	fi
	TARGET=$ip:$port
	env $DRIVER $in_ns unshare --pid --fork --mount-proc timeout -k 5 600 "$ROOT/build/bin/gpu-server" \
		--listen "unix:$TMP/b.sock" --listen "tcp:$ip:$port" --token-file "$TMP/token" \
		--cache-dir "$TMP/cache-b" --run-dir "$TMP/run-b" --workers 1 --accept-migrations \
		--migration-token-file "$TMP/mtoken" \
		>"$TMP/b.log" 2>&1 &
	PIDS="$PIDS $!"
	disown $!
	wait_for_server "${PIDS##* }" "$TMP/b.sock" "$TMP/b.log" demo || exit 1
}

if have_gpu; then
	echo "demo: GPU found ($(nvidia-smi -L 2>/dev/null | head -n 1 || echo libcuda)): the program runs on it through Cicada"
	DRIVER=""
else
	echo "demo: no GPU on this machine: this runs against Cicada's CPU stand-in for the driver (tests/fakecuda), the same flow a GPU node runs"
fi
if tools_missing && prebuilt; then
	echo "demo: no build tools here; using the prebuilt outputs in build/"
else
	if tools_missing; then
		echo "demo: a build tool is missing; running scripts/install-deps.sh"
		bash scripts/install-deps.sh
	fi
	build
fi
have_gpu || DRIVER="LD_LIBRARY_PATH=$ROOT/build/tests/fakecuda"
[ "$(id -u)" = 0 ] || { echo "demo: checkpoints need root (CRIU); run 'sudo make demo'"; exit 1; }
CRIU=$ROOT/build/bin/criu PLUGINS=$ROOT/build/lib/criu
TMP=$(mktemp -d /tmp/cicada-demo.XXXXXX)
head -c 24 /dev/urandom | base64 >"$TMP/token"
head -c 24 /dev/urandom | base64 >"$TMP/mtoken"   # migrations prove their own token
PORT=$((20000 + $$ % 20000))
export CICADA_KERNELS=$ROOT/build/tests/kernels
ARGS="$CICADA_KERNELS 64 30 200 10"
PROG=$ROOT/build/tests/programs/cr_pattern

echo "== the reference: cr_pattern (64 MiB of device memory, 30 steps, a tenth changed each step) run once, undisturbed"
env $DRIVER timeout -k 5 120 "$PROG" $ARGS >"$TMP/reference.out" 2>"$TMP/reference.err" || fail "the reference run failed"

server a "$PORT" 127.0.0.1
echo "== the same program through Cicada: its GPU work runs in gpu-server pid $SERVER_a"
CICADA_SERVER=unix:$TMP/a.sock LD_LIBRARY_PATH=$ROOT/build/lib timeout -k 5 300 setsid "$PROG" $ARGS \
	</dev/null >"$TMP/app.out" 2>"$TMP/app.err" &
disown $!
wait_step 4
APP=$(pgrep -f "^$PROG $ARGS" | head -n 1)
[ -n "$APP" ] || fail "cannot find the program's pid"

echo "== 1. checkpoint it mid-run (step $(grep -c '^step' "$TMP/app.out")) with CRIU and Cicada's plugin"
mkdir -p "$TMP/ckpt"
timeout -k 5 120 "$CRIU" dump -t "$APP" -D "$TMP/ckpt" -L "$PLUGINS" -o dump.log 2>"$TMP/criu.log" ||
	fail "criu dump failed"
build/bin/gpu-snapshot inspect "$TMP/ckpt" | grep -E "^(pieces|records|images) " | sed 's/^/     /'

echo "== 2. kill its gpu-server (pid $SERVER_a)"
kill -9 "$SERVER_a"
pkill -9 -f "cache-dir $TMP/cache-a" || true

server a2 $((PORT + 1)) 127.0.0.1
echo "== 3. restore it into a new gpu-server (pid $SERVER_a2)"
CICADA_RESTORE_SERVER=unix:$TMP/a2.sock timeout -k 5 120 "$CRIU" restore -D "$TMP/ckpt" -L "$PLUGINS" -d \
	-o restore.log 2>>"$TMP/criu.log" || fail "criu restore failed"
wait_step 12

second_node $((PORT + 2))
echo "== 4. move it, running, to $NODE with gpu-migrate"
CICADA_TOKEN_FILE=$TMP/token CICADA_MIGRATION_TOKEN_FILE=$TMP/mtoken timeout -k 5 120 build/bin/gpu-migrate "$APP" --to "$TARGET" --work-dir "$TMP" \
	2>"$TMP/migrate.log" | sed 's/^/     /' || fail "gpu-migrate failed: $(cat "$TMP/migrate.log")"

echo "== 5. it finishes there; its output against the reference"
for _ in $(seq 1200); do grep -q "^done" "$TMP/app.out" && break; sleep 0.05; done
grep -q "^done" "$TMP/app.out" || fail "the program did not finish"
tail -n 3 "$TMP/app.out" | sed 's/^/     /'
if cmp -s "$TMP/reference.out" "$TMP/app.out"; then
	echo "demo: identical to the undisturbed run, after a checkpoint, a lost server, a restore and a migration"
else
	diff "$TMP/reference.out" "$TMP/app.out" | head -n 5 >&2
	fail "the output differs from the reference"
fi

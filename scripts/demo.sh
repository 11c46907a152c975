#!/usr/bin/env bash
# demo.sh: `make demo`. Installs the build tools if one is missing, builds
# Cicada, and, where this machine has a GPU, runs two unmodified CUDA test
# programs through the interposer against a local gpu-server. Without a
# GPU it says how to use a gpu-server on another node instead.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
. scripts/lib.sh
TMP="" SERVER_PID=""

cleanup() {
	if [ -n "$SERVER_PID" ]; then
		kill "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
	fi
	if [ -n "$TMP" ]; then rm -rf "$TMP"; fi
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
	if ! make -j2 all >"$log" 2>&1; then
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

start_server() {
	timeout -k 5 600 build/bin/gpu-server --listen "unix:$TMP/gpu.sock" --cache-dir "$TMP/cache" \
		>"$TMP/server.log" 2>&1 &
	SERVER_PID=$!
	wait_for_server "$SERVER_PID" "$TMP/gpu.sock" "$TMP/server.log" demo || exit 1
}

# run_program NAME LINES: runs it through the interposer, shows its output.
run_program() {
	local name=$1 lines=$2 rc=0
	echo
	echo "== running an unmodified CUDA program ($name); its GPU work executes in gpu-server pid $SERVER_PID =="
	CICADA_SERVER="unix:$TMP/gpu.sock" LD_LIBRARY_PATH="$ROOT/build/lib" \
		CICADA_KERNELS="$ROOT/build/tests/kernels" timeout -k 5 120 "build/tests/programs/$name" \
		>"$TMP/out" 2>&1 || rc=$?
	head -n "$lines" "$TMP/out"
	if [ "$(wc -l <"$TMP/out")" -gt "$lines" ]; then echo "   [...]"; fi
	if [ $rc -ne 0 ]; then
		echo "demo: $name failed (exit $rc); gpu-server log:" >&2
		tail -n 20 "$TMP/server.log" >&2
		exit 1
	fi
}

prebuilt() {
	[ -x build/bin/gpu-server ] && [ -e build/lib/libcicada.so ] && [ -x build/tests/programs/vecadd_cubin ]
}

# A GPU node without build tools runs what was built elsewhere.
if tools_missing && prebuilt; then
	echo "demo: no build tools here; using the prebuilt outputs in build/"
else
	if tools_missing; then
		echo "demo: a build tool is missing; running scripts/install-deps.sh"
		bash scripts/install-deps.sh
	fi
	build
fi
if ! have_gpu; then
	echo "demo: no GPU on this machine; start 'gpu-server --listen tcp:0.0.0.0:7777 --token-file F' on a GPU node, then run your program with CICADA_SERVER=tcp:NODE:7777 CICADA_TOKEN_FILE=F LD_PRELOAD=$ROOT/build/lib/libcicada.so"
	exit 0
fi
TMP=$(mktemp -d /tmp/cicada-demo.XXXXXX)
start_server
run_program vecadd_cubin 20
run_program device_query 15
echo
echo "demo: done; stopping gpu-server pid $SERVER_PID"

#!/usr/bin/env bash
# gpu-check.sh [SIZES...]: on a GPU node, the Rust client against a
# gpu-server on the real GPU, beside the same kernels run natively from C.
# It uses only what make built (build/rust/bin, build/rust/kernels,
# build/bin/gpu-server): no cargo is needed on the node.
#
# For vector_add (1M and 16M floats) and the cuBLAS-free tiled matrix
# multiply (512, 1024, 2048; PTX, cubin and fatbin), it runs the native C
# program (build/rust/bin/native_kernels, on the driver) and the Rust
# example through Cicada over a unix socket and TCP loopback. The inputs
# make every sum exact in float, so the Rust results must equal the
# native ones bit for bit (the matrix's hash); a table gives the times
# (the kernel's, by events, and vector_add's whole run). Exit 0 when all
# agree. SIZES overrides the matrix sizes. CICADA_CHECK_DRIVER_ENV (e.g.
# LD_LIBRARY_PATH=build/tests/fakecuda) gives the server and the native
# runs another driver: the CPU stand-in, to try the script without a GPU.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${BUILD:-$ROOT/build}
R=$B/rust
. "$ROOT/scripts/lib.sh"
SIZES=${*:-512 1024 2048}
PORT=$((30000 + $$ % 20000))
T=$(mktemp -d "${TMPDIR:-/tmp}/cicada-rust-gpu.XXXXXX")
FAIL=0
for f in "$B/bin/gpu-server" "$R/bin/vector_add" "$R/bin/matmul" "$R/bin/native_kernels" "$R/kernels/rust_kernels.ptx"; do
	[ -e "$f" ] || { echo "gpu-check: $f is missing: run make (on a machine with cargo and nvcc) and carry build/"; exit 2; }
done
head -c 24 /dev/urandom | base64 >"$T/token"
DRIVER_ENV=${CICADA_CHECK_DRIVER_ENV:-}
# shellcheck disable=SC2086  # the variables' words
env $DRIVER_ENV timeout -k 5 1800 "$B/bin/gpu-server" --listen "unix:$T/gpu.sock" --listen "tcp:127.0.0.1:$PORT" \
	--token-file "$T/token" --cache-dir "$T/cache" --workers 2 >"$T/server.log" 2>&1 &
SERVER=$!
cleanup() {
	kill "$SERVER" 2>/dev/null
	pkill -9 -f "gpu-server --worker-fd .* --cache-dir $T/cache" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
wait_for_server "$SERVER" "$T/gpu.sock" "$T/server.log" gpu-check || exit 2

# native ARGS / through TRANSPORT CMD...: a run, natively or through Cicada.
# shellcheck disable=SC2086
native() { env -u LD_LIBRARY_PATH -u LD_PRELOAD $DRIVER_ENV timeout -k 5 600 "$R/bin/native_kernels" "$R/kernels" "$@"; }
through() {
	local tr=$1 srv=unix:$T/gpu.sock
	shift
	[ "$tr" = tcp ] && srv=tcp:127.0.0.1:$PORT
	env -u LD_LIBRARY_PATH -u LD_PRELOAD CICADA_SERVER=$srv CICADA_TOKEN_FILE=$T/token \
		CICADA_RUST_KERNELS="$R/kernels" timeout -k 5 600 "$@"
}
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p"; }

printf '%-28s %-10s %14s %14s %8s\n' "case" "run" "kernel (ms)" "all (ms)" "result"
for n in 1048576 16777216; do
	for how in native unix tcp; do
		if [ $how = native ]; then out=$(native vector_add $n 2>&1); else out=$(through $how "$R/bin/vector_add" $n 2>&1); fi
		rc=$?
		k=$(sed -n 's/.*kernel \([0-9.]*\) ms.*/\1/p' <<<"$out"); a=$(sed -n 's/.*all \([0-9.]*\) ms.*/\1/p' <<<"$out")
		res=$([ $rc = 0 ] && grep -q PASS <<<"$out" && echo PASS || echo FAIL)
		[ $res = PASS ] || { FAIL=1; echo "  $out"; }
		printf '%-28s %-10s %14s %14s %8s\n' "vector_add n=$n" "$how" "${k:--}" "${a:--}" "$res"
	done
done
for n in $SIZES; do
	for fmt in ptx cubin fatbin; do
		ref=""
		for how in native unix tcp; do
			if [ $how = native ]; then out=$(native matmul "$n" $fmt 10 2>&1)
			else out=$(through $how "$R/bin/matmul" "$n" $fmt 10 2>&1); fi
			rc=$?
			h=$(field hash <<<"$out"); k=$(field kernel_ms <<<"$out"); g=$(field gflops <<<"$out")
			res=$([ $rc = 0 ] && grep -q PASS <<<"$out" && echo PASS || echo FAIL)
			[ $how = native ] && ref=$h
			[ -n "$h" ] && [ "$h" = "$ref" ] || res="${res}/DIFF"
			[ "$res" = PASS ] || { FAIL=1; echo "  $out"; }
			printf '%-28s %-10s %14s %14s %8s\n' "matmul n=$n $fmt" "$how" "${k:--}" "${g:+$g GFLOP/s}" "$res"
		done
	done
done
echo "gpu-check: $([ $FAIL = 0 ] && echo "every Rust result equals the native one" || echo "FAILED: see above")"
exit $FAIL

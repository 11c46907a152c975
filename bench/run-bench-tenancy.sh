#!/usr/bin/env bash
# run-bench-tenancy.sh: `make bench-tenancy` (GPU node). Two tenants on
# one GPU, each held to BENCH_SMS SMs (default 64: half an H100 or H200,
# in whole groups of 8) by gpu-server --sm-share, each running the
# compute-bound nbody workload (bench/nbody.cu, BENCH_BODIES bodies,
# BENCH_STEPS steps) at the same time; against one tenant alone on the
# whole GPU natively, one alone on its share, and two at once without
# shares (the GPU shared in time). BENCH_ROUNDS rounds (default 3),
# medians of GFLOP/s. Target: each tenant of a pair with shares >= 0.45
# of the lone whole-GPU run. Where nvidia-cuda-mps-control is found (and
# BENCH_MPS is not 0) every row runs again with the servers' workers as
# clients of an MPS daemon of the script's own (gpu-server --mps):
# without MPS the GPU runs different processes' contexts in turns.
# BENCH_DRIVER_ENV: variables for the servers (the stand-in's, to try the
# script without a GPU). Prebuilt outputs only.
set -uo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
ROOT=$PWD B=$ROOT/build
. scripts/lib.sh
ROUNDS=${BENCH_ROUNDS:-3} SMS=${BENCH_SMS:-64} BODIES=${BENCH_BODIES:-65536} STEPS=${BENCH_STEPS:-400}
T=$(mktemp -d /tmp/cicada-bench-tenancy.XXXXXX) PIDS="" MPS=""
# shellcheck disable=SC2317,SC2086  # called from the EXIT trap; pids
cleanup() {
	[ -z "$PIDS" ] || kill $PIDS 2>/dev/null
	[ -z "$MPS" ] || echo quit | CUDA_MPS_PIPE_DIRECTORY=$T/mps timeout 20 nvidia-cuda-mps-control >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# server NAME [OPTIONS]: a gpu-server at $T/NAME.sock
server() {
	local name=$1
	shift
	env ${BENCH_DRIVER_ENV:-} timeout -k 5 3600 "$B/bin/gpu-server" --listen "unix:$T/$name.sock" \
		--cache-dir "$T/cache-$name" --run-dir "$T/run-$name" --workers 2 "$@" >"$T/$name.log" 2>&1 &
	PIDS="$PIDS $!"
	wait_for_server $! "$T/$name.sock" "$T/$name.log" bench-tenancy
}

gflops() { sed -n 's/.* gflops=\([0-9.]*\).*/\1/p' "$1"; }
# run OUT [SERVER]: nbody natively, or through SERVER
run() {
	local env=""
	[ -n "${2:-}" ] && env="LD_LIBRARY_PATH=$B/lib CICADA_SERVER=unix:$T/$2.sock"
	env $env timeout 600 "$B/bench/nbody" "$BODIES" "$STEPS" >"$1" 2>&1
}
# pair SERVER OUT: two tenants at once
pair() {
	run "$2.a" "$1" &
	local a=$!
	run "$2.b" "$1"
	wait $a
}
median() { sort -g | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "n/a" }'; }

echo "bench-tenancy: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
# rows MODE: the rounds and the table, with servers of MODE (plain, mps)
rows() {
	local mode=$1 opt="" N A P W PMIN
	[ "$mode" = mps ] && opt=--mps
	server "shared-$mode" --sm-share "default=$SMS" $opt || return 1
	server "whole-$mode" $opt || return 1
	echo
	if [ "$mode" = mps ]; then echo "== every process an MPS client (gpu-server --mps)"; else echo "== without MPS"; fi
	for r in $(seq "$ROUNDS"); do
		run "$T/native.$r"
		run "$T/alone.$r" "shared-$mode"
		pair "shared-$mode" "$T/pair.$r"
		pair "whole-$mode" "$T/timed.$r"
		printf 'round %d: native %s, alone on %s SMs %s, pair %s + %s, pair without shares %s + %s GFLOP/s\n' "$r" \
			"$(gflops "$T/native.$r")" "$SMS" "$(gflops "$T/alone.$r")" "$(gflops "$T/pair.$r.a")" \
			"$(gflops "$T/pair.$r.b")" "$(gflops "$T/timed.$r.a")" "$(gflops "$T/timed.$r.b")"
	done
	N=$(for r in $(seq "$ROUNDS"); do gflops "$T/native.$r"; done | median)
	A=$(for r in $(seq "$ROUNDS"); do gflops "$T/alone.$r"; done | median)
	P=$(for r in $(seq "$ROUNDS"); do gflops "$T/pair.$r.a"; gflops "$T/pair.$r.b"; done | median)
	W=$(for r in $(seq "$ROUNDS"); do gflops "$T/timed.$r.a"; gflops "$T/timed.$r.b"; done | median)
	PMIN=$(for r in $(seq "$ROUNDS"); do gflops "$T/pair.$r.a"; gflops "$T/pair.$r.b"; done | sort -g | head -1)
	echo "nbody, $BODIES bodies, $STEPS steps; GFLOP/s, medians of $ROUNDS rounds"
	printf '%-40s %10s %8s\n' "run" "GFLOP/s" "/native"
	for row in "native, whole GPU:$N" "one tenant alone, $SMS SMs:$A" "each of two tenants, $SMS SMs each:$P" \
		"each of two tenants, no shares:$W"; do
		awk -v l="${row%:*}" -v v="${row##*:}" -v n="$N" \
			'BEGIN { printf "%-40s %10s %8s\n", l, v, (n + 0 > 0 && v + 0 > 0) ? sprintf("%.3f", v / n) : "n/a" }'
	done
	awk -v p="$PMIN" -v n="$N" 'BEGIN { if (p == "" || n + 0 <= 0) { print "target: no figures (a run failed)"; exit 1 }
		r = p / n; printf "target: each tenant of a pair >= 0.45 of native alone: %s (slowest of all rounds %.3f)\n", (r >= 0.45 ? "MET" : "MISSED"), r }'
}
rows plain
if [ "${BENCH_MPS:-1}" != 0 ] && command -v nvidia-cuda-mps-control >/dev/null; then
	mkdir -p "$T/mps" "$T/mps-log"
	if CUDA_MPS_PIPE_DIRECTORY=$T/mps CUDA_MPS_LOG_DIRECTORY=$T/mps-log timeout 20 nvidia-cuda-mps-control -d; then
		MPS=1
		export CUDA_MPS_PIPE_DIRECTORY=$T/mps
		rows mps
	else
		echo "bench-tenancy: nvidia-cuda-mps-control -d failed: no MPS rows"
	fi
fi
grep -h "failed\|error" "$T"/*.log 2>/dev/null | head -5

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
# Then the noisy-neighbour rows (hog_rows, BENCH_HOG=0 leaves them out)
# and a resize's latency (resize_row).
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
# The noisy neighbour: a latency-sensitive tenant (hog lat: a 16 MiB
# read and sum, then a wait, HOG_ROUNDS times) alone, then beside a
# memory-bandwidth hog (hog bw: 1 GiB copies for HOG_SECONDS); natively
# (the whole GPU, both programs) and with the two tenants on disjoint
# shares of SERVER. Target: the hog slows the neighbour's median by <= 10%.
lat_us() { sed -n 's/.* median_us=\([0-9.]*\).*/\1/p' "$1"; }
hog_run() {   # hog_run OUT SERVER ARGS...
	local out=$1 env=""
	[ -n "$2" ] && env="LD_LIBRARY_PATH=$B/lib CICADA_SERVER=unix:$T/$2.sock"
	shift 2
	env $env timeout 120 "$B/bench/hog" "$@" >"$out" 2>&1
}
beside_hog() {   # beside_hog OUT SERVER: hog lat while hog bw runs
	hog_run "$1.hog" "$2" bw "${HOG_SECONDS:-10}" &
	local h=$!
	sleep 3
	hog_run "$1" "$2" lat "${HOG_ROUNDS:-2000}"
	wait $h
}
hog_rows() {
	local server=$1 NA NH SA SH
	for r in $(seq "$ROUNDS"); do
		hog_run "$T/lat-native.$r" "" lat "${HOG_ROUNDS:-2000}"
		beside_hog "$T/lat-native-hog.$r" ""
		hog_run "$T/lat-alone.$r" "$server" lat "${HOG_ROUNDS:-2000}"
		beside_hog "$T/lat-hog.$r" "$server"
		printf 'round %d: neighbour median natively %s us, beside a hog %s us (hog %s); on %s SMs %s us, beside a hog %s us (hog %s)\n' \
			"$r" "$(lat_us "$T/lat-native.$r")" "$(lat_us "$T/lat-native-hog.$r")" \
			"$(sed -n 's/hog gbs=//p' "$T/lat-native-hog.$r.hog") GB/s" "$SMS" "$(lat_us "$T/lat-alone.$r")" \
			"$(lat_us "$T/lat-hog.$r")" "$(sed -n 's/hog gbs=//p' "$T/lat-hog.$r.hog") GB/s"
	done
	NA=$(for r in $(seq "$ROUNDS"); do lat_us "$T/lat-native.$r"; done | median)
	NH=$(for r in $(seq "$ROUNDS"); do lat_us "$T/lat-native-hog.$r"; done | median)
	SA=$(for r in $(seq "$ROUNDS"); do lat_us "$T/lat-alone.$r"; done | median)
	SH=$(for r in $(seq "$ROUNDS"); do lat_us "$T/lat-hog.$r"; done | median)
	echo "noisy neighbour: a request's median time (us), medians of $ROUNDS rounds"
	awk -v na="$NA" -v nh="$NH" -v sa="$SA" -v sh="$SH" -v sms="$SMS" 'BEGIN {
		printf "%-44s %10s %10s %9s\n", "run", "alone", "beside hog", "slowdown"
		printf "%-44s %10s %10s %9s\n", "natively, both on the whole GPU", na, nh, (na > 0 && nh > 0) ? sprintf("%+.1f%%", 100 * (nh / na - 1)) : "n/a"
		printf "%-44s %10s %10s %9s\n", "each tenant on " sms " SMs", sa, sh, (sa > 0 && sh > 0) ? sprintf("%+.1f%%", 100 * (sh / sa - 1)) : "n/a"
		if (!(sa > 0 && sh > 0)) { print "target: no figures (a run failed)"; exit }
		d = 100 * (sh / sa - 1)
		printf "target: a hog slows its neighbour by <= 10%%: %s (%+.1f%%)\n", d <= 10 ? "MET" : "MISSED", d }'
}

# A resize from a quarter of the SMs to all: a compute loop of short
# steps (hog steps) on 25% of the groups, cicadactl resize --sms all once
# it runs; the time from the resize to the end of the first step at the
# new speed (within 25% of the last steps'). Target: <= 100 ms.
resize_row() {
	local s t0 out=$T/steps.out
	server resize --sm-share default=25% || return 1
	env LD_LIBRARY_PATH="$B/lib" CICADA_SERVER="unix:$T/resize.sock" timeout 120 "$B/bench/hog" steps 6 >"$out" 2>&1 &
	local p=$!
	for _ in $(seq 300); do grep -q "^step 40 " "$out" 2>/dev/null && break; sleep 0.1; done
	s=$(timeout 30 "$B/bin/cicadactl" --run-dir "$T/run-resize" list | awk 'NR == 2 { print $1 }')
	t0=$(date +%s.%N)
	timeout 30 "$B/bin/cicadactl" --run-dir "$T/run-resize" resize "${s:-0}" --sms all >"$T/resize.log" 2>&1 ||
		echo "resize: cicadactl resize failed: $(tail -n 1 "$T/resize.log")"
	wait $p
	awk -v t0="$t0" '$1 == "step" { split($3, e, "="); split($4, m, "="); n++; end[n] = e[2]; ms[n] = m[2] }
	END {
		for (i = 1; i <= n; i++) if (end[i] < t0) { b = i }
		if (!b || n - b < 12) { print "resize: too few steps to measure"; exit 1 }
		for (i = n - 9; i <= n; i++) { a += ms[i]; c++ } ; after = a / c
		for (i = b - 9; i <= b; i++) { bb += ms[i]; d++ } ; before = bb / d
		for (i = b + 1; i <= n && ms[i] > 1.25 * after; i++) ;
		lat = (end[i] - t0) * 1000
		printf "resize 25%% -> 100%% of the SMs: a step took %.2f ms before, %.2f ms after (%.2fx); the first step at the new speed ended %.1f ms after the resize\n", before, after, before / after, lat
		printf "target: a resize shows in the throughput within 100 ms: %s (%.1f ms)\n", lat <= 100 ? "MET" : "MISSED", lat }' "$out"
}

rows plain
[ "${BENCH_HOG:-1}" = 0 ] || hog_rows shared-plain
echo
resize_row
if [ "${BENCH_MPS:-1}" != 0 ] && command -v nvidia-cuda-mps-control >/dev/null; then
	mkdir -p "$T/mps" "$T/mps-log"
	if CUDA_MPS_PIPE_DIRECTORY=$T/mps CUDA_MPS_LOG_DIRECTORY=$T/mps-log timeout 20 nvidia-cuda-mps-control -d; then
		MPS=1
		export CUDA_MPS_PIPE_DIRECTORY=$T/mps
		rows mps
		[ "${BENCH_HOG:-1}" = 0 ] || hog_rows shared-mps
	else
		echo "bench-tenancy: nvidia-cuda-mps-control -d failed: no MPS rows"
	fi
fi
grep -h "failed\|error" "$T"/*.log 2>/dev/null | head -5

#!/usr/bin/env bash
# run-bench.sh: `make bench`. Runs cicada-bench natively, through Cicada
# over a local unix socket with shared memory, and over TCP loopback, then
# prints one comparison table and the performance targets. Uses prebuilt
# outputs only (run `make` first). --cpu runs everything on the CPU
# stand-in libcuda (a smoke test: the figures mean nothing). BENCH_MIB
# sets the bandwidth transfer size (default 256). Raw output goes to
# $OUT/bench.txt when OUT is set.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD BIN=build/bench/cicada-bench SERVER=build/bin/gpu-server KDIR=build/tests/kernels
. scripts/lib.sh
MIB=${BENCH_MIB:-256} CPU=0
[ "${1:-}" = --cpu ] && CPU=1
for f in "$BIN" "$SERVER" build/lib/libcuda.so.1 "$KDIR"; do
	[ -e "$f" ] || { echo "bench: $f is missing; run 'make' first" >&2; exit 1; }
done
DRIVER_LIBS=${LD_LIBRARY_PATH:-}      # native runs: the real libcuda
[ $CPU = 1 ] && DRIVER_LIBS=$ROOT/build/tests/fakecuda
TMP=$(mktemp -d /tmp/cicada-bench.XXXXXX) SERVER_PID=""
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
	if [ -n "$SERVER_PID" ]; then
		kill "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 40000))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
	echo 7790
}

start_server() {
	PORT=$(free_port)
	head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$TMP/token"
	chmod 600 "$TMP/token"
	LD_LIBRARY_PATH=$DRIVER_LIBS "$SERVER" --listen "unix:$TMP/gpu.sock" \
		--listen "tcp:127.0.0.1:$PORT" --token-file "$TMP/token" \
		--cache-dir "$TMP/cache" >"$TMP/server.log" 2>&1 &
	SERVER_PID=$!
	wait_for_server "$SERVER_PID" "$TMP/gpu.sock" "$TMP/server.log" bench || exit 1
}

# run_mode MODE VAR=VALUE...: every subcommand in that environment.
FAILED=0
run_mode() {
	local mode=$1 cmd
	shift
	for cmd in latency launch "bandwidth $MIB" init; do
		echo "## $mode: cicada-bench $cmd" >>"$TMP/raw.txt"
		# shellcheck disable=SC2086
		if ! env -u LD_PRELOAD -u CICADA_SERVER -u CICADA_TOKEN_FILE -u CICADA_SHM \
			CICADA_KERNELS="$KDIR" CUDA_KERNELS="$KDIR" "$@" "$BIN" $cmd \
			>"$TMP/out" 2>"$TMP/err"; then
			echo "bench: $mode: cicada-bench $cmd failed: $(tail -n 1 "$TMP/err")" >&2
			FAILED=1
		fi
		cat "$TMP/out" >>"$TMP/raw.txt"
		awk -v m="$mode" '$1 == "metric" { print m, $2, $3, $4 }' "$TMP/out" >>"$TMP/metrics"
	done
}

start_server
echo "bench: gpu-server pid $SERVER_PID, unix:$TMP/gpu.sock, tcp:127.0.0.1:$PORT$([ $CPU = 1 ] && echo ' (CPU stand-in)')"
touch "$TMP/raw.txt" "$TMP/metrics"
run_mode native LD_LIBRARY_PATH="$DRIVER_LIBS"
run_mode shm LD_LIBRARY_PATH="$ROOT/build/lib" CICADA_SERVER="unix:$TMP/gpu.sock"
run_mode tcp LD_LIBRARY_PATH="$ROOT/build/lib" CICADA_SERVER="tcp:127.0.0.1:$PORT" \
	CICADA_TOKEN_FILE="$TMP/token"
if [ -n "${OUT:-}" ]; then
	mkdir -p "$OUT"
	cp "$TMP/raw.txt" "$OUT/bench.txt"
fi

# The table and the targets, from lines "MODE NAME VALUE UNIT".
awk '
function rel(name, mode,   n, c, d) {
	if (!((mode, name) in v) || !(("native", name) in v)) return "-"
	n = v["native", name]; c = v[mode, name]
	if (unit[name] == "us" || unit[name] == "s") {
		d = (c - n) * (unit[name] == "s" ? 1e6 : 1)
		return sprintf("%+.2f us %s", d, n > 0 ? sprintf("(%.2fx)", c / n) : "")
	}
	return n > 0 ? sprintf("%.1f%%", 100 * c / n) : "-"
}
function val(name, mode) {
	return ((mode, name) in v) ? sprintf("%.4g %s", v[mode, name], unit[name]) : "-"
}
function target(what, name, kind, limit,   n, c, fig, ok) {
	if (!(("shm", name) in v) || !(("native", name) in v)) {
		printf "  MISSED  %-28s no figure\n", what; return
	}
	n = v["native", name]; c = v["shm", name]
	if (kind == "delta") { fig = c - n; ok = fig <= limit; fig = sprintf("%+.2f µs (target <= %g µs)", fig, limit) }
	else { fig = n > 0 ? 100 * c / n : 0; ok = fig >= limit; fig = sprintf("%.1f%% of native (target >= %g%%)", fig, limit) }
	printf "  %-6s  %-28s %s\n", ok ? "MET" : "MISSED", what, fig
}
{ if (!(($2) in unit)) order[++count] = $2; unit[$2] = $4; v[$1, $2] = $3 }
END {
	fmt = "%-20s | %-14s | %-14s | %-24s | %-14s | %s\n"
	printf fmt, "metric", "native", "shm", "shm vs native", "tcp", "tcp vs native"
	for (i = 1; i <= count; i++) {
		m = order[i]
		printf fmt, m, val(m, "native"), val(m, "shm"), rel(m, "shm"), val(m, "tcp"), rel(m, "tcp")
	}
	print "\ntargets (local = shm):"
	target("sync overhead h2d 4 B", "h2d_4b_us", "delta", 5)
	target("sync overhead d2h 4 B", "d2h_4b_us", "delta", 5)
	target("async launch rate", "launches_per_s", "pct", 80)
	target("pinned bandwidth h2d", "pinned_h2d_gbs", "pct", 90)
	target("pinned bandwidth d2h", "pinned_d2h_gbs", "pct", 90)
	target("pageable bandwidth h2d", "pageable_h2d_gbs", "pct", 80)
	target("pageable bandwidth d2h", "pageable_d2h_gbs", "pct", 80)
}' "$TMP/metrics" | tee "$TMP/table.txt"
[ -n "${OUT:-}" ] && { echo; cat "$TMP/table.txt"; } >>"$OUT/bench.txt"
[ $CPU = 1 ] && echo "bench: --cpu: CPU stand-in driver, the figures are meaningless"
exit $FAILED

#!/usr/bin/env bash
# run-bench.sh: `make bench`. Runs cicada-bench natively, through Cicada
# over a local unix socket with shared memory, and over TCP loopback, then
# prints one comparison table and the performance targets. Then the CUDA
# runtime workloads (build/bench/matmul, nbody) run the same three ways,
# BENCH_ROUNDS rounds (default 3) with the order of the modes rotating
# (the micro-benchmarks too, each figure the median of its rounds);
# the table shows the median time of each mode, and every checksum must
# equal the native one. With PyTorch (TORCH_PYTHON, default python3) and
# two GPUs, a single-process NCCL all-reduce is timed the same three ways
# (1 and 64 MiB a GPU, the median of 20 calls). Run as root, the
# micro-benchmarks also run over shared memory as the user nobody
# ("tenant": its worker drops to that user), against shm as root in the
# same run: what privilege separation costs. Peer copies between the
# two GPUs come from cicada-bench. Uses prebuilt outputs only (run `make`
# first).
# --cpu runs the micro-benchmarks on the CPU stand-in libcuda (a smoke
# test: the figures mean nothing) and skips the workloads. BENCH_MIB sets
# the bandwidth transfer size (default 256). Raw output goes to
# $OUT/bench.txt when OUT is set.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD BIN=build/bench/cicada-bench SERVER=build/bin/gpu-server KDIR=build/tests/kernels
. scripts/lib.sh
MIB=${BENCH_MIB:-256} CPU=0 PY=${TORCH_PYTHON:-python3} ROUNDS=${BENCH_ROUNDS:-3} WORKLOADS="matmul nbody"
[ "${1:-}" = --cpu ] && CPU=1
NEED=("$BIN" "$SERVER" build/lib/libcuda.so.1 "$KDIR")
[ $CPU = 0 ] && for w in $WORKLOADS; do NEED+=("build/bench/$w"); done
for f in "${NEED[@]}"; do
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
	TLS_PORT=$(free_port) TLS_ARGS=()
	# TLS needs a certificate: a self-signed one for 127.0.0.1, made here.
	if command -v openssl >/dev/null && timeout 60 openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-keyout "$TMP/tls.key" -out "$TMP/tls.crt" -days 2 -subj /CN=cicada-bench \
		-addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1; then
		TLS_ARGS=(--listen "tls:127.0.0.1:$TLS_PORT" --tls-cert "$TMP/tls.crt" --tls-key "$TMP/tls.key")
	else
		echo "bench: no openssl command to make a certificate: the TLS figures are left out" >&2
	fi
	LD_LIBRARY_PATH=$DRIVER_LIBS timeout -k 5 3600 "$SERVER" --listen "unix:$TMP/gpu.sock" \
		--listen "tcp:127.0.0.1:$PORT" "${TLS_ARGS[@]}" --token-file "$TMP/token" \
		--cache-dir "$TMP/cache" >"$TMP/server.log" 2>&1 &
	SERVER_PID=$!
	wait_for_server "$SERVER_PID" "$TMP/gpu.sock" "$TMP/server.log" bench || exit 1
	TENANT=""
	if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
		chmod 711 "$TMP" && chmod 666 "$TMP/gpu.sock" && TENANT=nobody
	fi
}

# mode_env MODE: MODE_ENV, the environment of a run natively (native) or
# through Cicada over shared memory (shm), as the user nobody (tenant) or
# TCP loopback (tcp); RUN_AS, what runs the command as that user.
mode_env() {
	RUN_AS=()
	case $1 in
	tenant) MODE_ENV=(LD_LIBRARY_PATH="$ROOT/build/lib" CICADA_SERVER="unix:$TMP/gpu.sock")
		RUN_AS=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups) ;;
	native) MODE_ENV=(LD_LIBRARY_PATH="$DRIVER_LIBS") ;;
	shm) MODE_ENV=(LD_LIBRARY_PATH="$ROOT/build/lib" CICADA_SERVER="unix:$TMP/gpu.sock") ;;
	tcp) MODE_ENV=(LD_LIBRARY_PATH="$ROOT/build/lib" CICADA_SERVER="tcp:127.0.0.1:$PORT"
		CICADA_TOKEN_FILE="$TMP/token") ;;
	tls) MODE_ENV=(LD_LIBRARY_PATH="$ROOT/build/lib" CICADA_SERVER="tls:127.0.0.1:$TLS_PORT"
		CICADA_TOKEN_FILE="$TMP/token" CICADA_TLS_CA="$TMP/tls.crt") ;;
	esac
}

# run_mode MODE VAR=VALUE...: every subcommand in that environment.
FAILED=0
run_mode() {
	local mode=$1 cmd
	shift
	for cmd in latency launch "bandwidth $MIB" init "peer $MIB"; do
		echo "## $mode: cicada-bench $cmd" >>"$TMP/raw.txt"
		# shellcheck disable=SC2086
		[ "$mode" = tls ] && { [ "$cmd" = init ] || [ "${cmd% *}" = peer ]; } && continue
		if ! env -u LD_PRELOAD -u CICADA_SERVER -u CICADA_TOKEN_FILE -u CICADA_SHM \
			CICADA_KERNELS="$KDIR" CUDA_KERNELS="$KDIR" "$@" "${RUN_AS[@]}" timeout -k 5 600 "$BIN" $cmd \
			>"$TMP/out" 2>"$TMP/err"; then
			echo "bench: $mode: cicada-bench $cmd failed: $(tail -n 1 "$TMP/err")" >&2
			FAILED=1
		fi
		cat "$TMP/out" >>"$TMP/raw.txt"
		awk -v m="$mode" '$1 == "metric" { print m, $2, $3, $4 }' "$TMP/out" >>"$TMP/metrics"
	done
}

# run_workload NAME MODE ROUND: one run of build/bench/NAME in MODE; its
# line "NAME ... seconds=S ... checksum=X" goes to $TMP/workloads as
# "NAME MODE ROUND S X".
run_workload() {
	local name=$1 mode=$2 round=$3
	mode_env "$mode"
	echo "## $mode: $name (round $round)" >>"$TMP/raw.txt"
	if ! env -u LD_PRELOAD -u CICADA_SERVER -u CICADA_TOKEN_FILE -u CICADA_SHM \
		"${MODE_ENV[@]}" timeout 600 "$ROOT/build/bench/$name" >"$TMP/out" 2>"$TMP/err"; then
		echo "bench: $mode: $name failed: $(tail -n 1 "$TMP/err")" >&2
		FAILED=1
	fi
	cat "$TMP/out" >>"$TMP/raw.txt"
	awk -v w="$name" -v m="$mode" -v r="$round" '$1 == w {
		for (i = 2; i <= NF; i++) if (split($i, kv, "=") == 2) f[kv[1]] = kv[2]
		if (("seconds" in f) && ("checksum" in f)) print w, m, r, f["seconds"], f["checksum"]
	}' "$TMP/out" >>"$TMP/workloads"
}

# run_workloads: every workload ROUNDS times in each mode, the first mode
# of a round rotating (native shm tcp, shm tcp native, tcp native shm).
run_workloads() {
	local modes=(native shm tcp) w r i
	for w in $WORKLOADS; do
		for ((r = 1; r <= ROUNDS; r++)); do
			for i in 0 1 2; do
				run_workload "$w" "${modes[(r - 1 + i) % 3]}" "$r"
			done
		done
	done
}

# run_allreduce: the NCCL all-reduce over two GPUs (tests/torch/workloads.py
# allreduce-bench) in each mode, when PyTorch is there; its lines are
# cicada-bench's kind.
run_allreduce() {
	local mode
	if ! timeout 120 "$PY" -c "import torch" 2>/dev/null; then
		echo "bench: $PY cannot import torch: the all-reduce is not measured" >&2
		return
	fi
	for mode in native shm tcp; do
		mode_env "$mode"
		echo "## $mode: workloads.py allreduce-bench" >>"$TMP/raw.txt"
		if ! env -u LD_PRELOAD -u CICADA_SERVER -u CICADA_TOKEN_FILE -u CICADA_SHM \
			"${MODE_ENV[@]}" timeout -k 5 600 "$PY" tests/torch/workloads.py allreduce-bench >"$TMP/out" 2>"$TMP/err"; then
			echo "bench: $mode: the all-reduce failed: $(tail -n 1 "$TMP/err")" >&2
			FAILED=1
		fi
		cat "$TMP/out" >>"$TMP/raw.txt"
		awk -v m="$mode" '$1 == "metric" { print m, $2, $3, $4 }' "$TMP/out" >>"$TMP/metrics"
	done
}

# check_checksums: a line for each workload run whose checksum differs
# from that of the workload's first native run.
check_checksums() {
	awk '$2 == "native" && !($1 in ref) { ref[$1] = $5 }
	{ line[NR] = $0 }
	END {
		for (i = 1; i <= NR; i++) {
			split(line[i], f, " ")
			if ((f[1] in ref) && f[5] != ref[f[1]])
				printf "bench: %s: %s round %s checksum %s, native %s\n",
					f[1], f[2], f[3], f[5], ref[f[1]]
		}
	}' "$TMP/workloads"
}

start_server
for s in 1 4 rtt; do
	timeout 120 build/bench/linkspeed $s "$MIB" | awk '$1 == "metric" { print "link", $2, $3, $4 }' >>"$TMP/metrics"
done
echo "bench: gpu-server pid $SERVER_PID, unix:$TMP/gpu.sock, tcp:127.0.0.1:$PORT$([ $CPU = 1 ] && echo ' (CPU stand-in)')"
touch "$TMP/raw.txt" "$TMP/metrics" "$TMP/workloads"
# The micro-benchmarks ROUNDS times, the first mode of a round rotating;
# each figure is the median of its rounds.
MODES=(native shm tcp $([ ${#TLS_ARGS[@]} -gt 0 ] && echo tls) $([ -n "$TENANT" ] && echo tenant))
for ((r = 0; r < ROUNDS; r++)); do
	for ((i = 0; i < ${#MODES[@]}; i++)); do
		mode=${MODES[(r + i) % ${#MODES[@]}]}
		mode_env $mode
		run_mode $mode "${MODE_ENV[@]}"
	done
done
if [ $CPU = 1 ]; then
	echo "bench: --cpu: workloads skipped (the CPU stand-in runs no CUDA runtime program natively)"
else
	run_workloads
	run_allreduce
fi
MISMATCH=$(check_checksums)
[ -n "$MISMATCH" ] && { echo "$MISMATCH" | tee -a "$TMP/raw.txt" >&2; FAILED=1; }
if [ -n "${OUT:-}" ]; then
	mkdir -p "$OUT"
	cp "$TMP/raw.txt" "$OUT/bench.txt"
fi

# The table and the targets, from lines "MODE NAME VALUE UNIT" (metrics)
# and "NAME MODE ROUND SECONDS CHECKSUM" (workloads, a row NAME_s each).
awk -v cpu=$CPU -v workloads="$WORKLOADS" '
function rel(name, mode,   n, c, d) {
	if (!((mode, name) in v) || !(("native", name) in v)) return "-"
	n = v["native", name]; c = v[mode, name]
	if (name in wl) return n > 0 ? sprintf("%+.1f%%", 100 * (c / n - 1)) : "-"
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
	else if (kind == "slower") {
		fig = n > 0 ? 100 * (c / n - 1) : 0; ok = n > 0 && fig <= limit
		fig = sprintf("%+.1f%% vs native (target <= +%g%%)", fig, limit)
	}
	else { fig = n > 0 ? 100 * c / n : 0; ok = fig >= limit; fig = sprintf("%.1f%% of native (target >= %g%%)", fig, limit) }
	printf "  %-6s  %-28s %s\n", ok ? "MET" : "MISSED", what, fig
}
# mmedian(MODE, NAME): the median of a micro-benchmark figure over the rounds.
function mmedian(mode, name,   n, i, j, t, a) {
	n = mn[mode, name]
	for (i = 1; i <= n; i++) a[i] = mv[mode, name, i] + 0
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
# median(ROW, MODE): the median of the times of that workload in MODE.
function median(row, mode,   n, i, j, t, a) {
	n = runs[mode, row]
	for (i = 1; i <= n; i++) a[i] = secs[mode, row, i]
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
# sums(NAME): MET when every run of workload NAME printed the checksum
# of its first native run.
function sums(name,   ok, fig) {
	if (!(name in all)) return
	if (!(name in ref)) { ok = 0; fig = "no native checksum to compare with" }
	else {
		ok = all[name] == same[name]
		fig = sprintf("%d of %d runs equal to native (%s)", same[name], all[name], ref[name])
	}
	printf "  %-6s  %-28s %s\n", ok ? "MET" : "MISSED", name " checksums", fig
}
# against(TITLE, A, B, NAME_A, NAME_B): the main rows of mode B beside
# those of mode A, with B / A.
function against(title, a, b, name_a, name_b,   tl, k, m) {
	print "\n" title
	split("h2d_4b_us d2h_4b_us launches_per_s pinned_h2d_gbs pinned_d2h_gbs pageable_h2d_gbs pageable_d2h_gbs", tl, " ")
	for (k = 1; k <= 7; k++) {
		m = tl[k]
		if (val(m, a) != "-" && val(m, b) != "-")
			printf "  %-18s %s %-12s %s %-12s (%.2fx)\n", m, name_a, val(m, a), name_b, val(m, b),
				(v[a, m] > 0 ? v[b, m] / v[a, m] : 0)
	}
}
# linkrow(WHAT, NAME): Cicada over TCP against the link on four streams.
function linkrow(what, name,   c, l, pct) {
	if (!(("tcp", name) in v) || !("link_tcp_4s_gbs" in link)) { printf "  MISSED  tcp %-24s no figure\n", what; return }
	c = v["tcp", name]; l = link["link_tcp_4s_gbs"]; pct = l > 0 ? 100 * c / l : 0
	printf "  %-6s  tcp %-24s %.3g GB/s, %.1f%% of the link (target >= 80%%)\n", (pct >= 80 ? "MET" : "MISSED"), what, c, pct
}
FILENAME == ARGV[1] && $1 == "link" { link[$2] = $3; next }
FILENAME == ARGV[1] { if (!(($2) in unit)) order[++count] = $2; unit[$2] = $4; mv[$1, $2, ++mn[$1, $2]] = $3 }
FILENAME == ARGV[2] {
	row = $1 "_s"
	if (!(row in unit)) order[++count] = row
	unit[row] = "s"; wl[row] = 1; secs[$2, row, ++runs[$2, row]] = $4 + 0
	if ($2 == "native" && !($1 in ref)) ref[$1] = $5
	line[++lines] = $1 " " $5
}
END {
	for (k in mn) {
		split(k, f, SUBSEP)
		v[f[1], f[2]] = mmedian(f[1], f[2])
	}
	for (i = 1; i <= lines; i++) {
		split(line[i], f, " "); all[f[1]]++
		if ((f[1] in ref) && f[2] == ref[f[1]]) same[f[1]]++
	}
	nm = split("native shm tcp", modes, " ")
	for (row in wl)
		for (j = 1; j <= nm; j++)
			if (runs[modes[j], row] > 0) v[modes[j], row] = median(row, modes[j])
	fmt = "%-20s | %-14s | %-14s | %-24s | %-14s | %s\n"
	printf fmt, "metric", "native", "shm", "shm vs native", "tcp", "tcp vs native"
	for (i = 1; i <= count; i++) {
		m = order[i]
		printf fmt, m, val(m, "native"), val(m, "shm"), rel(m, "shm"), val(m, "tcp"), rel(m, "tcp")
	}
	if (lines) print "(workload rows: median time of the runs in each mode; vs native: time / native - 1)"
	print "\ntargets (local = shm):"
	target("sync overhead h2d 4 B", "h2d_4b_us", "delta", 5)
	target("sync overhead d2h 4 B", "d2h_4b_us", "delta", 5)
	target("async launch rate", "launches_per_s", "pct", 90)
	target("pinned bandwidth h2d", "pinned_h2d_gbs", "pct", 90)
	target("pinned bandwidth d2h", "pinned_d2h_gbs", "pct", 90)
	target("pageable bandwidth h2d", "pageable_h2d_gbs", "pct", 80)
	target("pageable bandwidth d2h", "pageable_d2h_gbs", "pct", 80)
	if (("native", "peer_gpus") in v && v["native", "peer_gpus"] < 2)
		print "\npeer copies between two GPUs: not measured (this node has one GPU)"
	if (("native", "allreduce_gpus") in v && v["native", "allreduce_gpus"] < 2)
		print "the NCCL all-reduce over two GPUs: not measured (this node has one GPU)"
	printf "\nthe TCP path against the link itself (loopback, this run): %.3g GB/s on one stream, %.3g GB/s on four\n",
		link["link_tcp_1s_gbs"], link["link_tcp_4s_gbs"]
	linkrow("pinned h2d", "pinned_h2d_gbs")
	linkrow("pinned d2h", "pinned_d2h_gbs")
	linkrow("pageable h2d", "pageable_h2d_gbs")
	linkrow("pageable d2h", "pageable_d2h_gbs")
	if ("link_tcp_rtt_us" in link && ("tcp", "h2d_4b_us") in v) {
		printf "\nthe TCP round trip: the loopback ping-pong of the kernel takes %.3g µs; a synchronous 4-byte copy takes\n", link["link_tcp_rtt_us"]
		for (k = 1; k <= 2; k++) {
			m = k == 1 ? "h2d_4b_us" : "d2h_4b_us"
			printf "  %-6s  tcp %s %.3g µs: native %.3g + kernel %.3g + Cicada %.3g (over native %+.2f µs, target <= 15)\n",
				v["tcp", m] - v["native", m] <= 15 ? "MET" : "MISSED", substr(m, 1, 3), v["tcp", m], v["native", m],
				link["link_tcp_rtt_us"], v["tcp", m] - v["native", m] - link["link_tcp_rtt_us"], v["tcp", m] - v["native", m]
		}
	}
	if (("tls", "pinned_h2d_gbs") in v)
		against("the cost of TLS (tls: against tcp:, the same server, this run):", "tcp", "tls", "tcp", "tls")
	if (("tenant", "h2d_4b_us") in v)
		against("the cost of a worker that runs as its tenant (shm as the user nobody against shm as root, this run):",
			"shm", "tenant", "root", "tenant")
	if (cpu) exit
	n = split(workloads, names, " ")
	for (i = 1; i <= n; i++) target(names[i] " local time", names[i] "_s", "slower", 3)
	for (i = 1; i <= n; i++) sums(names[i])
}' "$TMP/metrics" "$TMP/workloads" | tee "$TMP/table.txt"
[ -n "${OUT:-}" ] && { echo; cat "$TMP/table.txt"; } >>"$OUT/bench.txt"
[ $CPU = 1 ] && echo "bench: --cpu: CPU stand-in driver, the figures are meaningless"
exit $FAILED

#!/usr/bin/env bash
# run-bench-cr.sh: `make bench-cr`. The checkpoint/restore benchmark.
#
# For each size (CICADA_CR_SIZES, default "1 8 32" GiB) an idle program,
# cr_hold, holds that much device memory filled with a hash pattern:
#   native  it runs on the real driver; cr_native checkpoints and restores
#           its GPU state with NVIDIA's cuCheckpointProcess* calls;
#   Cicada  it runs through Cicada against a gpu-server of its own;
#           `criu dump` with Cicada's plugin (build/lib/criu) writes its
#           image, once to tmpfs (/dev/shm) and once to disk (/var/tmp),
#           then `criu restore -d` brings it back.
# Each time cr_hold must then find its memory intact ("verified"). The
# disk checkpoint time includes a sync of the image; the page cache is
# dropped before the disk restore where /proc/sys/vm/drop_caches allows.
# Prints one table and the targets: checkpoint <= size / 10 GB/s,
# restore <= 0.5 s + size / 20 GB/s.
#
# --cpu runs the Cicada rows on the CPU stand-in libcuda with sizes in MiB
# (default "16 64"), no native rows: a smoke test, the figures mean
# nothing. Needs root (criu). CRIU names the criu binary (default:
# build/bin/criu, else criu in PATH, else build/criu/criu);
# CRIU_DUMP_OPTS and CRIU_RESTORE_OPTS add options; CICADA_CR_TMPFS and
# CICADA_CR_DISK move the image folders. Uses prebuilt outputs only (run
# `make` first). The table also goes to $OUT/bench-cr.txt when OUT is set
# (with the logs of failed runs in $OUT/bench-cr-logs.tar.gz).
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
ROOT=$PWD
. scripts/lib.sh
HOLD=$ROOT/build/tests/programs/cr_hold NATIVE=$ROOT/build/bench/cr_native
SERVER=$ROOT/build/bin/gpu-server KDIR=$ROOT/build/tests/kernels
PLUGINS=$ROOT/build/lib/criu
CPU=0
[ "${1:-}" = --cpu ] && CPU=1
if [ $CPU = 1 ]; then
	UNIT=MiB UNIT_MIB=1 SIZES=${CICADA_CR_SIZES:-16 64}
	DRIVER_LIBS=$ROOT/build/tests/fakecuda
else
	UNIT=GiB UNIT_MIB=1024 SIZES=${CICADA_CR_SIZES:-1 8 32}
	DRIVER_LIBS=${LD_LIBRARY_PATH:-}      # native runs: the real libcuda
fi
TMPFS_ROOT=${CICADA_CR_TMPFS:-/dev/shm} DISK_ROOT=${CICADA_CR_DISK:-/var/tmp}
TMP=$(mktemp -d /tmp/cicada-bench-cr.XXXXXX)
IMAGES="" SERVER_PID="" APP_PID="" FAILED=0 CICADA_OK=1 KEEP_LOGS=0
declare -A R    # R[size,column] = figure

say() { echo "bench-cr: $*"; }
warn() { echo "bench-cr: $*" >&2; }

# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
	[ -z "$APP_PID" ] || kill -9 "$APP_PID" 2>/dev/null || true
	stop_server
	# shellcheck disable=SC2086
	[ -z "$IMAGES" ] || rm -rf $IMAGES
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

find_criu() {
	if [ -n "${CRIU:-}" ]; then
		command -v "$CRIU" || true
	elif [ -x "$ROOT/build/bin/criu" ]; then
		echo "$ROOT/build/bin/criu"       # bundled for GPU nodes
	elif command -v criu >/dev/null 2>&1; then
		command -v criu
	elif [ -x "$ROOT/build/criu/criu" ]; then
		echo "$ROOT/build/criu/criu"
	fi
}

# check_inputs: the native inputs must exist; missing Cicada ones (criu,
# the plugin, root) only cost the Cicada columns, except with --cpu.
check_inputs() {
	local f why=""
	for f in "$HOLD" "$KDIR/kernels_cr.cubin"; do
		[ -e "$f" ] || { warn "$f is missing; run 'make' first"; exit 1; }
	done
	[ $CPU = 1 ] || [ -e "$NATIVE" ] || { warn "$NATIVE is missing; run 'make' first"; exit 1; }
	CRIU_BIN=$(find_criu)
	if [ -z "$CRIU_BIN" ]; then
		why="no criu binary (set CRIU=/path/to/criu)"
	elif [ "$(id -u)" != 0 ]; then
		why="criu needs root"
	elif ! compgen -G "$PLUGINS/*.so" >/dev/null; then
		why="no CRIU plugin in $PLUGINS; run 'make' first"
	elif [ ! -e "$SERVER" ] || [ ! -e "$ROOT/build/lib/libcuda.so.1" ]; then
		why="gpu-server or build/lib/libcuda.so.1 is missing; run 'make' first"
	fi
	[ -z "$why" ] && return 0
	[ $CPU = 1 ] && { warn "$why"; exit 1; }
	warn "$why: skipping the Cicada columns"
	CICADA_OK=0 FAILED=1
}

now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

# MiB free for device memory: the GPU's, or the host's for the stand-in.
free_mib() {
	if [ $CPU = 1 ]; then
		awk '$1 == "MemAvailable:" { print int($2 / 1024) }' /proc/meminfo
	else
		nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits -i 0 2>/dev/null |
			head -n 1 | tr -d ' ' || true
	fi
}

# MiB free on the file system of a folder.
fs_free_mib() {
	df -Pm "$1" 2>/dev/null | awk 'NR == 2 { print $4 }'
}

# wait_for_output FILE PID SECONDS: until FILE has "verified", "MISMATCH"
# or "ready" on a line; 1 when PID dies first or time runs out.
wait_for_output() {
	local file=$1 pid=$2 limit=$(($3 * 10))
	for _ in $(seq "$limit"); do
		grep -qxE 'ready|verified|MISMATCH' "$file" 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	grep -qxE 'ready|verified|MISMATCH' "$file" 2>/dev/null
}

# wait_for_result FILE PID: cr_hold's verdict after the go file appeared.
wait_for_result() {
	local file=$1 pid=$2
	for _ in $(seq 3000); do
		grep -qxE 'verified|MISMATCH' "$file" 2>/dev/null && break
		kill -0 "$pid" 2>/dev/null || { sleep 0.2; break; }
		sleep 0.1
	done
	grep -qx verified "$file" 2>/dev/null
}

# why_failed DIR: the last line worth showing from the files in DIR.
why_failed() {
	cat "$1"/*.err "$1"/out 2>/dev/null | grep -v '^$' | tail -n 1
}

start_server() {
	LD_LIBRARY_PATH=$DRIVER_LIBS timeout -k 5 3600 "$SERVER" --listen "unix:$TMP/gpu.sock" \
		--cache-dir "$TMP/cache" >>"$TMP/server.log" 2>&1 &
	SERVER_PID=$!
	wait_for_server "$SERVER_PID" "$TMP/gpu.sock" "$TMP/server.log" bench-cr
}

stop_server() {
	[ -n "$SERVER_PID" ] || return 0
	kill "$SERVER_PID" 2>/dev/null || true
	{ wait "$SERVER_PID"; } 2>/dev/null || true
	SERVER_PID=""
	rm -f "$TMP/gpu.sock"
}

# native SIZE: cr_hold on the real driver, checkpointed by cr_native.
native() {
	local size=$1 mib=$(($1 * UNIT_MIB)) dir=$TMP/native-$1 pid
	mkdir -p "$dir"
	env -u LD_PRELOAD -u CICADA_SERVER -u CICADA_TOKEN_FILE -u CICADA_SHM \
		LD_LIBRARY_PATH="$DRIVER_LIBS" \
		"$HOLD" "$KDIR" "$mib" "$dir/go" </dev/null >"$dir/out" 2>"$dir/hold.err" &
	pid=$! APP_PID=$!
	if ! wait_for_output "$dir/out" "$pid" 600 || ! grep -qx ready "$dir/out"; then
		warn "native $size $UNIT: cr_hold did not get ready: $(why_failed "$dir")"
		native_done "$pid" 1
		return
	fi
	if ! LD_LIBRARY_PATH="$DRIVER_LIBS" "$NATIVE" "$pid" >"$dir/cr" 2>"$dir/cr.err"; then
		warn "native $size $UNIT: $(tail -n 1 "$dir/cr.err")"
		native_done "$pid" 1
		return
	fi
	R[$size,nck]=$(awk '$1 == "native-checkpoint-s" { print $2 }' "$dir/cr")
	R[$size,nrs]=$(awk '$1 == "native-restore-s" { print $2 }' "$dir/cr")
	touch "$dir/go"
	if ! wait_for_result "$dir/out" "$pid"; then
		warn "native $size $UNIT: memory not intact after the restore: $(why_failed "$dir")"
		R[$size,nck]=FAIL R[$size,nrs]=FAIL
		native_done "$pid" 1
		return
	fi
	native_done "$pid" 0
}

native_done() {
	kill -9 "$1" 2>/dev/null || true
	{ wait "$1"; } 2>/dev/null || true
	APP_PID=""
	[ "$2" = 0 ] || FAILED=1
}

# criu_error BASE: the last error criu logged in BASE.log (the failed
# RLIMIT_NOFILE raise is harmless and always there), else BASE.err's.
criu_error() {
	local line
	line=$(grep -h -E 'Error|cicada:' "$1.log" "$1.err" 2>/dev/null |
		grep -v RLIMIT_NOFILE | tail -n 1 || true)
	echo "${line:-$(tail -n 1 "$1.err" 2>/dev/null)} (log: $1.log)"
}

# cicada_fail SIZE KIND MESSAGE: one line, the row's figures marked FAIL.
cicada_fail() {
	warn "cicada $1 $UNIT ($2): $3"
	R[$1,ck_$2]=FAIL R[$1,rs_$2]=FAIL
	FAILED=1
	KEEP_LOGS=1
	if [ -n "$APP_PID" ]; then
		kill -9 "$APP_PID" 2>/dev/null || true
		{ wait "$APP_PID"; } 2>/dev/null || true
		APP_PID=""
	fi
}

# start_app SIZE DIR: cr_hold through Cicada in a session of its own.
start_app() {
	local mib=$(($1 * UNIT_MIB)) dir=$2
	setsid env -u LD_PRELOAD -u CICADA_TOKEN_FILE -u CICADA_SHM \
		LD_LIBRARY_PATH="$ROOT/build/lib" \
		CICADA_SERVER="unix:$TMP/gpu.sock" \
		"$HOLD" "$KDIR" "$mib" "$dir/go" </dev/null >"$dir/out" 2>"$dir/hold.err" &
	APP_PID=$!
	disown "$APP_PID"    # no "Killed" notice when criu dump ends it
}

# gone PID: waits up to 10 s until PID no longer exists (the shell reaps
# its disowned children), so that criu restore finds the PID free.
gone() {
	for _ in $(seq 1000); do
		[ -e "/proc/$1" ] || return 0
		sleep 0.01
	done
	return 1
}

# dump SIZE KIND IMG: criu dump, timed; the disk kind syncs the image too.
dump() {
	local size=$1 kind=$2 img=$3 dir=$TMP/cicada-$1-$2 t0 t1
	t0=$(now)
	# shellcheck disable=SC2086
	if ! CICADA_SERVER="unix:$TMP/gpu.sock" deadline 600 "$CRIU_BIN" dump -t "$APP_PID" -D "$img" \
		-L "$PLUGINS" -o "$dir/dump.log" ${CRIU_DUMP_OPTS:-} 2>"$dir/dump.err"; then
		cicada_fail "$size" "$kind" "criu dump failed: $(criu_error "$dir/dump")"
		return 1
	fi
	[ "$kind" = disk ] && sync -f "$img/."
	t1=$(now)
	R[$size,ck_$kind]=$(elapsed "$t0" "$t1")
	R[$size,img_$kind]=$(du -sb "$img" | awk '{ print $1 }')
	if ! gone "$APP_PID"; then
		cicada_fail "$size" "$kind" "pid $APP_PID still exists after criu dump"
		return 1
	fi
}

# restore SIZE KIND IMG: criu restore -d, timed; the app must then verify.
restore() {
	local size=$1 kind=$2 img=$3 dir=$TMP/cicada-$1-$2 t0 t1
	if [ "$kind" = disk ] && [ -w /proc/sys/vm/drop_caches ]; then
		sync
		echo 3 >/proc/sys/vm/drop_caches
	fi
	t0=$(now)
	# shellcheck disable=SC2086
	if ! CICADA_SERVER="unix:$TMP/gpu.sock" deadline 600 "$CRIU_BIN" restore -d -D "$img" \
		-L "$PLUGINS" -o "$dir/restore.log" ${CRIU_RESTORE_OPTS:-} 2>"$dir/restore.err"; then
		cicada_fail "$size" "$kind" "criu restore failed: $(criu_error "$dir/restore")"
		return 1
	fi
	t1=$(now)
	R[$size,rs_$kind]=$(elapsed "$t0" "$t1")
	touch "$dir/go"
	if ! wait_for_result "$dir/out" "$APP_PID"; then
		cicada_fail "$size" "$kind" "memory not intact after the restore: $(why_failed "$dir")"
		return 1
	fi
	APP_PID=""
}

# cicada SIZE KIND ROOT: one dump and restore with the image under ROOT.
cicada() {
	local size=$1 kind=$2 root=$3 mib=$(($1 * UNIT_MIB)) dir=$TMP/cicada-$1-$2 img free
	free=$(fs_free_mib "$root")
	if [ -z "$free" ] || [ "$free" -lt $((mib + mib / 8 + 64)) ]; then
		say "skipping $size $UNIT to $kind: $root has ${free:-?} MiB free, the image needs about $mib"
		R[$size,ck_$kind]=skip R[$size,rs_$kind]=skip
		return
	fi
	mkdir -p "$dir"
	img=$(mktemp -d "$root/cicada-cr-image.XXXXXX")
	IMAGES="$IMAGES $img"
	start_app "$size" "$dir"
	if ! wait_for_output "$dir/out" "$APP_PID" 600 || ! grep -qx ready "$dir/out"; then
		cicada_fail "$size" "$kind" "cr_hold did not get ready: $(why_failed "$dir")"
	elif [ "$(ps -o sid= -p "$APP_PID" | tr -d ' ')" != "$APP_PID" ]; then
		cicada_fail "$size" "$kind" "cr_hold (pid $APP_PID) is not a session leader"
	elif dump "$size" "$kind" "$img"; then
		restore "$size" "$kind" "$img" || true
	fi
	rm -rf "$img"
}

# run_size SIZE: every row of one size, or one line saying why not.
run_size() {
	local size=$1 mib=$(($1 * UNIT_MIB)) free
	free=$(free_mib)
	if [ -n "$free" ] && [ "$free" -lt $((mib + 1024)) ]; then
		say "skipping $size $UNIT: $free MiB free for device memory, needs $((mib + 1024))"
		R[$size,skip]=1
		return
	fi
	[ -n "$free" ] || say "cannot read the free device memory; trying $size $UNIT anyway"
	[ $CPU = 1 ] || native "$size"
	[ $CICADA_OK = 1 ] || return 0
	if ! start_server; then
		R[$size,ck_tmpfs]=FAIL R[$size,ck_disk]=FAIL FAILED=1
		return
	fi
	cicada "$size" tmpfs "$TMPFS_ROOT"
	cicada "$size" disk "$DISK_ROOT"
	stop_server
}

# Table rows "size|column=value|..." for the awk below.
rows() {
	local size col line
	for size in $SIZES; do
		line="$size"
		for col in skip nck nrs ck_tmpfs rs_tmpfs img_tmpfs ck_disk rs_disk; do
			line="$line|$col=${R[$size,$col]:-}"
		done
		echo "$line"
	done
}

report() {
	rows | awk -F'|' -v unit="$UNIT" -v unit_mib="$UNIT_MIB" '
	function fig(x) { return x == "" ? "-" : x }
	function bytes(b) {
		if (b == "") return "-"
		return b >= 1073741824 ? sprintf("%.2f GiB", b / 1073741824) : sprintf("%.1f MiB", b / 1048576)
	}
	function target(what, got, limit) {
		if (got == "" || got == "skip") return
		if (got == "FAIL") { printf "  %-6s  %-26s failed\n", "MISSED", what; return }
		printf "  %-6s  %-26s %.3f s (target <= %.3f s)\n",
			got + 0 <= limit ? "MET" : "MISSED", what, got, limit
	}
	{
		size[NR] = $1
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[NR, kv[1]] = kv[2] }
	}
	END {
		fmt = "%-10s | %-8s | %-9s | %-11s | %-11s | %-10s | %-10s | %s\n"
		printf fmt, "size", "native", "native", "Cicada", "Cicada", "image", "Cicada", "Cicada"
		printf fmt, "", "ckpt s", "restore s", "ckpt tmpfs", "rest tmpfs", "size", "ckpt disk", "rest disk"
		for (r = 1; r <= NR; r++) {
			s = size[r] " " unit
			if (v[r, "skip"]) { printf "%-10s | skipped: not enough free device memory\n", s; continue }
			printf fmt, s, fig(v[r, "nck"]), fig(v[r, "nrs"]), fig(v[r, "ck_tmpfs"]),
				fig(v[r, "rs_tmpfs"]), bytes(v[r, "img_tmpfs"]), fig(v[r, "ck_disk"]),
				fig(v[r, "rs_disk"])
		}
		print "\ntargets: checkpoint <= size / 10 GB/s, restore <= 0.5 s + size / 20 GB/s"
		for (r = 1; r <= NR; r++) {
			if (v[r, "skip"]) continue
			b = size[r] * unit_mib * 1048576
			s = size[r] " " unit
			target(s " checkpoint (tmpfs)", v[r, "ck_tmpfs"], b / 10e9)
			target(s " restore (tmpfs)", v[r, "rs_tmpfs"], 0.5 + b / 20e9)
			target(s " checkpoint (disk)", v[r, "ck_disk"], b / 10e9)
			target(s " restore (disk)", v[r, "rs_disk"], 0.5 + b / 20e9)
		}
	}'
}

check_inputs
say "sizes: $SIZES $UNIT$([ $CPU = 1 ] && echo ' (CPU stand-in)'); criu: ${CRIU_BIN:-none}; images in $TMPFS_ROOT and $DISK_ROOT"
for size in $SIZES; do
	case $size in '' | *[!0-9]*) warn "size '$size' is not a whole number of $UNIT"; exit 1 ;; esac
	run_size "$size"
done
report | tee "$TMP/table.txt"
if [ -n "${OUT:-}" ]; then
	mkdir -p "$OUT"
	{ cat "$TMP/table.txt"; echo; cat "$TMP/server.log" 2>/dev/null; } >"$OUT/bench-cr.txt"
	[ $KEEP_LOGS = 0 ] || tar -C "$TMP" -czf "$OUT/bench-cr-logs.tar.gz" --exclude=cache . 2>/dev/null || true
elif [ $KEEP_LOGS = 1 ]; then
	rm -rf /tmp/cicada-bench-cr-logs
	cp -a "$TMP" /tmp/cicada-bench-cr-logs
	say "logs of the failed runs kept in /tmp/cicada-bench-cr-logs"
fi
[ $CPU = 1 ] && say "--cpu: CPU stand-in driver, the figures are meaningless"
exit $FAILED

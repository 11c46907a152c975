#!/usr/bin/env bash
# run-bench-coldstart.sh: `make bench-coldstart` (GPU node, root: criu).
# The serverless case: a GPT-2-medium-sized fp16 model server
# (tests/torch/llm.py) from launch to its first answer, natively and
# through Cicada over shared memory, against a copy started from a
# template of the same server (gpu-template: saved once, after its
# warm-up request) from `gpu-template start` to the copy's answer (the
# request already waiting). BENCH_ROUNDS rounds (default 3), the order
# rotating; medians; and whether every answer equals native's. The
# template's images go to BENCH_TEMPLATE_DIR (default under /dev/shm:
# the best case; a node's local disk is what most will use).
# Python is TORCH_PYTHON (default python3); BENCH_DRIVER_ENV, variables
# for the gpu-server (the stand-in's, to try the script without a GPU).
# Uses prebuilt outputs only.
set -uo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
ROOT=$PWD B=$ROOT/build
. scripts/lib.sh
PY=${TORCH_PYTHON:-python3} L=$ROOT/tests/torch/llm.py ROUNDS=${BENCH_ROUNDS:-3} DTYPE=${BENCH_DTYPE:-fp16}
TPL=${BENCH_TEMPLATE_DIR:-/dev/shm/cicada-bench-coldstart-$$}
[ -e "$TPL" ] && { echo "bench-coldstart: $TPL exists: give BENCH_TEMPLATE_DIR a new directory" >&2; exit 1; }
T=$(mktemp -d /tmp/cicada-bench-coldstart.XXXXXX) SERVER_PID="" TINIT=""
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
	# shellcheck disable=SC2046  # pids
	kill -9 ${TINIT:-} $(cat "$T/copies" 2>/dev/null) 2>/dev/null
	[ -z "$SERVER_PID" ] || kill "$SERVER_PID" 2>/dev/null
	rm -rf "$T" "$TPL"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
[ "$(id -u)" = 0 ] || { echo "bench-coldstart: needs root (criu)" >&2; exit 1; }
timeout 120 "$PY" -c "import torch, transformers" 2>/dev/null ||
	{ echo "bench-coldstart: $PY cannot import torch and transformers (a GPU node's job): skipped"; exit 0; }
env ${BENCH_DRIVER_ENV:-} timeout -k 5 3600 "$B/bin/gpu-server" --listen "unix:$T/gpu.sock" --cache-dir "$T/cache" >"$T/server.log" 2>&1 &
SERVER_PID=$!
wait_for_server "$SERVER_PID" "$T/gpu.sock" "$T/server.log" bench-coldstart || exit 1
SHM="LD_LIBRARY_PATH=$B/lib CICADA_SERVER=unix:$T/gpu.sock"

now() { date +%s.%N; }
# wait_line PATTERN FILE SECONDS
wait_line() {
	for _ in $(seq $(($3 * 200))); do grep -q "$1" "$2" 2>/dev/null && return 0; sleep 0.005; done
	return 1
}

# The template: made once, before the rounds.
TINIT=$(env $SHM timeout 10 "$B/bin/gpu-template" run --log "$T/template.log" -- "$PY" "$L" template "$DTYPE" "$T/go") ||
	{ echo "bench-coldstart: gpu-template run failed" >&2; exit 1; }
wait_line "^ready" "$T/template.log" 600 || { echo "bench-coldstart: the template never got ready:" >&2
	tail -3 "$T/template.log" >&2; exit 1; }
timeout 600 "$B/bin/gpu-template" save "$TINIT" "$TPL" >"$T/save.out" 2>&1 || { cat "$T/save.out" >&2; exit 1; }
TINIT=""
touch "$T/go"

# cold MODE ROUND: launch to exit (after its answer); prints seconds.
cold() {
	local env="" t0
	[ "$1" = shm ] && env=$SHM
	t0=$(now)
	env $env timeout -k 5 600 "$PY" "$L" serve "$DTYPE" >"$T/$1.$2" 2>"$T/$1.$2.err" || { echo fail; return; }
	awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'
}

# copy ROUND: gpu-template start to the copy's answer; prints seconds.
copy() {
	local t0 pid secs
	t0=$(now)
	timeout 600 "$B/bin/gpu-template" start "$TPL" --log "$T/copy.$1" >"$T/start.$1" 2>&1 || { echo fail; return; }
	pid=$(sed -n 's/.*started a copy as pid \([0-9]*\).*/\1/p' "$T/start.$1")
	echo "$pid" >>"$T/copies"          # (copy runs in a subshell: the cleanup reads them here)
	if wait_line "^answer" "$T/copy.$1" 600; then
		secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
	else
		secs=fail
	fi
	for _ in $(seq 200); do kill -0 "${pid:-0}" 2>/dev/null || break; sleep 0.05; done
	kill -9 "${pid:-0}" 2>/dev/null
	echo "$secs"
}

printf 'bench-coldstart: %s\n' "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
printf '%s\n' "$(cat "$T/save.out")"
printf '\nmodel server (GPT-2-medium-sized, %s): launch to first answer, or gpu-template start to the copy'"'"'s answer\n' "$DTYPE"
printf '%-7s %12s %12s %16s %s\n' round "native cold" "shm cold" "template copy" "(start alone)"
modes=(native shm copy)
for r in $(seq "$ROUNDS"); do
	declare -A got=()
	for i in 0 1 2; do
		m=${modes[$(((i + r) % 3))]}
		if [ "$m" = copy ]; then got[$m]=$(copy "$r"); else got[$m]=$(cold "$m" "$r"); fi
	done
	printf '%-7s %12s %12s %16s %s\n' "$r" "${got[native]}" "${got[shm]}" "${got[copy]}" \
		"($(sed -n 's/.* in \([0-9.]* s\)$/\1/p' "$T/start.$r"))"
	echo "${got[native]} ${got[shm]} ${got[copy]}" >>"$T/rows"
	unset got
done
med() { awk -v c="$1" '$c != "fail" { print $c }' "$T/rows" | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "fail" }'; }
n=$(med 1) s=$(med 2) c=$(med 3)
printf '%-7s %12s %12s %16s\n' median "$n" "$s" "$c"
ref=$(grep -h '^answer' "$T"/native.* | sort -u)
all=$(cat "$T"/native.* "$T"/shm.* "$T"/copy.* 2>/dev/null | grep -h '^answer' | sort -u)
if [ -n "$ref" ] && [ "$ref" = "$all" ]; then echo "answers: identical to native in every run"
else echo "answers: DIFFER ($(echo $all))"; fi
awk -v n="$n" -v c="$c" 'BEGIN { if (n + 0 > 0 && c + 0 > 0) printf "a copy from the template answers %.1fx sooner than a native cold start (%.2f s against %.2f s)\n", n / c, c, n }'

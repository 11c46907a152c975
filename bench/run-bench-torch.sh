#!/usr/bin/env bash
# run-bench-torch.sh: `make bench-torch` (GPU node). PyTorch natively
# against Cicada over shared memory (shm) and over TCP loopback, in one
# run, with tests/torch/workloads.py:
#   CNN training steps per second (a three-layer CNN with batch norm,
#   batch 128, SGD) and greedy-decode tokens per second (a randomly
#   initialised 6-layer GPT-2 from transformers, 64 new tokens a call),
#   each measured for BENCH_TORCH_SECONDS (default 10) after a warm-up,
#   BENCH_ROUNDS rounds (default 5) with the order of the modes rotating,
#   the median shown, and the ratios as the median of each round's own
#   ratio (a round's three runs are next to each other in time, so a
#   drift of the machine's speed cancels); with 8 cores or more, the
#   programs run on the first half of the cores and the gpu-server on the
#   other half, natively too, so no run competes with a worker's polling;
#   what LLM users run (tests/torch/llm.py, a GPT-2-medium-sized model
#   with random weights): fp16 and bf16 greedy decode of 32 tokens at
#   batch 1 and 8 (tokens/s), prefill of 2,048 tokens (tokens/s), time to
#   first token, and the cold start of a model server from launch to its
#   first answer, BENCH_LLM_ROUNDS rounds (default 3) rotating as above,
#   and whether the tokens were bit-identical to native in every run;
#   then a CNN training process checkpointed mid-way with criu and
#   Cicada's plugin (images on /dev/shm) and restored (criu restore of the
#   python process, and its GPU state), with the image size; the restored
#   process must go on training.
# BENCH_TORCH_PARTS picks parts (default "rates llm cr").
# Python is TORCH_PYTHON (default python3). Uses prebuilt outputs only.
# The table also goes to $OUT/bench-torch.txt when OUT is set.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
ROOT=$PWD
. scripts/lib.sh
PY=${TORCH_PYTHON:-python3} W=$ROOT/tests/torch/workloads.py SERVER=$ROOT/build/bin/gpu-server
SECS=${BENCH_TORCH_SECONDS:-10} ROUNDS=${BENCH_ROUNDS:-5} LLM_ROUNDS=${BENCH_LLM_ROUNDS:-3}
PARTS=" ${BENCH_TORCH_PARTS:-rates llm cr} " L=$ROOT/tests/torch/llm.py
CRIU=$(command -v criu || echo /usr/local/sbin/criu)
[ -x build/bin/criu ] && CRIU=$ROOT/build/bin/criu
TMP=$(mktemp -d /tmp/cicada-bench-torch.XXXXXX) IMG=/dev/shm/cicada-bench-torch-$$ SERVER_PID="" APP_PID=""
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
	[ -z "$APP_PID" ] || kill -9 "$APP_PID" 2>/dev/null || true
	pkill -9 -f "$W train" 2>/dev/null || true
	[ -z "$SERVER_PID" ] || kill "$SERVER_PID" 2>/dev/null || true
	rm -rf "$TMP" "$IMG"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
timeout 120 "$PY" -c "import torch, transformers" ||
	{ echo "bench-torch: $PY cannot import torch and transformers" >&2; exit 1; }
# CPU sets: the programs on the first half of the cores, the server on the rest.
APP_CPUS=() SRV_CPUS=()
NCPU=$(nproc 2>/dev/null || echo 1)
if command -v taskset >/dev/null && [ "$NCPU" -ge 8 ]; then
	APP_CPUS=(taskset -c "0-$((NCPU / 2 - 1))") SRV_CPUS=(taskset -c "$((NCPU / 2))-$((NCPU - 1))")
fi
PORT=$((20000 + RANDOM % 30000))
head -c 24 /dev/urandom | base64 >"$TMP/token"
timeout -k 5 3600 "${SRV_CPUS[@]}" "$SERVER" --listen "unix:$TMP/gpu.sock" --listen "tcp:127.0.0.1:$PORT" \
	--token-file "$TMP/token" --cache-dir "$TMP/cache" >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
wait_for_server "$SERVER_PID" "$TMP/gpu.sock" "$TMP/server.log" bench-torch || exit 1

mode_env() {
	case $1 in
	native) echo "CICADA_NATIVE=1" ;;
	shm) echo "LD_LIBRARY_PATH=$ROOT/build/lib CICADA_SERVER=unix:$TMP/gpu.sock" ;;
	tcp) echo "LD_LIBRARY_PATH=$ROOT/build/lib CICADA_SERVER=tcp:127.0.0.1:$PORT CICADA_TOKEN_FILE=$TMP/token" ;;
	esac
}

# Rates: one bench run per mode per round, the order rotating.
modes=(native shm tcp)
[[ $PARTS == *" rates "* ]] || ROUNDS=0
for r in $(seq "$ROUNDS"); do
	for i in 0 1 2; do
		m=${modes[$(((i + r) % 3))]}
		# shellcheck disable=SC2046
		if ! env $(mode_env "$m") timeout -k 5 $((SECS * 4 + 240)) "${APP_CPUS[@]}" "$PY" "$W" bench "$SECS" \
			>"$TMP/$m.$r" 2>"$TMP/$m.$r.err"; then
			echo "bench-torch: $m round $r failed: $(tail -n 1 "$TMP/$m.$r.err")" >&2
		fi
	done
done
# LLM rows: per round and mode, one llm.py suite process, then one cold
# model server timed from launch to exit.
llm_round() {
	local m=$1 r=$2 t0 t1
	# shellcheck disable=SC2046
	env $(mode_env "$m") timeout -k 5 600 "${APP_CPUS[@]}" "$PY" "$L" suite fp16 bf16 \
		>"$TMP/llm-$m.$r" 2>"$TMP/llm-$m.$r.err" ||
		echo "bench-torch: llm $m round $r failed: $(tail -n 1 "$TMP/llm-$m.$r.err")" >&2
	t0=$(date +%s.%N)
	# shellcheck disable=SC2046
	env $(mode_env "$m") timeout -k 5 300 "${APP_CPUS[@]}" "$PY" "$L" serve fp16 >"$TMP/serve-$m.$r" 2>&1 ||
		echo "bench-torch: llm server $m round $r failed: $(tail -n 1 "$TMP/serve-$m.$r")" >&2
	t1=$(date +%s.%N)
	! grep -q "^answer " "$TMP/serve-$m.$r" || awk "BEGIN { printf \"cold-start-s %.3f\\n\", $t1 - $t0 }" >>"$TMP/llm-$m.$r"
	sed -n 's/^answer/digest-serve/p' "$TMP/serve-$m.$r" >>"$TMP/llm-$m.$r"
}
[[ $PARTS == *" llm "* ]] || LLM_ROUNDS=0
for r in $(seq "$LLM_ROUNDS"); do
	for i in 0 1 2; do
		llm_round "${modes[$(((i + r) % 3))]}" "$r"
	done
done

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "nan" }'; }
figure() { cat "$TMP/$1".[0-9]* 2>/dev/null | awk -v k="$2" '$1 == k { print $2 }' | median; }
# per_round PREFIX ROUNDS MODE KEY: each round's MODE and native figures
# of KEY, side by side (PREFIX: "" for the rates, "llm-" for the LLM runs).
per_round() {
	for r in $(seq "$2"); do
		awk -v k="$4" '$1 == k { print $2 }' "$TMP/$1$3.$r" "$TMP/${1}native.$r" 2>/dev/null | paste -sd' '
	done
}
# ratio MODE KEY [PREFIX ROUNDS [INV]]: the median over rounds of MODE's
# figure / native's, same round; INV 1 for times (native's / the mode's,
# so above 1 is faster too).
ratio() {
	per_round "${3:-}" "${4:-$ROUNDS}" "$1" "$2" |
		awk -v inv="${5:-0}" 'NF == 2 && (inv ? $1 > 0 : $2 > 0) { printf "%.4f\n", inv ? $2 / $1 : $1 / $2 }' |
		median | awk '{ if ($1 == "nan") print "-"; else printf "%.3f", $1 }'
}
# delta MODE KEY: the LLM runs' median of each round's difference to native.
delta() {
	per_round llm- "$LLM_ROUNDS" "$1" "$2" | awk 'NF == 2 { printf "%+.3f\n", $1 - $2 }' |
		median | awk '{ if ($1 == "nan") print "-"; else printf "%+.2fs", $1 }'
}
# Whether every run's digests (tokens, prefill argmax, the server's
# answer) equal the native run's of the same round.
llm_identical() {
	local r m bad=0 n=0
	for r in $(seq "$LLM_ROUNDS"); do
		for m in shm tcp; do
			n=$((n + 1))
			cmp -s <(grep '^digest' "$TMP/llm-native.$r" | sort) <(grep '^digest' "$TMP/llm-$m.$r" | sort) &&
				grep -q '^digest' "$TMP/llm-native.$r" || bad=$((bad + 1))
		done
	done
	echo "$((n - bad)) of $n runs"
}

# Why criu failed: the plugin's line, else criu's first error but its
# harmless rlimit one; the whole log goes to $OUT when set.
criu_why() {
	{ grep -h "cicada:" "$@"; grep -h "Error" "$@" | grep -v RLIMIT_NOFILE; } 2>/dev/null | head -n 1
}
keep_log() {
	[ -z "${OUT:-}" ] || cp "$1" "$OUT/bench-torch-$(basename "$1")" 2>/dev/null || true
}

# Checkpoint and restore of a training process (shm).
ck="" rs="" size="" cr_note=""
checkpoint() {
	# shellcheck disable=SC2046
	env $(mode_env shm) setsid "$PY" "$W" train 100000 20 </dev/null >"$TMP/train.out" 2>"$TMP/train.err" &
	APP_PID=$!
	disown $APP_PID
	for _ in $(seq 1200); do grep -q "^step 20 " "$TMP/train.out" && break; sleep 0.1; done
	grep -q "^step 20 " "$TMP/train.out" || { cr_note="training did not start"; return 1; }
	mkdir -p "$IMG"
	local t0 t1 t2 steps
	t0=$(date +%s.%N)
	timeout -k 5 600 "$CRIU" dump -t "$APP_PID" -D "$IMG" -L "$ROOT/build/lib/criu" -o dump.log -v4 2>"$TMP/dump.err" ||
		{ cr_note="dump failed: $(criu_why "$IMG/dump.log" "$TMP/dump.err")"; keep_log "$IMG/dump.log"; return 1; }
	t1=$(date +%s.%N)
	size=$(du -sm "$IMG" | cut -f1)
	steps=$(grep -c "^step " "$TMP/train.out")
	timeout -k 5 600 "$CRIU" restore -d -D "$IMG" -L "$ROOT/build/lib/criu" -o restore.log -v4 2>"$TMP/restore.err" ||
		{ cr_note="restore failed: $(criu_why "$IMG/restore.log" "$TMP/restore.err")"; keep_log "$IMG/restore.log"; return 1; }
	t2=$(date +%s.%N)
	for _ in $(seq 600); do [ "$(grep -c "^step " "$TMP/train.out")" -gt $((steps + 20)) ] && break; sleep 0.1; done
	[ "$(grep -c "^step " "$TMP/train.out")" -gt $((steps + 20)) ] || { cr_note="restored process did not go on"; return 1; }
	ck=$(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }") rs=$(awk "BEGIN { printf \"%.2f\", $t2 - $t1 }")
}
if [[ $PARTS == *" cr "* ]]; then
	checkpoint || true
	kill -9 "$APP_PID" 2>/dev/null || true
fi

{
	echo "bench-torch: PyTorch natively and through Cicada, one run (median of $ROUNDS rounds of ${SECS} s)"
	printf '%-26s %12s %12s %12s %9s %9s\n' measure native shm tcp shm/nat tcp/nat
	if [ "$ROUNDS" -gt 0 ]; then
		for k in cnn-steps-per-s decode-tokens-per-s; do
			n=$(figure native "$k") s=$(figure shm "$k") t=$(figure tcp "$k")
			printf '%-26s %12s %12s %12s %9s %9s\n' "$k" "$n" "$s" "$t" "$(ratio shm "$k")" "$(ratio tcp "$k")"
		done
	fi
	if [ "$LLM_ROUNDS" -gt 0 ]; then
		for k in decode-fp16-b1 decode-fp16-b8 decode-bf16-b1 decode-bf16-b8 prefill-fp16-2048 prefill-bf16-2048; do
			n=$(figure llm-native "$k") s=$(figure llm-shm "$k") t=$(figure llm-tcp "$k")
			printf '%-26s %12s %12s %12s %9s %9s\n' "$k (tok/s)" "$n" "$s" "$t" "$(ratio shm "$k" llm- "$LLM_ROUNDS")" \
				"$(ratio tcp "$k" llm- "$LLM_ROUNDS")"
		done
		for k in ttft-fp16-b1 ttft-bf16-b1 first-call-fp16-b1; do
			n=$(figure llm-native "$k") s=$(figure llm-shm "$k") t=$(figure llm-tcp "$k")
			printf '%-26s %12s %12s %12s %9s %9s\n' "$k (s)" "$n" "$s" "$t" "$(ratio shm "$k" llm- "$LLM_ROUNDS" 1)" \
				"$(ratio tcp "$k" llm- "$LLM_ROUNDS" 1)"
		done
		k=cold-start-s n=$(figure llm-native $k) s=$(figure llm-shm $k) t=$(figure llm-tcp $k)
		printf '%-26s %12s %12s %12s %9s %9s\n' "cold start (s)" "$n" "$s" "$t" "$(delta shm $k)" "$(delta tcp $k)"
		echo "(LLM rows: $LLM_ROUNDS rounds; times: ratio = native's time / the mode's; cold start: the difference)"
		echo "LLM tokens, prefill and server answers bit-identical to native: $(llm_identical)"
	fi
	echo "(rates: median of the rounds; ratios: median of each round's ratio to its native run)"
	[ ${#APP_CPUS[@]} -gt 0 ] && echo "(programs on CPUs ${APP_CPUS[2]}, the gpu-server on ${SRV_CPUS[2]})"
	if [[ $PARTS != *" cr "* ]]; then
		:
	elif [ -n "$ck" ]; then
		echo "checkpoint of the training process (criu + GPU state, shm, /dev/shm): $ck s, image $size MiB; restore $rs s; training went on"
	else
		echo "checkpoint of the training process: FAILED ($cr_note)"
	fi
	echo "target: local (shm) within 3% of native (ratio >= 0.970) on every row; TCP >= 0.900 on decode and"
	echo "prefill; cold start through Cicada <= native + 0.3 s"
} | tee "$TMP/table"
[ -z "${OUT:-}" ] || cp "$TMP/table" "$OUT/bench-torch.txt"
[[ $PARTS != *" cr "* ]] || [ -n "$ck" ]

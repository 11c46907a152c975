#!/usr/bin/env bash
# run-bench-migrate.sh: `make bench-migrate`. Moves a running program
# (cr_pattern: SIZE MiB of device memory, half incompressible, half a
# pattern; DIRTY% of it rewritten every 100 ms) from one gpu-server to
# another with gpu-migrate, with pre-copy and without it (stop-and-copy,
# the baseline), and only its GPU state (--gpu-only, with pre-copy), and
# reports downtime, total time, bytes on the wire and pre-copy rounds.
# Then checkpoints of the same program with CRIU: a full one, and an
# incremental one after DIRTY% changed. The target server is
# another node (network and pid namespace) where iproute2 is here, else a
# pid namespace on loopback. On a machine without a GPU it runs against
# the CPU stand-in, says so, and its figures measure Cicada's own path
# only. MIGRATE_SIZES_MIB (default "1024 8192" on a GPU, "256 1024"
# without), MIGRATE_DIRTY ("0 10") and MIGRATE_MODES ("precopy
# stop-and-copy gpu-only") choose the cases; MIGRATE_STREAMS, if set,
# gpu-migrate's --streams; MIGRATE_HOST_MIB, host state of the program
# (cr_pattern's CR_HOST_MIB, DIRTY% of it rewritten every step too).
# Then, with PyTorch (TORCH_PYTHON, default python3) and a GPU, a real
# process: a transformer trained with AdamW under bf16 autocast beside
# MIGRATE_TORCH_HOST_MIB (1024) of host state and MIGRATE_TORCH_DEV_MIB
# (4096) of device memory, 0% and 10% of which it rewrites every step,
# moved whole (with criu's page server, and again without it: mode
# whole-no-ps) and --gpu-only while it trains (MIGRATE_TORCH_MODES picks
# among the three); each row also says whether its final weights, device
# memory and host state equal an unmoved run's.
# MIGRATE_TORCH=0 skips it; MIGRATE_ONLY_TORCH=1 runs only it.
# MIGRATE_LOGS=DIR keeps the servers' and criu's logs there; MIGRATE_ARGS,
# more gpu-migrate options for every move (--no-page-server, say).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD B=$ROOT/build
. scripts/lib.sh
T=$(mktemp -d /tmp/cicada-bench-migrate.XXXXXX)
PORT=$((20000 + $$ % 20000)) NS="" BR="" PIDS=""
export CICADA_KERNELS=$B/tests/kernels
PROG=$B/tests/programs/cr_pattern

cleanup() {
	if [ -n "${MIGRATE_LOGS:-}" ] && mkdir -p "$MIGRATE_LOGS"; then
		cp "$T"/*.log "$T"/m.* "$T"/torch.*.err "$MIGRATE_LOGS/" 2>/dev/null
		find "$T" -name "*.log" -path "*/run-*" -exec cp --backup=numbered {} "$MIGRATE_LOGS/" \;
	fi
	for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
	pkill -9 -f "^$PROG " 2>/dev/null
	pkill -9 -f "cache-dir $T/" 2>/dev/null
	[ -n "$NS" ] && ip netns del "$NS" 2>/dev/null
	[ -n "$BR" ] && ip link del "$BR" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
	DRIVER="" SIZES=${MIGRATE_SIZES_MIB:-"1024 8192"}
	echo "bench-migrate: $(nvidia-smi -L | head -n 1)"
else
	DRIVER="LD_LIBRARY_PATH=$B/tests/fakecuda" SIZES=${MIGRATE_SIZES_MIB:-"256 1024"}
	echo "bench-migrate: no GPU here: against the CPU stand-in (Cicada's own path; no GPU copies)"
fi
DIRTY=${MIGRATE_DIRTY:-"0 10"}
MODES=${MIGRATE_MODES:-"precopy stop-and-copy gpu-only"}
STREAMS=${MIGRATE_STREAMS:+--streams $MIGRATE_STREAMS}
[ "$(id -u)" = 0 ] || { echo "bench-migrate: needs root (CRIU, namespaces)"; exit 1; }
head -c 24 /dev/urandom | base64 >"$T/token"
head -c 24 /dev/urandom | base64 >"$T/mtoken"

env $DRIVER timeout -k 5 3600 "$B/bin/gpu-server" --listen "unix:$T/a.sock" --listen "tcp:127.0.0.1:$PORT" \
	--token-file "$T/token" --cache-dir "$T/cache-a" --run-dir "$T/run-a" --workers 2 >"$T/a.log" 2>&1 &
PIDS="$PIDS $!"
disown $!
wait_for_server $! "$T/a.sock" "$T/a.log" bench-migrate || exit 1
ip=127.0.0.1 in_ns=""
# A GPU node may lack iproute2: the build's copy stands in (tests/tools/ip).
if ! command -v ip >/dev/null && [ -x "$B/tests/tools/iproute/ip.bin" ]; then
	mkdir -p "$T/bin" && ln -s "$ROOT/tests/tools/ip" "$T/bin/ip" && PATH=$T/bin:$PATH
fi
if command -v ip >/dev/null; then
	NS=cicada-bm-$$ BR=cicbm$$ net=10.232.$(($$ % 250))
	ip link add "$BR" type bridge && ip addr add "$net.1/24" dev "$BR" && ip link set "$BR" up &&
		ip netns add "$NS" && ip -n "$NS" link set lo up &&
		ip link add "vb$$" type veth peer name eth0 netns "$NS" && ip link set "vb$$" master "$BR" up &&
		ip -n "$NS" addr add "$net.2/24" dev eth0 && ip -n "$NS" link set eth0 up || exit 1
	ip=$net.2 in_ns="nsenter --net=/run/netns/$NS"
fi
env $DRIVER $in_ns unshare --pid --fork --mount-proc timeout -k 5 3600 "$B/bin/gpu-server" \
	--listen "unix:$T/b.sock" --listen "tcp:$ip:$((PORT + 1))" --token-file "$T/token" --cache-dir "$T/cache-b" \
	--run-dir "$T/run-b" --workers 2 --accept-migrations --migration-token-file "$T/mtoken" \
	--migrate-timeout 600 >"$T/b.log" 2>&1 &
PIDS="$PIDS $!"
disown $!
wait_for_server $! "$T/b.sock" "$T/b.log" bench-migrate || exit 1
echo "bench-migrate: target $ip:$((PORT + 1)) ($([ -n "$in_ns" ] && echo "another node: network and pid namespace, veth" || echo "pid namespace, loopback"))"

# launch SIZE DIRTY: the program through server A; sets APP.
launch() {
	local out=$T/app.$1.$2
	CR_HOST_MIB=${MIGRATE_HOST_MIB:-} CICADA_SERVER=unix:$T/a.sock LD_LIBRARY_PATH=$B/lib timeout -k 5 1200 setsid "$PROG" "$CICADA_KERNELS" "$1" 100000 100 "$2" \
		</dev/null >"$out" 2>&1 &
	disown $!
	for _ in $(seq 6000); do grep -q "^step 3 " "$out" 2>/dev/null && break; sleep 0.05; done
	APP=$(pgrep -f "^$PROG $CICADA_KERNELS $1 100000 100 $2\$" | head -n 1)
	[ -n "$APP" ] && grep -q "^step 3 " "$out"
}

stop_program() {
	pkill -9 -f "^$PROG $CICADA_KERNELS $1 100000 100 $2\$" 2>/dev/null
	sleep 0.3
}

field() { sed -n "s/.*\"$1\":\\([0-9.]*\\).*/\\1/p" "$2"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

only_torch=${MIGRATE_ONLY_TORCH:-0}
[ "$only_torch" = 1 ] && SIZES="" DIRTY=""
[ -n "$SIZES" ] && printf '\n%-9s %-6s %-13s %10s %10s %12s %12s %7s   %s\n' "state" "dirty" "mode" "downtime" "total" "wire MiB" "frozen MiB" "rounds" \
	"downtime = dump + send + restore"
for size in $SIZES; do
	for d in $DIRTY; do
		for mode in $MODES; do
			launch "$size" "$d" || { echo "bench-migrate: the program did not start ($size MiB)"; tail -3 "$T/app.$size.$d"; exit 1; }
			opt=""; [ $mode = stop-and-copy ] && opt=--no-precopy
			[ $mode = gpu-only ] && opt=--gpu-only
			CICADA_TOKEN_FILE=$T/token CICADA_MIGRATION_TOKEN_FILE=$T/mtoken timeout -k 5 900 "$B/bin/gpu-migrate" "$APP" --to "$ip:$((PORT + 1))" --json \
				--timeout 600 --work-dir "$T" $opt $STREAMS ${MIGRATE_ARGS:-} >"$T/m.json" 2>"$T/m.err"
			if grep -q '"ok":true' "$T/m.json"; then
				printf '%-9s %-6s %-13s %9.3fs %9.3fs %12s %12s %7s   %s + %s + %s s\n' "$size MiB" "$d%" "$mode" \
					"$(field downtime_s "$T/m.json")" "$(field total_s "$T/m.json")" \
					"$(mib "$(field bytes "$T/m.json")")" "$(mib "$(field frozen_bytes "$T/m.json")")" \
					"$(field rounds "$T/m.json")" "$(field dump_s "$T/m.json")" "$(field send_s "$T/m.json")" \
					"$(field restore_s "$T/m.json")"
			else
				printf '%-9s %-6s %-13s failed: %s\n' "$size MiB" "$d%" "$mode" "$(head -c 200 "$T/m.err")"
			fi
			stop_program "$size" "$d"
		done
	done
done

run_json_row() {
	printf '%10.3fs %9.3fs %12s %12s %7s   %s + %s + %s s' \
		"$(field downtime_s "$1")" "$(field total_s "$1")" "$(mib "$(field bytes "$1")")" \
		"$(mib "$(field frozen_bytes "$1")")" "$(field rounds "$1")" "$(field dump_s "$1")" \
		"$(field send_s "$1")" "$(field restore_s "$1")"
}

# The real process (PyTorch), when there is a GPU and torch here.
TPY=${TORCH_PYTHON:-python3} TW=$ROOT/tests/torch/workloads.py
THOST=${MIGRATE_TORCH_HOST_MIB:-1024} TDEV=${MIGRATE_TORCH_DEV_MIB:-4096} TSTEPS=${MIGRATE_TORCH_STEPS:-300}
# torch_launch DIRTY OUT: the training through server A; sets APP.
torch_launch() {
	CICADA_SERVER=unix:$T/a.sock LD_LIBRARY_PATH=$B/lib timeout -k 5 1200 setsid "$TPY" "$TW" migrate-train \
		"$TSTEPS" 50 "$THOST" "$TDEV" "$1" </dev/null >"$2" 2>"$2.err" &
	disown $!
	for _ in $(seq 2400); do grep -q "^step 5 " "$2" 2>/dev/null && break; sleep 0.05; done
	APP=$(pgrep -n -f "^[^ ]*python[^ ]* [^ ]*workloads.py migrate-train $TSTEPS 50 $THOST $TDEV $1\$")
	[ -n "$APP" ] && grep -q "^step 5 " "$2"
}
torch_rows() {
	local d mode opt out ref
	printf '\nPyTorch training, %s MiB host state, %s MiB device memory beside the model (GPT-2 6x512, AdamW, bf16)\n' \
		"$THOST" "$TDEV"
	printf '%-6s %-13s %10s %10s %12s %12s %7s   %s\n' "dirty" "mode" "downtime" "total" "wire MiB" "frozen MiB" \
		"rounds" "downtime = dump + send + restore; final state"
	for d in $DIRTY_TORCH; do
		ref=$T/torch.ref.$d
		timeout -k 5 600 "$TPY" "$TW" migrate-train "$TSTEPS" 0 "$THOST" "$TDEV" "$d" >"$ref" 2>"$ref.err" ||
			{ echo "bench-migrate: the training natively failed"; tail -3 "$ref.err"; return 1; }
		for mode in ${MIGRATE_TORCH_MODES:-whole whole-no-ps gpu-only}; do
			out=$T/torch.$mode.$d opt=""
			[ $mode = gpu-only ] && opt=--gpu-only
			[ $mode = whole-no-ps ] && opt=--no-page-server
			torch_launch "$d" "$out" || { echo "bench-migrate: the training did not start"; tail -3 "$out.err"; return 1; }
			CICADA_TOKEN_FILE=$T/token CICADA_MIGRATION_TOKEN_FILE=$T/mtoken timeout -k 5 900 "$B/bin/gpu-migrate" \
				"$APP" --to "$ip:$((PORT + 1))" --json --timeout 600 --work-dir "$T" $opt $STREAMS ${MIGRATE_ARGS:-} \
				>"$T/m.json" 2>"$T/m.err"
			if grep -q '"ok":true' "$T/m.json"; then
				for _ in $(seq 2400); do grep -q "^done" "$out" && break; sleep 0.05; done
				printf '%-6s %-13s' "$d%" "$mode"
				run_json_row "$T/m.json"
				if [ "$(grep '^done' "$out")" = "$(grep '^done' "$ref")" ]; then echo "; identical"
				else echo "; DIFFERS from the unmoved run"; fi
			else
				printf '%-6s %-13s failed: %s\n' "$d%" "$mode" "$(head -c 200 "$T/m.err")"
			fi
			pkill -9 -f "workloads.py migrate-train" 2>/dev/null
			sleep 0.5
		done
	done
}
DIRTY_TORCH=${MIGRATE_DIRTY:-"0 10"}
if [ "${MIGRATE_TORCH:-1}" != 0 ] && [ -z "$DRIVER" ] && timeout 120 "$TPY" -c "import torch, transformers" 2>/dev/null; then
	torch_rows
elif [ "${MIGRATE_TORCH:-1}" != 0 ]; then
	echo "bench-migrate: the PyTorch rows need a GPU and $TPY with torch and transformers: skipped"
fi
[ "$only_torch" = 1 ] && exit 0

# Incremental checkpoints: the largest size, DIRTY 10.
size=${SIZES##* }
printf '\n%-40s %10s %12s\n' "checkpoint of $size MiB (--leave-running)" "time" "stored MiB"
launch "$size" 10 || exit 1
# ckpt DIR VAR=VALUE LABEL: a checkpoint into DIR, with VAR in criu's environment.
ckpt() {
	local dir=$1 t0 t1 bytes
	t0=$(date +%s.%N)
	env "$2" timeout -k 5 900 "$B/bin/criu" dump -t "$APP" -D "$dir" -L "$B/lib/criu" --leave-running -o dump.log \
		2>/dev/null || { echo "bench-migrate: criu dump failed"; return 1; }
	t1=$(date +%s.%N)
	bytes=$("$B/bin/gpu-snapshot" inspect "$dir" --json | sed -n 's/.*"data_files": {"count": [0-9]*, "bytes": \([0-9]*\)}.*/\1/p')
	printf '%-40s %9.3fs %12s\n' "$3" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$(mib "$bytes")"
}
mkdir -p "$T/ck1" "$T/ck2"
ckpt "$T/ck1" X=1 "full" || exit 1
sleep 1
ckpt "$T/ck2" CICADA_SNAPSHOT_PARENT=../ck1 "incremental (10% changed since)" || exit 1
stop_program "$size" 10

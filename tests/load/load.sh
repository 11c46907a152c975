#!/usr/bin/env bash
# load.sh: N clients at once against one gpu-server, each a driver-API
# program whose answer is checked (vecadd_cubin prints PASS). Starts its
# own server (CPU stand-in unless --gpu) in a scratch folder, runs the
# clients over shared memory or TCP, samples the server meanwhile, and
# prints one line: the clients, their results (right, wrong, refused
# busy, failed otherwise), the peak workers, server threads and memory
# (resident, of the server and its workers together), and the time.
# Exits 0 only if every client got the right answer.
#
# usage: load.sh [--gpu] [--clients N] [--transport shm|tcp] [-- SERVER OPTIONS...]
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/scripts/lib.sh"
B=$ROOT/build
N=200 TR=shm DRIVER="LD_LIBRARY_PATH=$B/tests/fakecuda"
while [ $# -gt 0 ]; do
	case $1 in
	--gpu) DRIVER="CICADA_NATIVE=1" ;;
	--clients) N=$2; shift ;;
	--transport) TR=$2; shift ;;
	--) shift; break ;;
	*) echo "load: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
T=$(mktemp -d /tmp/cicada-load.XXXXXX)
PORT=$((20000 + RANDOM % 30000))
SERVER=""
cleanup() {
	[ -n "$SERVER" ] && kill -9 "$SERVER" ${SPID:-} 2>/dev/null
	pkill -9 -f "gpu-server --worker-fd .* --cache-dir $T/" 2>/dev/null
	[ -n "${KEEP_T:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
head -c 24 /dev/urandom | base64 >"$T/token"

env $DRIVER timeout -k 5 600 "$B/bin/gpu-server" --listen "unix:$T/s.sock" --listen "tcp:127.0.0.1:$PORT" \
	--token-file "$T/token" --cache-dir "$T/cache" "$@" >"$T/server.log" 2>&1 &
SERVER=$!
disown "$SERVER"
wait_for_server "$SERVER" "$T/s.sock" "$T/server.log" load || exit 1
SPID=$(pgrep -P "$SERVER" -x gpu-server | head -n 1)
[ -n "$SPID" ] || SPID=$SERVER

# sample: one line "workers threads rss_kib" for the server now: its
# children and the resident memory of it and them. Read from files that
# take no lock of the processes' memory maps (smaps and cmdline do, and
# stall for seconds while 200 workers map their segments).
sample() {
	local kids rss=0 p v
	kids=$(cat /proc/$SPID/task/*/children 2>/dev/null)
	for p in $SPID $kids; do
		{ read -r _ v _ <"/proc/$p/statm"; } 2>/dev/null || v=0
		rss=$((rss + v * 4))
	done
	echo "$(wc -w <<<"$kids") $(awk '/^Threads:/ { print $2 }' "/proc/$SPID/status" 2>/dev/null) $rss"
}

case $TR in
shm) CENV="CICADA_SERVER=unix:$T/s.sock" ;;
tcp) CENV="CICADA_SERVER=tcp:127.0.0.1:$PORT CICADA_TOKEN_FILE=$T/token" ;;
*) echo "load: --transport shm or tcp" >&2; exit 2 ;;
esac
(while :; do sample >>"$T/samples"; sleep 0.2; done) &
SAMPLER=$!
t0=$(date +%s.%N)
for i in $(seq "$N"); do
	env $CENV LD_LIBRARY_PATH="$B/lib" CICADA_KERNELS="$B/tests/kernels" \
		timeout -k 5 300 "$B/tests/programs/vecadd_cubin" >"$T/c.$i.out" 2>"$T/c.$i.err" &
done
wait $(jobs -p | grep -vx "$SAMPLER") 2>/dev/null
kill "$SAMPLER" 2>/dev/null
t1=$(date +%s.%N)
right=0 wrong=0 busy=0 other=0
for i in $(seq "$N"); do
	if grep -qx "vecadd_cubin: PASS" "$T/c.$i.out"; then right=$((right + 1))
	elif grep -q "server busy" "$T/c.$i.err"; then busy=$((busy + 1))
	elif [ -s "$T/c.$i.out" ] && ! grep -q PASS "$T/c.$i.out"; then wrong=$((wrong + 1))
	else other=$((other + 1)); [ $other -le 3 ] && tail -n 2 "$T/c.$i.err" >&2
	fi
done
peak=$(awk 'BEGIN { w = t = m = 0 } { if ($1 > w) w = $1; if ($2 > t) t = $2; if ($3 > m) m = $3 }
	END { printf "%d workers, %d server threads, %d MiB", w, t, m / 1024 }' "$T/samples")
printf 'load: %d clients over %s: %d right, %d wrong, %d busy, %d failed; peak %s; %.1f s\n' \
	"$N" "$TR" $right $wrong $busy $other "$peak" "$(awk "BEGIN { print $t1 - $t0 }")"
kill -0 "$SERVER" 2>/dev/null || { echo "load: the gpu-server died" >&2; exit 1; }
[ $right -eq "$N" ]

#!/usr/bin/env bash
# run.sh CORPUS [NAME...]: `make conformance` on a GPU node. Builds each
# program of programs.txt found in CORPUS (prepare.sh) the default way
# (its own Makefile, ARCH=sm_90, nvcc's static runtime), runs it natively
# and through Cicada over shared memory and over TCP at once, and compares
# (with a second native run where they differ).
# A program passes through a transport when its exit status and its
# normalised output equal the native run's. The normaliser blanks the
# numbers on lines that report times or rates (time, ms, us, sec, GB/s,
# GFLOP, throughput, bandwidth) and squeezes their blanks (a number
# printed in a fixed width pads with as many spaces as it lacks
# digits), and where two native runs differ even so (non-deterministic
# output) only exit statuses are compared. Prints a
# line per program and a summary; programs that fail natively are left
# out of the rates. Every run has a deadline (CONFORMANCE_TIMEOUT, 120 s);
# CONFORMANCE_PAR programs are checked at once (4). The closing line
# counts a program's pass over each transport.
# CONFORMANCE_BUILD=0 keeps programs already built (with the same nvcc,
# elsewhere: copies lose the times make compares).
# CONFORMANCE_LIST picks the corpus: programs (HeCBench, programs.txt,
# CORPUS/NAME-cuda/main, the default) or libsamples (NVIDIA's
# CUDALibrarySamples, libsamples.txt, CORPUS/bin/NAME: built beforehand
# by prepare-libsamples.sh, never here, so CONFORMANCE_BUILD is moot;
# they load the toolkit's libraries, found in CUDA_HOME/lib64 as well).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/scripts/lib.sh"
B=$ROOT/build CORPUS=$(cd "$1" && pwd); shift
LIMIT=${CONFORMANCE_TIMEOUT:-120} JOBS=${CONFORMANCE_JOBS:-$(nproc)}
T=$(mktemp -d /tmp/cicada-conformance.XXXXXX) PORT=$((20000 + RANDOM % 30000)) SERVER=""
cleanup() {
	[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null
	pkill -9 -f "gpu-server --worker-fd .* --cache-dir $T/" 2>/dev/null
	[ -n "${KEEP_T:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
LIST=${CONFORMANCE_LIST:-programs}
case $LIST in
programs) FIELDS=1 ;;
libsamples) FIELDS=3
	export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}${CUDA_HOME:-/usr/local/cuda}/lib64 ;;
*) echo "conformance: CONFORMANCE_LIST is programs or libsamples, not $LIST" >&2; exit 2 ;;
esac
list() { grep -v '^#' "$ROOT/tests/conformance/$LIST.txt" | awk '$1 != "commit" && NF'; }
# args_of NAME: its arguments, the fields after the first FIELDS of its line.
args_of() { list | awk -v n="$1" -v f="$FIELDS" '$1 == n { for (i = 1; i <= f; i++) $i = ""; print }'; }
# where NAME: the folder a program runs in and its executable there.
where() {
	if [ "$LIST" = libsamples ]; then echo "$CORPUS/bin ./$1"; else echo "$CORPUS/$1-cuda ./main"; fi
}

build_one() {
	local name=$1 dir=$CORPUS/$1-cuda
	[ "$LIST" = libsamples ] && { [ -x "$CORPUS/bin/$name" ] && echo built || echo missing; return; }
	[ -d "$dir" ] || { echo "missing"; return; }
	[ "$CONFORMANCE_BUILD" = 0 ] && [ -x "$dir/main" ] && { echo built; return; }
	timeout -k 5 600 make -C "$dir" ARCH=sm_90 -j4 >"$dir/build.log" 2>&1 && echo built || echo "build failed"
}
export -f build_one
CONFORMANCE_BUILD=${CONFORMANCE_BUILD:-1}
export CORPUS CONFORMANCE_BUILD LIST

normalise() {
	sed -E '/[Tt]ime|[[:space:]](ms|us|sec|s)\b|GB\/s|GFLOP|[Tt]hroughput|[Bb]andwidth|elapsed/ { s/[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/N/g; s/[[:space:]]+/ /g }' "$1"
}

# run_mode NAME ARGS MODE: one run, output in $T/NAME.MODE(.rc).
run_mode() {
	local name=$1 args=$2 mode=$3 env="" lib=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} dir exe
	case $mode in
	shm) env="CICADA_SERVER=unix:$T/s.sock LD_LIBRARY_PATH=$lib" ;;
	tcp) env="CICADA_SERVER=tcp:127.0.0.1:$PORT CICADA_TOKEN_FILE=$T/token LD_LIBRARY_PATH=$lib" ;;
	esac
	read -r dir exe <<<"$(where "$name")"
	(cd "$dir" && env $env timeout -k 5 "$LIMIT" "$exe" $args >"$T/$name.$mode" 2>&1)
	echo $? >"$T/$name.$mode.rc"
}

compare() {
	local name=$1 mode=$2 nd=$3
	[ "$(cat "$T/$name.$mode.rc")" = "$(cat "$T/$name.native.rc")" ] || { echo "exit $(cat "$T/$name.$mode.rc")"; return; }
	[ "$nd" = 1 ] || cmp -s <(normalise "$T/$name.native") <(normalise "$T/$name.$mode") || { echo "output differs"; return; }
	echo same
}

head -c 24 /dev/urandom | base64 >"$T/token"
names=$(list | awk '{ print $1 }')
[ $# -gt 0 ] && names="$*"
echo "conformance: building $(wc -w <<<"$names") programs of $LIST.txt ($JOBS at once)"
for n in $names; do echo "$n"; done | xargs -P "$JOBS" -I{} bash -c 'echo "{} $(build_one {})"' >"$T/builds"
timeout -k 5 3600 "$B/bin/gpu-server" --listen "unix:$T/s.sock" --listen "tcp:127.0.0.1:$PORT" --token-file "$T/token" \
	--cache-dir "$T/cache" --workers 4 >"$T/server.log" 2>&1 &
SERVER=$!
wait_for_server "$SERVER" "$T/s.sock" "$T/server.log" conformance || exit 1
# verdict NAME: its line, from $T/NAME.result; counted by summary.
verdict() {
	local n=$1 kind rs rt nd
	read -r kind rs rt nd <"$T/$n.result"
	if [ "$kind" = skip ]; then
		echo "SKIP $n: $rs${rt:+ $rt}${nd:+ $nd}"
		return
	fi
	rs=${rs//_/ } rt=${rt//_/ }
	printf '%-4s %-28s shm: %-16s tcp: %s%s\n' "$([ "$rs$rt" = samesame ] && echo PASS || echo FAIL)" "$n" "$rs" "$rt" \
		"$([ "$nd" = 1 ] && echo ' (native output varies: exit status only)')"
	if [ "$rs$rt" != samesame ]; then
		for m in shm tcp; do
			grep -m2 -i "cicada\|error\|fail" "$T/$n.$m" | sed "s/^/     $m: /"
			[ "$nd" = 1 ] || diff <(normalise "$T/$n.native") <(normalise "$T/$n.$m") | grep -m4 '^[<>]' |
				cut -c1-160 | sed "s/^/     $m: /"
		done
	fi
}

# check_one NAME: the four runs of one program and its verdict, as one
# line in $T/NAME.result ("skip REASON", or "native SHM TCP ND": SHM and
# TCP are "same" or why not, ND 1 if native output varies), printed as
# soon as it is known.
check_one() {
	local n=$1 args rs rt nd=0
	args=$(args_of "$n")
	if ! grep -q "^$n built" "$T/builds"; then
		echo "skip $(grep "^$n " "$T/builds" | cut -d' ' -f2-)" >"$T/$n.result"
	else
		# (wait for these by pid: a bare wait would wait for the server)
		run_mode "$n" "$args" native & a=$!
		run_mode "$n" "$args" shm & b=$!
		run_mode "$n" "$args" tcp & wait $a $b $!
		if [ "$(cat "$T/$n.native.rc")" != 0 ]; then
			echo "skip fails natively (exit $(cat "$T/$n.native.rc"))" >"$T/$n.result"
		else
			# a second native run only where Cicada's output differs:
			# does the program's own output vary from run to run?
			if ! cmp -s <(normalise "$T/$n.native") <(normalise "$T/$n.shm") ||
			   ! cmp -s <(normalise "$T/$n.native") <(normalise "$T/$n.tcp"); then
				run_mode "$n" "$args" native2
				cmp -s <(normalise "$T/$n.native") <(normalise "$T/$n.native2") || nd=1
			fi
			rs=$(compare "$n" shm $nd) rt=$(compare "$n" tcp $nd)
			echo "native ${rs// /_} ${rt// /_} $nd" >"$T/$n.result"
		fi
	fi
	verdict "$n"
}
export -f check_one verdict run_mode compare normalise list args_of where
export T PORT LIMIT B ROOT FIELDS

# CONFORMANCE_PAR programs at once (default 4): each run has its own
# session, and the normaliser blanks what timing would change. A program
# cut short by the caller's own time limit leaves no result and is not
# counted.
printf '%s\n' $names | xargs -P "${CONFORMANCE_PAR:-4}" -I{} bash -c 'check_one {}'
native=0 shm=0 tcp=0 nd_count=0
for n in $names; do
	[ -f "$T/$n.result" ] || continue
	read -r kind rs rt nd <"$T/$n.result"
	[ "$kind" = skip ] && continue
	native=$((native + 1))
	nd_count=$((nd_count + nd))
	[ "$rs" = same ] && shm=$((shm + 1))
	[ "$rt" = same ] && tcp=$((tcp + 1))
done
echo "conformance: $native programs pass natively; through Cicada $shm over shared memory ($((native ? shm * 100 / native : 0))%)," \
	"$tcp over TCP ($((native ? tcp * 100 / native : 0))%); $nd_count with varying output compared by exit status"
echo "$((shm + tcp)) passed, $((2 * native - shm - tcp)) failed"

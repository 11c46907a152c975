# lib.sh: shell helpers shared by the demo, the tests and the benchmarks.
# Source it; it defines functions only.

# wait_for_server PID SOCKET LOG WHO: waits until the gpu-server PID has
# created its unix SOCKET; if it dies or takes over 10 s, prints its LOG
# prefixed by WHO and returns 1.
wait_for_server() {
	local pid=$1 sock=$2 log=$3 who=$4
	for _ in $(seq 100); do
		[ -S "$sock" ] && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	echo "$who: gpu-server did not start:" >&2
	cat "$log" >&2
	return 1
}

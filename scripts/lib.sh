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

# deadline SECONDS CMD...: runs CMD, killed if it runs past SECONDS (then
# KILL 5 s later). Past its deadline it prints "DEADLINE: CMD ran past N
# s" on stderr, with the last lines of DEADLINE_LOG if that names a file,
# and returns 124, so the caller's test fails and the suite goes on.
deadline() {
	local secs=$1 rc
	shift
	timeout -k 5 "$secs" "$@"
	rc=$?
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		echo "DEADLINE: $(basename "$1") ran past $secs s" >&2
		if [ -n "${DEADLINE_LOG:-}" ] && [ -f "$DEADLINE_LOG" ]; then
			tail -n 5 "$DEADLINE_LOG" | sed 's/^/  | /' >&2
		fi
		return 124
	fi
	return $rc
}

# copy_libs DEST FILE...: copies into DEST every shared library the FILEs
# load, as ldd names them, but glibc's own: a bundle for GPU nodes that
# lack them (bundle-criu.sh, bundle-runc.sh).
copy_libs() {
	local dest=$1 f name path
	shift
	for f in "$@"; do
		ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
	done | sort -u | while read -r name path; do
		case $name in libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) continue ;; esac
		cp -L "$path" "$dest/$name"
	done
}

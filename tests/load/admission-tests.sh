# admission-tests.sh: the gpu-server's front door under load and abuse,
# and the bundled criu on this host; sourced by tests/run-tests.sh (which
# defines ok/bad/check, $T, $B, $PROGS, $TOOLS, $PORT, $MODE and
# $DRIVER_ENV). Each case starts the servers it needs, with its own caps.

# adm_server NAME PORT OPTIONS...: a gpu-server on $T/NAME.sock and tcp
# PORT with the given admission options, bounded like every server here.
adm_server() {
	local name=$1 port=$2
	shift 2
	env $DRIVER_ENV timeout -k 5 600 "$B/bin/gpu-server" --listen "unix:$T/$name.sock" \
		--listen "tcp:127.0.0.1:$port" --token-file "$T/token" --cache-dir "$T/cache-$name" \
		--workers 1 "$@" >>"$T/$name.log" 2>&1 &
	SERVERS="$SERVERS $!"
	disown $!
	wait_for_server $! "$T/$name.sock" "$T/$name.log" admission
}

adm_stop() {
	pkill -9 -f "gpu-server --listen unix:$T/$1.sock" 2>/dev/null
	pkill -9 -f "gpu-server --worker-fd .* --cache-dir $T/cache-$1" 2>/dev/null
}

# adm_threads NAME: the thread count of server NAME's main process.
adm_threads() {
	local pid
	pid=$(pgrep -f -x "$B/bin/gpu-server --listen unix:$T/$1.sock .*" | head -n 1)
	awk '/^Threads:/ { print $2 }' "/proc/$pid/status" 2>/dev/null
}

# The bundled criu dumps and restores a plain process on this host (where
# hardware breakpoints may not be delivered: the probe decides).
adm_criu_plain() {
	local dir=$T/ckpt.plain pid rc
	mkdir -p "$dir"
	setsid sleep 600 </dev/null >/dev/null 2>&1 &
	pid=$!
	disown $pid
	timeout -k 5 60 "$B/bin/criu" dump -t $pid -D "$dir" -o dump.log --shell-job 2>>"$dir/criu.err"
	rc=$?
	if [ $rc -ne 0 ]; then
		[ $rc -ge 124 ] && echo "     DEADLINE: criu dump ran past 60 s"
		tail -3 "$dir/dump.log"; kill -9 $pid 2>/dev/null; return 1
	fi
	kill -0 $pid 2>/dev/null && { kill -9 $pid; return 1; }
	timeout -k 5 60 "$B/bin/criu" restore -D "$dir" -o restore.log --shell-job -d 2>>"$dir/criu.err" ||
		{ tail -3 "$dir/restore.log"; return 1; }
	grep -q "^sleep" "/proc/$pid/comm" 2>/dev/null
	rc=$?
	kill -9 $pid 2>/dev/null
	echo "     hardware breakpoints here: $("$B/libexec/cicada-hwbp-probe")"
	return $rc
}

# N clients at once, every answer checked (tests/load/load.sh).
adm_load() {
	local tr=$1 n=200 out=$T/load.$1 gpu=""
	[ "$MODE" = gpu ] && n=32 gpu=--gpu
	bash tests/load/load.sh $gpu --clients $n --transport "$tr" >"$out" 2>&1
	local rc=$?
	echo "     $(grep '^load:' "$out")"
	[ $rc -eq 0 ] || tail -5 "$out"
	return $rc
}

# A client while a session holds the only place: busy at once with no
# queue; served once the place frees with one.
adm_busy() {
	local err t0 t1 rc
	adm_server caps $((PORT + 10)) --max-sessions 1 --queue 0 || return 1
	env $(cicada_env shm caps) timeout 20 "$TOOLS/fault_client" expect-success 3 >"$T/caps.hold" 2>&1 &
	local holder=$!
	for _ in $(seq 100); do grep -qs ready "$T/caps.hold" && break; sleep 0.05; done
	t0=$(date +%s%N)
	err=$(env $(cicada_env unix caps) timeout 20 "$PROGS/vecadd_cubin" 2>&1 >/dev/null)
	rc=$?
	t1=$(date +%s%N)
	wait $holder
	adm_stop caps
	echo "     refused in $(((t1 - t0) / 1000000)) ms: $err"
	[ $rc -ne 0 ] && [ $(((t1 - t0) / 1000000)) -lt 2000 ] &&
		grep -q "refused the connection: server busy" <<<"$err"
}

adm_queue() {
	adm_server queue $((PORT + 11)) --max-sessions 1 --queue 4 --queue-timeout 30000 || return 1
	# (the holder keeps its place 4 s: long enough, on a loaded machine,
	# for the second client to arrive while it holds it)
	env $(cicada_env shm queue) timeout 20 "$TOOLS/fault_client" expect-success 4 >"$T/queue.hold" 2>&1 &
	local holder=$!
	for _ in $(seq 200); do grep -qs ready "$T/queue.hold" && break; sleep 0.05; done
	env $(cicada_env shm queue) timeout 30 "$PROGS/vecadd_cubin" >"$T/queue.out" 2>&1
	local rc=$?
	wait $holder
	adm_stop queue
	[ $rc -eq 0 ] && grep -q "vecadd_cubin: PASS" "$T/queue.out" && grep -q "waits for a session" "$T/queue.log"
}

adm_per_client() {
	local err
	adm_server percl $((PORT + 12)) --max-sessions 8 --max-sessions-per-client 1 || return 1
	env $(cicada_env shm percl) timeout 20 "$TOOLS/fault_client" expect-success 3 >"$T/percl.hold" 2>&1 &
	local holder=$!
	for _ in $(seq 100); do grep -qs ready "$T/percl.hold" && break; sleep 0.05; done
	err=$(env $(cicada_env unix percl) timeout 20 "$PROGS/vecadd_cubin" 2>&1 >/dev/null)
	local rc=$?
	wait $holder
	adm_stop percl
	echo "     $err"
	[ $rc -ne 0 ] && grep -q "server busy: this client already holds 1 sessions" <<<"$err"
}

# Slow and unfinished hellos: one deadline for the whole hello, a bound
# on how many wait, and no thread for any of them.
adm_hello_deadline() {
	local out before after
	adm_server door $((PORT + 13)) --hello-timeout 3000 --max-pending 8 || return 1
	before=$(adm_threads door)
	out=$("$TOOLS/wire_abuse" trickle "tcp:127.0.0.1:$((PORT + 13))" "$(cat "$T/token")" 5)
	local rc=$?
	echo "     $out"
	out=$("$TOOLS/wire_abuse" hold "tcp:127.0.0.1:$((PORT + 13))" 20 6 & sleep 1; adm_threads door >"$T/door.threads"; wait)
	after=$(cat "$T/door.threads")
	echo "     $out; server threads $before before, $after while held"
	adm_stop door
	[ $rc -eq 0 ] && grep -q "20 connections: 12 closed at once, 8 at the deadline, 0 still open" <<<"$out" &&
		[ "$before" = "$after" ]
}

# A host name with a newline and escapes is logged escaped; a flood of
# refusals is rate-limited.
adm_log_abuse() {
	adm_server logs $((PORT + 14)) || return 1
	"$TOOLS/wire_abuse" forge "tcp:127.0.0.1:$((PORT + 14))" >/dev/null || return 1
	local t0=$SECONDS
	for _ in $(seq 300); do
		"$TOOLS/wire_abuse" token "tcp:127.0.0.1:$((PORT + 14))" not-the-token-at-all >/dev/null &
	done
	wait
	sleep 0.3
	"$TOOLS/wire_abuse" token "tcp:127.0.0.1:$((PORT + 14))" not-the-token-at-all >/dev/null
	adm_stop logs
	# The log admits a burst of 20 lines, then 10 a second: a loaded
	# machine takes longer to make the 301 refusals, and may log more.
	local n secs=$((SECONDS - t0 + 1))
	n=$(grep -c "wrong token" "$T/logs.log")
	echo "     301 refusals in about $secs s: $n lines logged (at most $((25 + 10 * secs)) allowed)"
	grep -qF 'on wire_abuse\ngpu-server[1]: info: FORGED line\x0d\x1b[2J): wrong token' "$T/logs.log" &&
		! grep -q "^gpu-server\[1\]: info: FORGED" "$T/logs.log" && [ "$n" -lt 200 ] &&
		[ "$n" -le $((25 + 10 * secs)) ] &&
		grep -q "similar lines suppressed" "$T/logs.log"
}

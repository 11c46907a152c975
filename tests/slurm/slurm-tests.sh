# slurm-tests.sh: Cicada under Slurm, sourced by tests/run-tests.sh
# (which defines ok/bad/check, $T, $B, $PROGS, $DRIVER_ENV, wait_for).
#
# token-dir: gpu-server --token-dir, the jobs' own tokens: a session that
# proved one is named by it, and ends when its file goes or changes, or
# at cicadactl revoke; files the server may not trust are ignored.

# tok_client NAME TOKEN-FILE TRANSPORT: cr_pattern through the token-dir
# server with that token, in the background (TOK_PID, output $T/tok.NAME).
tok_client() {
	local addr=tcp:127.0.0.1:$TOK_PORT
	[ "$3" = unix ] && addr=unix:$T/tok.sock
	CICADA_SERVER=$addr CICADA_TOKEN_FILE=$2 LD_LIBRARY_PATH=$B/lib timeout -k 5 60 \
		"$PROGS/cr_pattern" "$CICADA_KERNELS" 16 200 100 </dev/null >"$T/tok.$1" 2>&1 &
	TOK_PID=$!
	wait_for "^step 2 " "$T/tok.$1" 20
}

# tok_session TOKEN-NAME: the worker of the session that proved it, if any.
tok_session() {
	timeout 30 "$B/bin/cicadactl" --run-dir "$T/run-tok" list | awk -v t="$1" '$10 == t { print $1 }'
}

# tok_gone NAME PID: the session named NAME ended within 3 s, and the
# program (PID) with it.
tok_gone() {
	for _ in $(seq 30); do
		[ -z "$(tok_session "$1")" ] && ! kill -0 "$2" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

test_token_dir() {
	local pid fails="" p1 p2 p3 p4 out
	want token-dir || return
	TOK_PORT=$((PORT + 95))
	mkdir -m 700 "$T/tokens"
	for n in job-1 job-2 job-3; do head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/tokens/$n"; done
	for n in job-1 job-2 job-3; do cp "$T/tokens/$n" "$T/client-$n"; done
	env $DRIVER_ENV timeout -k 5 120 "$B/bin/gpu-server" --listen "unix:$T/tok.sock" --listen "tcp:127.0.0.1:$TOK_PORT" \
		--token-dir "$T/tokens" --run-dir "$T/run-tok" --cache-dir "$T/cache-tok" --workers 2 >"$T/tok.log" 2>&1 &
	pid=$!
	wait_for_server $pid "$T/tok.sock" "$T/tok.log" run-tests || { bad "token-dir server"; return; }
	tok_client a "$T/client-job-1" tcp && p1=$TOK_PID || fails="$fails TCP with job-1's token not served;"
	tok_client b "$T/client-job-2" unix && p2=$TOK_PID || fails="$fails unix with job-2's token not served;"
	tok_client c "$T/client-job-3" tcp && p3=$TOK_PID || fails="$fails TCP with job-3's token not served;"
	[ -n "$(tok_session job-1)" ] && [ -n "$(tok_session job-2)" ] && [ -n "$(tok_session job-3)" ] ||
		fails="$fails sessions not named by their tokens ($(timeout 30 "$B/bin/cicadactl" --run-dir "$T/run-tok" list | tr '\n' '|'));"
	# a token the server may not trust is no token: a link, a file others may write
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/loose"
	ln -s "$T/loose" "$T/tokens/job-link"
	cp "$T/loose" "$T/tokens/job-loose" && chmod 666 "$T/tokens/job-loose"
	CICADA_SERVER=tcp:127.0.0.1:$TOK_PORT CICADA_TOKEN_FILE=$T/loose LD_LIBRARY_PATH=$B/lib timeout 30 \
		"$PROGS/vecadd_cubin" >"$T/tok.loose" 2>&1 && fails="$fails a linked or loose token let a client in;"
	grep -q "wrong token" "$T/tok.loose" || fails="$fails a loose token's client: $(tail -n 1 "$T/tok.loose");"
	rm "$T/tokens/job-1"
	tok_gone job-1 "$p1" || fails="$fails job-1's file removed, its session goes on;"
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/tokens/job-2.new" && mv "$T/tokens/job-2.new" "$T/tokens/job-2"
	tok_gone job-2 "$p2" || fails="$fails job-2's token replaced, its session goes on;"
	[ -n "$(tok_session job-3)" ] || fails="$fails job-3's session ended with the others;"
	out=$(timeout 30 "$B/bin/cicadactl" --run-dir "$T/run-tok" revoke job-3 2>&1)
	[ "$out" = "token job-3: 1 session ended" ] && tok_gone job-3 "$p3" || fails="$fails revoke job-3 ($out);"
	grep -q "token job-1 is gone: its session (worker [0-9]*) ends" "$T/tok.log" ||
		fails="$fails the server's log does not say why job-1's session ended;"
	# the file back: a new session is served again
	cp "$T/client-job-1" "$T/tokens/job-1"
	tok_client d "$T/client-job-1" tcp && p4=$TOK_PID || fails="$fails job-1's token back, not served;"
	kill $p4 $pid 2>/dev/null
	wait $pid 2>/dev/null
	pkill -9 -f "cache-dir $T/cache-tok" 2>/dev/null
	check "gpu-server --token-dir: sessions named by the job token they proved (TCP, unix), ended when its file goes, changes or is revoked; links and loose files refused${fails:+ (failed:$fails)}" \
		test -z "$fails"
}

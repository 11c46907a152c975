# slurm-tests.sh: Cicada under Slurm, sourced by tests/run-tests.sh
# (which defines ok/bad/check, $T, $B, $PROGS, $DRIVER_ENV, wait_for).
#
# token-dir: gpu-server --token-dir, the jobs' own tokens: a session that
# proved one is named by it, and ends when its file goes or changes, or
# at cicadactl revoke; files the server may not trust are ignored.
#
# slurm: a real Slurm from Debian's packages (tests/slurm/cluster.sh):
# munged, slurmctld and two slurmd, each node a network namespace with
# its own gpu-server on the stand-in; Cicada's SPANK plugin and
# cli_filter.lua configured. It shows srun --cicada locally and remotely,
# Slurm holding back a job while Cicada's GPUs are taken, a cancelled
# job leaving no session and no token (even of a process that escaped
# Slurm), a drained node's running job moving to the other node's GPU and
# ending as undisturbed, and a checkpointed job requeued and restored on
# the other node. Each srun and sbatch job has a deadline; the cluster
# is taken down whatever happens.

. tests/slurm/cluster.sh

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

# --- slurm ------------------------------------------------------------------

# sl_submit NAME SBATCH-OPTIONS... -- COMMAND...: a batch job running
# COMMAND (output $SL/NAME.out, errors $SL/NAME.err); its id in SL_JOB.
sl_submit() {
	local name=$1 opts=()
	shift
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	printf '#!/bin/bash\n%s\n' "$*" >"$SL/$name.sh"
	SL_JOB=$(timeout 30 sbatch --parsable -J "$name" -o "$SL/$name.out" -e "$SL/$name.err" -t 2 "${opts[@]}" \
		"$SL/$name.sh" 2>"$SL/$name.sbatch") || { cat "$SL/$name.sbatch"; return 1; }
	SL_JOB=${SL_JOB%%;*}
}

sl_field() {   # sl_field JOB FIELD: scontrol show job's FIELD=
	timeout 10 scontrol show job "$1" -o 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}

# sl_wait_state JOB STATE SECONDS
sl_wait_state() {
	for _ in $(seq $(($3 * 5))); do
		[ "$(sl_field "$1" JobState)" = "$2" ] && return 0
		sleep 0.2
	done
	echo "     job $1 is $(sl_field "$1" JobState) ($(sl_field "$1" Reason)), not $2"
	grep -h "\[$1\.\|JobId=$1 \|job $1\b" "$SL"/log/slurmd-*.log "$SL/log/slurmctld.log" 2>/dev/null | grep -i "error\|fail" |
		tail -n 4 | sed 's/^/     | /'
	return 1
}

# sl_sessions NODE [TOKEN]: how many sessions NODE's server holds (of TOKEN).
sl_sessions() {
	sl_ctl "$1" list 2>/dev/null | awk -v t="${2:-}" 'NR > 1 && (t == "" || $10 == t)' | wc -l
}

# sl_verdict DESCRIPTION FILE: ok or bad by the last command's status;
# FILE's last lines on failure.
sl_verdict() {
	local rc=$?
	if [ $rc = 0 ]; then
		ok "$1"
	else
		bad "$1"
		tail -n 3 "$2" 2>/dev/null | sed 's/^/     | /'
	fi
}

# sl_nothing_left JOB: no session of the job's token on either server, no
# token file, no state folder.
sl_nothing_left() {
	for _ in $(seq 30); do
		[ "$(sl_sessions gpu1 "job-$1")" = 0 ] && [ "$(sl_sessions gpu2 "job-$1")" = 0 ] &&
			[ ! -e "$SL/tokens/job-$1" ] && [ ! -e "$SL/state/$1" ] && return 0
		sleep 0.2
	done
	echo "     left of job $1: sessions $(sl_sessions gpu1 "job-$1") on gpu1, $(sl_sessions gpu2 "job-$1") on gpu2;" \
		"$(ls "$SL/tokens/job-$1" "$SL/state/$1" 2>/dev/null | tr '\n' ' ')"
	return 1
}

# srun --cicada=local and --cicada=remote: the program's output is its
# native output; it ran on the server the mode names; nothing is left.
sl_srun() {
	local ref=$SL/vecadd.native out addr pid owner
	env $DRIVER_ENV timeout 60 "$PROGS/vecadd_cubin" >"$ref" 2>/dev/null
	timeout -k 5 60 srun -w gpu1 --cicada=local bash -c 'echo "$CICADA_SERVER" >&2; exec "$0"' \
		"$PROGS/vecadd_cubin" </dev/null >"$SL/local.out" 2>"$SL/local.err"
	sl_verdict "srun --cicada=local: vecadd_cubin through the node's own server (cli_filter added --gres=cicada:1), output as native" \
		"$SL/local.err" [ -s "$ref" ] && cmp -s "$ref" "$SL/local.out" && grep -qx "unix:$SL/gpu1.sock" "$SL/local.err"
	# as user nobody, whose token file it is, and no one else's
	timeout -k 5 60 setpriv --reuid=nobody --regid=nogroup --clear-groups srun -w gpu1 -L cicada@gpu2:1 --cicada=remote \
		bash -c 'echo "$CICADA_SERVER $$ $(stat -c "%U:%a" "$CICADA_TOKEN_FILE")" >&2; exec "$0"' \
		"$PROGS/vecadd_cubin" </dev/null >"$SL/remote.out" 2>"$SL/remote.err"
	read -r addr pid owner < <(grep "^tcp:" "$SL/remote.err")
	cmp -s "$ref" "$SL/remote.out" && [ "$addr" = "$SL_ADDR_gpu2" ] && [ "$owner" = nobody:400 ] &&
		grep -q "client [^ ]*/$pid connected" "$SL/server-gpu2.log"
	sl_verdict "srun --cicada=remote on gpu1 as user nobody: vecadd_cubin through gpu2's server over TCP with the job's token (nobody's alone), output as native" \
		"$SL/remote.err"
	out=$(timeout -k 5 60 srun -w gpu1 --cicada=remote bash -c 'echo "$CICADA_SERVER"; scontrol show job "$SLURM_JOB_ID" -o' \
		</dev/null 2>&1)
	echo "$out" >"$SL/pick.out"
	[[ $out =~ Licenses=cicada@(gpu[12]):1 ]] && grep -qx "$(awk -v n="${BASH_REMATCH[1]}" '$1 == n { print $2 }' "$SL/servers")" <<<"$out"
	sl_verdict "srun --cicada=remote: cli_filter took a pool licence (cicada@NODE:1), the server is that node's" "$SL/pick.out"
	timeout -k 5 60 srun -w gpu1 -L cicada@gpu2:1 --cicada=remote:2 echo ran </dev/null >"$SL/refused.out" 2>&1
	! grep -q "^ran" "$SL/refused.out" && wait_for "cicada: job [0-9]*: --cicada=remote:2 needs the job to hold a licence cicada@NODE:2" \
			"$SL/log/slurmd-gpu1.log" 10
	sl_verdict "a step asking for more Cicada GPUs than its job holds is refused, in one line of the node's log" \
		"$SL/refused.out"
}

# Two jobs take both nodes' Cicada GPUs; a third waits (Resources) and the
# servers never hold two of these jobs' sessions at once. The first is
# cancelled mid-run, a process of it that escaped Slurm (double fork)
# still holding a session: its token goes with the job, and its sessions
# (the escaped one's too) end. The third then runs, on gpu1.
sl_count_and_cancel() {
	local a b c peak=0 n fails=""
	local long="$PROGS/cr_pattern $CICADA_KERNELS 16 400 100"
	sl_submit hold-a -w gpu1 --cicada=local -- "( setsid ${long/400/401} >$SL/escaped.out 2>&1 </dev/null & ); exec $long" &&
		a=$SL_JOB || return 1
	sl_submit hold-b -w gpu2 --cicada=local -- "exec $long" && b=$SL_JOB || return 1
	sl_wait_state "$a" RUNNING 30 && sl_wait_state "$b" RUNNING 30 || fails="$fails the first two did not start;"
	wait_for "^step 2 " "$SL/hold-a.out" 30 && wait_for "^step 2 " "$SL/escaped.out" 30 || fails="$fails job A's programs did not run;"
	sl_submit wait-c --cicada=local -- "exec $PROGS/cr_pattern $CICADA_KERNELS 16 10 100" && c=$SL_JOB || return 1
	for _ in 1 2 3 4; do
		[ "$(sl_field "$c" JobState)" = PENDING ] || fails="$fails job C did not wait ($(sl_field "$c" JobState));"
		for n in gpu1 gpu2; do
			[ "$(sl_sessions $n "job-$c")" = 0 ] || fails="$fails job C has a session on $n;"
		done
		sleep 0.5
	done
	[ "$(sl_field "$c" Reason)" = Resources ] || fails="$fails job C waits for $(sl_field "$c" Reason);"
	[ "$(sl_sessions gpu1 "job-$a")" = 2 ] || fails="$fails job A holds $(sl_sessions gpu1 "job-$a") sessions, not 2;"
	check "with both nodes' Cicada GPUs taken, a third --cicada job waits (Resources) and gets no session${fails:+ (failed:$fails)}" \
		test -z "$fails"
	fails=""
	timeout 10 scancel "$a"
	sl_nothing_left "$a" || fails="$fails sessions or files left;"
	for _ in $(seq 30); do pgrep -f "^$PROGS/cr_pattern .* 401 100" >/dev/null || break; sleep 0.1; done
	grep -q "lost the connection to gpu-server" "$SL/escaped.out" || fails="$fails the escaped process kept its GPU;"
	grep -q "token job-$a is gone: its session (worker [0-9]*) ends" "$SL/server-gpu1.log" ||
		fails="$fails gpu1's server does not say it ended job A's sessions;"
	check "a cancelled job leaves no session, token or file, even of a process that escaped Slurm${fails:+ (failed:$fails)}" \
		test -z "$fails"
	sl_wait_state "$c" COMPLETED 60 && [ "$(sl_field "$c" NodeList)" = gpu1 ] &&
		env $DRIVER_ENV timeout 60 "$PROGS/cr_pattern" "$CICADA_KERNELS" 16 10 100 >"$SL/c.native" 2>/dev/null
	check "the waiting job then ran on the freed GPU, output as native" cmp -s "$SL/c.native" "$SL/wait-c.out"
	timeout 10 scancel "$b"
	sl_nothing_left "$b" >/dev/null
	return 0
}

# A running job's node is drained: cicada-slurm watch (on the node) moves
# its GPU session to gpu2 with gpu-migrate --gpu-only; the job is not
# requeued and ends with the output of an undisturbed run.
sl_drain() {
	local j args="$CICADA_KERNELS 32 40 150" fails=""
	env $DRIVER_ENV timeout 60 "$PROGS/cr_pattern" $args >"$SL/drain.native" 2>/dev/null
	sl_submit drain -w gpu1 --cicada=local -- "exec $PROGS/cr_pattern $args" && j=$SL_JOB || return 1
	wait_for "^step 3 " "$SL/drain.out" 30 || fails="$fails the job did not start;"
	timeout 10 scontrol update nodename=gpu1 state=drain reason=cicada-test
	wait_for "drained gpu1: 1 of 1 GPU sessions moved to gpu2" "$SL/watch-gpu1.log" 30 ||
		fails="$fails the watcher did not move it ($(tail -n 2 "$SL/watch-gpu1.log" | tr '\n' ' '));"
	[ "$(sl_sessions gpu1 "job-$j")" = 0 ] && [ "$(sl_sessions gpu2 "job-$j")" = 1 ] ||
		fails="$fails sessions: $(sl_sessions gpu1 "job-$j") on gpu1, $(sl_sessions gpu2 "job-$j") on gpu2;"
	sl_wait_state "$j" COMPLETED 60 || fails="$fails the job did not complete;"
	[ "$(sl_field "$j" Restarts)" = 0 ] || fails="$fails the job was requeued;"
	cmp -s "$SL/drain.native" "$SL/drain.out" || fails="$fails its output differs;"
	[ -z "$fails" ] || diff "$SL/drain.native" "$SL/drain.out" | head -n 5 >>"$SL/drain.err"
	test -z "$fails"
	sl_verdict "draining gpu1 moved a running job's GPU session to gpu2 (gpu-migrate --gpu-only); not requeued, output as undisturbed${fails:+ (failed:$fails)}" \
		"$SL/drain.err"
	timeout 10 scontrol update nodename=gpu1 state=resume
	sl_nothing_left "$j" >/dev/null
	return 0
}

# cicada-slurm checkpoint on gpu1: criu dumps the batch job with its GPU
# state and Slurm requeues it, held; kept off gpu1 and released, it is
# restored on gpu2 and ends with the output of an undisturbed run.
sl_checkpoint() {
	local j args="$CICADA_KERNELS 32 40 150" fails=""
	env $DRIVER_ENV timeout 60 "$PROGS/cr_pattern" $args >"$SL/ckpt.native" 2>/dev/null
	sl_submit ckpt -x gpu2 --cicada=local --requeue --open-mode=append -- "$PROGS/cr_pattern $args" && j=$SL_JOB ||
		return 1
	wait_for "^step 5 " "$SL/ckpt.out" 30 || fails="$fails the job did not start;"
	# shellcheck disable=SC2086  # nsenter's argument
	timeout -k 5 120 nsenter $SL_NS_gpu1 "$B/bin/cicada-slurm" checkpoint "$j" --hold >"$SL/ckpt.log" 2>&1 ||
		fails="$fails cicada-slurm checkpoint: $(tail -n 1 "$SL/ckpt.log");"
	sl_wait_state "$j" PENDING 30 || fails="$fails not requeued;"
	timeout 10 scontrol update jobid="$j" excnodelist=gpu1
	timeout 10 scontrol release "$j"
	sl_wait_state "$j" COMPLETED 90 || fails="$fails the requeued job did not complete;"
	[ "$(sl_field "$j" NodeList)" = gpu2 ] && [ "$(sl_field "$j" Restarts)" = 1 ] ||
		fails="$fails ran on $(sl_field "$j" NodeList), $(sl_field "$j" Restarts) restarts;"
	grep -q "cicada: job $j restored from its checkpoint" "$SL/ckpt.err" || fails="$fails not restored;"
	cmp -s "$SL/ckpt.native" "$SL/ckpt.out" || fails="$fails its output differs;"
	if [ -n "$fails" ]; then
		diff "$SL/ckpt.native" "$SL/ckpt.out" | head -n 5
		grep -h "Error" "$SL/ckpt/job-$j/restore.log" "$SL/ckpt/job-$j/dump.log" "$SL"/ckpt/.job-*/dump.log 2>/dev/null | tail -n 5
	fi >>"$SL/ckpt.err"
	test -z "$fails"
	sl_verdict "a checkpointed job (criu, Cicada's plugin) is requeued and restored on the other node, output as undisturbed${fails:+ (failed:$fails)}" \
		"$SL/ckpt.err"
	sl_nothing_left "$j" >/dev/null
	return 0
}

test_slurm() {
	local t0
	want slurm || return
	t0=$(date +%s)
	if ! command -v slurmctld >/dev/null && [ -x "$B/slurm-root/sbin/slurmctld" ]; then
		SLURM_ROOT=$B/slurm-root                 # (scripts/bundle-slurm.sh's)
	elif ! command -v slurmctld >/dev/null && [ "$MODE" = gpu ]; then
		echo "skip slurm: no Slurm here (scripts/bundle-slurm.sh carries Debian's in build/slurm-root)"
		return
	fi
	SL=$T/slurm
	chmod 711 "$T"                               # (user nobody's job reaches munged)
	if ! slurm_cluster_up gpu1 gpu2 >"$T/slurm-up.log" 2>&1; then
		bad "slurm: a two-node cluster did not come up: $(tail -n 3 "$T/slurm-up.log" | tr '\n' ' ')"
		slurm_cluster_down
		chmod 700 "$T"
		return
	fi
	# shellcheck disable=SC2086  # nsenter's argument
	sl_bg "$SL/watch-gpu1.log" nsenter $SL_NS_gpu1 "$B/bin/cicada-slurm" watch --interval 0.5
	sl_srun
	sl_count_and_cancel || bad "slurm: a job could not be submitted"
	sl_drain || bad "slurm: the drain's job could not be submitted"
	sl_checkpoint || bad "slurm: the checkpoint's job could not be submitted"
	slurm_cluster_down
	chmod 700 "$T"
	unset SLURM_CONF
	echo "     slurm: $(($(date +%s) - t0)) s"
}

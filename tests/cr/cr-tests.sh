# cr-tests.sh: checkpoint/restart tests with the real CRIU and Cicada's
# plugin, sourced by tests/run-tests.sh (which defines ok/bad/check,
# start_server, cicada_env, $T, $B, $PROGS, $PORT and $DRIVER_ENV).
#
# The test program, cr_pattern, keeps device memory with a known pattern,
# a linked list built on the GPU and a module global, and prints a
# checksum after every step. A run that is checkpointed and restored must
# print exactly what an uninterrupted run prints.

CRIU=${CRIU:-$(command -v criu || echo /usr/local/sbin/criu)}
[ -x "$B/bin/criu" ] && CRIU=$B/bin/criu
PLUGIN_DIR=$B/lib/criu
CR_MIB=${CICADA_CR_MIB:-64}
CR_STEPS=10
CR_STEP_MS=150
CR_ARGS="$CICADA_KERNELS $CR_MIB $CR_STEPS $CR_STEP_MS"
CR_N=0
# How long one criu dump or restore may take (GPU sizes need more).
CR_DEADLINE=${CICADA_CR_DEADLINE:-90}
# criu's options for a tree that holds TCP connections: kept, and locked
# by nftables where there is no iptables command (as on these machines)
CR_TCP="--tcp-established"
command -v iptables >/dev/null 2>&1 || CR_TCP="$CR_TCP --network-lock nftables"

# wait_for LINE FILE SECONDS: waits until FILE has a line matching LINE.
wait_for() {
	for _ in $(seq $(($3 * 20))); do
		grep -q "$1" "$2" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

# cr_launch TRANSPORT SERVER [PROGRAM ARGS...]: starts a program (default
# cr_pattern) through Cicada as its own session leader, output in
# $T/cr.N.out; sets CR_PID and CR_OUT. CR_LIBS: more library folders.
# CR_PIDFILE: the program is tests/tools/reaper, which writes there the pid
# of the command it runs: CR_PID is that.
cr_launch() {
	local tr=$1 srv=$2
	shift 2
	[ $# -gt 0 ] || set -- "$PROGS/cr_pattern" $CR_ARGS
	CR_N=$((CR_N + 1))
	CR_OUT=$T/cr.$CR_N.out
	env $(cicada_env "$tr" "$srv") ${CR_LIBS:+LD_LIBRARY_PATH=$B/lib:$CR_LIBS} setsid "$@" </dev/null \
		>"$CR_OUT" 2>"$CR_OUT.err" &
	CR_PID=$!
	disown $CR_PID
	wait_for "^step 2 " "$CR_OUT" 60 || return 1
	[ -z "${CR_PIDFILE:-}" ] || CR_PID=$(cat "$CR_PIDFILE")       # (tests/tools/reaper's command)
}

# cr_dump DIR [criu options]: checkpoints $CR_PID into DIR, within
# CR_DEADLINE seconds. CR_DUMP_OPTS: more criu options.
cr_dump() {
	local dir=$1; shift
	mkdir -p "$dir"
	# shellcheck disable=SC2086  # the options' words
	DEADLINE_LOG=$dir/dump.log deadline "$CR_DEADLINE" \
		"$CRIU" dump -t "$CR_PID" -D "$dir" -L "$PLUGIN_DIR" -o dump.log -v4 ${CR_DUMP_OPTS:-} "$@" \
		2>>"$dir/criu.err"
}

# cr_restore DIR [env...]: restores DIR; criu stays in the background as
# the restored process's parent (and reaper). Fails if criu does.
# It must finish within CR_DEADLINE seconds; criu itself, the restored
# program's parent, is bounded by 600 s. CR_RESTORE_OPTS: more criu
# options.
cr_restore() {
	local dir=$1; shift
	# shellcheck disable=SC2086  # the options' words
	${CRIU_NS:-} env "$@" timeout -k 5 600 "$CRIU" restore -D "$dir" -L "$PLUGIN_DIR" -o restore.log -v4 \
		${CR_RESTORE_OPTS:-} 2>>"$dir/criu.err" &
	local criu=$!
	disown $criu
	for _ in $(seq $((CR_DEADLINE * 20))); do
		grep -q "Restore finished successfully" "$dir/restore.log" 2>/dev/null && return 0
		kill -0 $criu 2>/dev/null || return 1
		sleep 0.05
	done
	echo "DEADLINE: criu restore ran past $CR_DEADLINE s" >&2
	tail -n 5 "$dir/restore.log" | sed 's/^/  | /' >&2
	kill -9 $criu 2>/dev/null
	return 1
}

# cr_finished: the (restored) program ran to its end; its output matches
# the reference ($CR_REF, by default cr_pattern's native run).
cr_finished() {
	wait_for "^done" "$CR_OUT" 120 || return 1
	for _ in $(seq 100); do kill -0 "$CR_PID" 2>/dev/null || break; sleep 0.05; done
	cmp -s "${CR_REF:-$T/cr.native}" "$CR_OUT"
}

cr_show_failure() {
	diff "${CR_REF:-$T/cr.native}" "$CR_OUT" | head -5
	tail -3 "$CR_OUT.err"
	for f in "$1"/criu.err; do [ -s "$f" ] && tail -5 "$f"; done
	grep -h "Error\|cicada:" "$1"/dump.log "$1"/restore.log 2>/dev/null | tail -5
}

# cr_listen_free DIR: waits (at most 70 s) until no connection left over
# on this node (TIME_WAIT, mostly) holds a port the dumped processes
# listened on (DIR's dump log): criu binds their listening sockets
# again, and where the program set no SO_REUSEADDR (NCCL's bootstrap)
# that fails while a connection it accepted lingers, 60 s in TIME_WAIT.
cr_listen_free() {
	local ports hex n=0
	ports=$(sed -n 's/.*Dumping: .* port *\([0-9]*\) state TCP_LISTEN.*/\1/p' "$1/dump.log" | sort -u)
	[ -n "$ports" ] || return 0
	hex=$(for p in $ports; do printf ':%04X \n' "$p"; done)
	# (/proc/net/tcp: local address in column 2, state in 4; 0A listens)
	while awk '$4 != "0A" && $4 != "st" { print $2 }' /proc/net/tcp /proc/net/tcp6 2>/dev/null |
		sed 's/^.*\(:[0-9A-F]*\)$/\1 /' | grep -qFf <(echo "$hex"); do
		[ $n -eq 0 ] && echo "     waiting for connections left over on the job's listening ports to end"
		n=$((n + 1)); [ $n -le 70 ] || { echo "     they did not end in 70 s"; return 1; }
		sleep 1
	done
	[ $n -eq 0 ] || echo "     waited $n s"
}

cr_case() {
	local what=$1 dir=$2; shift 2
	if "$@"; then ok "$what"; else bad "$what"; cr_show_failure "$dir"; fi
}

# Dump mid-run, restore: same output as a run never interrupted.
cr_dump_restore() {
	local tr=$1 dir=$T/ckpt.$1
	cr_launch "$tr" main || return 1
	cr_dump "$dir" || return 1
	cr_restore "$dir" || return 1
	cr_finished
}

# A program that forked children once CUDA ran (as a DataLoader does),
# dumped with them and restored: output identical. The children hold a
# copy of the control socket, which must not pass for theirs. (The
# restore waits until the dumped children are reaped: criu needs their
# pids again.)
cr_children() {
	local dir=$T/ckpt.children rc=0 kids
	export CR_CHILDREN=3
	cr_launch shm main || rc=1
	unset CR_CHILDREN
	kids=$(pgrep -P "$CR_PID")
	[ $rc = 0 ] && [ "$(wc -w <<<"$kids")" = 3 ] && cr_dump "$dir" || return 1
	for _ in $(seq 100); do
		# shellcheck disable=SC2086  # pids
		ps -p "$(tr ' \n' ',,' <<<"$kids" | sed 's/,*$//')" >/dev/null || break
		sleep 0.05
	done
	cr_restore "$dir" && cr_finished
}

# A program in its own pid namespace, as in a container: its init,
# dumped from outside, restored into a new namespace (criu makes it),
# output identical. The session file keeps the pid the program knows
# itself by there. (unshare's own stderr goes nowhere: it writes when
# its child is dumped, and criu checks that the files it restores are
# as they were.)
cr_pidns() {
	local dir=$T/ckpt.pidns u
	CR_N=$((CR_N + 1))
	CR_OUT=$T/cr.$CR_N.out
	env $(cicada_env shm main) timeout -k 5 300 unshare --pid --fork --kill-child setsid "$PROGS/cr_pattern" \
		$CR_ARGS </dev/null >"$CR_OUT" 2>/dev/null &
	u=$!
	disown $u
	wait_for "^step 2 " "$CR_OUT" 60 || return 1
	CR_PID=$(pgrep -P "$(pgrep -P $u)")
	[ -n "$CR_PID" ] && grep -q "^NSpid:.*[[:space:]]1$" "/proc/$CR_PID/status" || return 1
	cr_dump "$dir" || return 1
	grep -qx "vpid 1" "$dir/cicada-session-$CR_PID.txt" || return 1
	cr_restore "$dir" || return 1
	cr_finished
}

# cr_suffix LOG: LOG ends the program's run ("done") and is the end of
# the reference output, at least 5 lines of it.
cr_suffix() {
	local n
	n=$(wc -l <"$1")
	[ "$n" -ge 5 ] && tail -n 1 "$1" | grep -qx done && tail -n "$n" "${CR_REF:-$T/cr.native}" | cmp -s - "$1"
}

# gpu-template: cr_pattern started by gpu-template run (a pid namespace
# of its own), saved once it has run two steps; two copies started from
# the template at once, each with its own log, both run to the end with
# the reference's output from where the template was saved; a third,
# started later, ends when its init is sent SIGTERM. A process outside a
# pid namespace is refused in one line.
cr_template() {
	local dir=$T/ckpt.template init copy3 env
	env=$(cicada_env shm main)
	init=$(env $env timeout 10 "$B/bin/gpu-template" run --log "$T/tpl.log" -- "$PROGS/cr_pattern" $CR_ARGS) ||
		return 1
	wait_for "^step 2 " "$T/tpl.log" 60 || return 1
	deadline 60 "$B/bin/gpu-template" save "$init" "$dir" >"$T/tpl.save" 2>&1 || { cat "$T/tpl.save"; return 1; }
	deadline 60 "$B/bin/gpu-template" start "$dir" --log "$T/tpl.1" >"$T/tpl.start1" 2>&1 &
	deadline 60 "$B/bin/gpu-template" start "$dir" --log "$T/tpl.2" >"$T/tpl.start2" 2>&1 ||
		{ cat "$T/tpl.start2"; return 1; }
	wait $! || { cat "$T/tpl.start1"; return 1; }
	cat "$T/tpl.save" "$T/tpl.start1" "$T/tpl.start2" | sed 's/^/     /'
	wait_for "^done" "$T/tpl.1" 120 && wait_for "^done" "$T/tpl.2" 120 || return 1
	cr_suffix "$T/tpl.1" && cr_suffix "$T/tpl.2" || { echo "     a copy's output is not the reference's end"; return 1; }
	deadline 60 "$B/bin/gpu-template" start "$dir" --log "$T/tpl.3" >"$T/tpl.start3" 2>&1 || return 1
	copy3=$(sed -n 's/.*started a copy as pid \([0-9]*\).*/\1/p' "$T/tpl.start3")
	kill -TERM "${copy3:-0}" || return 1
	for _ in $(seq 100); do kill -0 "$copy3" 2>/dev/null || break; sleep 0.05; done
	kill -0 "$copy3" 2>/dev/null && { echo "     the third copy did not end on SIGTERM"; return 1; }
	cr_launch shm main || return 1
	! deadline 30 "$B/bin/gpu-template" save "$CR_PID" "$T/ckpt.template-refused" >"$T/tpl.refused" 2>&1 &&
		grep -q "not the first process of a pid namespace" "$T/tpl.refused" && cr_finished ||
		{ echo "     a process outside a pid namespace: $(cat "$T/tpl.refused")"; return 1; }
}

# The original server is killed between dump and restore; a new server
# (new workers, new run directory) takes the snapshot. Arguments: the
# program (default cr_pattern); CR_TAG names the folders (default killed),
# CR_PORTS moves the servers' ports (default 2: PORT+2 and PORT+3);
# CR_BEFORE_RESTORE, a command run just before the restore.
cr_server_killed() {
	local tag=${CR_TAG:-killed} p=$((PORT + ${CR_PORTS:-2})) dir
	dir=$T/ckpt.$tag
	start_server "victim$tag" "$p" || return 1
	cr_launch shm "victim$tag" "$@" || return 1
	cr_dump "$dir" || return 1
	eval "kill -9 \$PID_victim$tag"
	pkill -9 -f "gpu-server --worker-fd .* --cache-dir $T/cache-victim$tag" 2>/dev/null
	start_server "heir$tag" $((p + 1)) || return 1
	${CR_BEFORE_RESTORE:-true} "$dir" || return 1
	cr_restore "$dir" CICADA_RESTORE_SERVER="unix:$T/heir$tag.sock" || return 1
	cr_finished && grep -q "restored snapshot" "$T/heir$tag.log"
}

# Another node: a network namespace with its own loopback and its own
# gpu-server, reached over TCP; the snapshot travels over the connection.
# Arguments: the program (default cr_pattern); CR_TAG names the namespace
# and folders (default node), CR_PORTS its server's port (default 4:
# PORT+4). Without iproute2 (neither the system's nor the build's copy), a
# second server on another TCP port stands in for the other node.
cr_other_node() {
	local tag=${CR_TAG:-node} in_ns=""
	local ns=cicada-$tag-$$ dir=$T/ckpt.$tag port=$((PORT + ${CR_PORTS:-4}))
	if command -v ip >/dev/null; then
		ip netns add "$ns" || return 1
		ip -n "$ns" link set lo up
		in_ns="nsenter --net=/run/netns/$ns"
	fi
	$in_ns env $DRIVER_ENV timeout -k 5 "$SERVER_DEADLINE" "$B/bin/gpu-server" --listen "unix:$T/$tag.sock" \
		--listen "tcp:127.0.0.1:$port" --token-file "$T/token" --cache-dir "$T/cache-$tag" \
		--workers 1 >>"$T/$tag.log" 2>&1 &
	local node=$!
	SERVERS="$SERVERS $node"
	disown $node
	wait_for_server $node "$T/$tag.sock" "$T/$tag.log" cr-tests || return 1
	cr_launch tcp main "$@" || return 1
	cr_dump "$dir" || return 1
	CRIU_NS=$in_ns cr_restore "$dir" CICADA_RESTORE_SERVER="tcp:127.0.0.1:$port" \
		CICADA_TOKEN_FILE="$T/token" || return 1
	cr_finished && grep -q "restored snapshot" "$T/$tag.log"
}

# --leave-running, twice (periodic checkpoints), then a final dump and a
# restore of that; then the restored process is checkpointed and
# restored again.
cr_periodic() {
	local dir=$T/ckpt.periodic
	cr_launch shm main || return 1
	cr_dump "$dir.1" --leave-running || return 1
	cr_dump "$dir.2" --leave-running || return 1
	wait_for "^step 5 " "$CR_OUT" 60 || return 1
	cr_dump "$dir.3" || return 1
	cr_restore "$dir.3" || return 1
	wait_for "^step 7 " "$CR_OUT" 60 || return 1
	cr_dump "$dir.4" || return 1
	cr_restore "$dir.4" || return 1
	cr_finished && "$B/bin/gpu-snapshot" verify "$dir.1" >/dev/null
}

# A dump that dies after the GPU state was written (criu killed by its own
# action script): the program carries on; the snapshot stays whole.
cr_killed_dump() {
	local dir=$T/ckpt.killed-dump
	printf '#!/bin/sh\n[ "$CRTOOLS_SCRIPT_ACTION" = post-dump ] && kill -9 $PPID\nexit 0\n' >"$T/kill-criu.sh"
	chmod +x "$T/kill-criu.sh"
	cr_launch shm main || return 1
	(cr_dump "$dir" --action-script "$T/kill-criu.sh") 2>/dev/null
	cr_finished && "$B/bin/gpu-snapshot" verify "$dir" >/dev/null
}

# Corruption and version mismatch: restore refuses with one clear line,
# and no process is left behind.
cr_refusals() {
	local dir=$T/ckpt.refuse snap
	cr_launch shm main || return 1
	cr_dump "$dir" --leave-running || return 1
	kill -9 "$CR_PID"
	snap=$(ls -d "$dir"/cicada-gpu-*)
	cp -a "$dir" "$dir.corrupt"
	cp -a "$dir" "$dir.version"
	local img
	# the middle of every data file (writer threads share the pieces out
	# as they come, so one file's middle may fall between two pieces)
	for img in "$dir.corrupt/$(basename "$snap")"/device-memory*.img; do
		printf '\xff\xfe' | dd of="$img" bs=1 seek=$(($(stat -c %s "$img") / 2)) conv=notrunc 2>/dev/null
	done
	printf '\x09' | dd of="$dir.version/$(basename "$snap")/manifest" bs=1 seek=8 conv=notrunc 2>/dev/null
	cr_restore "$dir.corrupt" && { echo "     the corrupted snapshot was restored"; return 1; }
	# (where the bytes fell: a raw piece or a compressed one)
	grep -q "^cicada: .*\(checksum\|decompress\)" "$dir.corrupt/criu.err" ||
		{ echo "     the corrupted snapshot's refusal:"; grep -v rlimit "$dir.corrupt/criu.err" | tail -3; return 1; }
	cr_gone "$CR_PID" || { echo "     a process $CR_PID runs after the refused restore"; return 1; }
	cr_restore "$dir.version" && { echo "     the wrong-version snapshot was restored"; return 1; }
	grep -q "^cicada: .*version 9 is not supported" "$dir.version/criu.err" ||
		{ echo "     the wrong-version snapshot's refusal:"; grep -v rlimit "$dir.version/criu.err" | tail -3; return 1; }
	cr_gone "$CR_PID" || { echo "     a process $CR_PID runs after the refused restore"; return 1; }
}

# cr_gone PID: no such process within 5 s (a zombie not yet reaped counts
# as gone: it runs no more).
cr_gone() {
	for _ in $(seq 100); do
		[ -e "/proc/$1" ] && [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ] || return 0
		sleep 0.05
	done
	return 1
}

# GPU only: a program holding GIB GiB of device memory with a known
# pattern is checkpointed (images on tmpfs) and restored; the pattern must
# be intact. Prints the times.
cr_size() {
	local gib=$1 dir=/dev/shm/cicada-cr-$$-$1 go=$T/go.$1 out=$T/hold.$1.out t0 t1 t2
	rm -rf "$dir" "$go"
	env $(cicada_env shm main) setsid "$PROGS/cr_hold" "$CICADA_KERNELS" $((gib * 1024)) "$go" \
		</dev/null >"$out" 2>"$out.err" &
	CR_PID=$!
	disown $CR_PID
	CR_OUT=$out
	wait_for "^ready" "$out" 300 || return 1
	t0=$(date +%s.%N)
	cr_dump "$dir" || return 1
	t1=$(date +%s.%N)
	cr_restore "$dir" || return 1
	t2=$(date +%s.%N)
	echo "     $gib GiB: checkpoint $(awk "BEGIN { print $t1 - $t0 }") s, restore $(awk "BEGIN { print $t2 - $t1 }") s," \
		"image $(du -sh "$dir" | cut -f1)"
	touch "$go"
	wait_for "^verified" "$out" 300
	local rc=$?
	rm -rf "$dir"
	return $rc
}

run_cr_sizes() {
	local free
	for gib in ${CICADA_CR_GIB:-1 8 32}; do
		free=$(df -k /dev/shm | awk 'NR == 2 { print int($4 / 1048576) }')
		if [ "$free" -le "$gib" ]; then
			bad "$gib GiB checkpoint: only $free GiB free on /dev/shm"
			continue
		fi
		cr_case "$gib GiB of device memory checkpointed and restored intact" "/dev/shm/cicada-cr-$$-$gib" \
			cr_size "$gib"
	done
}

# A CUDA runtime program (static runtime): the runtime's own state lives
# in the process (CRIU's part), its driver objects in the replay log.
# MODE hostfn: host functions and stream-ordered allocations each step,
# which must go on after the restore (a new host-function channel).
cr_runtime_program() {
	local mode=${1:-plain} dir=$T/ckpt.runtime.${1:-plain}
	CR_REF=$T/rt_steps.$mode.ref
	rt_steps_reference "$mode" || return 1
	cr_launch shm main "$PROGS/rt_steps" 10 150 "$mode" || return 1
	cr_dump "$dir" || return 1
	cr_restore "$dir" || return 1
	cr_finished
}

# Registered mapped memory of a TCP client (a device mirror), written by
# the host and by kernels each step, checkpointed mid-run: the snapshot
# takes the mirror, CRIU the pages, and the two agree after the restore.
cr_mapped_tcp() {
	local dir=$T/ckpt.runtime.mapped
	CR_REF=$T/rt_steps.mapped.ref
	rt_steps_reference mapped || return 1
	cr_launch tcp main "$PROGS/rt_steps" 10 150 mapped || return 1
	cr_dump "$dir" || return 1
	cr_restore "$dir" || return 1
	cr_finished
}

# The objects mode checkpointed twice: the restored session, whose replay
# log numbers its records anew, is dumped and restored again.
cr_objects_twice() {
	local dir=$T/ckpt.runtime.objects
	CR_REF=$T/rt_steps.objects.ref
	rt_steps_reference objects || return 1
	cr_launch shm main "$PROGS/rt_steps" 10 150 objects || return 1
	cr_dump "$dir.1" || return 1
	cr_restore "$dir.1" || return 1
	wait_for "^step 6 " "$CR_OUT" 60 || return 1
	cr_dump "$dir.2" || return 1
	cr_restore "$dir.2" || return 1
	cr_finished
}

# A process tree holding an established TCP connection (as NCCL's and
# torchrun's do): tcp_hold keeps one over loopback, busy, while
# cr_pattern runs; criu keeps it (the project's CRIU build answers the
# socket options Linux 6.16 refuses), and it still carries bytes after
# the restore.
cr_tcp_held() {
	local dir=$T/ckpt.tcp-held
	CR_PIDFILE=$T/tcp.pid cr_launch shm main "$B/tests/tools/reaper" "$T/tcp.pid" "$B/tests/tools/tcp_hold" \
		"$PROGS/cr_pattern" $CR_ARGS || return 1
	CR_DUMP_OPTS=$CR_TCP cr_dump "$dir" || return 1
	CR_RESTORE_OPTS=$CR_TCP cr_restore "$dir" || return 1
	cr_finished && wait_for "the connection held" "$CR_OUT.err" 30
}

# A process tree one of whose processes holds an io_uring, which criu
# cannot dump (torchrun's agent, through libuv): the dump is refused in
# one line before any GPU session is paused, and the program goes on.
cr_uring() {
	local dir=$T/ckpt.uring
	CR_PIDFILE=$T/uring.pid cr_launch shm main "$B/tests/tools/reaper" "$T/uring.pid" "$B/tests/tools/uring_hold" \
		"$PROGS/cr_pattern" $CR_ARGS || return 1
	cr_dump "$dir" && return 1
	grep -q "^cicada: process [0-9]* (uring_hold) holds an io_uring, which criu cannot dump" "$dir/criu.err" &&
		! grep -q "paused (session" "$dir/dump.log" || return 1
	cr_finished
}

# The driver holding a place where the worker would put an application's
# reservation (the stand-in's FAKECUDA_TAKEN, in both servers' workers):
# the worker places it further on, in its own regions, and the restore
# into a new server gets the same addresses back.
cr_vmm_taken() {
	local log=$T/victimtaken.log
	CR_REF=$T/rt_steps.objects.ref
	rt_steps_reference objects || return 1
	DRIVER_ENV="$DRIVER_ENV FAKECUDA_TAKEN=300000000000:4000000" CR_TAG=taken CR_PORTS=16 \
		cr_server_killed "$PROGS/rt_steps" 10 150 objects || return 1
	grep -q "trying further" "$log" && ! grep -q "left where the driver puts it" "$log" ||
		{ echo "     the worker did not place the reservation past the driver's"; return 1; }
}

# A program whose run compiles PTX on a cold compute cache (the driver
# maps its compiler then), restored by a new server that finds the PTX in
# the cache (where the driver maps nothing): its module variables come
# back in place all the same.
cr_jit_cache() {
	rm -rf "$T/jit-cache"
	DRIVER_ENV="$DRIVER_ENV CUDA_CACHE_PATH=$T/jit-cache" CR_TAG=jit CR_PORTS=26 \
		cr_server_killed env CR_JIT_FIRST=kernels_a.ptx "$PROGS/cr_pattern" $CR_ARGS || return 1
	[ -n "$(ls -A "$T/jit-cache" 2>/dev/null)" ] || { echo "     the driver cached nothing in $T/jit-cache"; return 1; }
}

rt_steps_reference() {
	if [ "$MODE" = gpu ]; then
		env $DRIVER_ENV timeout 120 "$PROGS/rt_steps" 10 150 "$1" >"$CR_REF"
	else
		env $(cicada_env shm) timeout 120 "$PROGS/rt_steps" 10 150 "$1" >"$CR_REF"
	fi
}

# A session holding a graph with a host function node (a captured
# cudaLaunchHostFunc): the dump is refused with one line that says why,
# and the program runs on to its end undisturbed.
cr_refused() {
	local dir=$T/ckpt.refused
	CR_REF=$T/rt_steps.graphhost.ref
	rt_steps_reference graphhost || return 1
	cr_launch shm main "$PROGS/rt_steps" 10 150 graphhost || return 1
	cr_dump "$dir" && return 1
	grep -q "cicada: .*holds a host function node, which a checkpoint cannot carry yet" "$dir/criu.err" \
		"$dir/dump.log" || return 1
	cr_finished
}

# A cuFFT program (GPU only): the functions cuFFT found through the
# driver's function walk come back under their ids.
cr_cufft() {
	local dir=$T/ckpt.cufft libs
	CR_REF=$T/rt_cufft_steps.ref
	libs=$(library_path libcufft.so.12) || return 1
	env $DRIVER_ENV LD_LIBRARY_PATH="$libs" timeout 120 "$PROGS/rt_cufft_steps" 10 150 >"$CR_REF" || return 1
	CR_LIBS=$libs cr_launch shm main "$PROGS/rt_cufft_steps" 10 150 || return 1
	cr_dump "$dir" || return 1
	cr_restore "$dir" || return 1
	cr_finished
}

# A target GPU with too little memory: one clear line, nothing restored.
cr_small_target() {
	local dir=$T/ckpt.small
	[ "$MODE" = cpu ] || return 0
	DRIVER_ENV="$DRIVER_ENV FAKECUDA_TOTAL_MIB=16" start_server small $((PORT + 5)) || return 1
	cr_launch shm main || return 1
	cr_dump "$dir" || return 1
	cr_restore "$dir" CICADA_RESTORE_SERVER="unix:$T/small.sock" && return 1
	grep -q "^cicada: .*needs 0.0[0-9] GiB of device memory; this GPU has 0.0[0-9] GiB free" "$dir/criu.err"
}

# A server whose --memory-quota gives root less than the snapshot holds:
# the restore is refused in one line naming the quota; the images then
# restore into the first server.
cr_quota() {
	local dir=$T/ckpt.quota
	start_server quota $((PORT + 6)) "" --memory-quota "default=$((CR_MIB / 2))M" || return 1
	cr_launch shm main || return 1
	cr_dump "$dir" || return 1
	cr_restore "$dir" CICADA_RESTORE_SERVER="unix:$T/quota.sock" && return 1
	grep -q "^cicada: .*needs [0-9.]* GiB of device memory; its owner's quota here is [0-9.]* GiB" "$dir/criu.err" ||
		return 1
	cr_restore "$dir" && cr_finished
}

# A target whose driver would put module globals elsewhere (the stand-in's
# FAKECUDA_SHIFT_MIB: 32 MiB lower, as an NCCL job's once came back 32 MiB
# higher): the restore is refused in one line, naming a global and how
# many moved, and the log says by how much; the images stay good and
# restore into the first server.
cr_globals_moved() {
	local dir=$T/ckpt.moved
	DRIVER_ENV="$DRIVER_ENV FAKECUDA_SHIFT_MIB=32" start_server moved $((PORT + 7)) || return 1
	cr_launch shm main || return 1
	cr_dump "$dir" || return 1
	cr_restore "$dir" CICADA_RESTORE_SERVER="unix:$T/moved.sock" && return 1
	grep -q "^cicada: .*module global at 0x[0-9a-f]* ([0-9]* bytes) did not come back at its address ([0-9]* of [0-9]* moved" \
		"$dir/criu.err" || return 1
	grep -q "did not come back there; one of its size is at 0x[0-9a-f]* (-33554432 bytes)" "$T/moved.log" || return 1
	grep -q "the first module global that moved was found by record [0-9]* ([a-z_]*)" "$T/moved.log" ||
		return 1
	cr_restore "$dir" || return 1
	cr_finished
}

# A tenant's program (the user nobody) whose GPU state root moves and
# checkpoints. Its worker runs as nobody, which may not write root's
# directories: the worker says so and the snapshot comes streamed. First
# gpu-migrate --gpu-only moves its session into a new worker (root's for
# the restore, nobody's again at the reattach); then, where root's criu
# may read another user's process (CAP_SYS_RESOURCE, which this test
# checks), criu dumps and restores it. The output is the native one, and
# the snapshots name their owner.
cr_tenant() {
	local dir=$T/ckpt.tenant uid n
	uid=$(id -u nobody) || return 1
	chmod 711 "$T"
	start_server tenant $((PORT + 80)) || return 1
	chmod 666 "$T/tenant.sock"
	cr_launch shm tenant setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
		"$PROGS/cr_pattern" $CR_ARGS || return 1
	mkdir -p "$T/mig-work-tenant"
	deadline 60 "$B/bin/gpu-migrate" "$CR_PID" --to local --gpu 0 \
		--work-dir "$T/mig-work-tenant" >"$dir.mig" 2>&1 || { cat "$dir.mig"; return 1; }
	n=$(grep -c "worker runs as uid $uid from now on" "$T/tenant.log")
	[ "$n" -ge 2 ] || { echo "     $n workers ran as nobody (the first, and the one moved to)"; return 1; }
	if prlimit --pid "$CR_PID" >/dev/null 2>&1; then
		cr_dump "$dir" || return 1
		grep -q "^owner .*uid $uid" <(timeout 30 "$B/bin/gpu-snapshot" inspect "$dir"/cicada-gpu-* 2>&1) ||
			{ echo "     the snapshot does not name its owner"; return 1; }
		cr_restore "$dir" || return 1
		[ "$(grep -c "worker runs as uid $uid from now on" "$T/tenant.log")" -gt "$n" ] ||
			{ echo "     the restored worker did not become nobody at the reattach"; return 1; }
	else
		echo "     (criu here may not read another user's process: no CAP_SYS_RESOURCE; the criu part is not run)"
	fi
	cr_finished
	chmod 700 "$T"
}

run_cr_tests() {
	wants_cr || return
	if ! deadline 60 "$CRIU" check >/dev/null 2>&1; then
		bad "criu check fails here ($CRIU); checkpoint tests skipped"
		return
	fi
	env $DRIVER_ENV timeout 120 "$PROGS/cr_pattern" $CR_ARGS >"$T/cr.native" 2>"$T/cr.native.err" ||
		{ bad "cr_pattern natively"; tail -3 "$T/cr.native.err"; return; }
	want cr-shm && cr_case "checkpoint mid-run and restore (shared memory): output identical" "$T/ckpt.shm" \
		cr_dump_restore shm
	want cr-unix && cr_case "checkpoint mid-run and restore (unix socket): output identical" "$T/ckpt.unix" \
		cr_dump_restore unix
	want cr-tcp && cr_case "checkpoint mid-run and restore (TCP): output identical" "$T/ckpt.tcp" cr_dump_restore tcp
	want cr-tcp && check "the image directory of a TCP client names its token file, never the token" \
		sh -c "grep -q '^token-file $T/token' '$T'/ckpt.tcp/cicada-session-*.txt && ! grep -rqF \"\$(cat '$T/token')\" '$T/ckpt.tcp'"
	want cr-children && cr_case "a program with three forked children, dumped and restored with them: output identical" \
		"$T/ckpt.children" cr_children
	want cr-pidns && cr_case "a program in its own pid namespace (a container's): dumped from outside, restored into a new one, output identical" \
		"$T/ckpt.pidns" cr_pidns
	want cr-template && cr_case "gpu-template: a program saved as a template once warm; two copies started from it at once and a third later, each its own log; both run on to the reference's end, the third ends on SIGTERM; a process outside a pid namespace refused in one line" \
		"$T/ckpt.template" cr_template
	want cr-server-killed && cr_case "restore after the original server was killed" "$T/ckpt.killed" \
		cr_server_killed
	if want cr-tenant && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
		cr_case "a tenant's program (nobody) moved and checkpointed by root: its workers run as nobody, the snapshot comes streamed and names its owner; output identical" \
			"$T/ckpt.tenant" cr_tenant
	elif want cr-tenant; then
		ok "cr-tenant: no setpriv or no user nobody here (skipped)"
	fi
	want cr-jit-cache && cr_case "a run that compiled PTX on a cold compute cache, restored by a server whose cache holds it: output identical" \
		"$T/ckpt.jit" cr_jit_cache
	if want cr-other-node && command -v ip >/dev/null; then
		cr_case "restore on another node (network namespace, TCP)" "$T/ckpt.node" cr_other_node
	elif want cr-other-node; then
		cr_case "restore on another server over TCP (no iproute2 here for a namespace)" \
			"$T/ckpt.node" cr_other_node
	fi
	want cr-periodic && cr_case "--leave-running twice, then dump, restore, and dump the restored process" \
		"$T/ckpt.periodic.4" cr_periodic
	want cr-killed-dump && cr_case "a dump killed part-way: the program goes on, the snapshot is whole" \
		"$T/ckpt.killed-dump" cr_killed_dump
	want cr-incremental && cr_case "incremental checkpoints (a tenth changed): a fraction of the full one stored, restored through the chain, output identical; a damaged or missing parent is refused" \
		"$T/ckpt.incr.3" cr_incremental
	want cr-keyed && cr_case "keyed snapshots: signed, restored to the same output; a copy re-checksummed without the key is refused" \
		"$T/ckpt.keyed" cr_keyed
	want cr-refusals && cr_case "corrupted and wrong-version snapshots are refused with one line" \
		"$T/ckpt.refuse" cr_refusals
	want cr-runtime && cr_case "a CUDA runtime program checkpointed mid-run and restored: output identical" \
		"$T/ckpt.runtime.plain" cr_runtime_program
	want cr-hostfn && cr_case "host functions and cudaMallocAsync go on working after a restore" \
		"$T/ckpt.runtime.hostfn" cr_runtime_program hostfn
	want cr-managed && cr_case "managed memory written on both sides goes on after a restore: output identical" \
		"$T/ckpt.runtime.managed" cr_runtime_program managed
	want cr-mapped && cr_case "registered mapped memory of a TCP client written on both sides goes on after a restore: output identical" \
		"$T/ckpt.runtime.mapped" cr_mapped_tcp
	want cr-graph && cr_case "a captured CUDA graph launched each step goes on after a restore: output identical" \
		"$T/ckpt.runtime.graph" cr_runtime_program graph
	want cr-objects && cr_case "a graph built node by node and updated, an array read through a texture and VMM memory: restored, then dumped and restored again, output identical" \
		"$T/ckpt.runtime.objects.2" cr_objects_twice
	want cr-refused && cr_case "a session holding what a checkpoint cannot carry: the dump is refused, saying why; the program goes on" \
		"$T/ckpt.refused" cr_refused
	unset CR_REF
	want cr-tcp-held && cr_case "a process tree holding an established TCP connection, dumped and restored: output identical, the connection carries on" \
		"$T/ckpt.tcp-held" cr_tcp_held
	if want cr-uring && ! timeout 10 "$B/tests/tools/uring_hold" true 2>/dev/null; then
		echo "note cr-uring: this kernel gives no io_uring"
	elif want cr-uring; then
		cr_case "a process tree holding an io_uring: the dump is refused in one line before any GPU session is paused; the program goes on" \
			"$T/ckpt.uring" cr_uring
	fi
	[ "$MODE" = cpu ] && want cr-vmm-taken && cr_case "a reservation whose place the driver holds goes further on, and comes back there after a restore into a new server" \
		"$T/ckpt.taken" cr_vmm_taken
	unset CR_REF
	[ "$MODE" = cpu ] && want cr-globals-moved && cr_case "a target whose driver would put module globals elsewhere: the restore is refused in one line, saying how many moved and by how much; the images restore into the first server" \
		"$T/ckpt.moved" cr_globals_moved
	want cr-quota && cr_case "a restore past its owner's --memory-quota is refused with one line; the images restore elsewhere" \
		"$T/ckpt.quota" cr_quota
	[ "$MODE" = cpu ] && want cr-small-target && cr_case "a target GPU with too little memory is refused with one line" \
		"$T/ckpt.small" cr_small_target
	[ "$MODE" = gpu ] && want cr-cufft && cr_case "a cuFFT program checkpointed mid-run and restored: output identical" \
		"$T/ckpt.cufft" cr_cufft
	unset CR_REF
	[ "$MODE" = gpu ] && want cr-sizes && CR_DEADLINE=${CICADA_CR_DEADLINE:-300} run_cr_sizes
	ip netns del "cicada-node-$$" 2>/dev/null
}

# wants_cr: whether any checkpoint test is to run.
wants_cr() {
	local n
	for n in $TESTS; do
		case $n in cr-*) want "$n" && return 0 ;; esac
	done
	return 1
}

# Incremental checkpoints: a program that changes a tenth of its device
# memory each step is checkpointed with --leave-running, then twice more,
# each GPU snapshot on the one before (CICADA_SNAPSHOT_PARENT); the later
# ones store a fraction of the first; the last restores, through its
# chain, to the same output. A copy of the chain with a parent's data
# cut off, or without that parent, is refused with one line.
cr_incremental() {
	local d=$T/ckpt.incr args="$CICADA_KERNELS $CR_MIB 14 $CR_STEP_MS 10" snap full part out line
	env $DRIVER_ENV timeout 120 "$PROGS/cr_pattern" $args >"$T/cr.incr.native" 2>/dev/null || return 1
	cr_launch shm main "$PROGS/cr_pattern" $args || return 1
	cr_dump "$d.1" --leave-running || return 1
	wait_for "^step 4 " "$CR_OUT" 30 || return 1
	CICADA_SNAPSHOT_PARENT=../ckpt.incr.1 cr_dump "$d.2" --leave-running || return 1
	wait_for "^step 6 " "$CR_OUT" 30 || return 1
	CICADA_SNAPSHOT_PARENT=../ckpt.incr.2 cr_dump "$d.3" || return 1
	snap=cicada-gpu-$CR_PID
	full=$(timeout 60 "$B/bin/gpu-snapshot" inspect "$d.1/$snap" --json | sed -n 's/.*"data_files": {"count": [0-9]*, "bytes": \([0-9]*\)}.*/\1/p')
	part=$(timeout 60 "$B/bin/gpu-snapshot" inspect "$d.3/$snap" --json | sed -n 's/.*"data_files": {"count": [0-9]*, "bytes": \([0-9]*\)}.*/\1/p')
	echo "     incremental checkpoint: $part bytes stored, the full one $full"
	[ -n "$full" ] && [ -n "$part" ] && [ "$part" -lt $((full / 3)) ] || return 1
	# the pieces left to the parent were found by their device hashes, unread
	line=$(grep "checkpoint $snap: .* pieces unchanged" "$T/main.log" | tail -n 1)
	echo "     ${line#*checkpoint }"
	[[ $line =~ ([0-9]+)\ pieces\ unchanged.*\ ([0-9]+)\ of\ them\ unread ]] &&
		[ "${BASH_REMATCH[2]}" -gt 0 ] && [ "${BASH_REMATCH[2]}" = "${BASH_REMATCH[1]}" ] || return 1
	timeout 60 "$B/bin/gpu-snapshot" inspect "$d.3/$snap" | grep -q "^parent  *../../ckpt.incr.2/$snap" || return 1
	mkdir -p "$T/incr-bad" && cp -r "$d.1" "$d.2" "$d.3" "$T/incr-bad/" || return 1
	for f in "$T/incr-bad/ckpt.incr.1/$snap"/device-memory*.img; do : >"$f"; done
	out=$(timeout 60 "$B/bin/gpu-snapshot" verify "$T/incr-bad/ckpt.incr.3/$snap" 2>&1)
	[ "$(echo "$out" | wc -l)" = 1 ] && grep -q "parent snapshot .*truncated" <<<"$out" || { echo "$out"; return 1; }
	rm -rf "$T/incr-bad/ckpt.incr.1"
	out=$(timeout 60 "$B/bin/gpu-snapshot" verify "$T/incr-bad/ckpt.incr.3/$snap" 2>&1)
	grep -q "parent snapshot .*ckpt.incr.1.* cannot be used (missing, changed, or not the owner.s)" <<<"$out" ||
		{ echo "$out"; return 1; }
	cr_restore "$d.3" || return 1
	CR_REF=$T/cr.incr.native cr_finished
}

# Keyed snapshots (--snapshot-key-file): a checkpoint is signed; a copy
# whose manifest was changed and re-checksummed without the key is
# refused by a restore and by gpu-snapshot verify; the signed one
# restores to the same output.
cr_keyed() {
	local d=$T/ckpt.keyed snap out pid
	printf 'a per-cluster secret of 32 bytes' >"$T/snapshot.key"
	env $DRIVER_ENV timeout -k 5 "$SERVER_DEADLINE" "$B/bin/gpu-server" --listen "unix:$T/keyed.sock" \
		--cache-dir "$T/cache-keyed" --workers 1 --snapshot-key-file "$T/snapshot.key" >>"$T/keyed.log" 2>&1 &
	pid=$!
	SERVERS="$SERVERS $pid"
	disown $pid
	wait_for_server $pid "$T/keyed.sock" "$T/keyed.log" cr-tests || return 1
	cr_launch shm keyed || return 1
	cr_dump "$d" || return 1
	snap=cicada-gpu-$CR_PID
	[ -s "$d/$snap/manifest.mac" ] || return 1
	CICADA_SNAPSHOT_KEY_FILE=$T/snapshot.key timeout 60 "$B/bin/gpu-snapshot" verify "$d/$snap" >/dev/null || return 1
	mkdir -p "$T/keyed-forged" && cp -r "$d/." "$T/keyed-forged/" || return 1
	timeout 60 "$B/tests/snapshot/test_snapshot" reseal "$T/keyed-forged/$snap" || return 1
	out=$(CICADA_SNAPSHOT_KEY_FILE=$T/snapshot.key timeout 60 "$B/bin/gpu-snapshot" verify "$T/keyed-forged/$snap" 2>&1)
	[ "$(echo "$out" | wc -l)" = 1 ] && grep -q "does not match this server's key" <<<"$out" || { echo "$out"; return 1; }
	cr_restore "$T/keyed-forged" && return 1
	grep -q "does not match this server's key" "$T/keyed-forged/criu.err" || return 1
	cr_restore "$d" || return 1
	cr_finished
}

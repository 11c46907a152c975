# migrate-tests.sh: gpu-migrate between nodes, sourced by
# tests/run-tests.sh after cr-tests.sh (whose cr_launch, cr_finished and
# wait_for it uses). A node is a network namespace on a bridge (veth,
# 10.N.0.0/24) and a pid namespace, with its own gpu-server (the CPU
# stand-in, or the GPU) that accepts migrations; the test server "main"
# is node A. Without iproute2 (neither the system's nor the build's copy,
# tests/tools/ip) a node is a pid namespace
# alone, its server on another loopback port. The program, cr_pattern,
# prints a checksum after every step, changing a tenth of its device
# memory each step; wherever it ends, its output must be what a run that
# never moved prints.

MIG_STEPS=24
MIG_ARGS="$CICADA_KERNELS $CR_MIB $MIG_STEPS $CR_STEP_MS 10"
MIG_BR=cicbr$$
MIG_NET=10.$((100 + $$ % 150))
MIG_NODES=""

# mig_node NAME IP PORT [server options...]: node NAME with its server;
# sets MIG_ADDR_NAME (tcp:IP:PORT) and MIG_PID_NAME (its server).
mig_node() {
	local name=$1 ip=$2 port=$3 ns="" in_ns="" pid
	shift 3
	if command -v ip >/dev/null; then
		ns=cicada-m$name-$$
		if ! ip link show "$MIG_BR" >/dev/null 2>&1; then
			ip link add "$MIG_BR" type bridge && ip addr add "$MIG_NET.0.1/24" dev "$MIG_BR" &&
				ip link set "$MIG_BR" up || return 1
		fi
		ip netns add "$ns" && ip -n "$ns" link set lo up || return 1
		ip link add "vm$name$$" type veth peer name eth0 netns "$ns" &&
			ip link set "vm$name$$" master "$MIG_BR" up &&
			ip -n "$ns" addr add "$MIG_NET.0.$ip/24" dev eth0 && ip -n "$ns" link set eth0 up || return 1
		in_ns="nsenter --net=/run/netns/$ns"
		ip="$MIG_NET.0.$ip"
	else
		ip=127.0.0.1
	fi
	MIG_NODES="$MIG_NODES $name:$ns"
	$in_ns unshare --pid --fork --mount-proc env $DRIVER_ENV timeout -k 5 "$SERVER_DEADLINE" \
		"$B/bin/gpu-server" --listen "unix:$T/mig-$name.sock" --listen "tcp:$ip:$port" --token-file "$T/token" \
		--migration-token-file "$T/mtoken" \
		--cache-dir "$T/cache-mig-$name" --run-dir "$T/run-mig-$name" --workers 1 --accept-migrations \
		--migrate-timeout 20 "$@" >>"$T/mig-$name.log" 2>&1 &
	pid=$!
	SERVERS="$SERVERS $pid"
	disown $pid
	wait_for_server $pid "$T/mig-$name.sock" "$T/mig-$name.log" migrate-tests || return 1
	pid=$(pgrep -f "^$B/bin/gpu-server --listen unix:$T/mig-$name.sock" | head -n 1)
	SERVERS="$SERVERS $pid"
	eval "MIG_ADDR_$name=tcp:$ip:$port MIG_PID_$name=$pid"
}

mig_nodes_down() {
	local n
	pkill -9 -f "gpu-migrate .*--work-dir $T/" 2>/dev/null
	for n in $MIG_NODES; do
		pkill -9 -f "cache-dir $T/cache-mig-${n%%:*}" 2>/dev/null
		[ -n "${n#*:}" ] && ip netns del "${n#*:}" 2>/dev/null
	done
	ip link del "$MIG_BR" 2>/dev/null
	MIG_NODES=""
}

# migrate ARGS...: gpu-migrate as a user runs it, output in $T/mig.N.
MIG_N=0
migrate() {
	MIG_N=$((MIG_N + 1))
	MIG_LOG=$T/mig.$MIG_N
	CICADA_TOKEN_FILE=$T/token CICADA_MIGRATION_TOKEN_FILE=$T/mtoken \
		deadline "${MIG_DEADLINE:-90}" "$B/bin/gpu-migrate" "$@" --work-dir "$T/mig-work" \
		>"$MIG_LOG" 2>"$MIG_LOG.err"
}

# The application runs on: no staging left here, nothing left on the target.
mig_nothing_left() {
	[ -z "$(ls -A "$T/mig-work")" ] && [ -z "$(ls -d "$T"/run-mig-*/migrate-in-* 2>/dev/null)" ]
}

mig_launch() {
	cr_launch shm main "$PROGS/cr_pattern" $MIG_ARGS
}

mig_finished() {
	CR_REF=$T/mig.native cr_finished
}

mig_show_failure() {
	cat "$MIG_LOG" "$MIG_LOG.err" 2>/dev/null | tail -3
	diff "$MIG_REF" "$CR_OUT" | head -5
	tail -2 "$CR_OUT.err"
	for n in $MIG_NODES; do grep -h "warning\|error" "$T/mig-${n%%:*}.log" | tail -2; done
	for f in "$T"/run-mig-*/migrate-failed-*.log "$T"/mig-work/gpu-migrate-*-dump.log; do
		[ -f "$f" ] || continue
		echo "   criu's log $f:"
		grep -E "Error|cicada|Warn" "$f" | tail -8
		rm -f "$f"
	done
}

mig_case() {
	local what=$1; shift
	MIG_REF=$T/mig.native                # (what the output is compared with)
	if "$@"; then ok "$what"; else bad "$what"; mig_show_failure; fi
}

# The whole application, A to B: identical output; the source session
# ended; pre-copy rounds sent most of the device memory before the freeze.
mig_whole() {
	local total frozen pages
	pages=$(grep -c "its pages come to a criu page-server" "$T/mig-b.log")
	mig_launch || return 1
	migrate "$CR_PID" --to "${MIG_ADDR_b#tcp:}" --json "$@" || return 1
	total=$(sed -n 's/.*"bytes":\([0-9]*\).*/\1/p' "$MIG_LOG")
	frozen=$(sed -n 's/.*"frozen_bytes":\([0-9]*\).*/\1/p' "$MIG_LOG")
	echo "     $(sed -n 's/.*"downtime_s":\([0-9.]*\).*"rounds":\([0-9]*\).*/downtime \1 s, \2 pre-copy rounds/p' "$MIG_LOG"), $frozen of $total bytes sent frozen"
	grep -q '"ok":true,.*"mode":"whole".*"rounds":[1-9].*"streams":8' "$MIG_LOG" && [ "$frozen" -lt $((total / 3)) ] &&
		mig_finished && mig_nothing_left &&
		grep -q "migration from .*: restored as pid" "$T/mig-b.log" && grep -q "session .* released" "$T/main.log" &&
		mig_preloaded && mig_pages_went "$pages" "$@"
}

# mig_pages_went BEFORE [--no-page-server]: the pages went to the target's
# criu page-server while criu dumped them (one more started than BEFORE),
# or with --no-page-server none was started.
mig_pages_went() {
	local n
	n=$(grep -c "its pages come to a criu page-server" "$T/mig-b.log")
	if [ "${2:-}" = --no-page-server ]; then [ "$n" = "$1" ]; else [ "$n" -gt "$1" ]; fi ||
		{ echo "     page servers started on the target: $n (before: $1)"; return 1; }
}

# The page server's connection breaks as the dump begins: criu dump
# fails, one line, and the application goes on on A.
mig_pages_cut() {
	mig_launch || return 1
	CICADA_MIGRATE_FAULT=cutpages migrate "$CR_PID" --to "$MIG_ADDR_b" && return 1
	[ "$(wc -l <"$MIG_LOG.err")" = 1 ] && grep -q "^gpu-migrate: .*the application goes on where it was" "$MIG_LOG.err" &&
		mig_finished && wait_for "migration from .* failed" "$T/mig-b.log" 10 || return 1
	# (criu's log of the failed dump is kept, and named in the line)
	rm "$T"/mig-work/gpu-migrate-*-dump.log && mig_nothing_left
}

# The target's restore used the chunks its preloading worker wrote while
# the program still ran, and wrote only what had changed since; the
# frozen process's GPU snapshot was loaded there while criu still dumped
# it; each round's files were freed once loaded.
mig_preloaded() {
	local line
	line=$(grep -h "preload: .* chunks were used as they were" "$T/mig-b.log" | tail -n 1)
	echo "     target: ${line#*preload: }"
	[[ $line =~ ([0-9]+)\ of\ ([0-9]+)\ chunks.*\ ([0-9]+)\ pieces\ were\ in\ place ]] &&
		[ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] && [ "${BASH_REMATCH[3]}" -gt 0 ] &&
		grep -q "preload: the final snapshot loaded" "$T/mig-b.log" &&
		grep -q "preload: a pre-copy round loaded .*stored, [1-9][0-9]* freed" "$T/mig-b.log"
}

# Only the GPU state, A to B over TCP: the process stays, its session moves;
# with pre-copy rounds (the target preloads them) unless --no-precopy.
mig_gpu_only() {
	local rounds
	mig_launch || return 1
	migrate "$CR_PID" --to "$MIG_ADDR_b" --gpu-only "$@" || return 1
	rounds=$(sed -n 's/.*, \([0-9]*\) pre-copy rounds.*/\1/p' "$MIG_LOG")
	echo "     $(sed -n 's/.*moved (gpu-only) to [^:]*:[^:]*:[^:]*: //p' "$MIG_LOG")"
	grep -q "moved (gpu-only) to $MIG_ADDR_b: downtime" "$MIG_LOG" && kill -0 "$CR_PID" && mig_finished &&
		grep -q "client .*/$CR_PID reattached" "$T/mig-b.log" &&
		if [ "${1:-}" = --no-precopy ]; then [ "$rounds" = 0 ]; else [ "${rounds:-0}" -ge 1 ] &&
			grep -q "its GPU session is restored" "$T/mig-b.log"; fi
}

# mig_pinned_ref MODE: cr_pattern's undisturbed output with CR_PINNED=MODE
# (4 MiB of pinned memory it keeps using), in $T/mig.pinned-MODE.native.
mig_pinned_ref() {
	MIG_REF=$T/mig.pinned-$1.native
	[ -s "$MIG_REF" ] || env $DRIVER_ENV CR_PINNED=$1 timeout 120 "$PROGS/cr_pattern" $MIG_ARGS \
		>"$MIG_REF" 2>/dev/null
}

mig_pinned_launch() {
	mig_pinned_ref "$1" && cr_launch shm main env CR_PINNED="$1" "$PROGS/cr_pattern" $MIG_ARGS
}

# mig_pinned MODE [options]: a local (shared memory) client holding pinned
# memory (cuMemAllocHost, DEVICEMAP, registered) moves --gpu-only to
# another node: over TCP there its pinned memory becomes ordinary memory,
# the device's view of it a mirror at the same device address; the
# program finishes as if never moved.
mig_pinned() {
	local mode=$1; shift
	mig_pinned_launch "$mode" || return 1
	migrate "$CR_PID" --to "$MIG_ADDR_b" --gpu-only "$@" || return 1
	kill -0 "$CR_PID" && CR_REF=$MIG_REF cr_finished && grep -q "client .*/$CR_PID reattached" "$T/mig-b.log"
}

# mig_whole_pinned MODE: the same program moved whole to another node.
mig_whole_pinned() {
	mig_pinned_launch "$1" || return 1
	migrate "$CR_PID" --to "$MIG_ADDR_b" || return 1
	CR_REF=$MIG_REF cr_finished && mig_nothing_left
}

# mig_tls_node: node "tls", whose server also listens with TLS (a
# certificate for its address, MIG_TLS_CA); sets MIG_ADDR_tlsport.
mig_tls_node() {
	local ip=$MIG_NET.0.8 port=$((PORT + 27))
	command -v ip >/dev/null || ip=127.0.0.1
	timeout 60 openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$T/mig-tls.key" \
		-out "$T/mig-tls.crt" -days 2 -subj /CN=cicada-mig -addext "subjectAltName=IP:$ip" >/dev/null 2>&1 || return 1
	MIG_TLS_CA=$T/mig-tls.crt
	mig_node tls 8 $((PORT + 26)) --listen "tls:$ip:$port" --tls-cert "$T/mig-tls.crt" --tls-key "$T/mig-tls.key" ||
		return 1
	MIG_ADDR_tlsport=tls:$ip:$port
}

# mig_tls [gpu-migrate options]: a program that trusts the cluster's CA
# (CICADA_TLS_CA) moves to the TLS listener of node "tls"; its output is
# as if never moved. Whole moves send the pages to the page server
# through TLS too.
mig_tls() {
	local before
	before=$(grep -c "its pages come to a criu page-server" "$T/mig-tls.log")
	MIG_REF=$T/mig.native
	cr_launch shm main env CICADA_TLS_CA="$MIG_TLS_CA" "$PROGS/cr_pattern" $MIG_ARGS || return 1
	CICADA_TLS_CA=$MIG_TLS_CA migrate "$CR_PID" --to "$MIG_ADDR_tlsport" "$@" || return 1
	CR_REF=$MIG_REF cr_finished && mig_nothing_left || return 1
	case " $* " in
	*" --gpu-only "*) grep -q "client .*/$CR_PID reattached" "$T/mig-tls.log" ;;
	*) [ "$(grep -c "its pages come to a criu page-server" "$T/mig-tls.log")" -gt "$before" ] ;;
	esac
}

# Faults of a --gpu-only move of a program using mapped pinned memory,
# each with one line from gpu-migrate: the program goes on on A, its
# output as if never moved, and nothing is left on either side.
# mig_gpu_fault FAULT TARGET [options]: CICADA_MIGRATE_FAULT=FAULT.
mig_gpu_fault() {
	local fault=$1 to=$2; shift 2
	mig_pinned_launch devicemap || return 1
	CICADA_MIGRATE_FAULT=$fault migrate "$CR_PID" --to "$to" --gpu-only "$@" && return 1
	grep -q "^gpu-migrate: .*the application goes on where it was" "$MIG_LOG.err" && kill -0 "$CR_PID" &&
		CR_REF=$MIG_REF cr_finished && mig_nothing_left
}

# The target refuses a --gpu-only move (a wrong migration token).
mig_gpu_refused() {
	echo "not-the-token" >"$T/wrong-token"
	CICADA_MIGRATION_TOKEN_FILE=$T/wrong-token mig_gpu_fault none "$MIG_ADDR_b" \
		--migration-token-file "$T/wrong-token" && grep -q "wrong migration token" "$MIG_LOG.err"
}

# The link cut during a pre-copy round, once the session is paused, and
# while the target restores it.
mig_gpu_link_cut() {
	mig_gpu_fault cut:1000000 "$MIG_ADDR_b" && [ "$(wc -l <"$MIG_LOG.err")" = 1 ] &&
		mig_gpu_fault cutfrozen "$MIG_ADDR_b" && [ "$(wc -l <"$MIG_LOG.err")" = 1 ] &&
		mig_gpu_fault cutrestore "$MIG_ADDR_b"
}

# The target has too little device memory for the session.
mig_gpu_target_oom() {
	[ "$MODE" = cpu ] || return 0
	mig_gpu_fault none "$MIG_ADDR_small" && grep -q "GiB of device memory\|out of memory\|OUT_OF_MEMORY" "$MIG_LOG.err"
}

# The target cannot pin the session's mapped pinned memory (the stand-in
# refuses mapped registrations over 1 MiB there): the process cannot
# reattach, and resumes on A.
mig_gpu_cannot_map() {
	[ "$MODE" = cpu ] || return 0
	mig_gpu_fault none "$MIG_ADDR_nopin" --no-precopy && grep -q "could not reattach" "$MIG_LOG.err" &&
		grep -q "new worker cannot hold it" "$CR_OUT.err"
}

# mig_gpu_held WHAT: gpu-migrate --gpu-only stops before the RESUME (the
# session paused on A, restored on B); then WHAT is killed: B's workers
# (the process cannot reattach there and resumes on A), or gpu-migrate
# (its control connection closes: the process resumes on A; its guard
# removes the staging). The program finishes on A as if never moved.
mig_gpu_held() {
	local what=$1 m
	mig_pinned_launch devicemap || return 1
	rm -f "$T/mig-hold" "$T/mig-hold.held"
	MIG_N=$((MIG_N + 1))
	MIG_LOG=$T/mig.$MIG_N
	CICADA_MIGRATE_FAULT=hold CICADA_MIGRATE_HOLD=$T/mig-hold CICADA_TOKEN_FILE=$T/token \
		CICADA_MIGRATION_TOKEN_FILE=$T/mtoken deadline 90 "$B/bin/gpu-migrate" "$CR_PID" --to "$MIG_ADDR_b" \
		--gpu-only --work-dir "$T/mig-work-killed" >"$MIG_LOG" 2>"$MIG_LOG.err" &
	m=$!
	for _ in $(seq 600); do [ -e "$T/mig-hold.held" ] && break; sleep 0.05; done
	if [ "$what" = worker ]; then
		pkill -9 -f "gpu-server --worker-fd .*--cache-dir $T/cache-mig-b" || return 1
		touch "$T/mig-hold"
		wait "$m" && return 1
		grep -q "could not reattach" "$MIG_LOG.err" || return 1
	else
		pkill -9 -f "^$B/bin/gpu-migrate $CR_PID --to $MIG_ADDR_b --gpu-only" || return 1
		wait "$m" 2>/dev/null
	fi
	touch "$T/mig-hold"
	CR_REF=$MIG_REF cr_finished && for _ in $(seq 50); do [ -z "$(ls -A "$T/mig-work-killed")" ] && break; sleep 0.1; done &&
		[ -z "$(ls -A "$T/mig-work-killed")" ]
}

# gpu-migrate --gpu-only killed during a pre-copy round (its staging
# holds the round): the program finishes on A; its guard removes the
# staging.
mig_gpu_killed() {
	local m
	mig_pinned_launch devicemap || return 1
	# (no timeout wrapper: this kill is what is tested, and it comes at once)
	CICADA_MIGRATE_FAULT=stall:1000000 CICADA_TOKEN_FILE=$T/token CICADA_MIGRATION_TOKEN_FILE=$T/mtoken \
		"$B/bin/gpu-migrate" "$CR_PID" --to "$MIG_ADDR_b" --gpu-only --work-dir "$T/mig-work-killed" \
		>/dev/null 2>&1 &
	m=$!
	for _ in $(seq 100); do [ -n "$(ls -A "$T/mig-work-killed")" ] && break; sleep 0.05; done
	sleep 0.5
	[ -n "$(ls -A "$T/mig-work-killed")" ] || { kill -9 "$m"; return 1; }
	kill -9 "$m"
	wait "$m" 2>/dev/null
	CR_REF=$MIG_REF cr_finished && for _ in $(seq 50); do [ -z "$(ls -A "$T/mig-work-killed")" ] && break; sleep 0.1; done &&
		[ -z "$(ls -A "$T/mig-work-killed")" ]
}

# A whole move whose link breaks while the target restores the process.
mig_cut_restore() {
	mig_launch || return 1
	CICADA_MIGRATE_FAULT=cutrestore migrate "$CR_PID" --to "$MIG_ADDR_b" && return 1
	grep -q "^gpu-migrate: .*the application goes on where it was" "$MIG_LOG.err" && mig_finished &&
		wait_for "migration from .* failed\|no go from gpu-migrate" "$T/mig-b.log" 10 && mig_nothing_left
}

# A whole move onto the target's second GPU (--gpu 1): the preloading
# worker and the restore both put the program there.
mig_onto_gpu() {
	mig_launch || return 1
	migrate "$CR_PID" --to "${MIG_ADDR_duo#tcp:}" --gpu 1 || return 1
	mig_finished && grep -q "session GPUs: 2 (first: GPU 1 of the node)" "$T/mig-duo.log"
}

# A to B, then B to C, gpu-migrate run on B (in its namespaces).
mig_chain() {
	local pid
	mig_launch || return 1
	migrate "$CR_PID" --to "$MIG_ADDR_b" --json || return 1
	pid=$(sed -n 's/.*"new_pid":\([0-9]*\).*/\1/p' "$MIG_LOG")
	[ -n "$pid" ] || return 1
	wait_for "^step 8 " "$CR_OUT" 30 || return 1
	MIG_N=$((MIG_N + 1))
	MIG_LOG=$T/mig.$MIG_N
	CICADA_TOKEN_FILE=$T/token CICADA_MIGRATION_TOKEN_FILE=$T/mtoken \
		deadline 90 nsenter -t "$MIG_PID_b" -n -p -m "$B/bin/gpu-migrate" "$pid" \
		--to "$MIG_ADDR_c" --work-dir "$T/mig-work" >"$MIG_LOG" 2>"$MIG_LOG.err" || return 1
	grep -q "moved (whole) to $MIG_ADDR_c" "$MIG_LOG" && mig_finished &&
		grep -q "restored as pid" "$T/mig-c.log"
}

# The link breaks mid-transfer, during pre-copy or (--no-precopy) with the
# application frozen: one line, and the application finishes on A.
mig_link_cut() {
	local opt=${1:-}
	mig_launch || return 1
	CICADA_MIGRATE_FAULT=cut:1000000 migrate "$CR_PID" --to "$MIG_ADDR_b" $opt && return 1
	[ "$(wc -l <"$MIG_LOG.err")" = 1 ] && grep -q "^gpu-migrate: .*the application goes on where it was" "$MIG_LOG.err" &&
		mig_finished && wait_for "migration from .* failed" "$T/mig-b.log" 10 && mig_nothing_left
}

# The target has too little device memory: the restore fails there, A goes on.
mig_target_oom() {
	[ "$MODE" = cpu ] || return 0
	mig_launch || return 1
	migrate "$CR_PID" --to "$MIG_ADDR_small" && return 1
	grep -q "GiB of device memory" "$MIG_LOG.err" && mig_finished && mig_nothing_left
}

# The target is another GPU model (the stand-in as sm_100) and the
# program's kernels are sm_90 cubins without PTX: refused with one line
# that says so; the application finishes on A.
mig_other_model() {
	[ "$MODE" = cpu ] || return 0
	mig_launch || return 1
	migrate "$CR_PID" --to "$MIG_ADDR_sm100" && return 1
	grep -q "this GPU (sm_100) cannot run the program's kernels" "$MIG_LOG.err" && mig_finished && mig_nothing_left
}

# Refusals before anything is frozen: a wrong token, a server that does
# not accept migrations, another GPU of a one-GPU server, no such process.
mig_refused() {
	echo "not-the-token" >"$T/wrong-token"
	mig_launch || return 1
	CICADA_TOKEN_FILE=$T/token deadline 30 "$B/bin/gpu-migrate" "$CR_PID" --to "$MIG_ADDR_b" \
		--migration-token-file "$T/wrong-token" --work-dir "$T/mig-work" 2>"$T/mig.refused" && return 1
	grep -q "wrong migration token; the application goes on where it was" "$T/mig.refused" || return 1
	# the tenants' token is no migration token
	CICADA_TOKEN_FILE=$T/token deadline 30 "$B/bin/gpu-migrate" "$CR_PID" --to "$MIG_ADDR_b" \
		--migration-token-file "$T/token" --work-dir "$T/mig-work" 2>"$T/mig.refused" && return 1
	grep -q "wrong migration token; the application goes on where it was" "$T/mig.refused" || return 1
	migrate "$CR_PID" --to "127.0.0.1:$PORT" && return 1
	grep -q "does not accept migrations" "$MIG_LOG.err" || return 1
	migrate "$CR_PID" --to local --gpu 7 && return 1
	grep -q "CICADA_RESTORE_GPUS: '7' names no GPU of this server's" "$MIG_LOG.err" || return 1
	migrate 999999999 --to "$MIG_ADDR_b" && return 1
	grep -q "not a process id\|no process" "$MIG_LOG.err" && mig_finished && mig_nothing_left
}

# gpu-migrate killed while the application is frozen: its guard resumes it.
mig_killed() {
	local m
	mig_launch || return 1
	# (no timeout wrapper: this kill is what is tested, and it comes at once)
	CICADA_MIGRATE_FAULT=stall:1000000 CICADA_TOKEN_FILE=$T/token CICADA_MIGRATION_TOKEN_FILE=$T/mtoken \
		"$B/bin/gpu-migrate" "$CR_PID" \
		--to "$MIG_ADDR_b" --no-precopy --work-dir "$T/mig-work-killed" >/dev/null 2>&1 &
	m=$!
	for _ in $(seq 100); do
		[ "$(awk '{ print $3 }' "/proc/$CR_PID/stat" 2>/dev/null)" = T ] && break
		sleep 0.05
	done
	sleep 0.3
	kill -9 "$m"
	wait "$m" 2>/dev/null
	mig_finished && [ -z "$(ls -A "$T/mig-work-killed")" ]   # (the guard removed the images)
}

# On a GPU: 8 GiB of device memory, a tenth rewritten every 100 ms (for
# 30 s, longer than the move), moved between two servers on the one GPU
# with pre-copy; the downtime is shown.
# mig_big [--gpu-only]: the whole application, or only its GPU state.
mig_big() {
	local args="$CICADA_KERNELS ${CICADA_MIGRATE_BIG_MIB:-8192} 300 100 10"
	MIG_REF=$T/mig.big.native
	[ -s "$T/mig.big.native" ] ||
		env $DRIVER_ENV timeout 300 "$PROGS/cr_pattern" $args >"$T/mig.big.native" 2>/dev/null || return 1
	cr_launch shm main "$PROGS/cr_pattern" $args || return 1
	MIG_DEADLINE=320 migrate "$CR_PID" --to "$MIG_ADDR_b" --json --timeout 300 "$@" || return 1
	echo "     $(sed -n 's/.*"downtime_s":\([0-9.]*\),"total_s":\([0-9.]*\),"bytes":\([0-9]*\),"frozen_bytes":\([0-9]*\).*"rounds":\([0-9]*\),"dump_s":\([0-9.]*\),"send_s":\([0-9.]*\),"restore_s":\([0-9.]*\).*/downtime \1 s (dump \6, send \7, restore \8), total \2 s, \3 bytes (\4 frozen), \5 rounds/p' "$MIG_LOG")"
	CR_REF=$T/mig.big.native cr_finished
}

# gpu-migrate dies after the target restored the copy, before its go: the
# copy there is ended (its GPU session too), and the application (its
# guard resumes it) finishes on A: it never runs twice.
# A job of two processes sharing device memory (ipc_pair: CUDA IPC memory
# and an event, the child holding them open) moves whole to B: both
# processes and both GPU states; there the child opens them again and
# both end as if never moved.
mig_ipc() {
	ipc_pair_hold_lines >"$T/mig-ipc.ref"
	CR_OUT=$T/mig-ipc.out
	env $(cicada_env shm main) setsid "$PROGS/ipc_pair" hold </dev/null >"$CR_OUT" 2>"$CR_OUT.err" &
	CR_PID=$!
	wait_for "^child: holding" "$CR_OUT" 30 || { kill -9 $CR_PID; return 1; }
	migrate "$CR_PID" --to "${MIG_ADDR_b#tcp:}" || { kill -9 $CR_PID; return 1; }
	wait $CR_PID 2>/dev/null
	CR_REF=$T/mig-ipc.ref cr_finished && mig_nothing_left && grep -q "opened again the CUDA IPC" "$T/mig-b.log"
}

mig_nogo() {
	mig_launch || return 1
	CICADA_MIGRATE_FAULT=nogo migrate "$CR_PID" --to "$MIG_ADDR_b" && return 1
	mig_finished && wait_for "no go from gpu-migrate; the restored pid .* is ended" "$T/mig-b.log" 10 &&
		wait_for "the restored session .* is ended" "$T/mig-b.log" 10 && mig_nothing_left
}

run_migrate_tests() {
	local n any=""
	for n in $TESTS; do case $n in migrate-*) want "$n" && any=1 ;; esac; done
	[ -n "$any" ] || return
	if ! deadline 60 "$CRIU" check >/dev/null 2>&1; then
		bad "criu check fails here ($CRIU); migration tests skipped"
		return
	fi
	mkdir -p "$T/mig-work" "$T/mig-work-killed"
	env $DRIVER_ENV timeout 120 "$PROGS/cr_pattern" $MIG_ARGS >"$T/mig.native" 2>/dev/null ||
		{ bad "cr_pattern natively"; return; }
	mig_node b 2 $((PORT + 20)) && mig_node c 3 $((PORT + 21)) ||
		{ bad "cannot set up the nodes (namespaces)"; mig_nodes_down; return; }
	want migrate-whole && mig_case "gpu-migrate: the whole application to another node, its pages by criu's page server, output identical" mig_whole
	want migrate-whole && mig_case "gpu-migrate --no-page-server: the pages with the images, output identical" \
		mig_whole --no-page-server
	want migrate-link-cut && mig_case "gpu-migrate: the page server's link cut as the dump begins, one line, it finishes on A" \
		mig_pages_cut
	want migrate-gpu-only && mig_case "gpu-migrate --gpu-only: the GPU state to another node over TCP, pre-copied while it runs, output identical" \
		mig_gpu_only
	want migrate-gpu-only && mig_case "gpu-migrate --gpu-only --no-precopy: the GPU state to another node, output identical" \
		mig_gpu_only --no-precopy
	for m in alloc devicemap register managed; do
		want migrate-pinned && mig_case "gpu-migrate --gpu-only: pinned memory ($m) of a local client to another node, output identical" \
			mig_pinned $m
	done
	want migrate-pinned && mig_case "gpu-migrate --gpu-only --no-precopy: mapped pinned memory to another node, output identical" \
		mig_pinned devicemap --no-precopy
	for m in devicemap managed; do
		want migrate-pinned && mig_case "gpu-migrate: a program with $m memory moved whole to another node, output identical" \
			mig_whole_pinned $m
	done
	want migrate-chain && mig_case "gpu-migrate: A to B, then B to C (run on B), output identical" mig_chain
	want migrate-link-cut && mig_case "gpu-migrate: the link cut during pre-copy, one line, the application finishes on A" \
		mig_link_cut
	want migrate-link-cut && mig_case "gpu-migrate --no-precopy: the link cut while the application is frozen, one line, it finishes on A" \
		mig_link_cut --no-precopy
	want migrate-link-cut && mig_case "gpu-migrate: the link cut while the target restores, the application finishes on A" \
		mig_cut_restore
	want migrate-gpu-faults && mig_case "gpu-migrate --gpu-only: refused by the target, the program (mapped pinned memory) finishes on A" \
		mig_gpu_refused
	want migrate-gpu-faults && mig_case "gpu-migrate --gpu-only: the link cut in pre-copy, while paused, while restoring: each time it finishes on A" \
		mig_gpu_link_cut
	want migrate-gpu-faults && mig_case "gpu-migrate --gpu-only: the target's workers killed before the reattach, it resumes and finishes on A" \
		mig_gpu_held worker
	want migrate-gpu-faults && mig_case "gpu-migrate --gpu-only killed during pre-copy: the program finishes on A, no staging left" \
		mig_gpu_killed
	want migrate-gpu-faults && mig_case "gpu-migrate --gpu-only killed while the session is paused: it resumes and finishes on A, no staging left" \
		mig_gpu_held migrate
	if [ "$MODE" = cpu ] && want migrate-target-oom; then
		DRIVER_ENV="$DRIVER_ENV FAKECUDA_TOTAL_MIB=16" mig_node small 4 $((PORT + 22)) &&
			mig_case "gpu-migrate: a target with too little device memory, the application finishes on A" \
				mig_target_oom
	fi
	if [ "$MODE" = cpu ] && want migrate-gpu-faults; then
		{ [ -n "${MIG_PID_small:-}" ] || DRIVER_ENV="$DRIVER_ENV FAKECUDA_TOTAL_MIB=16" mig_node small 4 $((PORT + 22)); } &&
			mig_case "gpu-migrate --gpu-only: a target with too little device memory, the program finishes on A" \
				mig_gpu_target_oom
		DRIVER_ENV="$DRIVER_ENV FAKECUDA_MAPPED_MAX_MIB=1" mig_node nopin 7 $((PORT + 25)) &&
			mig_case "gpu-migrate --gpu-only: a target that cannot pin the session's mapped pinned memory, the program finishes on A" \
				mig_gpu_cannot_map
	fi
	if [ "$MODE" = cpu ] && want migrate-other-model; then
		DRIVER_ENV="$DRIVER_ENV FAKECUDA_CC=10.0" mig_node sm100 5 $((PORT + 23)) &&
			mig_case "gpu-migrate: a target GPU model that cannot run the program's sm_90 cubins: refused with one line, the application finishes on A" \
				mig_other_model
	fi
	if [ "$MODE" = cpu ] && want migrate-gpu; then
		DRIVER_ENV="$DRIVER_ENV FAKECUDA_DEVICES=2" mig_node duo 6 $((PORT + 24)) &&
			mig_case "gpu-migrate --gpu 1: the whole application onto the target's second GPU, output identical" \
				mig_onto_gpu
	fi
	if want migrate-tls; then
		mig_tls_node || bad "cannot set up the TLS node"
		mig_case "gpu-migrate --gpu-only over TLS: the program reattaches there, output identical" mig_tls --gpu-only
		mig_case "gpu-migrate over TLS: the whole application, its pages too, output identical" mig_tls
	fi
	want migrate-refused && mig_case "gpu-migrate: wrong token, a server not taking migrations, a GPU it lacks, no such process: refused with one line, nothing frozen" \
		mig_refused
	want migrate-killed && mig_case "gpu-migrate killed mid-transfer: the application resumes on A and finishes, no images left" \
		mig_killed
	want migrate-killed && mig_case "gpu-migrate dead before the go: the copy on B is ended, the application finishes on A, no images left" \
		mig_nogo
	want migrate-ipc && mig_case "gpu-migrate: a job of two processes sharing device memory by CUDA IPC moves whole to B, both end right" \
		mig_ipc
	[ "$MODE" = gpu ] && want migrate-big && mig_case "gpu-migrate: 8 GiB, a tenth rewritten while it moves, between two servers on the GPU, output identical" \
		mig_big
	[ "$MODE" = gpu ] && want migrate-big && mig_case "gpu-migrate --gpu-only: the GPU state of 8 GiB, a tenth rewritten while it moves, output identical" \
		mig_big --gpu-only
	mig_nodes_down
}

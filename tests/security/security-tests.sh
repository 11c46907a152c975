# security-tests.sh: the hostile-tenant suite, sourced by tests/run-tests.sh
# (which defines ok/bad/check, want, $T, $B, $PROGS, $TOOLS, $PORT,
# $MODE, $DRIVER_ENV, $SERVERS, and through cr-tests.sh wait_for).
#
# The suite runs as root, as CI does, and so do its gpu-servers; tenants
# are other unix users: nobody (the attacker, "A") and daemon (a second
# tenant, "B"), through setpriv. Each test attacks what one fix defends:
#
#   sec-shm-race          a client rewrites its shared-memory segment's
#                         header under the worker to read the worker's
#                         memory (the snapshot key); unsealed memfds
#   sec-checkpoint-theft  B restores A's snapshot: from A's directory,
#                         through links; A restores its own
#   sec-parent            a snapshot whose manifest names an absolute or
#                         far parent, or one reached through a link
#   sec-verify-key        gpu-snapshot verify of a keyed snapshot without
#                         the key, with --no-key, with the key
#   sec-ipc-users         CUDA IPC handles of A opened by A and by B
#   sec-privsep           who the workers run as, and who may read them
#   sec-jam-unix, sec-jam-tcp
#                         A pauses its own session and asks 250 times for
#                         its checkpoint without the directory; B must
#                         still get a session within 1 s
#   sec-flood             1,000 hostile connections of every kind from A;
#                         B within 1 s, and the server serves on
#   sec-migrate-token     OP_MIGRATE proving the tenants' token, or from a
#                         tenant over unix, is refused
#   sec-ctl-squat         A binds the control sockets' names of the next
#                         pids; root's program starts among them and is
#                         checkpointed: A is never asked
#
# Each test prints one ok or FAIL line (details indented below it). Every
# process has a deadline (timeout), and every server SEC_SERVER_S; the
# tests stop their own servers and programs, by pid, when done.

SEC_SERVER_S=300
SEC_NB="setpriv --reuid=nobody --regid=nogroup --clear-groups"
SEC_DM="setpriv --reuid=daemon --regid=daemon --clear-groups"
SEC_FRESH_MS=1000                        # a fresh client's session, at worst
SEC_COPY=4096                            # the bytes of one of shm_race's copies (its COPY)

# sec_can WHAT: whether this host can run the tests (root, setpriv, the
# users nobody and daemon, the tools); if not, says "skipped" and why.
sec_can() {
	local why="" t
	[ "$(id -u)" = 0 ] || why="not root"
	command -v setpriv >/dev/null || why="no setpriv"
	getent passwd nobody >/dev/null && getent passwd daemon >/dev/null && getent group nogroup >/dev/null ||
		why="no users nobody and daemon"
	for t in shm_race snap_request flood snap_forge first_call fault_client ctl_squat; do
		[ -x "$TOOLS/$t" ] || why="$TOOLS/$t is missing (make)"
	done
	[ -z "$why" ] && return 0
	ok "$1: skipped ($why)"
	return 1
}

# sec_server NAME PORT [OPTION...]: a gpu-server on $T/NAME.sock (0666:
# the tenants may dial it) and tcp PORT, with its own cache and run
# directories; a running one is kept. $T/NAME.pid holds its pid.
sec_server() {
	local name=$1 port=$2 pid
	shift 2
	[ -S "$T/$name.sock" ] && kill -0 "$(cat "$T/$name.pid" 2>/dev/null)" 2>/dev/null && return 0
	mkdir -p "$T/run-$name" && chmod 700 "$T/run-$name"
	env $DRIVER_ENV timeout -k 5 "$SEC_SERVER_S" "$B/bin/gpu-server" --listen "unix:$T/$name.sock" \
		--listen "tcp:127.0.0.1:$port" --token-file "$T/token" --cache-dir "$T/cache-$name" \
		--run-dir "$T/run-$name" --workers 2 --refill-delay 0 "$@" >>"$T/$name.log" 2>&1 &
	pid=$!
	SERVERS="$SERVERS $pid"
	disown $pid
	wait_for_server $pid "$T/$name.sock" "$T/$name.log" security || return 1
	pid=$(pgrep -P $pid | head -n 1)
	SERVERS="$SERVERS $pid"
	echo "$pid" >"$T/$name.pid"
	echo "$port" >"$T/$name.port"
	chmod 666 "$T/$name.sock"
}

# sec_stop NAME: server NAME and its workers, by pid.
sec_stop() {
	local pid
	pid=$(cat "$T/$1.pid" 2>/dev/null) || return 0
	kill -9 $pid $(pgrep -P "$pid") 2>/dev/null
	rm -f "$T/$1.pid" "$T/$1.sock"
}

# sec_alive NAME: server NAME still runs.
sec_alive() {
	kill -0 "$(cat "$T/$1.pid" 2>/dev/null)" 2>/dev/null
}

# The server of most tests: keyed snapshots (the key is the secret that
# sec-shm-race tries to steal), TCP tenants run as daemon.
sec_main() {
	mkdir -p "$T/sec"
	[ -s "$T/sec/key" ] || (umask 077 && head -c 32 /dev/urandom | base64 >"$T/sec/key")
	sec_server sec $((PORT + 70)) --snapshot-key-file "$T/sec/key" --user daemon
}

# sec_env NAME TRANSPORT: a client's environment for server NAME.
sec_env() {
	case $2 in
	unix) echo "CICADA_SERVER=unix:$T/$1.sock LD_LIBRARY_PATH=$B/lib" ;;
	tcp) echo "CICADA_SERVER=tcp:127.0.0.1:$(cat "$T/$1.port") CICADA_TOKEN_FILE=$T/token LD_LIBRARY_PATH=$B/lib" ;;
	esac
}

# sec_fresh NAME TIMES: a fresh client of tenant daemon (first_call: its
# session and first calls) TIMES times, 0.3 s apart, against server NAME
# over unix. SEC_TIMES: their times in ms; SEC_WORST the worst (99999
# for one not served).
sec_fresh() {
	local out ms
	SEC_TIMES="" SEC_WORST=0
	for _ in $(seq "$2"); do
		out=$(env $(sec_env "$1" unix) timeout 10 $SEC_DM "$TOOLS/first_call" 2>&1)
		ms=$(sed -n 's/^first_call: served in \([0-9]*\) ms$/\1/p' <<<"$out")
		[ -n "$ms" ] || ms=99999
		SEC_TIMES="$SEC_TIMES $ms"
		[ "$ms" -gt "$SEC_WORST" ] && SEC_WORST=$ms
		sleep 0.3
	done
}

# sec_serves NAME: a fresh program of tenant daemon runs to its end on
# server NAME (vecadd_cubin).
sec_serves() {
	env $(sec_env "$1" unix) timeout 60 $SEC_DM "$PROGS/vecadd_cubin" 2>&1 | grep -q "vecadd_cubin: PASS"
}

# sec_victim NAME TRANSPORT: a program of tenant nobody in a session on
# server NAME (fault_client, calling for 30 s), ready; SEC_VICTIM is its
# pid, SEC_VICTIM_T its deadline's.
sec_victim() {
	local out=$T/sec/victim.$1
	env $(sec_env "$1" "$2") timeout 60 $SEC_NB "$TOOLS/fault_client" expect-success 30 >"$out" 2>&1 &
	SEC_VICTIM_T=$!
	wait_for "ready" "$out" 20 || return 1
	SEC_VICTIM=$(pgrep -P $SEC_VICTIM_T)
}

sec_victim_end() {
	kill -9 ${SEC_VICTIM:-} ${SEC_VICTIM_T:-} 2>/dev/null
	wait ${SEC_VICTIM_T:-} 2>/dev/null
	SEC_VICTIM="" SEC_VICTIM_T=""
}

# sec_request USER ARGS...: snap_request as USER (nobody, daemon, root);
# its one line.
sec_request() {
	local who=$1
	shift
	case $who in
	nobody) timeout 60 $SEC_NB "$TOOLS/snap_request" "$@" 2>&1 ;;
	daemon) timeout 60 $SEC_DM "$TOOLS/snap_request" "$@" 2>&1 ;;
	*) timeout 60 "$TOOLS/snap_request" "$@" 2>&1 ;;
	esac
}

# sec_restored LINE: a restore's answer was a session (its ticket, which
# is released again by tenant nobody).
sec_restored() {
	local ticket
	ticket=$(sed -n 's/.*refused=0 message=.* ticket=\([0-9a-f]\{32\}\)$/\1/p' <<<"$1")
	[ -n "$ticket" ] || return 1
	sec_request nobody release "unix:$T/sec.sock" "$ticket" >/dev/null
}

# ---- sec-shm-race ----------------------------------------------------

# sec_aim PID KEY OUT: as root, where the key lies in worker PID's memory
# (its heap, its own image and anonymous memory: never a device's), as
# offsets from its shared-memory segment of windows of $SEC_COPY bytes
# that hold it (OUT, for shm_race). Fails if the key is not there (the
# attack would prove nothing).
sec_aim() {
	timeout 60 python3 - "$@" "$SEC_COPY" <<'PY'
import os, re, sys
pid, key, out, copy = int(sys.argv[1]), open(sys.argv[2], "rb").read().rstrip(b"\r\n "), sys.argv[3], int(sys.argv[4])
seg, regions = None, []
for line in open("/proc/%d/maps" % pid):
    f = line.split()
    lo, hi = (int(x, 16) for x in f[0].split("-"))
    if seg is None and "memfd:cicada-shm" in line:
        seg = lo
    path = f[5] if len(f) > 5 else ""
    if f[1].startswith("r") and hi - lo < 1 << 30 and (path in ("", "[heap]") or path.endswith("gpu-server")):
        regions.append((lo, hi))
starts = []
with open("/proc/%d/mem" % pid, "rb", 0) as mem:
    for lo, hi in regions:
        try:
            mem.seek(lo)
            data = mem.read(hi - lo)
        except OSError:
            continue
        starts += [max(lo, min(lo + m.start() - 256, hi - copy)) for m in re.finditer(re.escape(key), data)]
if seg is None or not starts:
    print("     the worker has %s and the key %s" % ("no segment" if seg is None else "its segment",
          "nowhere in its memory" if not starts else "in it"))
    sys.exit(1)
with open(out + ".tmp", "w") as f:
    f.write(" ".join("%x" % ((s - seg) % (1 << 64)) for s in starts[:8]) + "\n")
os.chmod(out + ".tmp", 0o644)
os.rename(out + ".tmp", out)
print("     worker %d: segment at %#x, the key at %s" % (pid, seg, ", ".join("%#x" % (s + 256) for s in starts[:8])))
PY
}

# sec_leaked KEY FILE: FILE holds 16 bytes in a row of the key.
sec_leaked() {
	timeout 60 python3 - "$1" "$2" <<'PY'
import sys
key, data = open(sys.argv[1], "rb").read().rstrip(b"\r\n "), open(sys.argv[2], "rb").read()
sys.exit(0 if any(key[i:i + 16] in data for i in range(len(key) - 15)) else 1)
PY
}

# A client rewrites the staging geometry and pipe offsets of its segment's
# header (a second thread, steadily and flapping) while staging copies to
# the device and reading them back, aimed at the worker's copy of the
# snapshot key (workers run without ASLR: a tenant can know the layout;
# here root finds it for the attacker). Nothing of the key may come back
# (the worker uses the geometry it copied at attach), every read-back
# must be the client's own bytes, unsealed memfds (a pinned region, a
# second segment) are refused, and the attacker's session, the server
# and a fresh client are fine afterwards.
test_sec_shm_race() {
	local d=$T/sec/race out rc aim
	want sec-shm-race || return
	sec_can "shared-memory header race" || return
	sec_main || { bad "shm race: no server"; return; }
	mkdir -p "$d" && chown nobody:nogroup "$d" && rm -f "$d/targets" "$d/dump"
	out=$d/out
	timeout 60 $SEC_NB "$TOOLS/shm_race" "unix:$T/sec.sock" 2 "$d/dump" "$d/targets" >"$out" 2>&1 &
	local pid=$!
	wait_for "attached worker=" "$out" 20
	aim=$(sec_aim "$(sed -n 's/.*attached worker=\([0-9]*\).*/\1/p' "$out")" "$T/sec/key" "$d/targets")
	local aimed=$?
	wait $pid
	rc=$?
	echo "$aim"
	sed -n 's/^shm_race: [0-9]* copies/     &/p' "$out"
	if [ $aimed -eq 0 ] && [ $rc -eq 0 ] && [ -s "$d/dump" ] && ! sec_leaked "$T/sec/key" "$d/dump" &&
		! sec_leaked "$T/sec/key" "$out" && sec_alive sec && sec_serves sec; then
		ok "shm race: a client rewriting its segment's header under the worker reads back only its own bytes, never the key; unsealed memfds refused; all serve on"
	else
		bad "shm race (aimed $aimed, exit $rc, key leaked: $(sec_leaked "$T/sec/key" "$d/dump" && echo YES || echo no))"
		tail -n 3 "$out"
	fi
	rm -f "$d/dump"
}

# ---- snapshots of tenant nobody's session (sec-checkpoint-theft,
# sec-parent, sec-verify-key) -------------------------------------------

# sec_dir PATH OWNER MODE: a directory of OWNER's.
sec_dir() {
	mkdir -p "$1" && chown "$2" "$1" && chmod "$3" "$1"
}

# sec_snapshots: once, on server sec: tenant nobody's program (cr_pattern)
# paused by its own user; nobody checkpoints it into its own directory
# $T/sec/a/s1 (snapshot cicada-gpu, keyed), and root, as CRIU's plugin
# would, an incremental one into $T/sec/a/s2 whose parent is
# ../../s1/cicada-gpu. Then the program resumes and is ended.
sec_snapshots() {
	local a=$T/sec/a out=$T/sec/app.out t app ticket rc=1
	[ -s "$a/s2/cicada-gpu/manifest" ] && return 0
	sec_main || return 1
	sec_dir "$a" nobody:nogroup 755 && sec_dir "$a/s1" nobody:nogroup 755 && sec_dir "$a/s2" nobody:nogroup 755
	env $(sec_env sec unix) timeout 60 $SEC_NB "$PROGS/cr_pattern" "$CICADA_KERNELS" 4 100 100 >"$out" 2>&1 &
	t=$!
	wait_for "^step 2 " "$out" 30 && app=$(pgrep -P $t)
	touch "$T/sec/hold" && chmod 644 "$T/sec/hold"
	timeout 60 $SEC_NB "$TOOLS/snap_request" pause "${app:-0}" "$T/sec/hold" >"$T/sec/pause.out" 2>&1 &
	local holder=$!
	wait_for "ticket=" "$T/sec/pause.out" 20
	ticket=$(sed -n 's/.*ticket=//p' "$T/sec/pause.out")
	SEC_A_CKPT=$(sec_request nobody checkpoint "unix:$T/sec.sock" "$ticket" "$a/s1" cicada-gpu)
	SEC_R_CKPT=$(sec_request root checkpoint "unix:$T/sec.sock" "$ticket" "$a/s2" cicada-gpu ../../s1/cicada-gpu)
	grep -q "refused=0" <<<"$SEC_A_CKPT" && grep -q "refused=0" <<<"$SEC_R_CKPT" && rc=0
	rm -f "$T/sec/hold"
	wait $holder
	kill -9 ${app:-} $t 2>/dev/null
	wait $t 2>/dev/null
	[ $rc -eq 0 ] || echo "     checkpoints: $SEC_A_CKPT | $SEC_R_CKPT"
	return $rc
}

# sec_shared: A's snapshots readable by all, as a careless tenant leaves
# them: only the server's owner check stands in B's way.
sec_shared() {
	chown -R nobody:nogroup "$T/sec/a" && chmod -R a+rX "$T/sec/a"
}

# Tenant B (daemon) restores tenant A's (nobody's) snapshot: from A's
# directory (readable by all), through a link in B's own directory to it,
# and through links to a copy root made in a root-only directory and to
# nothing there: each refused, the last two in the same words (nothing
# said of what exists). A restores its own: a session.
test_sec_checkpoint_theft() {
	local b=$T/sec/b r=$T/sec/root theirs linked stolen ghost own fails=""
	want sec-checkpoint-theft || return
	sec_can "checkpoint theft" || return
	sec_snapshots || { bad "checkpoint theft: tenant nobody could not checkpoint its own paused session"; return; }
	sec_shared
	sec_dir "$b" daemon:daemon 755 && sec_dir "$r" root:root 700
	rm -rf "${b:?}"/* "$r/copy" && cp -r "$T/sec/a/s1/cicada-gpu" "$r/copy"
	$SEC_DM ln -s "$T/sec/a/s1/cicada-gpu" "$b/linked"
	$SEC_DM ln -s "$r/copy" "$b/stolen"
	$SEC_DM ln -s "$r/none" "$b/ghost"
	theirs=$(sec_request daemon restore "unix:$T/sec.sock" "$T/sec/a/s1" cicada-gpu)
	linked=$(sec_request daemon restore "unix:$T/sec.sock" "$b" linked)
	stolen=$(sec_request daemon restore "unix:$T/sec.sock" "$b" stolen)
	ghost=$(sec_request daemon restore "unix:$T/sec.sock" "$b" ghost)
	own=$(sec_request nobody restore "unix:$T/sec.sock" "$T/sec/a/s1" cicada-gpu)
	grep -q "refused=1 message=this snapshot belongs to another user" <<<"$theirs" || fails="$fails from A's directory;"
	grep -q "refused=1 message=.*symbolic link" <<<"$linked" || fails="$fails through a link;"
	grep -q "refused=1" <<<"$stolen" && grep -q "refused=1" <<<"$ghost" || fails="$fails root's copy;"
	[ "${stolen//stolen/NAME}" = "${ghost//ghost/NAME}" ] || fails="$fails an existing copy and none told apart;"
	sec_restored "$own" || fails="$fails the owner's own restore;"
	printf '     %s\n' "$theirs" "$linked" "$stolen" "$ghost" "$own"
	check "checkpoint theft: tenant daemon cannot restore nobody's snapshot (its directory, a link, root's copy), nothing said of what exists; nobody restores its own${fails:+ (failed:$fails)}" \
		test -z "$fails"
}

# sec_forge PARENT: A's incremental snapshot names PARENT, its manifest
# signed again with the server's key (so that only the rules on parents
# refuse it), and A's again.
sec_forge() {
	CICADA_SNAPSHOT_KEY_FILE=$T/sec/key "$TOOLS/snap_forge" "$T/sec/a/s2/cicada-gpu" "$1" >/dev/null && sec_shared
}

# A snapshot of tenant nobody whose manifest names an absolute parent
# (the same snapshot, so that its checksum matches), or one three levels
# up, or whose parent is reached through a symbolic link on the way, is
# refused; mended, the same snapshot restores (the refusals were theirs).
test_sec_parent() {
	local abs up link mended a=$T/sec/a
	want sec-parent || return
	sec_can "snapshot parents" || return
	sec_snapshots || { bad "snapshot parents: tenant nobody could not checkpoint its paused session"; return; }
	sec_forge "$a/s1/cicada-gpu" && abs=$(sec_request nobody restore "unix:$T/sec.sock" "$a/s2" cicada-gpu)
	sec_forge "../../../a/s1/cicada-gpu" && up=$(sec_request nobody restore "unix:$T/sec.sock" "$a/s2" cicada-gpu)
	sec_forge "../../s1/cicada-gpu" && mv "$a/s1" "$a/s1.real" && ln -s s1.real "$a/s1" &&
		link=$(sec_request nobody restore "unix:$T/sec.sock" "$a/s2" cicada-gpu)
	rm -f "$a/s1" && mv "$a/s1.real" "$a/s1"
	mended=$(sec_request nobody restore "unix:$T/sec.sock" "$a/s2" cicada-gpu)
	printf '     %s\n' "absolute: $abs" "three up: $up" "through a link: $link" "mended: $mended"
	if grep -q "refused=1 message=.*parent" <<<"$abs" && grep -q "refused=1 message=.*parent" <<<"$up" &&
		grep -q "refused=1 message=.*parent" <<<"$link" && sec_restored "$mended"; then
		ok "snapshot parents: an absolute one, one three levels up, one through a link are refused; the mended snapshot restores"
	else
		bad "snapshot parents"
	fi
}

# gpu-snapshot verify of tenant nobody's keyed snapshot: without the key
# it fails, saying its codes were not checked; with --no-key it passes
# saying so (codes NOT checked); with the key every code is checked.
test_sec_verify_key() {
	local s=$T/sec/a/s1 nokey flag key rc1 rc2 rc3
	want sec-verify-key || return
	sec_can "verify without the key" || return
	sec_snapshots || { bad "verify without the key: no keyed snapshot"; return; }
	nokey=$(timeout 60 "$B/bin/gpu-snapshot" verify "$s" 2>&1)
	rc1=$?
	flag=$(timeout 60 "$B/bin/gpu-snapshot" verify "$s" --no-key 2>&1)
	rc2=$?
	key=$(CICADA_SNAPSHOT_KEY_FILE=$T/sec/key timeout 60 "$B/bin/gpu-snapshot" verify "$s" 2>&1)
	rc3=$?
	printf '     exit %s: %s\n' "$rc1" "$nokey" "$rc2" "$flag" "$rc3" "$key"
	check "gpu-snapshot verify of a keyed snapshot: without the key an error (codes not checked), --no-key passes saying codes NOT checked, with the key all checked" \
		test "$rc1" -ne 0 -a "$rc2" -eq 0 -a "$rc3" -eq 0 -a \
		"$(grep -ciE "codes (cannot be|were not|NOT) checked" <<<"$nokey")" -ge 1 -a \
		"$(grep -c "codes NOT checked" <<<"$flag")" -ge 1 -a "$(grep -c "codes checked under the key" <<<"$key")" -ge 1
}

# ---- sec-ipc-users ------------------------------------------------------

# The lines ipc_pair events prints (natively, on a GPU node).
sec_ipc_reference() {
	if [ "$MODE" = gpu ]; then
		env $DRIVER_ENV timeout 120 "$PROGS/ipc_pair" events >"$1" 2>/dev/null
	else
		printf '%s\n' "parent: 2097152 values of 7, handed to a child with an interprocess event" \
			"child: a damaged handle is refused" "child: every value is the parent's: yes" \
			"child: added one to each, closed the handle" "parent: sees the child's writes: yes" "done" >"$1"
	fi
}

# sec_ipc_open USER ARGS...: ipc_pair --child ARGS as USER; its output and
# exit status.
sec_ipc_open() {
	local who=$1
	shift
	env $(sec_env sec unix) timeout 60 setpriv --reuid="$who" --regid="$([ "$who" = nobody ] && echo nogroup || echo "$who")" \
		--clear-groups "$PROGS/ipc_pair" --child "$@" 2>&1
	echo "exit $?"
}

# CUDA IPC between users: ipc_pair's two processes both of tenant nobody
# run as natively; while nobody's child holds the handles open (hold),
# its handles, read off its command line as any user may, opened by
# tenant daemon are refused (memory and event: a CUDA error, no crash),
# and by nobody work.
test_sec_ipc_users() {
	local out=$T/sec/ipc hold t parent child mem ev theirs theirs_ev same
	want sec-ipc-users || return
	sec_can "IPC between users" || return
	sec_main || { bad "IPC between users: no server"; return; }
	sec_ipc_reference "$out.ref"
	env $(sec_env sec unix) timeout 60 $SEC_NB "$PROGS/ipc_pair" events >"$out.same" 2>&1
	env $(sec_env sec unix) timeout 60 $SEC_NB "$PROGS/ipc_pair" hold >"$out.hold" 2>&1 &
	t=$!
	wait_for "child: holding" "$out.hold" 30
	parent=$(pgrep -P $t)
	child=$(pgrep -P "${parent:-0}" | head -n 1)
	mem=$(tr '\0' '\n' <"/proc/${child:-0}/cmdline" 2>/dev/null | sed -n 3p)
	ev=$(tr '\0' '\n' <"/proc/${child:-0}/cmdline" 2>/dev/null | sed -n 4p)
	theirs=$(sec_ipc_open daemon "${mem:-none}")
	theirs_ev=$(sec_ipc_open daemon "${mem:-none}" "${ev:-none}")
	same=$(sec_ipc_open nobody "${mem:-none}")
	kill -9 $child $parent $t 2>/dev/null
	wait $t 2>/dev/null
	printf '     daemon: %s\n' "$(tr '\n' ' ' <<<"$theirs")" "$(tr '\n' ' ' <<<"$theirs_ev")"
	printf '     nobody: %s\n' "$(tr '\n' ' ' <<<"$same")"
	if cmp -s "$out.ref" "$out.same" && [ -n "$mem" ] &&
		grep -q "cuIpcOpenMemHandle.*failed: CUDA_ERROR" <<<"$theirs" && grep -qx "exit 1" <<<"$theirs" &&
		! grep -q "every value" <<<"$theirs" &&
		grep -q "cuIpcOpenEventHandle.*failed: CUDA_ERROR" <<<"$theirs_ev" && grep -qx "exit 1" <<<"$theirs_ev" &&
		grep -q "every value is the parent's: yes" <<<"$same" && grep -qx "exit 0" <<<"$same"; then
		ok "IPC between users: nobody and nobody share memory as natively; daemon opening nobody's handles is refused cleanly"
	else
		bad "IPC between users"; diff "$out.ref" "$out.same" | head -5
	fi
}

# ---- sec-privsep --------------------------------------------------------

# sec_worker_uid FILE: the uid its worker runs as, from a client's log
# line in FILE ("(worker PID").
sec_worker_uid() {
	local w
	w=$(sed -n 's/.*(worker \([0-9]*\).*/\1/p' "$1" | head -n 1)
	awk '/^Uid:/ { print $2 "/" $3 "/" $4 "/" $5 }' "/proc/${w:-0}/status" 2>/dev/null
}

# Workers run as their tenant: a unix client of nobody's has a worker of
# uid 65534 through and through, a TCP client's runs as --user (daemon),
# root's stays root; the tenant cannot read its own worker's memory or
# environment (the worker is not dumpable: it holds the server's key).
test_sec_privsep() {
	local d=$T/sec/privsep t1 t2 t3 w nb tcp root peek
	want sec-privsep || return
	sec_can "privilege separation" || return
	sec_main || { bad "privilege separation: no server"; return; }
	mkdir -p "$d"
	env $(sec_env sec unix) CICADA_LOG=info timeout 30 $SEC_NB "$TOOLS/fault_client" expect-success 3 >"$d/nb" 2>&1 &
	t1=$!
	env $(sec_env sec tcp) CICADA_LOG=info timeout 30 "$TOOLS/fault_client" expect-success 3 >"$d/tcp" 2>&1 &
	t2=$!
	env $(sec_env sec unix) CICADA_LOG=info timeout 30 "$TOOLS/fault_client" expect-success 3 >"$d/root" 2>&1 &
	t3=$!
	wait_for ready "$d/nb" 20 && wait_for ready "$d/tcp" 20 && wait_for ready "$d/root" 20
	nb=$(sec_worker_uid "$d/nb")
	tcp=$(sec_worker_uid "$d/tcp")
	root=$(sec_worker_uid "$d/root")
	w=$(sed -n 's/.*(worker \([0-9]*\).*/\1/p' "$d/nb" | head -n 1)
	# (each file opened by the tenant: its own environment is the control)
	peek=$(timeout 10 $SEC_NB sh -c "head -c 1 /proc/self/environ >/dev/null && echo self
		dd if=/proc/${w:-0}/mem bs=1 count=0 2>/dev/null && echo mem
		head -c 1 /proc/${w:-0}/environ >/dev/null 2>&1 && echo environ
		head -c 1 /proc/${w:-0}/maps >/dev/null 2>&1 && echo maps")
	wait $t1 $t2 $t3
	echo "     workers' uids (real/effective/saved/fs): nobody's $nb, TCP's $tcp, root's $root; nobody reads its worker's: $(p=${peek#self}; echo ${p:-nothing})"
	check "privilege separation: a unix tenant's worker runs as its uid, a TCP tenant's as --user, root's as root; the tenant cannot read its worker" \
		test "$nb" = "65534/65534/65534/65534" -a "$tcp" = "1/1/1/1" -a "$root" = "0/0/0/0" -a "$peek" = self
}

# ---- sec-jam-unix, sec-jam-tcp, sec-flood --------------------------------

# sec_tally FILE: flood's lines, indented.
sec_tally() {
	sed -n 's/^flood: \([a-z-]*: \)/     \1/p' "$1"
}

# sec_jam NAME TRANSPORT: on a server of its own, tenant nobody pauses its
# own session (over TRANSPORT) and sends 250 checkpoint requests for it
# over TRANSPORT without the directory's descriptor, holding them 8 s;
# meanwhile a fresh client of tenant daemon must get its session within
# SEC_FRESH_MS each time. At most the requests the server hands on (8 of
# a client) and those the paused worker holds in its backlog may stay
# unanswered; the rest are answered at once. Afterwards the server serves.
sec_jam() {
	local name=$1 tr=$2 out=$T/sec/jam.$1 addr token="" open
	mkdir -p "$T/sec"
	sec_server "$name" "$3" || { bad "checkpoint jam over $tr: no server"; return; }
	sec_victim "$name" "$tr" || { bad "checkpoint jam over $tr: the tenant's program did not start"; sec_stop "$name"; return; }
	addr="unix:$T/$name.sock"
	[ "$tr" = tcp ] && addr="tcp:127.0.0.1:$3" token="-t $T/token"
	# shellcheck disable=SC2086  # (token: an option and its file, or nothing)
	timeout 40 $SEC_NB "$TOOLS/flood" "$addr" 8 $token -p "$SEC_VICTIM" ckpt-nofd:250 >"$out" 2>&1 &
	local f=$!
	wait_for "^flood: opened" "$out" 20
	sleep 0.5
	sec_fresh "$name" 5
	wait $f
	open=$(sed -n 's/.* \([0-9]*\) open without an answer.*/\1/p' "$out")
	sec_tally "$out"
	echo "     a fresh client of uid daemon served in (ms):$SEC_TIMES"
	if [ "$SEC_WORST" -lt "$SEC_FRESH_MS" ] && [ -n "$open" ] && [ "$open" -le 24 ] && sec_alive "$name" &&
		sec_serves "$name"; then
		ok "checkpoint jam over $tr: 250 checkpoints of a paused session without its directory; a fresh client of another user served within $SEC_FRESH_MS ms (worst $SEC_WORST ms), the server serves on"
	else
		bad "checkpoint jam over $tr (worst $SEC_WORST ms, ${open:-?} requests left unanswered)"; tail -n 3 "$out"
	fi
	sec_victim_end
	sec_stop "$name"
}

test_sec_jam_unix() {
	want sec-jam-unix || return
	sec_can "checkpoint jam over unix" || return
	sec_jam jamu unix $((PORT + 71))
}

test_sec_jam_tcp() {
	want sec-jam-tcp || return
	sec_can "checkpoint jam over TCP" || return
	sec_jam jamt tcp $((PORT + 72))
}

# 1,000 hostile connections from tenant nobody, 900 over unix and 100 over
# TCP, of every kind: idle ones, half hellos, hellos for made-up tickets
# (reattach, checkpoint, release, callback), migrations, checkpoints of
# its paused session without the directory. Meanwhile a fresh client of
# tenant daemon gets its session within SEC_FRESH_MS each time, the
# server stays up, and it serves a whole program afterwards. (How many of
# nobody's hellos still wait at the end is printed, for the record.)
test_sec_flood() {
	local out=$T/sec/flood port=$((PORT + 73)) ticket waiting
	want sec-flood || return
	sec_can "connection flood" || return
	mkdir -p "$T/sec"
	sec_server flood $port || { bad "connection flood: no server"; return; }
	sec_victim flood unix || { bad "connection flood: the tenant's program did not start"; sec_stop flood; return; }
	timeout 40 $SEC_NB "$TOOLS/flood" "unix:$T/flood.sock" 8 -p "$SEC_VICTIM" idle:150 partial:150 reattach:100 \
		checkpoint:100 release:100 callback:50 migrate:100 ckpt-nofd:150 >"$out.unix" 2>&1 &
	local f1=$!
	wait_for "ticket=" "$out.unix" 20
	ticket=$(sed -n 's/.*ticket=//p' "$out.unix")
	timeout 40 $SEC_NB "$TOOLS/flood" "tcp:127.0.0.1:$port" 7 -t "$T/token" -k "${ticket:-none}" idle:20 partial:20 \
		reattach:10 checkpoint:10 release:10 migrate:10 ckpt-nofd:20 >"$out.tcp" 2>&1 &
	local f2=$!
	wait_for "^flood: opened" "$out.unix" 20 && wait_for "^flood: opened" "$out.tcp" 20
	sleep 0.5
	sec_fresh flood 6
	wait $f1 $f2
	echo "     over unix:"; sec_tally "$out.unix"
	echo "     over TCP:"; sec_tally "$out.tcp"
	waiting=$(sed -n 's/^flood: \(idle\|partial\): .* \([0-9]*\) open without an answer.*/\2/p' "$out.unix" |
		awk '{ n += $1 } END { print n + 0 }')
	echo "     a fresh client of uid daemon served in (ms):$SEC_TIMES; nobody's hellos waiting over unix at the end: $waiting"
	if [ "$SEC_WORST" -lt "$SEC_FRESH_MS" ] && grep -q "^flood: ckpt-nofd" "$out.unix" && sec_alive flood &&
		sec_serves flood; then
		ok "connection flood: 1,000 hostile connections of every kind from one tenant; another user's client served within $SEC_FRESH_MS ms (worst $SEC_WORST ms), the server serves on"
	else
		bad "connection flood (worst $SEC_WORST ms)"; tail -n 3 "$out.unix" "$out.tcp"
	fi
	sec_victim_end
	sec_stop flood
}

# ---- sec-migrate-token --------------------------------------------------

# A migration (OP_MIGRATE) over TCP proving the tenants' token is refused
# by a server without --migration-token-file and by one with it; the
# migration token gets past the door (the server says it is coming);
# tenant nobody over unix is refused; a migration token equal to the
# tenants' token keeps the server from starting.
test_sec_migrate_token() {
	local p1=$((PORT + 74)) p2=$((PORT + 75)) none wrong right unix same
	want sec-migrate-token || return
	sec_can "migration authority" || return
	mkdir -p "$T/sec"
	(umask 077 && head -c 24 /dev/urandom | base64 >"$T/sec/mtoken")
	sec_server mignone $p1 --accept-migrations && sec_server migtok $p2 --accept-migrations \
		--migration-token-file "$T/sec/mtoken" || { bad "migration authority: no server"; return; }
	none=$(sec_request root -t "$T/token" migrate "tcp:127.0.0.1:$p1")
	wrong=$(sec_request root -t "$T/token" migrate "tcp:127.0.0.1:$p2")
	right=$(sec_request root -t "$T/sec/mtoken" migrate "tcp:127.0.0.1:$p2")
	unix=$(sec_request nobody migrate "unix:$T/migtok.sock")
	same=$(env $DRIVER_ENV timeout 5 "$B/bin/gpu-server" --listen "unix:$T/migsame.sock" --listen "tcp:127.0.0.1:$((PORT + 76))" \
		--token-file "$T/token" --cache-dir "$T/cache-migsame" --accept-migrations --migration-token-file "$T/token" 2>&1)
	local same_rc=$?
	sleep 0.3
	printf '     %s\n' "without one: $none" "the tenants' token: $wrong" "the migration token: $right" \
		"nobody over unix: $unix" "the same token for both (exit $same_rc): $same"
	if grep -q "refused=1 message=this server takes migrations over TCP only with --migration-token-file" <<<"$none" &&
		grep -q "refused=1 message=wrong migration token" <<<"$wrong" &&
		! grep -q "refused=1 message=\(wrong migration token\|this server takes migrations\)" <<<"$right" &&
		grep -q "migration coming in from tcp:127.0.0.1" "$T/migtok.log" &&
		grep -q "refused=1 message=only root or the server's user may migrate" <<<"$unix" &&
		[ "$same_rc" -ne 0 ] && grep -q "must differ from --token-file" <<<"$same"; then
		ok "migration authority: the tenants' token never migrates a process here (with or without a migration token); the migration token gets past the door; a tenant over unix is refused"
	else
		bad "migration authority"
	fi
	sec_stop mignone
	sec_stop migtok
}

# ---- sec-staged ------------------------------------------------------------
# A remote tenant's graph copies of pageable memory are staged in memory
# its worker pins: past --max-staged (64 MiB here) the next one is refused
# as out of memory, with one line in the log, and the server serves on.
# Pinned memory of the worker's own that the tenant asks for (the way a
# --gpu-only move carries pinned memory) counts against the same bound.
test_sec_staged() {
	local port=$((PORT + 77)) out=$T/sec/staged tcp
	want sec-staged || return
	mkdir -p "$T/sec"
	sec_server staged $port --max-staged 64M || { bad "staged copies: no server"; return; }
	tcp="CICADA_SERVER=tcp:127.0.0.1:$port CICADA_TOKEN_FILE=$T/token LD_LIBRARY_PATH=$B/lib"
	# shellcheck disable=SC2086
	deadline 120 env $tcp "$PROGS/stage_flood" >"$out" 2>"$out.err"
	# shellcheck disable=SC2086
	check "a remote tenant's staged copies stop at --max-staged: out of memory, one line, the server serves on" \
		sh -c "grep -qx 'staged 4' '$out' && grep -qx 'refused 2' '$out' &&
		       grep -q 'would pass --max-staged' '$T/staged.log' &&
		       env $tcp timeout 60 '$PROGS/vecadd_cubin' >/dev/null 2>&1"
	# The same bound holds pinned memory of the worker's own (what a
	# --gpu-only move carries), asked for directly over a raw session.
	timeout 60 "$TOOLS/own_region" "tcp:127.0.0.1:$port" "$T/token" 24 4 >"$out.own" 2>&1
	check "pinned memory of a worker's own, asked by a remote tenant, stops at --max-staged too" \
		sh -c "grep -qx 'region 1: 0' '$out.own' && grep -qx 'region 2: 0' '$out.own' &&
		       grep -qx 'region 3: 2' '$out.own' && grep -qx 'region 4: 2' '$out.own'"
	sec_stop staged
}

# Tenant nobody binds "\0cicada-ctl.N" for the next pids, before root's
# program (cr_pattern; root's, because criu in some containers cannot
# dump another user's process) starts with one of them; root then
# checkpoints it as CRIU's plugin does (--leave-running). The program
# listens elsewhere, the plugin finds its socket among the program's
# own and checks who listens there: the squatter is never asked, the
# checkpoint holds the GPU state, and the program runs to its end with
# an undisturbed run's output. Twice: a squatter that answers, and one
# whose sockets' backlogs are full (a dial that waited for room would
# wait for ever).
sec_squat_once() {
	local mode=$1 count=$2 d=$T/sec/squat.$1 out=$T/sec/squat.$1.out ref=$T/sec/squat.ref first t app squatter
	SEC_SQUAT_FAILS=""
	rm -rf "$d" && mkdir -p "$d/img" && chmod 755 "$d" && : >"$d/asked" && chmod 666 "$d/asked"
	first=$(($(cat /proc/sys/kernel/ns_last_pid) + 1))
	# shellcheck disable=SC2086  # the mode word, or none
	timeout 120 $SEC_NB "$TOOLS/ctl_squat" "$first" "$count" "$d/asked" 100 ${mode#plain} >"$d/ready" 2>&1 &
	squatter=$!
	wait_for "^squatting" "$d/ready" 10 || SEC_SQUAT_FAILS="$SEC_SQUAT_FAILS $mode: the squatter did not start;"
	env $(sec_env sec unix) timeout 60 setsid "$PROGS/cr_pattern" "$CICADA_KERNELS" 4 12 100 \
		</dev/null >"$out" 2>/dev/null &
	t=$!
	wait_for "^step 2 " "$out" 30 && app=$(pgrep -P $t)
	if [ -z "$app" ] || [ "$app" -lt "$first" ] || [ "$app" -ge $((first + count)) ]; then
		SEC_SQUAT_FAILS="$SEC_SQUAT_FAILS $mode: the program ($app) did not start among the squatted pids ($first...);"
	fi
	deadline 60 "$CRIU" dump -t "${app:-0}" -D "$d/img" -L "$PLUGIN_DIR" -o dump.log --leave-running \
		2>"$d/criu.err" ||
		SEC_SQUAT_FAILS="$SEC_SQUAT_FAILS $mode: the checkpoint failed ($(grep -v RLIMIT "$d/img/dump.log" | grep -m1 Error));"
	[ -s "$d/img/cicada-session-$app.txt" ] || SEC_SQUAT_FAILS="$SEC_SQUAT_FAILS $mode: the checkpoint holds no GPU state;"
	[ -s "$d/asked" ] && SEC_SQUAT_FAILS="$SEC_SQUAT_FAILS $mode: the squatter was asked ($(head -1 "$d/asked"));"
	wait_for "^done" "$out" 60 && cmp -s "$ref" "$out" || SEC_SQUAT_FAILS="$SEC_SQUAT_FAILS $mode: the program's output differs;"
	kill $squatter 2>/dev/null
	wait $t $squatter 2>/dev/null
	echo "     $mode: $(cat "$d/ready"); program $app"
}

test_sec_ctl_squat() {
	local fails
	want sec-ctl-squat || return
	sec_can "control socket squat" || return
	sec_main || { bad "control socket squat: no server"; return; }
	env $(sec_env sec unix) timeout 60 "$PROGS/cr_pattern" "$CICADA_KERNELS" 4 12 100 >"$T/sec/squat.ref" 2>&1
	sec_squat_once plain 1500
	fails=$SEC_SQUAT_FAILS
	sec_squat_once full 400
	fails="$fails$SEC_SQUAT_FAILS"
	check "a tenant squatting the control sockets' names of the next pids (answering, or with full backlogs) is never asked and stalls nothing; the program it aimed at is checkpointed with its GPU state and runs on${fails:+ (failed:$fails)}" \
		test -z "$fails"
}

run_security_tests() {
	chmod 711 "$T"
	test_sec_shm_race
	test_sec_checkpoint_theft
	test_sec_parent
	test_sec_verify_key
	test_sec_ipc_users
	test_sec_privsep
	test_sec_jam_unix
	test_sec_jam_tcp
	test_sec_flood
	test_sec_migrate_token
	test_sec_staged
	test_sec_ctl_squat
	for s in sec jamu jamt flood mignone migtok staged; do sec_stop $s; done
	chmod 700 "$T"
}

# multigpu-tests.sh: several GPUs, sourced by tests/run-tests.sh (which
# defines ok/bad/check, start_server, cicada_env, $T, $B, $PROGS, $PORT,
# $MODE and $DRIVER_ENV, and cr-tests.sh's cr_launch, cr_dump,
# cr_restore, cr_finished). On the CPU stand-in the node has two GPUs
# (FAKECUDA_DEVICES=2); on a GPU node, the GPUs it has: with one, the
# checks that need two say so and the rest run on the one.
#
#   multi-gpu     multi_gpu (peer access, peer copies, a kernel reading the
#                 other GPU, a two-GPU reduction, a kernel that grows GPU
#                 1's stack, then a context made on GPU 0, 12 streams made
#                 and destroyed in it, and a module: cr-multi-gpu finds
#                 the module where it was only if the growth, though GPU
#                 1 was not current, and the streams' mark were kept)
#                 through Cicada
#                 prints what it prints natively, over shm, unix and TCP
#   gpu-visible   CUDA_VISIBLE_DEVICES by ordinal, order and UUID; none
#                 left is CUDA_ERROR_NO_DEVICE; --gpus; --gpus-per-client
#                 and CICADA_GPUS place sessions on the least loaded GPU;
#                 NVML answers for the same GPUs
#   cr-multi-gpu  multi_gpu checkpointed mid-run and restored: onto the same
#                 GPUs, onto them swapped (CICADA_RESTORE_GPUS=1,0), and
#                 refused onto one GPU
#   migrate-gpu   gpu-migrate --to local --gpu 1 moves a running program's GPU
#                 state to another GPU of the node; output identical
#   ipc           ipc_pair: two processes of one server share device memory
#                 and an interprocess event through CUDA IPC handles;
#                 natively on a GPU, against its expected lines on the
#                 stand-in (whose driver has no IPC of its own); and
#                 vmm_share: VMM memory passed as a file descriptor, as
#                 NCCL passes its buffers, identical to native
#   cr-ipc        the two processes of ipc_pair, and of vmm_share, checkpointed
#                 together mid-run and restored; gpu-migrate --gpu-only of
#                 one of them is refused; the child restored alone is
#                 refused (its exporter is gone) and ends; a dump of a pair
#                 whose exporter let go of its VMM handle, or whose child
#                 holds a graph on the shared event, is refused

MG_ENV=""
[ "$MODE" = cpu ] && MG_ENV="FAKECUDA_DEVICES=2"
MG_ARGS="16 6 0"

# mg_native: multi_gpu's native output and the node's GPU count (MG_N).
mg_native() {
	[ -s "$T/mg.native" ] ||
		env $DRIVER_ENV $MG_ENV timeout 120 "$PROGS/multi_gpu" $MG_ARGS >"$T/mg.native" 2>"$T/mg.native.err" ||
		return 1
	MG_N=$(awk '/^devices / { print $2 }' "$T/mg.native")
}

# mg_env TRANSPORT [SERVER [PORT]]: a client's environment for the server
# "mg" (on PORT+50) or another of this file's servers.
mg_env() {
	if [ "$1" = tcp ]; then
		echo "CICADA_SERVER=tcp:127.0.0.1:${3:-$((PORT + 50))} CICADA_TOKEN_FILE=$T/token LD_LIBRARY_PATH=$B/lib"
	else
		cicada_env "$1" "${2:-mg}"
	fi
}

# mg_run NAME TRANSPORT [ENV...]: multi_gpu through the server "mg".
mg_run() {
	local name=$1 tr=$2
	shift 2
	deadline 120 env $(mg_env "$tr") "$@" "$PROGS/multi_gpu" $MG_ARGS >"$T/mg.$name" 2>"$T/mg.$name.err"
}

# The UUID line multi_gpu printed natively for GPU d, as it reads for ordinal o.
mg_uuid_line() {
	sed -n "s/^device $1: /device $2: /p" "$T/mg.native"
}

# NVML's form of GPU d's UUID, as the server's NVML answers (all its GPUs).
mg_nvml_uuid() {
	deadline 60 env $(cicada_env shm mg) "$PROGS/nvml_query" 2>/dev/null | sed -n "s/^device $1 uuid = //p"
}

mg_same_as_native() {
	local tr
	for tr in shm unix tcp; do
		if mg_run "$tr" "$tr" && cmp -s "$T/mg.native" "$T/mg.$tr"; then
			ok "multi_gpu over $tr: identical to native ($MG_N GPUs)"
		else
			bad "multi_gpu over $tr"; diff "$T/mg.native" "$T/mg.$tr" | head -5; tail -3 "$T/mg.$tr.err"
		fi
	done
}

# visible WHAT VALUE EXPECTED...: with CUDA_VISIBLE_DEVICES=VALUE the client
# sees the devices whose lines are EXPECTED (as "D:O": native GPU D as
# ordinal O), in order, and no others.
mg_visible() {
	local what=$1 value=$2 want="" got
	shift 2
	for m in "$@"; do want="$want$(mg_uuid_line "${m%:*}" "${m#*:}")|"; done
	mg_run "vis.$value" shm CUDA_VISIBLE_DEVICES="$value"
	got=$(grep "^device [0-9]*:" "$T/mg.vis.$value" | tr '\n' '|')
	check "CUDA_VISIBLE_DEVICES=$value ($what): sees $# GPU(s), the right ones in order" \
		test "$got" = "$want" -a "$(awk '/^devices / { print $2 }' "$T/mg.vis.$value")" = "$#"
}

mg_visible_tests() {
	local uuid1
	mg_visible "one GPU" 0 0:0
	if [ "$MG_N" -lt 2 ]; then
		mg_run vis.none shm CUDA_VISIBLE_DEVICES=1
		check "CUDA_VISIBLE_DEVICES=1 on a one-GPU node: no device, as natively (CUDA_ERROR_NO_DEVICE)" \
			grep -q "CUDA_ERROR_NO_DEVICE" "$T/mg.vis.none" "$T/mg.vis.none.err"
		echo "note gpu-visible: one GPU here; the ordering, UUID and placement checks need two"
		return
	fi
	mg_visible "the second GPU" 1 1:0
	mg_visible "swapped" 1,0 1:0 0:1
	mg_visible "a list ends at an entry that names no GPU" 1,7,0 1:0
	uuid1=$(mg_nvml_uuid 1)
	[ -n "$uuid1" ] && mg_visible "by UUID" "$uuid1" 1:0
	mg_run vis.empty shm CUDA_VISIBLE_DEVICES=
	check "CUDA_VISIBLE_DEVICES empty: CUDA_ERROR_NO_DEVICE, as natively" \
		grep -q "CUDA_ERROR_NO_DEVICE" "$T/mg.vis.empty" "$T/mg.vis.empty.err"
	# NVML sees the same GPUs as the driver API.
	deadline 60 env $(cicada_env shm mg) CUDA_VISIBLE_DEVICES=1 "$PROGS/nvml_query" >"$T/mg.nvml" 2>&1
	check "NVML through Cicada with CUDA_VISIBLE_DEVICES=1: one GPU, the second one" \
		sh -c "grep -q '^device count = 1$' '$T/mg.nvml' && grep -q '^device 0 uuid = $uuid1$' '$T/mg.nvml'"
	mg_placement
}

# --gpus 1, and placement by load (--gpus-per-client 1; CICADA_GPUS=1).
mg_placement() {
	local p=$((PORT + 51)) hold
	start_server mgone $p "$MG_ENV" --gpus 1 || { bad "a server with --gpus 1 did not start"; return; }
	deadline 60 env $(cicada_env shm mgone) "$PROGS/multi_gpu" $MG_ARGS >"$T/mg.gpus1" 2>&1
	check "a server with --gpus 1: its clients see that GPU only" \
		test "$(grep "^device [0-9]" "$T/mg.gpus1")" = "$(mg_uuid_line 1 0)"
	start_server mgplace $((p + 1)) "$MG_ENV" --gpus-per-client 1 || { bad "a server with --gpus-per-client did not start"; return; }
	for who in place env all; do
		local srv=mgplace extra="" first what
		[ $who = env ] && srv=mg extra="CICADA_GPUS=1"
		[ $who = all ] && srv=mg
		first=$(mg_uuid_line 0 0)
		[ $who = all ] && first="$(mg_uuid_line 0 0)
$(mg_uuid_line 1 1)"
		env $(cicada_env shm $srv) $extra timeout 60 "$PROGS/multi_gpu" 16 40 100 >"$T/mg.hold.$who" 2>&1 &
		hold=$!
		wait_for "^step 1 " "$T/mg.hold.$who" 30
		deadline 60 env $(cicada_env shm $srv) CICADA_GPUS=1 "$PROGS/multi_gpu" $MG_ARGS >"$T/mg.second.$who" 2>&1
		kill $hold 2>/dev/null; wait $hold 2>/dev/null
		case $who in
		place) what="--gpus-per-client 1: a session on the first GPU, the next on the less loaded second" ;;
		env) what="CICADA_GPUS=1: a session on the first GPU, the next on the less loaded second" ;;
		all) what="a session that sees both GPUs counts on its first: a CICADA_GPUS=1 one goes to the second" ;;
		esac
		check "placement ($what)" \
			sh -c "test \"\$(grep '^device [0-9]' '$T/mg.hold.$who')\" = \"$first\" &&
			       test \"\$(grep '^device [0-9]' '$T/mg.second.$who')\" = \"$(mg_uuid_line 1 0)\""
	done
}

# Checkpoint a two-GPU run mid-way, restore it (with env: a device map).
mg_cr() {
	local tag=$1
	shift
	cr_launch shm mg "$PROGS/multi_gpu" 16 14 150 || return 1
	cr_dump "$T/ckpt.mg.$tag" || return 1
	cr_restore "$T/ckpt.mg.$tag" "$@" || return 1
	CR_REF=$T/mg.cr.native cr_finished
}

mg_cr_tests() {
	local first
	env $DRIVER_ENV $MG_ENV timeout 120 "$PROGS/multi_gpu" 16 14 0 >"$T/mg.cr.native" 2>/dev/null ||
		{ bad "multi_gpu (checkpoint run) natively"; return; }
	cr_case "a $MG_N-GPU program checkpointed mid-run and restored: output identical" "$T/ckpt.mg.same" mg_cr same
	if [ "$MG_N" -lt 2 ]; then
		echo "note cr-multi-gpu: one GPU here; the device-map restores need two"
		return
	fi
	cr_case "restored onto the GPUs swapped (CICADA_RESTORE_GPUS=1,0): output identical" "$T/ckpt.mg.swap" \
		mg_cr swap CICADA_RESTORE_GPUS=1,0
	first=$(grep -c "session GPUs: 2 (first: GPU 1 of the node)" "$T/mg.log")
	check "the swapped restore's session has GPU 1 as its first" test "$first" -ge 1
	start_server mgsolo $((PORT + 53)) "$MG_ENV" --gpus 0 || { bad "a server with --gpus 0 did not start"; return; }
	cr_launch shm mg "$PROGS/multi_gpu" 16 14 150 && cr_dump "$T/ckpt.mg.one" &&
		! cr_restore "$T/ckpt.mg.one" CICADA_RESTORE_SERVER="unix:$T/mgsolo.sock"
	check "a restore onto fewer GPUs than the program used is refused, saying why" \
		grep -q "the application used 2 GPUs; this session has 1" "$T/ckpt.mg.one/restore.log" "$T/mgsolo.log"
	cr_case "a program that saw two GPUs and used one, restored onto a server of one: output identical" \
		"$T/ckpt.mg.used" mg_cr_used_one
}

# A program that saw both GPUs but used only its first needs no more: it
# is restored onto the server of one GPU (mgsolo).
mg_cr_used_one() {
	env $DRIVER_ENV timeout 120 "$PROGS/cr_pattern" $CR_ARGS >"$T/mg.one.native" 2>/dev/null || return 1
	cr_launch shm mg || return 1
	cr_dump "$T/ckpt.mg.used" || return 1
	cr_restore "$T/ckpt.mg.used" CICADA_RESTORE_SERVER="unix:$T/mgsolo.sock" || return 1
	CR_REF=$T/mg.one.native cr_finished
}

# gpu-migrate --to local --gpu 1: the program goes on on the other GPU.
mg_migrate_local() {
	local before
	before=$(grep -c "session GPUs: 2 (first: GPU 1 of the node)" "$T/mg.log")
	cr_launch shm mg "$PROGS/multi_gpu" 16 14 150 || return 1
	CICADA_TOKEN_FILE=$T/token deadline 90 "$B/bin/gpu-migrate" "$CR_PID" --to local --gpu 1 \
		--work-dir "$T/mg-mig-work" >"$T/mg.mig" 2>"$T/mg.mig.err" || { cat "$T/mg.mig.err"; return 1; }
	grep -q "moved (gpu-only) to " "$T/mg.mig" && CR_REF=$T/mg.cr.native cr_finished &&
		[ "$(grep -c "session GPUs: 2 (first: GPU 1 of the node)" "$T/mg.log")" -gt "$before" ]
}

# The two processes of ipc_pair, through Cicada over each transport.
mg_ipc() {
	local ref=$T/ipc.native tr arg=events
	if [ "$MODE" = gpu ]; then
		env $DRIVER_ENV timeout 120 "$PROGS/ipc_pair" $arg >"$ref" 2>"$ref.err" ||
			{ bad "ipc_pair natively"; tail -3 "$ref.err"; return; }
	else
		printf '%s\n' "parent: 2097152 values of 7, handed to a child with an interprocess event" \
			"child: a damaged handle is refused" "child: every value is the parent's: yes" \
			"child: added one to each, closed the handle" "parent: sees the child's writes: yes" done >"$ref"
	fi
	for tr in shm unix tcp; do
		deadline 120 env $(mg_env "$tr") "$PROGS/ipc_pair" $arg >"$T/ipc.$tr" 2>"$T/ipc.$tr.err"
		local rc=$?
		if [ $rc -eq 0 ] && cmp -s "$ref" "$T/ipc.$tr"; then
			ok "CUDA IPC between two processes of one server over $tr${arg:+ (memory and an event)}: $([ "$MODE" = gpu ] && echo identical to native || echo as expected)"
		else
			bad "CUDA IPC over $tr (exit $rc)"; diff "$ref" "$T/ipc.$tr" | head -5; tail -3 "$T/ipc.$tr.err"
		fi
	done
	env $DRIVER_ENV timeout 120 "$PROGS/vmm_share" >"$T/vmm_share.native" 2>"$T/vmm_share.native.err" ||
		{ bad "vmm_share natively"; tail -3 "$T/vmm_share.native.err"; return; }
	for tr in shm unix tcp; do
		deadline 120 env $(mg_env "$tr") "$PROGS/vmm_share" >"$T/vmm_share.$tr" 2>"$T/vmm_share.$tr.err"
		local rc=$?
		if [ $rc -eq 0 ] && cmp -s "$T/vmm_share.native" "$T/vmm_share.$tr"; then
			ok "VMM memory shared by file descriptor between two processes over $tr: identical to native"
		else
			bad "vmm_share over $tr (exit $rc)"; diff "$T/vmm_share.native" "$T/vmm_share.$tr" | head -5
			tail -3 "$T/vmm_share.$tr.err"
		fi
	done
}

# The two processes of a job sharing device memory through CUDA IPC are
# checkpointed together while the child holds what the parent shared, and
# restored. ipc_pair: the child holds the parent's buffer and event open,
# then opens the handle of a second buffer, made before the dump;
# vmm_share: the child maps the parent's VMM memory (its handle let go).
# Both processes end with each other's writes.
mg_ipc_cr() {
	local prog=$1 dir=$T/ckpt.$1 child before
	shift
	printf '%s\n' "$@" >"$CR_REF"
	CR_OUT=$T/$prog.hold
	before=$(grep -c "opened again the CUDA IPC\|imported again the VMM" "$T/mg.log")
	env $(mg_env shm) setsid "$PROGS/$prog" hold </dev/null >"$CR_OUT" 2>"$CR_OUT.err" &
	CR_PID=$!
	wait_for "^child: holding" "$CR_OUT" 30 || { kill -9 $CR_PID; return 1; }
	child=$(pgrep -P "$CR_PID" -f "$prog --child")
	# the GPU state of one of them alone is not moved: refused, both go on
	CICADA_TOKEN_FILE=$T/token deadline 60 "$B/bin/gpu-migrate" "$child" --to local --gpu 0 --work-dir "$T" \
		>"$dir.mig" 2>&1 && { echo "     gpu-migrate --gpu-only moved one process of the pair"; kill -9 $CR_PID; return 1; }
	grep -q "shares device memory with other processes (CUDA IPC)" "$dir.mig" ||
		{ cat "$dir.mig"; kill -9 $CR_PID; return 1; }
	cr_dump "$dir" || { kill -9 $CR_PID; return 1; }
	wait $CR_PID 2>/dev/null                 # (the restore needs both pids free: not even zombies)
	for _ in $(seq 100); do [ -e "/proc/$child" ] || break; sleep 0.05; done
	cr_restore "$dir" || return 1
	cr_finished && [ "$(grep -c "opened again the CUDA IPC\|imported again the VMM" "$T/mg.log")" -gt "$before" ]
}

# What `ipc_pair hold` prints, wherever it runs (also migrate-ipc's).
ipc_pair_hold_lines() {
	printf '%s\n' "parent: 2097152 values of 7, handed to a child with an interprocess event" \
		"child: a damaged handle is refused" "child: every value is the parent's: yes" "child: holding" \
		"child: every value of the second buffer is the parent's: yes" \
		"child: added one to each, closed the handle" "parent: sees the child's writes: yes" \
		"parent: sees the child's writes to the second buffer: yes" done
}

mg_ipc_pair_cr() {
	local lines
	mapfile -t lines < <(ipc_pair_hold_lines)
	mg_ipc_cr ipc_pair "${lines[@]}"
}

# The child of ipc_pair alone is dumped (--leave-running) while it holds
# its parent's memory open; both are killed; the child alone is restored:
# its exporter is gone, so its reattach is refused after CICADA_IPC_WAIT
# with one line naming what it had opened, and the restored child fails
# at its next CUDA call (the end of its hold) rather than running on
# without the memory.
mg_ipc_orphan() {
	local dir=$T/ckpt.ipc-orphan out=$T/ipc-orphan.out child
	env $(mg_env shm) setsid "$PROGS/ipc_pair" hold </dev/null >"$out" 2>"$out.err" &
	CR_PID=$!
	wait_for "^child: holding" "$out" 30 || { kill -9 $CR_PID; return 1; }
	child=$(pgrep -P "$CR_PID" -f "ipc_pair --child")
	CR_PID=$child cr_dump "$dir" --leave-running || { kill -9 $CR_PID; return 1; }
	kill -9 "$child" "$CR_PID"
	wait "$CR_PID" 2>/dev/null
	for _ in $(seq 100); do [ -e "/proc/$child" ] || break; sleep 0.05; done
	cr_restore "$dir" || return 1
	wait_for "refused the connection: cannot open again the CUDA IPC .* of session .*: its process is gone" \
		"$out.err" 20 || return 1
	for _ in $(seq 600); do [ -e "/proc/$child" ] && [ "$(awk '{ print $3 }' "/proc/$child/stat" 2>/dev/null)" != Z ] ||
		break; sleep 0.05; done
	cr_gone "$child" || { kill -9 "$child"; echo "     the restored child runs on"; return 1; }
	! grep -q "child: added one" "$out"
}

# mg_end PID: PID's exit status, once it ends (killed after 60 s).
mg_end() {
	for _ in $(seq 1200); do
		[ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = Z ] || [ ! -e "/proc/$1" ] && break
		sleep 0.05
	done
	kill -9 "$1" 2>/dev/null
	wait "$1"
}

# vmm_share hold-let-go: the parent let go of the handle it exported (its
# mapping keeps the memory), so a restore could not export it again: the
# dump of the pair is refused with one line, and both go on to their end.
mg_ipc_let_go() {
	local dir=$T/ckpt.let-go out=$T/let-go.out
	env $(mg_env shm) setsid "$PROGS/vmm_share" hold-let-go </dev/null >"$out" 2>"$out.err" &
	CR_PID=$!
	wait_for "^child: holding" "$out" 30 || { kill -9 $CR_PID; return 1; }
	cr_dump "$dir" && { echo "     the dump was not refused"; return 1; }
	grep -q "maps VMM memory another process no longer shares" "$dir/criu.err" "$dir/dump.log" ||
		{ kill -9 $CR_PID; return 1; }
	mg_end $CR_PID && grep -q "^parent: sees the child's writes: yes" "$out"
}

# ipc_pair hold-graph: the child holds a CUDA graph that records the
# parent's event, which a restore could not give back: the dump of the
# pair is refused with one line, and both go on to their end.
mg_ipc_graph() {
	local dir=$T/ckpt.ipc-graph out=$T/ipc-graph.out
	env $(mg_env shm) setsid "$PROGS/ipc_pair" hold-graph </dev/null >"$out" 2>"$out.err" &
	CR_PID=$!
	wait_for "^child: holding" "$out" 30 || { kill -9 $CR_PID; return 1; }
	cr_dump "$dir" && { echo "     the dump was not refused"; return 1; }
	grep -q "a CUDA graph records or waits on an event another process shares" "$dir/criu.err" "$dir/dump.log" ||
		{ kill -9 $CR_PID; return 1; }
	mg_end $CR_PID && grep -q "^parent: sees the child's writes to the second buffer: yes" "$out"
}

mg_vmm_share_cr() {
	[ -s "$T/vmm_share.native" ] || env $DRIVER_ENV timeout 120 "$PROGS/vmm_share" >"$T/vmm_share.native" 2>/dev/null
	mg_ipc_cr vmm_share "$(head -n 1 "$T/vmm_share.native")" "child: a descriptor that is no export is refused" \
		"child: every value is the parent's: yes" "child: holding" "child: added one to each, let go of the memory" \
		"parent: sees the child's writes: yes" done
}

run_multigpu_tests() {
	want multi-gpu || want gpu-visible || want cr-multi-gpu || want migrate-gpu || want ipc || want cr-ipc || return
	# (a restored importer waits 3 s for its exporter: mg_ipc_orphan)
	start_server mg $((PORT + 50)) "$MG_ENV CICADA_IPC_WAIT=3" || { bad "the multi-GPU server did not start"; return; }
	mg_native || { bad "multi_gpu natively"; tail -3 "$T/mg.native.err"; return; }
	want multi-gpu && mg_same_as_native
	want gpu-visible && mg_visible_tests
	want cr-multi-gpu && mg_cr_tests
	if want migrate-gpu && [ "$MG_N" -ge 2 ]; then
		[ -s "$T/mg.cr.native" ] || env $DRIVER_ENV $MG_ENV timeout 120 "$PROGS/multi_gpu" 16 14 0 >"$T/mg.cr.native"
		mkdir -p "$T/mg-mig-work"
		cr_case "gpu-migrate --to local --gpu 1: the running program's GPU state moves to GPU 1, output identical" \
			"$T/mg-mig-work" mg_migrate_local
	elif want migrate-gpu; then
		echo "note migrate-gpu: one GPU here; a move to another GPU needs two"
	fi
	want ipc && mg_ipc
	want cr-ipc && wants_cr_ok && CR_REF=$T/ipc_pair.hold.ref cr_case \
		"two processes sharing memory and an event by CUDA IPC: --gpu-only refused, checkpointed mid-run, restored, both end right" \
		"$T/ckpt.ipc_pair" mg_ipc_pair_cr
	want cr-ipc && wants_cr_ok && cr_case \
		"a process restored without the process whose memory it had open: refused with one line, it ends" \
		"$T/ckpt.ipc-orphan" mg_ipc_orphan
	want cr-ipc && wants_cr_ok && cr_case \
		"a pair whose exporter let go of what it shared (a restore could not share it again): the dump is refused, saying why; both go on" \
		"$T/ckpt.let-go" mg_ipc_let_go
	want cr-ipc && wants_cr_ok && cr_case \
		"a process whose CUDA graph records an event another process shares: the dump is refused, saying why; both go on" \
		"$T/ckpt.ipc-graph" mg_ipc_graph
	want cr-ipc && wants_cr_ok && CR_REF=$T/vmm_share.hold.ref cr_case \
		"two processes sharing VMM memory by file descriptor (NCCL's way): --gpu-only refused, checkpointed, restored, both end right" \
		"$T/ckpt.vmm_share" mg_vmm_share_cr
}

# criu works here (the checkpoint tests' own check).
wants_cr_ok() {
	deadline 60 "$CRIU" check >/dev/null 2>&1
}

# torch-tests.sh: PyTorch through Cicada (GPU only: the stand-in has no
# cuDNN or cuBLAS kernels), sourced by tests/run-tests.sh after
# tests/cr/cr-tests.sh (whose cr_* helpers it uses).
#
# torch-shm, torch-tcp: every workload of tests/torch/workloads.py (CNN
#   training with SGD, bf16 and fp16 AMP, a transformers GPT-2 trained a
#   few steps and greedy-decoding, a GPT-2-medium-sized model decoding
#   and prefilling in fp16 and in bf16, torch.compile, a captured graph
#   replayed, events, pinned copies, expandable segments, NVML, and with
#   two GPUs peer copies, a single-process NCCL all-reduce and a
#   two-process torchrun DDP run) prints the same digest through Cicada as
#   natively. A workload that fails natively is named and not counted.
# torch-tenant: the same over shared memory, run as the user nobody: its
#   worker runs as nobody (the TCP runs' as the service user).
# torch-quota: under a server's --memory-quota of 2 GiB, PyTorch's
#   mem_get_info answers the quota, a CNN trains within it, a tensor of
#   twice the quota is a clean OutOfMemoryError, and training goes on.
# torch-cr: a CNN training run is dumped by criu mid-way, its server is
#   killed, and the python process is restored into a new server; it ends
#   with the weights of a run never interrupted, bit for bit.
# torch-cr-node: the same over TCP, restored on another node (a network
#   namespace with its own server).
# torch-cr-share: the share workload (a CUDA tensor handed by
#   torch.multiprocessing to a spawned process, which writes it in turn
#   with its parent) is dumped by criu mid-way, both processes with it,
#   its server is killed, and both are restored into a new server; the
#   tensor ends as in a run never interrupted.
# torch-cr-nccl: with two GPUs, one process doing an NCCL all-reduce over
#   both every step is dumped mid-way, its server killed, and restored
#   into a new server; it ends as a run never interrupted.
# torch-cr-ddp: with two GPUs, a DDP job (its launcher and one process a
#   GPU, NCCL between them over the VMM memory they share by file
#   descriptor, TCP between them and rank 0's store) is dumped whole
#   mid-way, with its established TCP connections; its server is
#   killed and the job restored into a new one; rank 0 ends with the
#   weights of a run never interrupted.
# Python is TORCH_PYTHON (default python3); without torch the tests say so
# and are skipped. TORCH_WORKLOADS names the workloads torch-shm and
# torch-tcp run (default all).

TORCH_PY=${TORCH_PYTHON:-python3}
TORCH_W=$ROOT/tests/torch/workloads.py
TORCH_STEPS=40
TORCH_STEP_MS=150

# torch_compare TRANSPORT: one verdict per workload, against the native run.
# TRANSPORT tenant: over shared memory as the user nobody, whose worker
# runs as nobody (its own server, torchtenant, which nobody may dial).
torch_compare() {
	local tr=$1 out=$T/torch.$1 name line envs as=()
	envs=$(cicada_env "$tr")
	if [ "$tr" = tenant ]; then
		envs="$(cicada_env shm torchtenant) HOME=$T/home-nobody"
		as=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups)
	fi
	# shellcheck disable=SC2086  # the names
	deadline 600 env $envs CICADA_LOG=info "${as[@]}" "$TORCH_PY" "$TORCH_W" ${TORCH_WORKLOADS:-} >"$out" 2>"$out.err"
	while read -r name line; do
		[ "$name" = workloads ] && continue
		case $line in
		ok*) ;;
		*) echo "     $name fails natively: ${line#FAIL }"; continue ;;
		esac
		# (under CICADA_TEST_GPUS native NVML counts the node's GPUs,
		# Cicada's the server's: those counts are left out)
		[ -n "${CICADA_TEST_GPUS:-}" ] && [ "$name" = nvml ] && line=$(echo "$line" | sed 's/nvml-devices=[0-9]* uuids=[0-9]* //') &&
			sed -i 's/^nvml ok nvml-devices=[0-9]* uuids=[0-9]* /nvml ok /' "$out"
		if grep -qxF "$name $line" "$out"; then
			ok "torch $name over $tr: identical to native ($line)"
		else
			bad "torch $name over $tr"
			echo "     native: $line"
			echo "     cicada: $(grep "^$name " "$out" | cut -d' ' -f2- || echo "no line")"
			grep -m3 "cicada\|Error" "$out.err" | sed 's/^/     | /'
		fi
	done <"$T/torch.native"
	grep -qx "workloads done" "$out" || { bad "torch workloads over $tr did not run to their end"; tail -3 "$out.err"; }
}

torch_cr_share() {
	local CR_REF=$T/torch.share.ref
	deadline 300 env $DRIVER_ENV "$TORCH_PY" "$TORCH_W" share-train "$TORCH_STEPS" 0 >"$CR_REF" 2>"$CR_REF.err" ||
		{ bad "torch share natively"; tail -3 "$CR_REF.err"; return; }
	# the processes multiprocessing starts must be reaped once criu kills
	# them, so that their pids are free for the restore: tests/tools/reaper
	CR_PIDFILE=$T/torchshare.pid CR_TAG=torchshare CR_PORTS=44 cr_case \
		"PyTorch processes sharing a CUDA tensor (torch.multiprocessing) dumped mid-way, server killed, restored: same tensor" \
		"$T/ckpt.torchshare" cr_server_killed "$B/tests/tools/reaper" "$T/torchshare.pid" "$TORCH_PY" "$TORCH_W" \
		share-train "$TORCH_STEPS" "$TORCH_STEP_MS"
}

torch_cr_nccl() {
	local CR_REF=$T/torch.nccl.ref
	deadline 300 env $DRIVER_ENV "$TORCH_PY" "$TORCH_W" nccl-train "$TORCH_STEPS" 0 >"$CR_REF" 2>"$CR_REF.err" ||
		{ bad "torch nccl-train natively"; tail -3 "$CR_REF.err"; return; }
	# (NCCL keeps TCP connections of its own, even in one process)
	CR_TAG=torchnccl CR_PORTS=46 CR_DUMP_OPTS=$CR_TCP CR_RESTORE_OPTS=$CR_TCP CR_BEFORE_RESTORE=cr_listen_free cr_case \
		"an NCCL all-reduce over two GPUs in one process, dumped mid-way, server killed, restored: output identical" \
		"$T/ckpt.torchnccl" cr_server_killed "$TORCH_PY" "$TORCH_W" nccl-train "$TORCH_STEPS" "$TORCH_STEP_MS"
}

torch_cr_ddp() {
	# (the ranks start as under a batch system's launcher: torchrun's agent
	# holds an io_uring whatever its options say, which criu cannot dump,
	# and cr-uring checks that refusal; the ranks' store runs on PyTorch's
	# own backend, since libuv's event loop holds one too)
	local CR_REF=$T/torch.ddp.ref
	deadline 300 env $DRIVER_ENV "$TORCH_PY" "$TORCH_W" ddp-launch "$TORCH_STEPS" 0 >"$CR_REF" 2>"$CR_REF.err" ||
		{ bad "torch ddp-launch natively"; tail -3 "$CR_REF.err"; return; }
	# (the ranks' files in /dev/shm are unlinked while mapped: criu keeps
	# them as ghost files, up to the limit)
	CR_PIDFILE=$T/torchddp.pid CR_TAG=torchddp CR_PORTS=48 CR_DUMP_OPTS="$CR_TCP --ghost-limit 1G" \
		CR_RESTORE_OPTS=$CR_TCP CR_BEFORE_RESTORE=cr_listen_free cr_case \
		"a two-process DDP job on two GPUs (NCCL between its processes) dumped whole mid-way, server killed, restored: same weights" \
		"$T/ckpt.torchddp" cr_server_killed "$B/tests/tools/reaper" "$T/torchddp.pid" "$TORCH_PY" "$TORCH_W" \
		ddp-launch "$TORCH_STEPS" "$TORCH_STEP_MS"
}

# torch_gpus: how many GPUs PyTorch sees natively (0 if it cannot say).
torch_gpus() {
	local n
	n=$(timeout 120 env $DRIVER_ENV "$TORCH_PY" -c "import torch; print(torch.cuda.device_count())" 2>/dev/null |
		tail -n 1)
	case $n in '' | *[!0-9]*) echo 0 ;; *) echo "$n" ;; esac
}

# torch_quota: the quota workload through a server with --memory-quota.
torch_quota() {
	local out
	start_server torchquota $((PORT + 83)) "" --memory-quota default=2G || { bad "torch-quota: its server did not start"; return; }
	out=$(deadline 300 env CICADA_SERVER="unix:$T/torchquota.sock" LD_LIBRARY_PATH="$B/lib" "$TORCH_PY" "$TORCH_W" quota 2048 2>&1)
	if grep -qx "quota total 2048 MiB, oom clean, same" <<<"$out"; then
		ok "PyTorch under a 2 GiB --memory-quota: mem_get_info answers it, training runs within it, past it a clean OutOfMemoryError, then training goes on"
	else
		bad "PyTorch under a 2 GiB --memory-quota"
		tail -3 <<<"$out"
	fi
}

# torch_tenant_ready: a server nobody may dial, and a home for nobody;
# false (with a note) where there is no setpriv or no user nobody.
torch_tenant_ready() {
	command -v setpriv >/dev/null && id nobody >/dev/null 2>&1 ||
		{ ok "torch-tenant: no setpriv or no user nobody here (skipped)"; return 1; }
	chmod 711 "$T"
	mkdir -p "$T/home-nobody" && chown nobody "$T/home-nobody" || return 1
	start_server torchtenant $((PORT + 81)) || { bad "torch-tenant: its server did not start"; return 1; }
	chmod 666 "$T/torchtenant.sock"
}

run_torch_tests() {
	[ "$MODE" = gpu ] || return
	{ want torch-shm || want torch-tcp || want torch-tenant || want torch-quota || want torch-cr || want torch-cr-node || want torch-cr-share ||
		want torch-cr-nccl || want torch-cr-ddp; } || return
	if ! timeout 120 "$TORCH_PY" -c "import torch, transformers" 2>/dev/null; then
		echo "skip torch tests: $TORCH_PY cannot import torch and transformers"
		return
	fi
	if want torch-shm || want torch-tcp || want torch-tenant; then
		# shellcheck disable=SC2086
		deadline 600 env $DRIVER_ENV "$TORCH_PY" "$TORCH_W" ${TORCH_WORKLOADS:-} >"$T/torch.native" 2>"$T/torch.native.err"
		if ! grep -qx "workloads done" "$T/torch.native"; then
			bad "torch workloads natively did not run to their end"; tail -3 "$T/torch.native.err"
		else
			want torch-shm && torch_compare shm
			want torch-tcp && torch_compare tcp
			want torch-tenant && torch_tenant_ready && torch_compare tenant
		fi
	fi
	want torch-quota && torch_quota
	want torch-cr-share && torch_cr_share
	if { want torch-cr-nccl || want torch-cr-ddp; } && [ "$(torch_gpus)" -lt 2 ]; then
		echo "note torch-cr-nccl, torch-cr-ddp: one GPU here; they need two"
	elif want torch-cr-nccl || want torch-cr-ddp; then
		want torch-cr-nccl && wants_cr_ok && torch_cr_nccl
		want torch-cr-ddp && wants_cr_ok && torch_cr_ddp
	fi
	want torch-cr || want torch-cr-node || return
	CR_REF=$T/torch.train.ref
	deadline 300 env $DRIVER_ENV "$TORCH_PY" "$TORCH_W" train "$TORCH_STEPS" 0 >"$CR_REF" 2>"$CR_REF.err" ||
		{ bad "torch training natively"; tail -3 "$CR_REF.err"; unset CR_REF; return; }
	local train="$TORCH_PY $TORCH_W train $TORCH_STEPS $TORCH_STEP_MS"
	# shellcheck disable=SC2086  # the command's words
	want torch-cr && CR_TAG=torch CR_PORTS=40 cr_case \
		"PyTorch training dumped by criu mid-way, its server killed, restored into a new server: same final weights" \
		"$T/ckpt.torch" cr_server_killed $train
	# shellcheck disable=SC2086
	want torch-cr-node && CR_TAG=torchnode CR_PORTS=42 cr_case \
		"PyTorch training over TCP dumped mid-way and restored on another node: same final weights" \
		"$T/ckpt.torchnode" cr_other_node $train
	ip netns del "cicada-torchnode-$$" 2>/dev/null
	unset CR_REF
}

#!/usr/bin/env bash
# gpu-check.sh [--cpu]: Cicada under Slurm on a GPU node that has no Slurm
# (and no apt): the build's copy of Debian's Slurm (build/slurm-root, which
# `make` leaves there: scripts/bundle-slurm.sh), run as root from the
# tree's root, after `make` on a build machine and copying the tree:
#
#   bash tests/slurm/gpu-check.sh
#
# 1. A one-node Slurm on GPU 0: srun --cicada=local runs a PyTorch
#    training (tests/torch/workloads.py train) through the node's
#    gpu-server; its output must be the native run's, bit for bit.
# 2. With two GPUs: two nodes (network namespaces), each GPU behind its
#    own gpu-server (--gpus 0, --gpus 1). The same training runs as a
#    batch job on node gpu0; the node is drained (scontrol update
#    state=drain) and cicada-slurm watch moves the job's GPU session to
#    gpu1's server, on GPU 1 (gpu-migrate --gpu-only); the job must end
#    with the native output and must not have been requeued.
#
# Prints "ok"/"FAIL" per check and "N passed, N failed" last; KEEP_T=1
# keeps the scratch folder. --cpu runs the same on the CPU stand-in with
# a small C program in place of PyTorch (to try it without a GPU).
# TORCH_PYTHON names the Python with torch (default python3).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
B=$ROOT/build
. scripts/lib.sh
PASS=0 FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }
T=$(mktemp -d "${TMPDIR:-/tmp}/cicada-slurm-gpu.XXXXXX")
chmod 755 "$T"
SL=$T/one

if [ "${1:-}" = --cpu ]; then
	DRIVER_ENV="LD_LIBRARY_PATH=$B/tests/fakecuda FAKECUDA_DEVICES=2"
	NGPUS=2
	export CICADA_KERNELS=$B/tests/kernels
	JOB="$B/tests/programs/cr_pattern $CICADA_KERNELS 64 60 150"
	SHORT="$B/tests/programs/cr_pattern $CICADA_KERNELS 64 10 10"
else
	DRIVER_ENV=""
	NGPUS=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU")
	PY=${TORCH_PYTHON:-python3}
	JOB="$PY $ROOT/tests/torch/workloads.py train 150 100"
	SHORT="$PY $ROOT/tests/torch/workloads.py train 30 0"
fi
[ -x "$B/slurm-root/sbin/slurmctld" ] && SLURM_ROOT=${SLURM_ROOT:-$B/slurm-root}
[ -x "$B/lib/slurm/cicada.so" ] || { echo "gpu-check: no build/lib/slurm/cicada.so: run make where libslurm-dev is"; exit 1; }
# no iproute2 here: the build's copy stands in
if ! command -v ip >/dev/null && [ -x "$B/tests/tools/iproute/ip.bin" ]; then
	mkdir -p "$T/bin" && ln -s "$ROOT/tests/tools/ip" "$T/bin/ip" && PATH=$T/bin:$PATH
fi
. tests/slurm/cluster.sh
SLURM_DEADLINE=900
trap 'slurm_cluster_down; [ -n "${KEEP_T:-}" ] || rm -rf "$T"' EXIT

# wait_for LINE FILE SECONDS
wait_for() {
	for _ in $(seq $(($3 * 10))); do grep -q "$1" "$2" 2>/dev/null && return 0; sleep 0.1; done
	return 1
}

# native NAME COMMAND...: the reference output, on GPU 0.
native() {
	local name=$1
	shift
	# shellcheck disable=SC2086  # the driver's variables
	env $DRIVER_ENV CUDA_VISIBLE_DEVICES=0 timeout -k 5 600 "$@" >"$T/$name.native" 2>"$T/$name.native.err"
}

# 1. one node, one GPU: srun --cicada=local
native short $SHORT
if ! slurm_cluster_up "gpu0:--gpus:0" >"$T/up1.log" 2>&1; then
	bad "a one-node Slurm did not come up: $(tail -n 3 "$T/up1.log" | tr '\n' ' ')"
else
	# shellcheck disable=SC2086  # the command's words
	timeout -k 5 600 srun -w gpu0 --cicada=local $SHORT </dev/null >"$T/short.out" 2>"$T/short.err"
	if [ -s "$T/short.native" ] && cmp -s "$T/short.native" "$T/short.out" &&
		grep -q "client .* connected" "$SL/server-gpu0.log"; then
		ok "srun --cicada=local on a one-node Slurm: the program's GPU work on the node's gpu-server, output as native ($(tail -n 1 "$T/short.out"))"
	else
		bad "srun --cicada=local on a one-node Slurm"
		diff "$T/short.native" "$T/short.out" | head -n 5
		tail -n 5 "$T/short.err"
	fi
fi
slurm_cluster_down

# 2. two GPUs, each behind its own server and node: drain
if [ "${NGPUS:-0}" -lt 2 ]; then
	echo "skip drain: this node has ${NGPUS:-0} GPU (two are needed)"
else
	SL=$T/two
	native long $JOB
	if ! slurm_cluster_up "gpu0:--gpus:0" "gpu1:--gpus:1" >"$T/up2.log" 2>&1; then
		bad "a two-node Slurm did not come up: $(tail -n 3 "$T/up2.log" | tr '\n' ' ')"
	else
		# shellcheck disable=SC2086  # nsenter's argument
		sl_bg "$SL/watch.log" nsenter $SL_NS_gpu0 "$B/bin/cicada-slurm" watch --interval 1
		printf '#!/bin/bash\nexec %s\n' "$JOB" >"$SL/long.sh"
		job=$(timeout 30 sbatch --parsable -w gpu0 --cicada=local -t 20 -o "$SL/long.out" -e "$SL/long.err" "$SL/long.sh")
		fails=""
		wait_for "^step 20 " "$SL/long.out" 300 || fails="$fails the job did not start;"
		timeout 30 scontrol update nodename=gpu0 state=drain reason=cicada-gpu-check
		wait_for "drained gpu0: 1 of 1 GPU sessions moved to gpu1" "$SL/watch.log" 300 ||
			fails="$fails not moved ($(tail -n 2 "$SL/watch.log" | tr '\n' ' '));"
		for _ in $(seq 1200); do
			[ "$(timeout 10 squeue -h -j "$job" 2>/dev/null | wc -l)" = 0 ] && break
			sleep 0.5
		done
		state=$(timeout 10 scontrol show job "$job" -o | tr ' ' '\n' | sed -n 's/^JobState=//p')
		restarts=$(timeout 10 scontrol show job "$job" -o | tr ' ' '\n' | sed -n 's/^Restarts=//p')
		[ "$state" = COMPLETED ] && [ "$restarts" = 0 ] || fails="$fails job $state, $restarts restarts;"
		cmp -s "$T/long.native" "$SL/long.out" || fails="$fails the output differs;"
		grep -q "reattached" "$SL/server-gpu1.log" || fails="$fails gpu1's server saw no reattach;"
		if [ -z "$fails" ]; then
			ok "drain of gpu0: the running job's GPU session moved to GPU 1 (gpu1's server); not requeued; output as native ($(grep "moved (gpu-only)" "$SL/watch.log" | sed 's/.*: downtime/downtime/'))"
		else
			bad "drain of gpu0:$fails"
			diff "$T/long.native" "$SL/long.out" | head -n 5
			tail -n 5 "$SL/long.err" "$SL/watch.log"
		fi
	fi
	slurm_cluster_down
fi
echo "$PASS passed, $FAIL failed"
[ $FAIL = 0 ]

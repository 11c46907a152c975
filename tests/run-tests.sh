#!/usr/bin/env bash
# run-tests.sh [--gpu] [--list] [NAME...]: Cicada's test suite, run by
# 'make test' (CPU stand-in for the driver, no GPU needed) and 'make
# test-gpu' (real driver). With NAMEs (shell patterns allowed: 'cr-*')
# only those tests run; --list prints every name. To add a test, add its
# name to TESTS below and begin it with 'want NAME || return'.
#
# Every test program runs twice: directly on the driver ("native": the
# stand-in in CPU mode, the real libcuda on a GPU machine) and through
# Cicada over each transport (shared memory, unix socket, TCP loopback,
# LD_PRELOAD). The outputs must be identical. Then the fault cases:
# unreachable servers, refused tokens and versions, malformed messages,
# a server dying mid-run, a client dying next to another. Uses prebuilt
# outputs only; prints "N passed, N failed" last. KEEP_T=1 keeps the
# scratch directory (logs, outputs, snapshots) for a look afterwards.
# CICADA_TEST_GPUS=LIST (GPU mode) runs on those GPUs of the node only:
# the servers and the native references see them (CUDA_VISIBLE_DEVICES),
# a client through Cicada sees what its server serves; two suites can so
# share a two-GPU node.
#
# Nothing here can hang: every process a test starts has a deadline
# (scripts/lib.sh's deadline, or timeout), a process past it is a FAIL
# that says so, and servers are bounded by SERVER_DEADLINE.
set -u

TESTS="snapshot snapshot-cli unit
vecadd_cubin vecadd_ptx vecadd_library multi_module memcpy_all lanes streams_events launch_1000 sm_share misc_calls jit_link managed_mem graph_nodes graph_pageable graph_conditional vmm_app device_query features tensor_map stream_memops user_objects
context_ops errors_app zero_copy host_devptr dlopen_app device_assert
rt_basic rt_basic_shared rt_features rt_features_shared rt_texture rt_texture_shared rt_mapped rt_graph_copy printf
rt_cublas rt_cufft rt_curand rt_cusolver rt_cusparse rt_thrust rt_cublas_batched rt_fft_conv rt_cg_graph
nvml trace compute-cache handshake tls tls-client allow-list quota cicadactl sm-share sm-share-nvml token-dir session-owner server-dirs module-cache unreachable refusals malformed sweep generator server-death isolation
criu-plain load-shm load-tcp busy queue per-client hello-deadline log-abuse install
sec-shm-race sec-checkpoint-theft sec-parent sec-jam-unix sec-jam-tcp sec-flood sec-migrate-token sec-verify-key sec-ipc-users sec-privsep sec-staged sec-ctl-squat
cr-shm cr-unix cr-tcp cr-children cr-pidns cr-template cr-quota cr-server-killed cr-tenant cr-jit-cache cr-other-node cr-periodic cr-incremental cr-keyed cr-killed-dump cr-refusals cr-runtime
cr-hostfn cr-managed cr-mapped cr-graph cr-objects cr-refused cr-tcp-held cr-uring cr-vmm-taken cr-globals-moved cr-small-target cr-cufft cr-sizes cr-carry cr-carry-out cr-carry-in
rust
multi-gpu gpu-visible cr-multi-gpu migrate-gpu ipc cr-ipc
torch-shm torch-tcp torch-tenant torch-quota torch-cr torch-cr-node torch-cr-share torch-cr-nccl torch-cr-ddp
migrate-whole migrate-gpu-only migrate-pinned migrate-chain migrate-link-cut migrate-gpu-faults migrate-target-oom migrate-other-model migrate-tls migrate-refused migrate-killed migrate-ipc migrate-big
containers containers-runc
slurm"
MODE=cpu SELECT=()
for a in "$@"; do
	case $a in
	--gpu) MODE=gpu ;;
	--list) printf '%s\n' $TESTS; exit 0 ;;
	-*) echo "run-tests: unknown option $a (--gpu, --list, or test names)"; exit 2 ;;
	*) SELECT+=("$a") ;;
	esac
done
for pat in "${SELECT[@]}"; do
	found=""
	for n in $TESTS; do
		# shellcheck disable=SC2053  # a pattern on purpose
		[[ $n == $pat ]] && found=1
	done
	[ -n "$found" ] || { echo "run-tests: no test is named '$pat' (run-tests.sh --list)"; exit 2; }
done

# want NAME: whether test NAME is to run (all are when none was named).
want() {
	local pat
	[ ${#SELECT[@]} -eq 0 ] && return 0
	for pat in "${SELECT[@]}"; do
		# shellcheck disable=SC2053
		[[ $1 == $pat ]] && return 0
	done
	return 1
}

SUITE_START=$(date +%s)
CUDA_INCLUDE=${CUDA:-/usr/local/cuda}/include
CUDA_STUB=${CUDA:-/usr/local/cuda}/lib64/stubs/libcuda.so
SERVER_DEADLINE=${SERVER_DEADLINE:-5400}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. scripts/lib.sh
B=$ROOT/build
PROGS=$B/tests/programs
TOOLS=$B/tests/tools
export CICADA_KERNELS=$B/tests/kernels
. tests/cr/cr-tests.sh
. tests/cr/carry.sh
. tests/migrate/migrate-tests.sh
. tests/load/admission-tests.sh
. tests/security/security-tests.sh
. tests/torch/torch-tests.sh
. tests/multigpu/multigpu-tests.sh
. tests/packaging/install-tests.sh
. tests/rust/rust-tests.sh
. tests/containers/run.sh
. tests/slurm/slurm-tests.sh
T=$(mktemp -d "${TMPDIR:-/tmp}/cicada-test.XXXXXX")
# A GPU node may lack iproute2: the build's copy stands in (tests/tools/ip).
if ! command -v ip >/dev/null && [ -x "$TOOLS/iproute/ip.bin" ]; then
	mkdir -p "$T/bin" && ln -s "$ROOT/tests/tools/ip" "$T/bin/ip" && PATH=$T/bin:$PATH
fi
PORT=$((20000 + $$ % 20000))
PASS=0
FAIL=0
SERVERS=""

# (a preloaded client keeps what the driver needs, but not the GPU choice:
# its CUDA_VISIBLE_DEVICES would pick among its server's GPUs)
if [ "$MODE" = cpu ]; then
	DRIVER_ENV="LD_LIBRARY_PATH=$B/tests/fakecuda CUDA_CACHE_PATH=$T/compute-cache"
	PRELOAD_ENV=$DRIVER_ENV
else
	PRELOAD_ENV="CICADA_NATIVE=1"
	DRIVER_ENV="$PRELOAD_ENV${CICADA_TEST_GPUS:+ CUDA_VISIBLE_DEVICES=$CICADA_TEST_GPUS}"
fi

# kill_ours PATTERN: this suite's processes matching PATTERN, those whose
# environment names its scratch directory (its clients' CICADA_SERVER or
# token file): a suite beside it on the node keeps its own.
kill_ours() {
	local p
	for p in $(pgrep -f "$1"); do
		grep -qsF "$T/" "/proc/$p/environ" && kill -9 "$p" 2>/dev/null
	done
}

cleanup() {
	for p in $SERVERS; do kill -9 "$p" 2>/dev/null; done
	pkill -9 -f "gpu-server --listen .* --cache-dir $T/" 2>/dev/null
	pkill -9 -f "gpu-server --worker-fd .* --cache-dir $T/" 2>/dev/null
	kill_ours "^$PROGS/"                       # checkpointed programs (setsid, no deadline of their own)
	kill_ours "tests/torch/workloads.py [a-z-]*(train|launch)"   # (launchers and ranks too)
	ip netns del "cicada-node-$$" 2>/dev/null
	ip netns del "cicada-torchnode-$$" 2>/dev/null
	mig_nodes_down
	ct_down
	slurm_cluster_down
	[ -n "${KEEP_T:-}" ] || rm -rf "$T"
}
trap cleanup EXIT

ok() { PASS=$((PASS + 1)); echo "ok   $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

for f in "$B/bin/gpu-server" "$B/lib/libcicada.so" "$B/lib/libnvidia-ml.so.1" "$PROGS/vecadd_cubin" \
	"$PROGS/nvml_query" "$TOOLS/wire_abuse"; do
	[ -e "$f" ] || { echo "run-tests: $f is missing; run 'make' first"; echo "0 passed, 1 failed"; exit 1; }
done
head -c 24 /dev/urandom | base64 > "$T/token"
head -c 24 /dev/urandom | base64 > "$T/mtoken"   # migrations' own (--migration-token-file)

# start_server NAME PORT [ENV [ARG...]]: starts a gpu-server on
# $T/NAME.sock and tcp PORT (ENV: more variables for it, after the
# driver's; ARGs: more options).
# PID_NAME is the server's own pid (the deadline's timeout is its parent).
start_server() {
	local name=$1 port=$2 extra=${3:-} pid
	shift 2
	[ $# -gt 0 ] && shift
	env $DRIVER_ENV $extra timeout -k 5 "$SERVER_DEADLINE" "$B/bin/gpu-server" --listen "unix:$T/$name.sock" \
		--listen "tcp:127.0.0.1:$port" --token-file "$T/token" --cache-dir "$T/cache-$name" --workers 2 "$@" \
		>>"$T/$name.log" 2>&1 &
	pid=$!
	SERVERS="$SERVERS $pid"
	disown $pid
	wait_for_server $pid "$T/$name.sock" "$T/$name.log" run-tests || return 1
	pid=$(pgrep -P "$pid" | head -n 1)
	SERVERS="$SERVERS $pid"
	eval "PID_$name=$pid"
}

# cicada_env TRANSPORT [SERVER]: the environment of a client of SERVER.
cicada_env() {
	local s=${2:-main} port=$PORT
	[ "$s" = main ] || port=$((PORT + 1))
	case $1 in
	shm) echo "CICADA_SERVER=unix:$T/$s.sock LD_LIBRARY_PATH=$B/lib" ;;
	unix) echo "CICADA_SERVER=unix:$T/$s.sock CICADA_SHM=0 LD_LIBRARY_PATH=$B/lib" ;;
	tcp) echo "CICADA_SERVER=tcp:127.0.0.1:$port CICADA_TOKEN_FILE=$T/token LD_LIBRARY_PATH=$B/lib" ;;
	preload) echo "CICADA_SERVER=unix:$T/$s.sock LD_PRELOAD=$B/lib/libcicada.so $PRELOAD_ENV" ;;
	esac
}

# run_same PROG TRANSPORT: PROG through Cicada prints what it prints natively.
run_same() {
	local prog=$1 tr=$2 out=$T/$1.$2
	[ -s "$T/$prog.native" ] || { bad "$prog over $tr: no native reference"; return; }
	deadline 120 env $(cicada_env "$tr") "$PROGS/$prog" >"$out" 2>"$out.err"
	local rc=$?
	if [ $rc -eq 0 ] && cmp -s "$T/$prog.native" "$out"; then
		ok "$prog over $tr: identical to native"
	else
		bad "$prog over $tr: exit $rc"; diff "$T/$prog.native" "$out" | head -5; tail -3 "$out.err"
	fi
}

run_programs() {
	local progs="vecadd_cubin vecadd_ptx vecadd_library multi_module memcpy_all streams_events launch_1000 misc_calls jit_link managed_mem graph_nodes graph_pageable graph_conditional vmm_app
		     device_query tensor_map stream_memops user_objects context_ops errors_app zero_copy host_devptr dlopen_app"
	for p in $progs; do
		want "$p" || continue
		env $DRIVER_ENV timeout 120 "$PROGS/$p" >"$T/$p.native" 2>"$T/$p.native.err" ||
			{ bad "$p natively (exit $?)"; tail -3 "$T/$p.native.err"; continue; }
		case $p in
		dlopen_app) run_same "$p" preload ;;
		*) for tr in shm unix tcp; do run_same "$p" "$tr"; done ;;
		esac
	done
	[ "$MODE" = gpu ] && want vecadd_cubin && run_same vecadd_cubin preload
	want device_assert && run_device_assert
	want features && test_features
	test_lanes
	run_runtime_programs
}

# Features Cicada does not serve (multicast, the old ABI of stream memory
# operations, dma-buf, pool exports, fabric handles, GPUDirect RDMA, ...): through
# Cicada the device says it lacks every one, whatever it says natively.
test_features() {
	local tr on
	env $DRIVER_ENV timeout 60 "$PROGS/device_query" features >"$T/features.native" 2>&1 ||
		{ bad "device_query features natively"; tail -3 "$T/features.native"; return; }
	on=$(grep -c ' = [1-9]' "$T/features.native")
	for tr in shm tcp; do
		deadline 60 env $(cicada_env "$tr") "$PROGS/device_query" features >"$T/features.$tr" 2>&1
		check "features Cicada does not serve read 0 over $tr ($on of $(wc -l <"$T/features.native") are on natively)" \
			sh -c "test \$(grep -c ' = 0\$' '$T/features.$tr') = $(wc -l <"$T/features.native") -a -s '$T/features.$tr'"
	done
}

# Bulk lanes: memcpy_all over TCP with 1, 3 and 4 lanes and with none
# (one connection) prints what it prints natively, and said it used them.
test_lanes() {
	want lanes || return
	[ -s "$T/memcpy_all.native" ] || env $DRIVER_ENV timeout 120 "$PROGS/memcpy_all" >"$T/memcpy_all.native" 2>/dev/null
	for n in 1 3 4 0; do
		deadline 120 env $(cicada_env tcp) CICADA_LANES=$n CICADA_LOG=info "$PROGS/memcpy_all" \
			>"$T/lanes.$n" 2>"$T/lanes.$n.err"
		local rc=$? what="memcpy_all over TCP with CICADA_LANES=$n: identical to native"
		if [ $rc -eq 0 ] && cmp -s "$T/memcpy_all.native" "$T/lanes.$n" &&
			{ [ $n = 0 ] && ! grep -q "bulk lanes" "$T/lanes.$n.err" || grep -q "bulk lanes: $n open" "$T/lanes.$n.err"; }; then
			ok "$what"
		else
			bad "$what (exit $rc)"; tail -3 "$T/lanes.$n.err"
		fi
	done
}

# Failed device asserts: the driver's lines on stderr reach the program's
# own stderr through Cicada, and the synchronisation's error its stdout.
run_device_assert() {
	local tr out
	env $DRIVER_ENV timeout 120 "$PROGS/device_assert" >"$T/assert.native" 2>"$T/assert.native.err" ||
		{ bad "device_assert natively (exit $?)"; tail -3 "$T/assert.native.err"; return; }
	grep -q "Assertion" "$T/assert.native.err" || { bad "device_assert natively printed no assertion"; return; }
	for tr in shm tcp; do
		out=$T/assert.$tr
		deadline 120 env $(cicada_env "$tr") "$PROGS/device_assert" >"$out" 2>"$out.err"
		if cmp -s "$T/assert.native" "$out" &&
		   cmp -s <(grep Assertion "$T/assert.native.err") <(grep Assertion "$out.err"); then
			ok "device asserts over $tr: the driver's lines on the program's stderr, the error as natively"
		else
			bad "device asserts over $tr"; diff "$T/assert.native" "$out" | head -4
			diff <(grep Assertion "$T/assert.native.err") <(grep Assertion "$out.err") | head -4
		fi
	done
}

# CUDA runtime programs (static and shared runtime). The stand-in is no
# runtime's driver (it has no export tables), so in CPU mode the reference
# is the run over shared memory, which must itself end with "done".
run_runtime_programs() {
	local p
	for p in rt_basic rt_basic_shared rt_features rt_features_shared rt_texture rt_texture_shared; do
		want "$p" || { [ "$p" = rt_features ] && want printf; } || continue
		if [ "$MODE" = gpu ]; then
			env $DRIVER_ENV timeout 120 "$PROGS/$p" >"$T/$p.native" 2>"$T/$p.native.err" ||
				{ bad "$p natively (exit $?)"; tail -3 "$T/$p.native.err"; continue; }
		else
			env $(cicada_env shm) timeout 120 "$PROGS/$p" >"$T/$p.native" 2>"$T/$p.native.err"
			if ! grep -qx done "$T/$p.native"; then
				bad "$p through Cicada (shared memory): did not run to its end"
				tail -5 "$T/$p.native" "$T/$p.native.err"
				continue
			fi
			ok "$p through Cicada (shared memory) runs to its end, every check passing"
		fi
		for tr in shm unix tcp; do run_same "$p" "$tr"; done
	done
	want rt_basic && run_same rt_basic preload
	want rt_features && run_same rt_features preload
	want rt_mapped && run_mapped_program
	want rt_graph_copy && run_graph_copy
	want printf && check "device printf reaches the program's stdout, in order, at synchronise and at a blocking copy" \
		printf_in_place "$T/rt_features.shm"
	[ "$MODE" = gpu ] && run_library_programs
}

# rt_mapped: zero-copy with memory shared with a local worker; over a
# remote link, mapped pinned memory is managed memory and registered
# memory a device mirror (kernels' writes seen after a synchronisation,
# as natively).
run_mapped_program() {
	local p=rt_mapped
	if [ "$MODE" = gpu ]; then
		env $DRIVER_ENV timeout 120 "$PROGS/$p" >"$T/$p.native" 2>"$T/$p.native.err" ||
			{ bad "$p natively (exit $?)"; return; }
	else
		env $(cicada_env shm) timeout 120 "$PROGS/$p" >"$T/$p.native" 2>/dev/null
		check "$p through Cicada (shared memory) runs to its end, every check passing" grep -qx done "$T/$p.native"
	fi
	run_same "$p" shm
	run_same "$p" preload
	run_same "$p" unix
	run_same "$p" tcp
}

# rt_graph_copy: pageable copies captured into a graph move at each launch,
# through memory shared with a local worker; a remote server refuses the
# capture, and says why at info level.
run_graph_copy() {
	local p=rt_graph_copy err
	if [ "$MODE" = gpu ]; then
		env $DRIVER_ENV timeout 120 "$PROGS/$p" >"$T/$p.native" 2>"$T/$p.native.err" ||
			{ bad "$p natively (exit $?)"; return; }
	else
		env $(cicada_env shm) timeout 120 "$PROGS/$p" >"$T/$p.native" 2>/dev/null
		check "$p through Cicada (shared memory): every launch reads and writes the program's memory as it is then" \
			test "$(grep -c "output right" "$T/$p.native")/$(grep -cx done "$T/$p.native")" = 3/1
	fi
	run_same "$p" shm
	run_same "$p" tcp      # staged by the worker, its bytes on the host function channel
}

# rt_features prints device printf lines between lines of its own: after
# a device synchronise, and after a blocking copy.
printf_in_place() {
	local want="before the kernel's output|device printf: value 21|device printf: twice 42|after the kernel's output|"
	want="${want}device printf: value 5|device printf: twice 10|after the copy|"
	[ "$(sed -n "/^before the kernel/,/^after the copy/p" "$1" | tr '\n' '|')" = "$want" ]
}

# CUDA library programs (GPU only: the stand-in has none of their
# kernels): each name, what it exercises, and the shared libraries it
# loads (its NEEDED entries and theirs).
LIBRARY_PROGRAMS="
rt_cublas|cuBLAS, cuBLASLt|libcublas.so.13 libcublasLt.so.13
rt_cufft|cuFFT: batched C2C round trip, 2D R2C|libcufft.so.12
rt_curand|cuRAND: XORWOW and Philox generators, device API|libcurand.so.10
rt_cusolver|cuSOLVER: getrf/getrs, syevd|libcusolver.so.12 libcusparse.so.12 libcublas.so.13 libcublasLt.so.13 libnvJitLink.so.13
rt_cusparse|cuSPARSE: CSR SpMV and SpMM|libcusparse.so.12 libnvJitLink.so.13
rt_thrust|Thrust: radix sort, sort by key, reduce, scan|
rt_cublas_batched|cuBLAS batched GEMMs: pointer arrays, strided, fp16|libcublas.so.13 libcublasLt.so.13
rt_fft_conv|cuFFT convolution: 1D 2^24, 2D 4096^2, 3D, odd radix, prime|libcufft.so.12
rt_cg_graph|cuBLAS and cuSPARSE conjugate gradient captured into a graph|libcublas.so.13 libcublasLt.so.13 libcusparse.so.12 libnvJitLink.so.13"

# library_path LIB...: a search path holding every LIB, from the node's
# toolkit or else the NVIDIA pip packages beside PyTorch; names the first
# missing one and fails if none holds it.
library_path() {
	local lib d path="" found
	for lib in "$@"; do
		found=""
		for d in /usr/local/cuda/lib64 /usr/local/cuda-13.0/targets/x86_64-linux/lib \
			/opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib; do
			[ -e "$d/$lib" ] && found=$d && break
		done
		[ -n "$found" ] || { echo "$lib"; return 1; }
		case ":$path:" in *":$found:"*) ;; *) path=${path:+$path:}$found ;; esac
	done
	echo "$path"
}

run_library_programs() {
	local prog what needs libs tr out
	while IFS='|' read -r -u 3 prog what needs; do
		[ -n "$prog" ] && want "$prog" || continue
		libs=$(library_path $needs) || { bad "$prog ($what): no $libs in the toolkit or the pip NVIDIA packages"; continue; }
		env $DRIVER_ENV LD_LIBRARY_PATH="$libs" timeout 120 "$PROGS/$prog" >"$T/$prog.native" 2>&1 ||
			{ bad "$prog natively"; tail -3 "$T/$prog.native"; continue; }
		for tr in shm unix tcp; do
			out=$T/$prog.$tr
			env $(cicada_env "$tr") LD_LIBRARY_PATH="$B/lib:$libs" timeout 120 "$PROGS/$prog" >"$out" 2>"$out.err"
			if [ $? -eq 0 ] && cmp -s "$T/$prog.native" "$out"; then
				ok "$prog ($what) over $tr: identical to native"
			else
				bad "$prog over $tr"; diff "$T/$prog.native" "$out" | head -5; tail -3 "$out.err"
			fi
		done
	done 3<<<"$LIBRARY_PROGRAMS"
}

# NVML through Cicada's libnvidia-ml.so.1 ($B/lib, beside libcuda.so.1).
# On a GPU node the reference is the real NVML, natively. The stand-in
# has no NVML (the server answers from the driver API), so in CPU mode
# the reference is the run over shared memory, which must end with
# "done". Either way NVML must name the device as the driver does.
run_nvml() {
	local p=nvml_query tr
	want nvml || return
	[ -s "$T/device_query.native" ] ||
		env $DRIVER_ENV timeout 120 "$PROGS/device_query" >"$T/device_query.native" 2>/dev/null
	if [ "$MODE" = gpu ]; then
		env $DRIVER_ENV timeout 60 "$PROGS/$p" >"$T/$p.native" 2>"$T/$p.native.err" ||
			{ bad "$p natively (exit $?)"; grep FAIL "$T/$p.native" | head -5; tail -3 "$T/$p.native.err"; return; }
	else
		env $(cicada_env shm) timeout 60 "$PROGS/$p" >"$T/$p.native" 2>"$T/$p.native.err"
		if [ "$(tail -n 1 "$T/$p.native")" != done ]; then
			bad "$p through Cicada (shared memory): did not run to its end"
			grep FAIL "$T/$p.native" | head -5; tail -3 "$T/$p.native.err"
			return
		fi
		ok "$p through Cicada (shared memory) runs to its end, every check passing"
	fi
	check "$p: NVML's device is the driver's (name, UUID, compute capability, CUDA version$(
		[ "$MODE" = cpu ] && echo ", memory"))" nvml_matches_driver
	if [ -n "${CICADA_TEST_GPUS:-}" ]; then
		# native NVML counts every GPU of the node whatever
		# CUDA_VISIBLE_DEVICES says; through Cicada it counts the
		# server's: each run's own checks must pass
		for tr in shm unix tcp preload; do
			check "$p over $tr (CICADA_TEST_GPUS: its own checks)" nvml_done "$tr"
		done
		return
	fi
	for tr in shm unix tcp preload; do run_same "$p" "$tr"; done
	test_nvml_guard
}

# nvml_done TRANSPORT: nvml_query through Cicada runs to its end.
nvml_done() {
	env $(cicada_env "$1") timeout 60 "$PROGS/nvml_query" >"$T/nvml_query.$1" 2>&1 &&
		[ "$(tail -n 1 "$T/nvml_query.$1")" = done ]
}

# The facts device_query printed through the driver, found in what NVML
# printed (any device: NVML's order may differ from CUDA's). NVML counts
# a GPU's memory differently from cuDeviceTotalMem, so memory is
# compared only where both come from the driver (CPU mode).
nvml_matches_driver() {
	local dq=$T/device_query.native nq=$T/nvml_query.norm name uuid mem ver maj min
	name=$(sed -n 's/^device 0 name = //p' "$dq")
	uuid=$(sed -n 's/^device 0 uuid = //p' "$dq")
	mem=$(sed -n 's/^device 0 total_mem = //p' "$dq")
	ver=$(sed -n 's/^driver_version = //p' "$dq")
	maj=$(sed -n 's/^attr COMPUTE_CAPABILITY_MAJOR = //p' "$dq")
	min=$(sed -n 's/^attr COMPUTE_CAPABILITY_MINOR = //p' "$dq")
	sed 's/^device [0-9]* /device N /' "$T/nvml_query.native" >"$nq"
	[ -n "$name" ] && [ -n "$uuid" ] && [ -n "$ver" ] && [ -n "$maj" ] || return 1
	grep -qFx "device N name = $name" "$nq" && grep -qFx "device N uuid = GPU-$uuid" "$nq" &&
		grep -qFx "device N compute capability = $maj.$min" "$nq" &&
		grep -qFx "CUDA driver version = $ver" "$nq" &&
		{ [ "$MODE" = gpu ] || grep -qFx "device N total memory = $mem" "$nq"; }
}

# A server whose library path leads to Cicada's replacement must not take
# it for NVML: it says so and uses the real NVML (GPU) or the driver API.
test_nvml_guard() {
	local fake="" out=$T/nvml_query.guard
	mkdir -p "$T/nvml-only"
	ln -sf "$B/lib/libnvidia-ml.so.1" "$T/nvml-only/libnvidia-ml.so.1"
	[ "$MODE" = cpu ] && fake="$B/tests/fakecuda:"
	start_server guard $((PORT + 2)) "LD_LIBRARY_PATH=$fake$T/nvml-only" || { bad "guard server did not start"; return; }
	env $(cicada_env shm guard) timeout 60 "$PROGS/nvml_query" >"$out" 2>"$out.err"
	if [ $? -eq 0 ] && cmp -s "$T/nvml_query.native" "$out"; then
		ok "nvml_query via a server that finds Cicada's libnvidia-ml.so.1 first: identical"
	else
		bad "nvml_query via a server that finds Cicada's libnvidia-ml.so.1 first"
		diff "$T/nvml_query.native" "$out" | head -5; tail -3 "$out.err"
	fi
	check "that server refused the replacement as NVML, and said so" \
		grep -q "is Cicada's NVML replacement, not NVML; not using it" "$T/guard.log"
	pkill -9 -f "gpu-server --worker-fd .* --cache-dir $T/cache-guard" 2>/dev/null
	kill -9 "$PID_guard" 2>/dev/null
	rm -f "$T/guard.sock"
}

test_module_cache() {
	want module-cache || return
	env $(cicada_env shm) timeout 60 "$PROGS/vecadd_cubin" >/dev/null 2>&1
	env $(cicada_env shm) CICADA_LOG=debug timeout 60 "$PROGS/vecadd_cubin" >/dev/null 2>"$T/cache.err"
	check "module images are cached by hash (second run sends only the hash)" \
		grep -q "already cached on the server" "$T/cache.err"
	check "module cache holds the image by SHA-256, indexed for this client's user" \
		sh -c "ls '$T/cache-main/objects/' | grep -q '^[0-9a-f]\{64\}\.img\$' && ls '$T/cache-main/uid-$(id -u)/' | grep -q '^[0-9a-f]\{32\}\$'"
	env $(cicada_env tcp) timeout 60 "$PROGS/vecadd_cubin" >/dev/null 2>&1
	# (its worker runs as the service user, whose part of the cache is its own)
	check "a TCP client has an index of its own, in its worker's user's part of the cache" \
		sh -c "ls '$T'/cache-main/u*/ip-127.0.0.1/ | grep -q . && [ \$(ls '$T'/cache-main/u*/objects/ | grep -c '\.img\$') -ge 1 ]"
	for f in "$T"/cache-main/objects/*.img; do printf 'not the image' | dd of="$f" bs=1 seek=64 conv=notrunc 2>/dev/null; done
	env $(cicada_env shm) CICADA_LOG=debug timeout 60 "$PROGS/vecadd_cubin" >"$T/cache.out" 2>"$T/cache.err"
	check "a cache entry that is not what its name says is thrown away; the program runs" \
		sh -c "grep -q 'vecadd_cubin: PASS' '$T/cache.out' && grep -q 'not what its name says' '$T/main.log'"
	env $DRIVER_ENV timeout -k 5 120 "$B/bin/gpu-server" --listen "unix:$T/quota.sock" --cache-dir "$T/cache-quota" \
		--workers 1 --cache-quota 12K >"$T/quota.log" 2>&1 &
	local pid=$!
	wait_for_server $pid "$T/quota.sock" "$T/quota.log" run-tests || { bad "quota server"; return; }
	CICADA_SERVER=unix:$T/quota.sock LD_LIBRARY_PATH=$B/lib timeout 60 "$PROGS/multi_module" >/dev/null 2>&1
	check "the module cache keeps to its quota, evicting the least recently used" \
		sh -c "[ \$(cat '$T'/cache-quota/objects/*.img | wc -c) -le 12288 ] && grep -q 'evicted' '$T/quota.log'"
	kill $pid 2>/dev/null
	wait $pid 2>/dev/null
}

# Which driver call failed (interposer/trace.c): errors_app calls
# cuMemFree with a bogus pointer once as linked and twice through
# cuGetProcAddress.
count_in() { grep -c -- "$2" "$1"; }
test_trace() {
	local e=$T/trace.err
	want trace || return
	env $(cicada_env shm) CICADA_LOG=info timeout 60 "$PROGS/errors_app" >/dev/null 2>"$e"
	check "CICADA_LOG=info: a failed call is named once, with its error" \
		test "$(count_in "$e" "cuMemFree_v2 failed: CUDA_ERROR_INVALID_VALUE")" = 1
	env $(cicada_env tcp) CICADA_LOG=debug CICADA_TRACE=1 timeout 60 "$PROGS/errors_app" >/dev/null 2>"$e.all"
	check "CICADA_TRACE=1: each failure, linked or looked up, and the calls that succeed" \
		test "$(count_in "$e.all" "cuMemFree_v2 failed: CUDA_ERROR_INVALID_VALUE")" = 3 -a \
		"$(count_in "$e.all" "cuMemFree_v2: CUDA_SUCCESS")" -ge 1
	env $(cicada_env shm) CICADA_LOG=info CICADA_TRACE=1 timeout 60 "$PROGS/launch_1000" >/dev/null 2>"$e.many"
	check "CICADA_TRACE=1 at info level: every call of a thousand, none rate-limited" \
		test "$(count_in "$e.many" "cuLaunchKernel: CUDA_SUCCESS")" -ge 1000
	env $(cicada_env shm) timeout 60 "$PROGS/errors_app" >/dev/null 2>"$e.none"
	check "by default no call is traced" test "$(count_in "$e.none" "failed: CUDA_ERROR")" = 0
	env $(cicada_env shm) CICADA_STATS=1 timeout 60 "$PROGS/launch_1000" >/dev/null 2>"$e.stats"
	check "CICADA_STATS=1: each driver function's calls and time, and the process's wall and CPU time" sh -c \
		"grep -Eq 'driver cuLaunchKernel +[0-9]+ calls +[0-9.]+ ms' '$e.stats' &&
		 grep -Eq 'process [0-9.]+ s wall, [0-9.]+ s CPU; [0-9]+ driver calls took' '$e.stats'"
	env $(cicada_env tcp) CICADA_STATS=1 timeout 60 "$PROGS/launch_1000" >/dev/null 2>"$e.wstats"
	check "CICADA_STATS=1: the worker's side, its time by part and the launches it ran" sh -c \
		"grep -Eq 'worker [0-9]+ records in [0-9.]+ s: waiting for this process [0-9.]+ ms, decoding' '$e.wstats' &&
		 grep -Eq 'worker launch_kernel +1200 calls +[0-9.]+ ms' '$e.wstats' &&
		 grep -Eq 'worker launch_kernel +1200 calls' '$e.stats'"
	# vecadd_library sets a kernel attribute 208 times with 6 changes
	# (one refused), and asks the driver version and the attribute after
	# most of them (answers.c).
	env $(cicada_env tcp) CICADA_STATS=1 timeout 60 "$PROGS/vecadd_library" >/dev/null 2>"$e.kept"
	check "a kernel attribute set to the value it has, and the queries after it, cross no wire" sh -c \
		"awk '\$3 == \"cuKernelSetAttribute\" && \$4 <= 7 { k = 1 } \$3 == \"cuDriverGetVersion\" && \$6 <= 2 { v = 1 }
		     \$3 == \"cuKernelGetAttribute\" && \$6 <= 8 { g = 1 } END { exit !(k && v && g) }' '$e.kept'"
}

# The compute cache (interposer/compute_cache.c): nvrtc, reached through
# Cicada, keeps a compile in the client's cache and the next process,
# over any transport, skips the compile and gets the same cubin; a
# damaged entry is a miss, recompiled and rewritten; CUDA_CACHE_DISABLE
# and CUDA_CACHE_MAXSIZE are obeyed; a directory open to others is not used.
nvrtc_run() {   # nvrtc_run NAME TRANSPORT DIR [VAR=VALUE...]
	local name=$1 tr=$2 dir=$3
	shift 3
	deadline 120 env $(cicada_env "$tr") CICADA_COMPUTE_CACHE="$dir" "$@" "$PROGS/nvrtc_cache" \
		>"$T/cc.$name" 2>"$T/cc.$name.err"
}
cc_entries() { find "$1" -maxdepth 1 -type f -regex '.*/[0-9a-f]*' 2>/dev/null | grep -c '/[0-9a-f]\{32\}$'; }
test_compute_cache() {
	local d=$T/nvrtc-cache hash
	want compute-cache || return
	nvrtc_run first shm "$d"
	[ $? = 2 ] && { echo "skip compute-cache: no libnvrtc.so.13 here"; return; }
	hash=$(grep cubin "$T/cc.first")
	check "nvrtc through Cicada: a first compile is a miss and is kept (0700 directory)" sh -c \
		"grep -q 'cached no' '$T/cc.first' && test $(cc_entries "$d") -ge 1 && test \$(stat -c %a '$d') = 700"
	nvrtc_run second tcp "$d"
	check "the next process (over TCP) skips the compile and gets the same cubin" sh -c \
		"grep -q 'cached yes' '$T/cc.second' && grep -qx '$hash' '$T/cc.second'"
	for f in $(find "$d" -type f); do printf 'x' | dd of="$f" bs=1 seek=40 conv=notrunc 2>/dev/null; done
	nvrtc_run damaged shm "$d"
	nvrtc_run rewritten shm "$d"
	check "a damaged entry is a miss, compiled again, the same cubin, and rewritten" sh -c \
		"grep -q 'cached no' '$T/cc.damaged' && grep -qx '$hash' '$T/cc.damaged' && grep -q 'cached yes' '$T/cc.rewritten'"
	nvrtc_run off1 shm "$d.off" CUDA_CACHE_DISABLE=1
	nvrtc_run off2 shm "$d.off" CUDA_CACHE_DISABLE=1
	nvrtc_run small shm "$d.small" CUDA_CACHE_MAXSIZE=100
	check "CUDA_CACHE_DISABLE=1 keeps nothing; CUDA_CACHE_MAXSIZE bounds what is kept" sh -c \
		"grep -q 'cached no' '$T/cc.off2' && test $(cc_entries "$d.off") = 0 && test $(cc_entries "$d.small") = 0 &&
		 grep -qx '$hash' '$T/cc.small'"
	mkdir -p "$d.open" && chmod 777 "$d.open"
	nvrtc_run open1 shm "$d.open"
	nvrtc_run open2 shm "$d.open"
	check "a cache directory open to others is not used" sh -c \
		"grep -q 'cached no' '$T/cc.open2' && test $(cc_entries "$d.open") = 0 && grep -q 'not used' '$T/cc.open1.err'"
}

# The token never crosses the wire (a capture of a whole TCP session holds
# none of it), and a captured hello, replayed, is refused.
test_handshake() {
	local cap=$T/capture port=$((PORT + 30)) rec
	want handshake || return
	timeout 60 python3 tests/tools/wire_record.py proxy "$port" "$PORT" "$cap" 30 &
	rec=$!
	for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
	: >"$cap"
	check "a TCP session through a recording proxy works" sh -c "env CICADA_SERVER=tcp:127.0.0.1:$port \
		CICADA_TOKEN_FILE='$T/token' LD_LIBRARY_PATH='$B/lib' timeout 60 '$PROGS/vecadd_cubin' >/dev/null 2>&1"
	kill "$rec" 2>/dev/null
	wait "$rec" 2>/dev/null
	check "the capture holds a hello but not the token" sh -c "grep -q CICADACH '$cap' && grep -q vec_add '$cap' && ! grep -qF \"\$(cat '$T/token')\" '$cap'"
	check "the captured hello, replayed, is refused" deadline 30 python3 tests/tools/wire_record.py replay "$PORT" "$cap"
}

# TLS (tls:host:port): a server with a self-signed certificate for
# 127.0.0.1. Programs over TLS print what they print natively (memcpy_all
# with its bulk lanes), a client that does not trust the certificate is
# refused with one line, a plain TCP client at the TLS port fails
# cleanly, and a capture of a TLS session holds no plaintext: neither the
# challenge nor the kernel names of the module it loaded.
test_tls() {
	local port=$((PORT + 40)) tport=$((PORT + 41)) cap=$T/tls-capture rec p
	want tls || return
	if ! timeout 60 openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$T/tls.key" \
		-out "$T/tls.crt" -days 2 -subj /CN=cicada-test -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1; then
		bad "TLS: cannot make a test certificate (the openssl command; make deps installs it)"
		return
	fi
	start_server tls "$tport" "" --listen "tls:127.0.0.1:$port" --tls-cert "$T/tls.crt" --tls-key "$T/tls.key" ||
		{ bad "TLS: the server did not start"; tail -3 "$T/tls.log"; return; }
	for p in vecadd_cubin memcpy_all streams_events; do
		[ -s "$T/$p.native" ] || env $DRIVER_ENV timeout 120 "$PROGS/$p" >"$T/$p.native" 2>/dev/null
		deadline 120 env CICADA_SERVER=tls:127.0.0.1:$port CICADA_TLS_CA="$T/tls.crt" CICADA_TOKEN_FILE="$T/token" \
			LD_LIBRARY_PATH="$B/lib" "$PROGS/$p" >"$T/$p.tls" 2>"$T/$p.tls.err"
		check "$p over TLS: identical to native" cmp -s "$T/$p.native" "$T/$p.tls"
	done
	deadline 60 env CICADA_SERVER=tls:127.0.0.1:$port CICADA_TOKEN_FILE="$T/token" LD_LIBRARY_PATH="$B/lib" \
		"$PROGS/vecadd_cubin" >/dev/null 2>"$T/tls-untrusted.err"
	check "a client that does not trust the certificate is refused, with one line" \
		grep -q "certificate is not trusted" "$T/tls-untrusted.err"
	deadline 60 env CICADA_SERVER=tcp:127.0.0.1:$port CICADA_TOKEN_FILE="$T/token" LD_LIBRARY_PATH="$B/lib" \
		CICADA_CONNECT_TIMEOUT=5 "$PROGS/vecadd_cubin" >/dev/null 2>"$T/tls-plain.err"
	check "a plain TCP client at the TLS port fails cleanly" grep -q "cicada:" "$T/tls-plain.err"
	timeout 60 python3 tests/tools/wire_record.py proxy "$((PORT + 42))" "$port" "$cap" 30 &
	rec=$!
	for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$((PORT + 42))") 2>/dev/null && break; sleep 0.1; done
	: >"$cap"
	check "a TLS session through a recording proxy works" sh -c "env CICADA_SERVER=tls:127.0.0.1:$((PORT + 42)) \
		CICADA_TLS_CA='$T/tls.crt' CICADA_TOKEN_FILE='$T/token' LD_LIBRARY_PATH='$B/lib' \
		timeout 60 '$PROGS/vecadd_cubin' >/dev/null 2>&1"
	kill "$rec" 2>/dev/null
	wait "$rec" 2>/dev/null
	check "the TLS capture holds no plaintext (no challenge, no kernel name, no token)" sh -c "[ -s '$cap' ] &&
		! grep -q CICADACH '$cap' && ! grep -q vec_add '$cap' && ! grep -q shstrtab '$cap' && ! grep -qF \"\$(cat '$T/token')\" '$cap'"
}

# Mutual TLS (--tls-client-ca): a CA of the test's with certificates for
# alice and bob, one of another CA's (mallory), and one of the CA whose
# CN no policy could name (eve,x). The server's policy is
# token:job-1=48M,tls:alice=64M,remote=80M,default=1G: alice's session
# gets 64 MiB (a tls: rule before remote), bob's 80 (no rule of his: a
# TLS tenant is remote, as a TCP one), alice with job-1's --token-dir
# token 48 (a token before a name), a TCP client 80 (TCP never matches a
# tls: rule); each finds its quota as its total and is refused past it
# (quota_routes). cicadactl list shows alice's session as tls:alice. A
# client without a certificate, with one of another CA, or with a bad
# name is refused: one line on the client, one on the server's log.
# Without --tls-client-ca the old behaviour holds: no certificate is
# asked for, and alice's, presented, names no one (80 MiB, remote).
tls_cert() {   # tls_cert NAME CA SUBJECT [ARG...]: NAME.crt and .key in $T/mtls, signed by CA (none: self-signed)
	local d=$T/mtls ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
	if [ -z "$2" ]; then
		timeout 60 openssl req -x509 "${ec[@]}" -keyout "$d/$1.key" -out "$d/$1.crt" -days 2 -subj "$3" "${@:4}" \
			>/dev/null 2>&1
	else
		timeout 60 openssl req "${ec[@]}" -keyout "$d/$1.key" -out "$d/$1.csr" -subj "$3" >/dev/null 2>&1 &&
			timeout 60 openssl x509 -req -in "$d/$1.csr" -CA "$d/$2.crt" -CAkey "$d/$2.key" -CAcreateserial \
				-days 2 -out "$d/$1.crt" >/dev/null 2>&1
	fi
}
# mtls_run NAME PORT CERT PROG ARGS...: PROG over tls:127.0.0.1:PORT with
# CERT's certificate (-: none) and $T/mtls/NAME.tok's token (none: the
# server's); output in $T/mtls/NAME.out, errors in NAME.err.
mtls_run() {
	local name=$1 port=$2 cert=$3 d=$T/mtls tok=$T/token ce=()
	shift 3
	[ -f "$d/$name.tok" ] && tok=$d/$name.tok
	[ "$cert" = - ] || ce=(CICADA_TLS_CERT="$d/$cert.crt" CICADA_TLS_KEY="$d/$cert.key")
	deadline 60 env CICADA_SERVER=tls:127.0.0.1:$port CICADA_TLS_CA="$d/server.crt" CICADA_TOKEN_FILE="$tok" \
		LD_LIBRARY_PATH="$B/lib" "${ce[@]}" "$@" >"$d/$name.out" 2>"$d/$name.err"
}
# mtls_refused NAME WHY LOGLINE: NAME's client failed with one line
# saying WHY, and the server's log has LOGLINE.
mtls_refused() {
	[ "$(grep -c "^cicada: " "$T/mtls/$1.err")" = 1 ] && grep -q "$2" "$T/mtls/$1.err" && grep -q "$3" "$T/mtls.log"
}
mtls_server() {   # mtls_server NAME TLSPORT TCPPORT ARG...
	local name=$1 port=$2 tport=$3
	shift 3
	env $DRIVER_ENV timeout -k 5 300 "$B/bin/gpu-server" --listen "unix:$T/$name.sock" --listen "tcp:127.0.0.1:$tport" \
		--listen "tls:127.0.0.1:$port" --token-file "$T/token" --cache-dir "$T/cache-$name" --run-dir "$T/run-$name" \
		--workers 2 --tls-cert "$T/mtls/server.crt" --tls-key "$T/mtls/server.key" \
		--memory-quota token:job-1=48M,tls:alice=64M,remote=80M,default=1G "$@" >>"$T/$name.log" 2>&1 &
	MTLS_PID=$!
	wait_for_server $MTLS_PID "$T/$name.sock" "$T/$name.log" run-tests
}
mtls_stop() {
	kill "$MTLS_PID" 2>/dev/null
	wait "$MTLS_PID" 2>/dev/null
	pkill -9 -f "cache-dir $T/cache-$1" 2>/dev/null
}
test_tls_client() {
	local d=$T/mtls port=$((PORT + 43)) tport=$((PORT + 44)) out app t fails=""
	want tls-client || return
	mkdir -p "$d" && mkdir -m 700 "$d/tokens"
	if ! { tls_cert server "" /CN=cicada-test -addext subjectAltName=IP:127.0.0.1 &&
		tls_cert ca "" /CN=cicada-test-ca && tls_cert otherca "" /CN=other-ca &&
		tls_cert alice ca /CN=alice && tls_cert bob ca /CN=bob && tls_cert mallory otherca /CN=mallory &&
		tls_cert eve ca "/CN=eve,x"; }; then
		bad "TLS client names: cannot make test certificates (the openssl command)"
		return
	fi
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$d/tokens/job-1"
	cp "$d/tokens/job-1" "$d/alice-job.tok"
	mtls_server mtls "$port" "$tport" --token-dir "$d/tokens" --tls-client-ca "$d/ca.crt" ||
		{ bad "TLS client names: the server did not start ($(tail -1 "$T/mtls.log"))"; return; }
	mtls_run alice "$port" alice "$PROGS/quota_routes" 64
	check "mutual TLS: alice's certificate gets tls:alice's quota (64 MiB, before remote's), past it refused" \
		grep -q "quota_routes: PASS" "$d/alice.out"
	mtls_run bob "$port" bob "$PROGS/quota_routes" 80
	check "mutual TLS: bob's certificate, no rule of his, gets remote's quota (80 MiB)" \
		grep -q "quota_routes: PASS" "$d/bob.out"
	mtls_run alice-job "$port" alice "$PROGS/quota_routes" 48
	check "mutual TLS: alice with job-1's token gets token:job-1's quota (48 MiB): a token before a TLS name" \
		grep -q "quota_routes: PASS" "$d/alice-job.out"
	out=$(CICADA_SERVER=tcp:127.0.0.1:$tport CICADA_TOKEN_FILE=$T/token LD_LIBRARY_PATH=$B/lib \
		timeout 60 "$PROGS/quota_routes" 80 2>&1)
	check "mutual TLS: a TCP client never matches a tls: rule (80 MiB, remote's)" grep -q "quota_routes: PASS" <<<"$out"
	mtls_run alice-long "$port" alice timeout 60 "$PROGS/cr_pattern" "$CICADA_KERNELS" 8 200 100 &
	t=$!
	wait_for "^step 2 " "$d/alice-long.out" 30 || fails="$fails the program did not start;"
	out=$(timeout 30 "$B/bin/cicadactl" --run-dir "$T/run-mtls" list 2>&1)
	awk '$3 == "tls:alice"' <<<"$out" | grep -q . || fails="$fails list ($out);"
	kill_ours "^$PROGS/cr_pattern"
	wait $t 2>/dev/null
	check "mutual TLS: cicadactl list shows alice's session as tls:alice${fails:+ (failed:$fails)}" test -z "$fails"
	mtls_run none "$port" - "$PROGS/vecadd_cubin"
	check "mutual TLS: a client without a certificate is refused, one line each side" \
		mtls_refused none "refused this client's certificate, or its lack of one" "TLS: the client sent no certificate"
	mtls_run mallory "$port" mallory "$PROGS/vecadd_cubin"
	check "mutual TLS: a certificate of another CA is refused, one line each side" \
		mtls_refused mallory "refused this client's certificate" "TLS: the client's certificate is not trusted"
	mtls_run eve "$port" eve "$PROGS/vecadd_cubin"
	check "mutual TLS: a certificate whose CN names no client (eve,x) is refused" \
		mtls_refused eve "refused this client's certificate" "not one subject CN that names a client"
	mtls_stop mtls
	mtls_server plain-tls "$((PORT + 45))" "$((PORT + 46))" ||
		{ bad "TLS client names: the server without --tls-client-ca did not start"; return; }
	mtls_run plain-none "$((PORT + 45))" - "$PROGS/quota_routes" 80
	mtls_run plain-alice "$((PORT + 45))" alice "$PROGS/quota_routes" 80
	check "without --tls-client-ca: no certificate asked for; alice's, presented, names no one (remote's 80 MiB)" \
		sh -c "grep -q 'quota_routes: PASS' '$d/plain-none.out' && grep -q 'quota_routes: PASS' '$d/plain-alice.out'"
	mtls_stop plain-tls
	fails=""
	for a in "--memory-quota tls:a/b=1G" "--memory-quota tls:=1G" "--tls-client-ca $d/ca.crt"; do
		# shellcheck disable=SC2086  # the option and its value
		out=$(env $DRIVER_ENV timeout 10 "$B/bin/gpu-server" --listen "unix:$T/mtls-bad.sock" $a 2>&1)
		[ "$(wc -l <<<"$out")" = 1 ] && grep -q "^gpu-server: " <<<"$out" || fails="$fails '$a' ($out);"
	done
	check "a bad tls: rule, and --tls-client-ca with no tls: listener, are refused at start in one line${fails:+ (failed:$fails)}" \
		test -z "$fails"
}

# Unix clients: an allow list keeps out a user not on it (nobody, here)
# and lets in the members of a group on it; the socket is 0660 from its
# creation.
test_allow_list() {
	local out pid n=0
	want allow-list || return
	check "unix sockets are created 0660" test "$(stat -c %a "$T/main.sock")" = 660
	command -v setpriv >/dev/null && getent passwd nobody >/dev/null || { ok "allow list: no setpriv or nobody here (skipped)"; return; }
	chmod 711 "$T"
	for list in "--allow-users daemon" "--allow-groups nogroup"; do
		n=$((n + 1))
		env $DRIVER_ENV timeout -k 5 120 "$B/bin/gpu-server" --listen "unix:$T/allow$n.sock" --cache-dir "$T/cache-allow" \
			--workers 1 $list >"$T/allow.log" 2>&1 &
		pid=$!
		wait_for_server $pid "$T/allow$n.sock" "$T/allow.log" run-tests || { bad "allow-list server"; return; }
		chgrp nogroup "$T/allow$n.sock"
		out=$(CICADA_SERVER=unix:$T/allow$n.sock LD_LIBRARY_PATH=$B/lib CICADA_KERNELS=$CICADA_KERNELS \
			timeout 60 setpriv --reuid=nobody --regid=nogroup --clear-groups "$PROGS/vecadd_cubin" 2>&1)
		case $list in
		*daemon) check "a unix client not on the allow list is refused, saying why" \
				grep -q "refused the connection: this user is not allowed on this server" <<<"$out" ;;
		*) check "a unix client in an allowed group is served" grep -q "vecadd_cubin: PASS\|max_err=0" <<<"$out" ;;
		esac
		kill $pid 2>/dev/null
		wait $pid 2>/dev/null
		pkill -9 -f "cache-dir $T/cache-allow" 2>/dev/null
	done
	chmod 700 "$T"
}

# --memory-quota: a server whose policy gives root 96 MiB, user nobody
# 64 MiB and TCP tenants 48 MiB; root's program asking for 40 MiB
# (CICADA_MEMORY_LIMIT) gets it, asking for 200 MiB keeps 96.
# quota_routes, as each, finds its own
# quota as cuMemGetInfo's total and refused past it (OUT_OF_MEMORY)
# through cuMemAlloc, pitch, pool, VMM and array allocations, each freed and
# given back; the server logs the refusals; bad policies are refused
# at start in one line.
test_quota() {
	local pid out fails="" spec
	want quota || return
	command -v setpriv >/dev/null && getent passwd nobody >/dev/null || { ok "quota: no setpriv or nobody here (skipped)"; return; }
	chmod 711 "$T"
	env $DRIVER_ENV timeout -k 5 120 "$B/bin/gpu-server" --listen "unix:$T/quota.sock" \
		--listen "tcp:127.0.0.1:$((PORT + 90))" --token-file "$T/token" --cache-dir "$T/cache-quota" --workers 2 \
		--allow-users nobody --memory-quota "uid:0=96M,user:nobody=64M,remote=48M,default=1T" >"$T/quota.log" 2>&1 &
	pid=$!
	wait_for_server $pid "$T/quota.sock" "$T/quota.log" run-tests || { bad "quota server"; return; }
	chmod 666 "$T/quota.sock"
	out=$(CICADA_SERVER=unix:$T/quota.sock LD_LIBRARY_PATH=$B/lib timeout 60 "$PROGS/quota_routes" 96 2>&1)
	grep -q "quota_routes: PASS" <<<"$out" || fails="$fails root's 96 MiB ($(tail -1 <<<"$out"));"
	out=$(CICADA_SERVER=unix:$T/quota.sock LD_LIBRARY_PATH=$B/lib CICADA_KERNELS=$CICADA_KERNELS \
		timeout 60 setpriv --reuid=nobody --regid=nogroup --clear-groups "$PROGS/quota_routes" 64 2>&1)
	grep -q "quota_routes: PASS" <<<"$out" || fails="$fails nobody's 64 MiB ($(tail -1 <<<"$out"));"
	out=$(CICADA_SERVER=tcp:127.0.0.1:$((PORT + 90)) CICADA_TOKEN_FILE=$T/token LD_LIBRARY_PATH=$B/lib \
		timeout 60 "$PROGS/quota_routes" 48 2>&1)
	grep -q "quota_routes: PASS" <<<"$out" || fails="$fails TCP's 48 MiB ($(tail -1 <<<"$out"));"
	out=$(CICADA_SERVER=unix:$T/quota.sock LD_LIBRARY_PATH=$B/lib CICADA_MEMORY_LIMIT=40M \
		timeout 60 "$PROGS/quota_routes" 40 2>&1)
	grep -q "quota_routes: PASS" <<<"$out" || fails="$fails root asking for 40 MiB ($(tail -1 <<<"$out"));"
	out=$(CICADA_SERVER=unix:$T/quota.sock LD_LIBRARY_PATH=$B/lib CICADA_MEMORY_LIMIT=200M \
		timeout 60 "$PROGS/quota_routes" 96 2>&1)
	grep -q "quota_routes: PASS" <<<"$out" || fails="$fails root asking for more than 96 MiB ($(tail -1 <<<"$out"));"
	grep -q "refused: the quota is" "$T/quota.log" || fails="$fails no refusal logged;"
	kill $pid 2>/dev/null
	wait $pid 2>/dev/null
	pkill -9 -f "cache-dir $T/cache-quota" 2>/dev/null
	chmod 700 "$T"
	check "memory quota by policy (root, user nobody, TCP; a program asking for less gets it, for more does not): each session's total is its quota, allocations past it refused through cuMemAlloc, pitch, pools, VMM and arrays, and given back when freed${fails:+ (failed:$fails)}" \
		test -z "$fails"
	fails=""
	for spec in "uid:x=1G" "gid:0=0" "user:no-such-user=1G" "nonsense=1G" "default=-1G" "default"; do
		out=$(env $DRIVER_ENV timeout 10 "$B/bin/gpu-server" --listen "unix:$T/quota-bad.sock" --memory-quota "$spec" 2>&1)
		[ "$(wc -l <<<"$out")" = 1 ] && grep -q "^gpu-server: --memory-quota: " <<<"$out" || fails="$fails '$spec' ($out);"
	done
	check "bad --memory-quota policies are refused at start in one line${fails:+ (failed:$fails)}" test -z "$fails"
}

# cicadactl against a server with --memory-quota default=256M: list
# (table and JSON) shows cr_pattern's session with its process, memory
# and quota; resize below what it holds is refused in one line, above
# it shows at once; pause holds its steps until resume; checkpoint
# leaves it running; migrate and drain move
# it to the node's GPU 0 again (a new worker each time); bad input and a
# user who is not the server's get one-line errors; the program ends
# with its undisturbed output.
test_cicadactl() {
	local pid t app out s s2 run=$T/run-ctl fails="" ctl="timeout -k 5 300 $B/bin/cicadactl --run-dir $T/run-ctl"
	want cicadactl || return
	env $DRIVER_ENV timeout -k 5 180 "$B/bin/gpu-server" --listen "unix:$T/ctl.sock" --run-dir "$run" \
		--cache-dir "$T/cache-ctl" --workers 2 --memory-quota default=256M >"$T/ctl.log" 2>&1 &
	pid=$!
	wait_for_server $pid "$T/ctl.sock" "$T/ctl.log" run-tests || { bad "cicadactl server"; return; }
	env $DRIVER_ENV timeout 60 "$PROGS/cr_pattern" "$CICADA_KERNELS" 64 40 150 >"$T/ctl.ref" 2>/dev/null
	CICADA_SERVER=unix:$T/ctl.sock LD_LIBRARY_PATH=$B/lib timeout 120 setsid "$PROGS/cr_pattern" "$CICADA_KERNELS" \
		64 40 150 </dev/null >"$T/ctl.app" 2>&1 &
	t=$!
	wait_for "^step 2 " "$T/ctl.app" 30 || fails="$fails the program did not start;"
	app=$(pgrep -P $t)
	out=$($ctl list 2>&1)
	s=$(awk -v a=$app '$2 == a { print $1 }' <<<"$out")
	awk -v a=$app '$2 == a && $4 == "0" && $5 == "all" && $6 >= 64 && $7 == 256 && $3 == "uid_0"' <<<"$out" | grep -q . ||
		fails="$fails list ($out);"
	$ctl list --json | python3 -c "import json,sys; d=json.load(sys.stdin); assert d[0]['client_pid'] == $app" 2>/dev/null ||
		fails="$fails list --json;"
	out=$($ctl resize "${s:-0}" --memory 16M 2>&1) && fails="$fails resize below use accepted;"
	grep -q "holds .* MiB, more than 16 MiB" <<<"$out" || fails="$fails resize below use ($out);"
	$ctl resize "${s:-0}" --memory 1G >/dev/null && $ctl list | awk -v s="$s" '$1 == s && $7 == 1024' | grep -q . ||
		fails="$fails resize to 1G;"
	local before after
	$ctl pause "${s:-0}" >/dev/null && sleep 0.5 && before=$(grep -c "^step" "$T/ctl.app") && sleep 1.5 &&
		after=$(grep -c "^step" "$T/ctl.app") && $ctl list | awk -v s="$s" '$1 == s && $9 == "paused"' | grep -q . &&
		[ "$after" = "$before" ] || fails="$fails pause (steps $before then $after);"
	$ctl resume "${s:-0}" >/dev/null && sleep 1 && [ "$(grep -c "^step" "$T/ctl.app")" -gt "${after:-0}" ] ||
		fails="$fails resume;"
	mkdir -p "$T/ctl-ckpt"
	$ctl checkpoint "${s:-0}" "$T/ctl-ckpt" >"$T/ctl.ckpt" 2>&1 && ls "$T/ctl-ckpt"/cicada-session-$app.txt >/dev/null 2>&1 ||
		fails="$fails checkpoint ($(tail -1 "$T/ctl.ckpt"));"
	$ctl migrate "${s:-0}" --to local -- --gpu 0 >"$T/ctl.mig" 2>&1 || fails="$fails migrate ($(tail -1 "$T/ctl.mig"));"
	s2=$($ctl list | awk -v a=$app '$2 == a { print $1 }')
	[ -n "$s2" ] && [ "$s2" != "$s" ] || fails="$fails after migrate, session '$s2' (was $s);"
	$ctl drain --gpu 0 --to local -- --gpu 0 >"$T/ctl.drain" 2>&1 && grep -q "1 of 1 sessions moved" "$T/ctl.drain" ||
		fails="$fails drain ($(tail -1 "$T/ctl.drain"));"
	for bad_args in "resize 99999 --memory 1G" "resize ${s2:-1} --memory -5" "resize --memory 1G" "checkpoint 99999 /tmp" \
		"nonsense"; do
		# shellcheck disable=SC2086  # the arguments' words
		out=$($ctl $bad_args 2>&1) && fails="$fails '$bad_args' accepted;"
		[ "$(wc -l <<<"$out")" -le 8 ] && grep -q "cicadactl: \|usage:" <<<"$out" || fails="$fails '$bad_args' ($out);"
	done
	chmod 711 "$T"
	out=$(timeout 10 setpriv --reuid=nobody --regid=nogroup --clear-groups $ctl list 2>&1) && fails="$fails nobody may list;"
	chmod 700 "$T"
	wait_for "^done" "$T/ctl.app" 90 && cmp -s "$T/ctl.ref" "$T/ctl.app" || fails="$fails the program's output differs;"
	kill $pid $t 2>/dev/null
	wait $pid $t 2>/dev/null
	pkill -9 -f "cache-dir $T/cache-ctl" 2>/dev/null
	check "cicadactl: list (table, JSON), resize (below use refused, raised at once), pause and resume, checkpoint, migrate and drain of a running session; bad input and other users refused in one line; the program ends as undisturbed${fails:+ (failed:$fails)}" \
		test -z "$fails"
}

# SM shares (--sm-share, gpu-server/state/green.c, front/sm_share.c):
# sessions run in green contexts of whole groups of SMs, none another's;
# the driver reports the share; a session past the GPU's free SMs is
# refused unless --overcommit; cicadactl resize --sms moves a running
# session (its stream with it) to more SMs and back to the whole GPU.
sm_list() { grep -m1 "^sm_share: stream ran on" "$1" | sed 's/.*: //' | tr ',' '\n' | sort; }
sm_server() {
	rm -f "$T/sm.sock"                       # (a stopped server's would look ready)
	env $DRIVER_ENV timeout -k 5 120 "$B/bin/gpu-server" --listen "unix:$T/sm.sock" --run-dir "$T/run-sm" \
		--cache-dir "$T/cache-sm" --workers 3 "$@" >"$T/sm.log" 2>&1 &
	SM_PID=$!
	wait_for_server $SM_PID "$T/sm.sock" "$T/sm.log" run-tests
}
sm_stop() {
	kill $SM_PID 2>/dev/null
	wait $SM_PID 2>/dev/null
	pkill -9 -f "cache-dir $T/cache-sm" 2>/dev/null
}
test_sm_share() {
	local fails="" total out a b app s n both c="CICADA_SERVER=unix:$T/sm.sock LD_LIBRARY_PATH=$B/lib"
	local ctl="timeout -k 5 60 $B/bin/cicadactl --run-dir $T/run-sm"
	want sm-share || return
	total=$(env $DRIVER_ENV timeout 60 "$PROGS/sm_share" 2>/dev/null | sed -n 's/.*reports \([0-9]*\) SMs/\1/p')
	sm_server --sm-share default=32 || { bad "sm-share server"; return; }
	out=$(env $c timeout 60 "$PROGS/sm_share" 2>&1)
	grep -q "reports 32 SMs" <<<"$out" && grep -q "NULL stream ran on 32 SMs" <<<"$out" &&
		grep -q "^sm_share: stream ran on 32 SMs" <<<"$out" || fails="$fails one session ($out);"
	out=$(env $c timeout 60 "$PROGS/sm_share" ctx 2>&1)
	grep -q "cuCtxCreate: CUDA_ERROR_NOT_SUPPORTED" <<<"$out" || fails="$fails cuCtxCreate under a share ($out);"
	out=$(env $c CICADA_SM_LIMIT=12 timeout 60 "$PROGS/sm_share" 2>&1)
	grep -q "reports 16 SMs" <<<"$out" && grep -q "^sm_share: stream ran on 16 SMs" <<<"$out" ||
		fails="$fails CICADA_SM_LIMIT=12 ($out);"
	out=$(env $c CICADA_SM_LIMIT=100 timeout 60 "$PROGS/sm_share" 2>&1)
	grep -q "^sm_share: stream ran on 32 SMs" <<<"$out" || fails="$fails CICADA_SM_LIMIT=100 got more ($out);"
	rm -f "$T/sm.stop"
	env $c timeout 90 "$PROGS/sm_share" hold "$T/sm.stop" >"$T/sm.a" 2>&1 &
	a=$!
	env $c timeout 90 "$PROGS/sm_share" hold "$T/sm.stop" >"$T/sm.b" 2>&1 &
	b=$!
	wait_for "stream ran on" "$T/sm.a" 30 && wait_for "stream ran on" "$T/sm.b" 30 || fails="$fails two sessions;"
	both=$(comm -12 <(sm_list "$T/sm.a") <(sm_list "$T/sm.b") | wc -l)
	[ "$(sm_list "$T/sm.a" | wc -l)" = 32 ] && [ "$both" = 0 ] || fails="$fails two sessions share $both SMs;"
	app=$(pgrep -P $a)
	s=$($ctl list | awk -v a="$app" '$2 == a { print $1 }')
	$ctl list | awk -v s="$s" '$1 == s && $5 == 32' | grep -q . || fails="$fails list (SMS);"
	$ctl resize "${s:-0}" --sms 64 >/dev/null && wait_for "stream ran on 64 SMs" "$T/sm.a" 10 ||
		fails="$fails resize to 64;"
	$ctl resize "${s:-0}" --sms all >/dev/null && wait_for "stream ran on $total SMs" "$T/sm.a" 10 ||
		fails="$fails resize to all ($total);"
	out=$($ctl resize "${s:-0}" --sms 0 2>&1) && fails="$fails --sms 0 accepted;"
	touch "$T/sm.stop"
	wait $a $b
	grep -q "done after" "$T/sm.a" && grep -q "done after" "$T/sm.b" && ! grep -qi "error\|fail" "$T/sm.a" "$T/sm.b" ||
		fails="$fails the sessions saw an error;"
	# A resize not taken yet (the session is paused) holds its old and new
	# groups: 4 + 8 of 16, and B's 4, leave none for C; once A takes it,
	# its old 4 are free. (A's groups are the last 4, three sessions gone
	# before it having held the first 12, so the 8 it asks are others.)
	rm -f "$T/sm.stop" "$T/sm.fill"
	for n in 1 2 3; do
		env $c timeout 90 "$PROGS/sm_share" hold "$T/sm.fill" >"$T/sm.f$n" 2>&1 &
		wait_for "stream ran on" "$T/sm.f$n" 30
	done
	env $c timeout 90 "$PROGS/sm_share" hold "$T/sm.stop" >"$T/sm.a" 2>&1 &
	a=$!
	wait_for "stream ran on" "$T/sm.a" 30
	touch "$T/sm.fill"
	for _ in $(seq 100); do [ "$($ctl list | wc -l)" = 2 ] && break; sleep 0.1; done
	s=$($ctl list | awk -v a="$(pgrep -P $a)" '$2 == a { print $1 }')
	$ctl pause "${s:-0}" >/dev/null && $ctl resize "${s:-0}" --sms 64 >/dev/null || fails="$fails pause and resize;"
	env $c timeout 90 "$PROGS/sm_share" hold "$T/sm.stop" >"$T/sm.b" 2>&1 &
	b=$!
	wait_for "stream ran on" "$T/sm.b" 30
	out=$(env $c timeout 60 "$PROGS/sm_share" 2>&1) && fails="$fails groups of a resize not yet taken were given out;"
	$ctl resume "${s:-0}" >/dev/null
	wait_for "stream ran on 64 SMs" "$T/sm.a" 10 || fails="$fails the paused session's resize;"
	sleep 0.2
	out=$(env $c timeout 60 "$PROGS/sm_share" 2>&1) || fails="$fails groups let go after the resize ($out);"
	touch "$T/sm.stop"
	wait $a $b
	sm_stop
	# A session moved (cicadactl migrate: a restore the operator connects)
	# takes its owner's share, not the operator's.
	if command -v criu >/dev/null && id nobody >/dev/null 2>&1; then
		sm_server --sm-share uid:65534=32 || { bad "sm-share server"; return; }
		rm -f "$T/sm.stop"
		chmod 711 "$T"
		chmod 666 "$T/sm.sock"
		env $c timeout 90 setpriv --reuid=nobody --regid=nogroup --clear-groups "$PROGS/sm_share" hold "$T/sm.stop" \
			>"$T/sm.a" 2>&1 &
		a=$!
		wait_for "stream ran on" "$T/sm.a" 30
		s=$($ctl list | awk -v a="$(pgrep -P $a)" '$2 == a && $5 == 32 { print $1 }')
		$ctl migrate "${s:-0}" --to local -- --gpu 0 >"$T/sm.mig" 2>&1 || fails="$fails migrate ($(tail -1 "$T/sm.mig"));"
		sleep 1
		[ "$(grep "stream ran on" "$T/sm.a" | tail -1 | sed 's/.* on \([0-9]*\) SMs.*/\1/')" = 32 ] &&
			$ctl list | awk '$5 == 32' | grep -q . || fails="$fails after a move, not its owner's share ($(tail -1 "$T/sm.a" | cut -c1-60));"
		touch "$T/sm.stop"
		wait $a
		chmod 700 "$T"
		sm_stop
	fi
	sm_server --sm-share default=66% || { bad "sm-share server"; return; }
	rm -f "$T/sm.stop"
	env $c timeout 90 "$PROGS/sm_share" hold "$T/sm.stop" >"$T/sm.a" 2>&1 &
	a=$!
	wait_for "stream ran on" "$T/sm.a" 30
	out=$(env $c timeout 60 "$PROGS/sm_share" 2>&1) && fails="$fails past capacity admitted;"
	[ "$(grep -c "no room" <<<"$out")" -ge 1 ] || fails="$fails past capacity ($out);"
	# (refused before a pre-initialised worker is taken: none is started anew)
	sleep 1
	n=$(grep -c "NVML queries" "$T/sm.log")
	for _ in 1 2 3 4 5; do env $c timeout 60 "$PROGS/sm_share" >/dev/null 2>&1; done
	sleep 1
	[ "$(grep -c "NVML queries" "$T/sm.log")" = "$n" ] ||
		fails="$fails refusals started $(($(grep -c "NVML queries" "$T/sm.log") - n)) workers;"
	touch "$T/sm.stop"
	wait $a
	sm_stop
	# A client that starts again as its session ends gets the SMs that
	# session held, once its worker is gone (the driver's teardown takes
	# a while: FAKECUDA_EXIT_MS on the stand-in).
	DRIVER_ENV="$DRIVER_ENV FAKECUDA_EXIT_MS=700" sm_server --sm-share default=66% ||
		{ bad "sm-share server"; return; }
	env $c timeout 60 "$PROGS/sm_share" >"$T/sm.a" 2>&1 && env $c timeout 60 "$PROGS/sm_share" >"$T/sm.b" 2>&1 ||
		fails="$fails a session right after its last was refused ($(tail -1 "$T/sm.b"));"
	sm_stop
	sm_server --sm-share default=66% --overcommit || { bad "sm-share server"; return; }
	rm -f "$T/sm.stop"
	env $c timeout 90 "$PROGS/sm_share" hold "$T/sm.stop" >"$T/sm.a" 2>&1 &
	a=$!
	wait_for "stream ran on" "$T/sm.a" 30
	# (an H200 gave such a mix of free and held groups 80 SMs, not 88)
	env $c timeout 60 "$PROGS/sm_share" >"$T/sm.b" 2>&1 && n=$(sed -n 's/^sm_share: stream ran on \([0-9]*\) SMs.*/\1/p' "$T/sm.b") &&
		[ "$n" -gt 0 ] && [ "$n" -le 88 ] || fails="$fails --overcommit ($(tail -1 "$T/sm.b"));"
	touch "$T/sm.stop"
	wait $a
	sm_stop
	# A batch job's token (--token-dir) names its session: token: rules
	# give it its own share and memory quota.
	mkdir -m 700 "$T/sm-tokens" && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/sm-tokens/job-7"
	cp "$T/sm-tokens/job-7" "$T/sm-job-7"
	sm_server --listen "tcp:127.0.0.1:$((PORT + 96))" --token-dir "$T/sm-tokens" --sm-share token:job-7=16,default=32 \
		--memory-quota token:job-7=64M || { bad "sm-share server"; return; }
	out=$(env CICADA_SERVER=tcp:127.0.0.1:$((PORT + 96)) CICADA_TOKEN_FILE=$T/sm-job-7 LD_LIBRARY_PATH=$B/lib \
		timeout 60 "$PROGS/sm_share" 2>&1)
	grep -q "reports 16 SMs" <<<"$out" && grep -q "has 64 MiB" <<<"$out" || fails="$fails a job token's rules ($out);"
	out=$(env $c timeout 60 "$PROGS/sm_share" 2>&1)
	grep -q "reports 32 SMs" <<<"$out" && ! grep -q "has 64 MiB" <<<"$out" || fails="$fails no token, the default ($out);"
	sm_stop
	for policy in default=0 default=101% uid:x=8 default=8,bogus=1 token:=8 token:a/b=8; do
		out=$(env $DRIVER_ENV timeout 10 "$B/bin/gpu-server" --listen "unix:$T/sm-bad.sock" --sm-share "$policy" 2>&1) &&
			fails="$fails '$policy' accepted;"
		[ "$(wc -l <<<"$out")" = 1 ] && grep -q -- "--sm-share" <<<"$out" || fails="$fails '$policy' ($out);"
	done
	out=$(CUDA_MPS_PIPE_DIRECTORY=$T/no-mps env $DRIVER_ENV timeout 10 "$B/bin/gpu-server" --listen "unix:$T/sm-bad.sock" \
		--mps 2>&1) && fails="$fails --mps without a daemon accepted;"
	[ "$(wc -l <<<"$out")" = 1 ] && grep -q "no MPS control daemon at $T/no-mps/control" <<<"$out" ||
		fails="$fails --mps without a daemon ($out);"
	if [ "$MODE" = cpu ]; then               # (a socket that is no daemon: the stand-in never calls it)
		mkdir -p "$T/mps" && python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('$T/mps/control')"
		CUDA_MPS_PIPE_DIRECTORY=$T/mps sm_server --mps && grep -q "clients of the MPS control daemon" "$T/sm.log" ||
			fails="$fails --mps with a daemon;"
		sm_stop
	fi
	check "SM shares: a session runs on its share alone (and is told so), two never share an SM, past the free SMs a session is refused, no worker spent (--overcommit admits it), one right after its last is not, cicadactl resize --sms moves a running session with its stream; a job token's rules give its share and quota; CICADA_SM_LIMIT asks for fewer, never more; cuCtxCreate refused under a share; a resize holds both until taken; a moved session keeps its owner's share; bad policies refused; --mps wants its daemon${fails:+ (failed:$fails)}" \
		test -z "$fails"
}

# What a session under --sm-share is told of the GPU's compute besides
# the driver's SM count: the runtime's device properties, the grid
# cuOccupancyMaxPotentialBlockSize says fills its SMs, and through
# Cicada's libnvidia-ml.so.1 NVML's cores (in proportion) and attributes
# (its SMs; memory: its quota). A session without a share is told of the
# whole GPU. Real NVML answers attributes for MIG devices only (and older
# NVMLs have no core count), so on a GPU "not supported" passes there.
sv_value() { sed -n "s/^share_view: $2 = \([0-9]*\).*/\1/p" <<<"$1"; }
sv_is() {
	[ "$(sv_value "$1" "$2")" = "$3" ] || { [ "$MODE" = gpu ] && grep -q "^share_view: $2 not supported" <<<"$1"; }
}
test_sm_share_nvml() {
	local native whole share limit rt total grid cores c="CICADA_SERVER=unix:$T/sm.sock LD_LIBRARY_PATH=$B/lib"
	want sm-share-nvml || return
	native=$(env $DRIVER_ENV timeout 60 "$PROGS/share_view" 2>&1)   # (no NVML on the stand-in)
	total=$(sv_value "$native" "driver SMs")
	grid=$(sv_value "$native" "occupancy grid")
	[ -n "$total" ] && [ -n "$grid" ] || { bad "share_view natively ($native)"; return; }
	sm_server || { bad "sm-share-nvml server"; return; }
	whole=$(env $c timeout 60 "$PROGS/share_view" 2>&1)
	sm_stop
	sm_server --sm-share default=32 --memory-quota default=64M || { bad "sm-share-nvml server"; return; }
	share=$(env $c timeout 60 "$PROGS/share_view" 2>&1)
	limit=$(env $c CICADA_SM_LIMIT=12 timeout 60 "$PROGS/share_view" 2>&1)
	rt=$(env $c timeout 120 "$PROGS/rt_basic" 2>&1; env $c timeout 120 "$PROGS/rt_basic_shared" 2>&1)
	sm_stop
	cores=$(sv_value "$whole" "nvml cores")
	check "share_view without a share: the whole GPU's $total SMs (driver, NVML), its cores, the occupancy grid" \
		eval 'grep -q "^share_view: done" <<<"$whole" && sv_is "$whole" "driver SMs" "$total" &&
			sv_is "$whole" "nvml SMs" "$total" && sv_is "$whole" "occupancy grid" "$grid" &&
			{ [ -z "$cores" ] && [ "$MODE" = gpu ] || { [ "${cores:-0}" -gt 0 ] && [ $((cores % total)) = 0 ]; }; }'
	[ -n "$cores" ] || cores=0
	check "share_view under --sm-share 32: NVML cores are 32 SMs' ($((cores / total * 32)))" \
		sv_is "$share" "nvml cores" $((cores / total * 32))
	check "share_view under --sm-share 32: NVML attributes (v2 and v1) count 32 SMs, and the quota's 64 MiB" \
		eval 'sv_is "$share" "nvml SMs" 32 && sv_is "$share" "nvml SMs (v1)" 32 && sv_is "$share" "nvml memory MiB" 64'
	check "share_view under --sm-share 32: the driver counts 32 SMs, the occupancy grid fills 32 ($((grid / total * 32)))" \
		eval 'sv_is "$share" "driver SMs" 32 && sv_is "$share" "occupancy grid" $((grid / total * 32))'
	check "share_view with CICADA_SM_LIMIT=12 under 32: 16 SMs in NVML's cores and attributes, and the occupancy grid" \
		eval 'sv_is "$limit" "nvml cores" $((cores / total * 16)) && sv_is "$limit" "nvml SMs" 16 &&
			sv_is "$limit" "occupancy grid" $((grid / total * 16))'
	check "cudaGetDeviceProperties under --sm-share 32 (static and shared runtime): multiProcessorCount is 32" \
		test "$(grep -c "^devices [0-9]*: .*, 32 SMs," <<<"$rt")" = 2
	grep -q "^share_view: done" <<<"$share$limit" || { echo "$share"; echo "$limit"; } | grep -v "^share_view: " | head -5
}

# A paused session's ticket (which lies in image directories) does not
# let another unix user take the session: cr_pattern runs as nobody, root
# pauses it through its control socket, and user daemon, holding the
# ticket, is refused; the program then resumes and finishes.
test_session_owner() {
	local app ctl out
	want session-owner || return
	command -v setpriv >/dev/null && getent passwd daemon >/dev/null || { ok "session owner: no setpriv here (skipped)"; return; }
	chmod 711 "$T"
	env $DRIVER_ENV timeout -k 5 120 "$B/bin/gpu-server" --listen "unix:$T/owner.sock" --cache-dir "$T/cache-owner" \
		--workers 1 >"$T/owner.log" 2>&1 &
	local pid=$!
	wait_for_server $pid "$T/owner.sock" "$T/owner.log" run-tests || { bad "owner server"; return; }
	chmod 666 "$T/owner.sock"
	CICADA_SERVER=unix:$T/owner.sock LD_LIBRARY_PATH=$B/lib timeout 120 setpriv --reuid=nobody --regid=nogroup \
		--clear-groups "$PROGS/cr_pattern" $CR_ARGS </dev/null >"$T/owner.out" 2>&1 &
	wait_for "^step 2 " "$T/owner.out" 30
	app=$(pgrep -f "^$PROGS/cr_pattern $CR_ARGS" | head -n 1)
	out=$(timeout 60 python3 - "$app" "$B/tests/tools/wire_abuse" "$T/owner.sock" <<'PY'
import socket, subprocess, sys
s = socket.socket(socket.AF_UNIX)
s.connect("\0cicada-ctl.%s" % sys.argv[1])
s.sendall(b"PAUSE\n")
ticket = s.makefile().readline().split()[1]
r = subprocess.run(["setpriv", "--reuid=daemon", "--regid=daemon", "--clear-groups", sys.argv[2], "reattach",
                    "unix:" + sys.argv[3], ticket], capture_output=True, text=True, timeout=30)
print(r.stdout.strip())
s.close()
PY
)
	check "another unix user holding a paused session's ticket is refused" \
		grep -q "refused=1 message=this session belongs to another user" <<<"$out"
	check "the session's own program resumes and finishes" wait_for "^done" "$T/owner.out" 60
	kill $pid 2>/dev/null
	wait $pid 2>/dev/null
	pkill -9 -f "cache-dir $T/cache-owner" 2>/dev/null
	chmod 700 "$T"
}

# A run or cache directory that others may write, or that is another
# user's, is refused with one line.
test_server_dirs() {
	local out
	want server-dirs || return
	mkdir -p "$T/open-dir" "$T/their-dir" && chmod 777 "$T/open-dir" && chown nobody "$T/their-dir" 2>/dev/null
	out=$(env $DRIVER_ENV timeout 30 "$B/bin/gpu-server" --listen "unix:$T/dirs.sock" --run-dir "$T/open-dir" 2>&1)
	check "a run directory others may write is refused" grep -q "may be written by others (mode 0777)" <<<"$out"
	out=$(env $DRIVER_ENV timeout 30 "$B/bin/gpu-server" --listen "unix:$T/dirs.sock" --cache-dir "$T/their-dir" 2>&1)
	check "a cache directory of another user's is refused" grep -q "belongs to uid 65534" <<<"$out"
}

test_unreachable() {
	local err
	want unreachable || return
	err=$(CICADA_SERVER=unix:$T/nowhere.sock LD_LIBRARY_PATH=$B/lib timeout 10 "$PROGS/vecadd_cubin" 2>&1 >/dev/null)
	check "unreachable unix server: one clear line naming it" \
		test "$(echo "$err" | grep -c "cicada: cannot reach gpu-server at unix:$T/nowhere.sock")" = 1
	err=$(CICADA_SERVER=tcp:127.0.0.1:1 CICADA_TOKEN_FILE=$T/token LD_LIBRARY_PATH=$B/lib timeout 10 \
		"$PROGS/vecadd_cubin" 2>&1 >/dev/null)
	check "unreachable tcp server: one clear line naming it" \
		grep -q "cicada: cannot reach gpu-server at tcp:127.0.0.1:1: Connection refused" <<<"$err"
}

test_refusals() {
	local err
	want refusals || return
	echo "not-the-right-token-at-all" >"$T/wrong"
	err=$(CICADA_SERVER=tcp:127.0.0.1:$PORT CICADA_TOKEN_FILE=$T/wrong LD_LIBRARY_PATH=$B/lib timeout 10 \
		"$PROGS/vecadd_cubin" 2>&1 >/dev/null)
	check "wrong token: refused with a reason" grep -q "refused the connection: wrong token" <<<"$err"
	check "wrong token: the refusal is logged" grep -q "refused connection from tcp:127.0.0.1.*wrong token" "$T/main.log"
	err=$(CICADA_SERVER=tcp:127.0.0.1:$PORT LD_LIBRARY_PATH=$B/lib timeout 10 "$PROGS/vecadd_cubin" 2>&1 >/dev/null)
	check "no token over TCP: refused" grep -q "requires a token" <<<"$err"
	check "wrong protocol version: refused with a reason" \
		sh -c "timeout 30 '$TOOLS/wire_abuse' version unix:$T/main.sock | grep -q 'refused=1 message=protocol version 99'"
}

test_malformed() {
	want malformed || return
	for c in garbage oversized truncated badproc badargs; do
		check "malformed input ($c): connection dropped" \
			deadline 30 "$TOOLS/wire_abuse" $c "tcp:127.0.0.1:$PORT" "$(cat "$T/token")"
	done
	check "malformed NVML queries: clean NVML errors; a text over the limit is dropped" \
		sh -c "timeout 30 '$TOOLS/wire_abuse' nvml 'tcp:127.0.0.1:$PORT' '$(cat "$T/token")' >'$T/wire_abuse.nvml' 2>&1"
	check "bad texture, 3D copy and host-function requests: CUDA errors, the connection serves on" \
		sh -c "timeout 30 '$TOOLS/wire_abuse' objects 'tcp:127.0.0.1:$PORT' '$(cat "$T/token")' >'$T/wire_abuse.objects' 2>&1"
	check "server still serves after malformed input" \
		sh -c "env $(cicada_env shm) timeout 60 '$PROGS/vecadd_cubin' >/dev/null 2>&1"
	check "gpu-server survived" kill -0 "$PID_main"
}

# Every exported driver function called with NULL, zero and invalid
# arguments (tests/tools/sweep.c): errors, never a crash; the session and
# the server serve on.
test_sweep() {
	local tr out
	want sweep || return
	for tr in shm unix tcp; do
		out=$T/sweep.$tr
		deadline 300 env $(cicada_env "$tr") "$TOOLS/sweep" >"$out" 2>"$out.err"
		if [ $? -eq 0 ] && grep -q "^sweep: no crash; real work still succeeds" "$out"; then
			ok "every driver function with NULL, zero and invalid arguments over $tr: errors, no crash"
			sed -n 's/^sweep: pass/     pass/p' "$out"
		else
			bad "the never-crash sweep over $tr"; tail -n 3 "$out" "$out.err"
		fi
	done
	check "gpu-server survived the sweep" kill -0 "$PID_main"
}

# The driver API generator's own tests (wire/cuda_h.py, wire/gen-driver.py).
test_generator() {
	want generator || return
	check "the driver API generator: prototypes from cuda.h, classification" \
		deadline 120 sh -c "python3 tests/gen/test_cuda_h.py '$CUDA_INCLUDE' '$CUDA_STUB' >'$T/generator.log' 2>&1"
}

# The server dies mid-run: calls fail within a second, nothing hangs.
test_server_death() {
	local tr=$1 out=$T/death.$1
	want server-death || return
	start_server spare $((PORT + 1)) || return
	env $(cicada_env "$tr" spare) timeout 20 "$TOOLS/fault_client" expect-failure 15 >"$out" 2>"$out.err" &
	local client=$!
	for _ in $(seq 100); do grep -q ready "$out" && break; sleep 0.05; done
	sleep 0.5
	pkill -9 -f "gpu-server --worker-fd .* --cache-dir $T/cache-spare" 2>/dev/null
	kill -9 "$PID_spare" 2>/dev/null
	wait "$client"
	check "server killed mid-run ($tr): calls fail within 1 s, no hang" test $? = 0
	echo "     $(cat "$out" | tail -1)"
	check "server killed mid-run ($tr): one line on stderr" grep -q "cicada: lost the connection to gpu-server" "$out.err"
	rm -f "$T/spare.sock"
}

# One client dying frees only its worker; its neighbour carries on.
test_client_isolation() {
	want isolation || return
	env $(cicada_env shm) timeout 20 "$TOOLS/fault_client" expect-success 3 >"$T/iso.b" 2>&1 &
	local survivor=$!
	env $(cicada_env shm) "$TOOLS/fault_client" expect-success 10 >"$T/iso.a" 2>&1 &   # ends by itself in 10 s
	local victim=$!
	sleep 1
	{ kill -9 $victim; wait $victim; } 2>/dev/null
	wait $survivor
	check "a client killed mid-run harms no other client" test $? = 0
	sleep 0.3
	check "the killed client's worker noticed and exited" grep -q "client .*/$victim disconnected" "$T/main.log"
}

run_admission_tests() {
	want criu-plain && check "the bundled criu dumps and restores a plain process on this host" adm_criu_plain
	want load-shm && check "many clients at once over shared memory: every answer right" adm_load shm
	want load-tcp && check "many clients at once over TCP: every answer right" adm_load tcp
	want busy && check "past --max-sessions with no queue: 'server busy' at once" adm_busy
	want queue && check "past --max-sessions with a queue: the client waits, then is served" adm_queue
	want per-client && check "past --max-sessions-per-client: 'server busy' at once" adm_per_client
	want hello-deadline && check "a trickled hello is cut at its deadline; held hellos are bounded, no thread each" \
		adm_hello_deadline
	want log-abuse && check "a forged host name is logged escaped; a refusal flood is rate-limited" adm_log_abuse
}

echo "Cicada tests ($MODE mode)"
want snapshot && check "snapshot-format library: round trips, corruption, atomic commits" \
	deadline 300 sh -c "'$B/tests/snapshot/test_snapshot' >'$T/snapshot.log' 2>&1"
want snapshot-cli && check "gpu-snapshot inspect/verify" \
	deadline 300 sh -c "bash tests/snapshot/test_cli.sh '$B' >'$T/snapshot-cli.log' 2>&1"
want unit && check "unit tests (cmocka): handles, replay log, VMM placement, shm ring, call tables" \
	deadline 600 sh -c "bash tests/unit/run-unit.sh '$B' >'$T/unit.log' 2>&1 || { grep -E '^(FAIL|\\[  (ERROR|LINE|FAILED))' '$T/unit.log' | head -20; tail -n 1 '$T/unit.log'; exit 1; }"
start_server main $PORT || { echo "0 passed, 1 failed"; exit 1; }
run_programs
run_nvml
test_trace
test_compute_cache
test_handshake
test_tls
test_tls_client
test_allow_list
test_quota
test_cicadactl
test_sm_share
test_sm_share_nvml
test_token_dir
test_session_owner
test_server_dirs
test_module_cache
test_unreachable
test_refusals
test_malformed
test_sweep
test_generator
test_server_death shm
test_server_death tcp
test_client_isolation
run_admission_tests
run_install_tests
run_security_tests
run_cr_tests
run_carry_tests
run_rust_tests
run_multigpu_tests
run_torch_tests
run_migrate_tests
run_container_tests
test_slurm
echo "suite: $(($(date +%s) - SUITE_START)) s"
echo "$PASS passed, $FAIL failed"
[ $FAIL -eq 0 ]

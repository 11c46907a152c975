# cicada-bench: the driver-API micro-benchmarks (bench/run-bench.sh
# runs them). Links the stub libcuda so it NEEDS libcuda.so.1.

BENCH_SRCS := bench/bench.c bench/latency.c bench/launch.c \
	bench/bandwidth.c bench/init.c bench/peer.c
BENCH_OBJS := $(patsubst bench/%.c,$(BUILD)/bench/%.o,$(BENCH_SRCS))
BENCH_BIN := $(BUILD)/bench/cicada-bench

all: $(BENCH_BIN)

$(BUILD)/bench/%.o: bench/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BENCH_BIN): $(BENCH_OBJS)
	$(CC) $(CFLAGS) -o $@ $^ -L$(CUDA_STUBS) -lcuda -Wl,-rpath-link,$(CUDA_STUBS)

# linkspeed: what the TCP loopback itself carries (1 and 4 streams), set
# against Cicada's TCP copies in the same run.
LINKSPEED_BIN := $(BUILD)/bench/linkspeed
all: $(LINKSPEED_BIN)
$(LINKSPEED_BIN): bench/linkspeed.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -pthread -o $@ $<

# cr_native: NVIDIA's driver checkpoint of a native process, the baseline
# of the checkpoint benchmark (bench/run-bench-cr.sh, `make bench-cr`).
CR_NATIVE_BIN := $(BUILD)/bench/cr_native

all: $(CR_NATIVE_BIN)

$(CR_NATIVE_BIN): $(BUILD)/bench/cr_native.o
	$(CC) $(CFLAGS) -o $@ $^ -L$(CUDA_STUBS) -lcuda -Wl,-rpath-link,$(CUDA_STUBS)

bench-cr:
	bash bench/run-bench-cr.sh

# gpu-migrate's downtime, time and bytes, with pre-copy and without, and
# incremental checkpoints (bench/run-bench-migrate.sh).
bench-migrate:
	bash bench/run-bench-migrate.sh

# PyTorch natively and through Cicada, and a training process
# checkpointed and restored (bench/run-bench-torch.sh; GPU node).
bench-torch:
	bash bench/run-bench-torch.sh

# A model server's cold start against a copy started from its template
# (gpu-template; bench/run-bench-coldstart.sh; GPU node, root).
bench-coldstart:
	bash bench/run-bench-coldstart.sh

# The workloads: CUDA runtime programs built the normal way (nvcc's
# default static runtime), sm_90 SASS plus compute_90 PTX. They reach the
# driver only through dlopen("libcuda.so.1"); run-bench.sh runs them.
BENCH_RT_BINS := $(BUILD)/bench/matmul $(BUILD)/bench/nbody $(BUILD)/bench/hog
BENCH_RT_FLAGS := -O2 $(NVCC_ARCH) -gencode arch=compute_90,code=compute_90

all: $(BENCH_RT_BINS)

$(BENCH_RT_BINS): $(BUILD)/bench/%: bench/%.cu bench/workload.h
	@mkdir -p $(@D)
	$(NVCC) $(BENCH_RT_FLAGS) -o $@ $<

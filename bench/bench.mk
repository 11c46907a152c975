# cicada-bench: the driver-API micro-benchmarks (bench/run-bench.sh
# runs them). Links the stub libcuda so it NEEDS libcuda.so.1.

BENCH_SRCS := bench/bench.c bench/latency.c bench/launch.c \
	bench/bandwidth.c bench/init.c
BENCH_OBJS := $(patsubst bench/%.c,$(BUILD)/bench/%.o,$(BENCH_SRCS))
BENCH_BIN := $(BUILD)/bench/cicada-bench

all: $(BENCH_BIN)

$(BUILD)/bench/%.o: bench/%.c bench/bench.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BENCH_BIN): $(BENCH_OBJS)
	$(CC) $(CFLAGS) -o $@ $^ -L$(CUDA_STUBS) -lcuda -Wl,-rpath-link,$(CUDA_STUBS)

# cr_native: NVIDIA's driver checkpoint of a native process, the baseline
# of the checkpoint benchmark (bench/run-bench-cr.sh, `make bench-cr`).
CR_NATIVE_BIN := $(BUILD)/bench/cr_native

all: $(CR_NATIVE_BIN)

$(CR_NATIVE_BIN): $(BUILD)/bench/cr_native.o
	$(CC) $(CFLAGS) -o $@ $^ -L$(CUDA_STUBS) -lcuda -Wl,-rpath-link,$(CUDA_STUBS)

bench-cr:
	bash bench/run-bench-cr.sh

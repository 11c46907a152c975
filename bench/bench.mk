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

# fuzz.mk: the libFuzzer target for the gpu-server's message decoding
# (tests/fuzz/fuzz_decode.c) and `make fuzz`, which runs it for a bounded
# time on a corpus under $(BUILD)/tests/fuzz seeded by make_seeds.
# The target is built with clang from the same wire/ and gpu-server/
# sources (not part of `all`). It links the CUDA stub for the symbols
# (the stand-in lacks a few the generated handlers name, never called
# here) and loads the CPU stand-in libcuda.so.1 at run time via rpath.

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_DIR     := $(BUILD)/tests/fuzz
FUZZ_OBJDIR  := $(FUZZ_DIR)/obj
FUZZ_BIN     := $(FUZZ_DIR)/fuzz_decode
FUZZ_SEEDGEN := $(FUZZ_DIR)/make_seeds
FUZZ_SEEDS   := $(FUZZ_DIR)/seeds
FUZZ_CORPUS  := $(FUZZ_DIR)/corpus
FUZZ_LOG     := $(FUZZ_DIR)/fuzz.log
FUZZ_SAN     := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS  := -O1 -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -pthread -D_GNU_SOURCE \
                $(FUZZ_SAN) -I$(CUDA)/include -I/usr/include/tirpc -I$(GEN) -Iwire -Igpu-server -Invml -Icriu-plugin -Isnapshot-format

FUZZ_SRCS := tests/fuzz/fuzz_decode.c $(WIRE_SRCS) $(filter-out gpu-server/main.c,$(SERVER_SRCS)) $(SERVER_SHARED)
FUZZ_OBJS := $(FUZZ_SRCS:%.c=$(FUZZ_OBJDIR)/%.o) \
             $(FUZZ_OBJDIR)/gen/server_calls.o $(FUZZ_OBJDIR)/gen/cicada_xdr.o $(FUZZ_OBJDIR)/gen/devhash_image.o
FUZZ_HDRS := wire/wire.h gpu-server/gpu-server.h $(GEN)/cicada.h $(GEN)/server_calls.h $(GEN)/manifest.pb-c.h

$(FUZZ_OBJDIR)/%.o: %.c $(FUZZ_HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@
$(FUZZ_OBJDIR)/gen/%.o: $(GEN)/%.c $(FUZZ_HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Wno-unused-variable -c $< -o $@

$(FUZZ_BIN): $(FUZZ_OBJS) $(FAKECUDA_LIB) $(SNAPSHOT_LIB)
	$(FUZZ_CC) $(FUZZ_SAN) -pthread -o $@ $(FUZZ_OBJS) $(SNAPSHOT_LIB) -L$(CUDA_STUBS) -lcuda \
		-Wl,-rpath,$(abspath $(dir $(FAKECUDA_LIB))) $(LDLIBS_RPC) $(SNAPSHOT_LDLIBS)

$(FUZZ_SEEDGEN): tests/fuzz/make_seeds.c $(WIRE_LIB) nvml/nvml-wire.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE -Invml -o $@ $< $(WIRE_LIB) $(LDLIBS_RPC)

# Runs the fuzzer, then prints "fuzz: N executions, M crashes"; fails on
# any crash (artifacts land in $(FUZZ_DIR)/crashes, the log in $(FUZZ_LOG)).
fuzz: $(FUZZ_BIN) $(FUZZ_SEEDGEN)
	@mkdir -p $(FUZZ_SEEDS) $(FUZZ_CORPUS) $(FUZZ_DIR)/crashes
	@$(FUZZ_SEEDGEN) $(FUZZ_SEEDS)
	@echo "fuzz: running $(FUZZ_BIN) for $(FUZZ_SECONDS) s (log: $(FUZZ_LOG))"
	@rc=0; CICADA_LOG=error $(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
		-print_final_stats=1 -report_slow_units=100000 -artifact_prefix=$(FUZZ_DIR)/crashes/ \
		$(FUZZ_CORPUS) $(FUZZ_SEEDS) >$(FUZZ_LOG) 2>&1 || rc=$$?; \
	n=$$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' $(FUZZ_LOG) | tail -n 1); \
	[ -n "$$n" ] || n=$$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' $(FUZZ_LOG) | tail -n 1); \
	[ -n "$$n" ] || n=$$(sed -n 's/^#\([0-9]*\).*/\1/p' $(FUZZ_LOG) | tail -n 1); \
	c=$$(bash tests/fuzz/count-crashes.sh $(FUZZ_LOG) $$rc); \
	if [ $$c -ne 0 ]; then tail -n 60 $(FUZZ_LOG); fi; \
	echo "fuzz: $${n:-0} executions, $$c crashes"; \
	[ $$c -eq 0 ]

# fuzz.mk: the libFuzzer targets for the gpu-server's message decoding
# (tests/fuzz/fuzz_decode.c) and `make fuzz`, which runs it for a bounded
# time on a corpus under $(BUILD)/tests/fuzz seeded by make_seeds, and
# for the shared-memory ring (fuzz_shm.c, `make fuzz-shm`, at the end).
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
                $(FUZZ_SAN) -I$(CUDA)/include -I/usr/include/tirpc -I$(GEN) -Iwire -Igpu-server -Isession -Isnapshot-format \
                $(DEPFLAGS)

FUZZ_SRCS := tests/fuzz/fuzz_decode.c $(WIRE_SRCS) $(filter-out gpu-server/front/main.c,$(SERVER_SRCS)) $(SERVER_SHARED)
FUZZ_OBJS := $(FUZZ_SRCS:%.c=$(FUZZ_OBJDIR)/%.o) \
             $(FUZZ_OBJDIR)/gen/server_calls.o $(FUZZ_OBJDIR)/gen/cicada_xdr.o $(FUZZ_OBJDIR)/gen/devhash_image.o
FUZZ_GEN_HDRS := $(GEN)/cicada.h $(GEN)/server_calls.h $(GEN)/manifest.pb-c.h

$(FUZZ_OBJDIR)/%.o: %.c | $(FUZZ_GEN_HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@
$(FUZZ_OBJDIR)/gen/%.o: $(GEN)/%.c | $(FUZZ_GEN_HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Wno-unused-variable -c $< -o $@

$(FUZZ_BIN): $(FUZZ_OBJS) $(FAKECUDA_LIB) $(SNAPSHOT_LIB)
	$(FUZZ_CC) $(FUZZ_SAN) -pthread -o $@ $(FUZZ_OBJS) $(SNAPSHOT_LIB) -L$(CUDA_STUBS) -lcuda \
		-Wl,-rpath,$(abspath $(dir $(FAKECUDA_LIB))) $(LDLIBS_RPC) $(SNAPSHOT_LDLIBS)

$(FUZZ_SEEDGEN): tests/fuzz/make_seeds.c $(WIRE_LIB) | $(GEN)/cicada.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE -o $@ $< $(WIRE_LIB) $(LDLIBS_RPC)

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

# fuzz_shm (tests/fuzz/fuzz_shm.c): the shared-memory ring as the worker
# reads it while a client thread rewrites the segment. Built with clang
# from the wire/ sources and the worker's host area (gpu-server/state/
# hostarea.c, which maps the segment as in a worker; objects of its own,
# under obj-shm);
# `make fuzz-shm` runs it like `make fuzz` on a corpus seeded by
# make_shm_seeds and prints "fuzz-shm: N executions, M crashes".
FUZZ_SHM_OBJDIR := $(FUZZ_DIR)/obj-shm
FUZZ_SHM_BIN    := $(FUZZ_DIR)/fuzz_shm
FUZZ_SHM_SEEDGEN := $(FUZZ_DIR)/make_shm_seeds
FUZZ_SHM_SEEDS  := $(FUZZ_DIR)/shm-seeds
FUZZ_SHM_CORPUS := $(FUZZ_DIR)/shm-corpus
FUZZ_SHM_LOG    := $(FUZZ_DIR)/fuzz-shm.log
FUZZ_SHM_SRCS   := tests/fuzz/fuzz_shm.c $(WIRE_SRCS) gpu-server/state/hostarea.c
FUZZ_SHM_OBJS   := $(FUZZ_SHM_SRCS:%.c=$(FUZZ_SHM_OBJDIR)/%.o) $(FUZZ_SHM_OBJDIR)/gen/cicada_xdr.o
FUZZ_SHM_CFLAGS := -O1 -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -pthread -D_GNU_SOURCE \
                   $(FUZZ_SAN) -I$(CUDA)/include -I/usr/include/tirpc -I$(GEN) -Iwire -Igpu-server/state $(DEPFLAGS)

$(FUZZ_SHM_OBJDIR)/%.o: %.c | $(GEN)/cicada.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_SHM_CFLAGS) -c $< -o $@
$(FUZZ_SHM_OBJDIR)/gen/%.o: $(GEN)/%.c | $(GEN)/cicada.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_SHM_CFLAGS) -Wno-unused-variable -c $< -o $@

$(FUZZ_SHM_BIN): $(FUZZ_SHM_OBJS)
	$(FUZZ_CC) $(FUZZ_SAN) -pthread -o $@ $(FUZZ_SHM_OBJS) $(LDLIBS_RPC)

$(FUZZ_SHM_SEEDGEN): tests/fuzz/make_shm_seeds.c $(WIRE_LIB) | $(GEN)/cicada.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE -o $@ $< $(WIRE_LIB) $(LDLIBS_RPC)

# Fails on any crash (artifacts in $(FUZZ_DIR)/shm-crashes, the log in
# $(FUZZ_SHM_LOG)); -timeout catches an input that makes the worker wait.
.PHONY: fuzz-shm
fuzz-shm: $(FUZZ_SHM_BIN) $(FUZZ_SHM_SEEDGEN)
	@mkdir -p $(FUZZ_SHM_SEEDS) $(FUZZ_SHM_CORPUS) $(FUZZ_DIR)/shm-crashes
	@$(FUZZ_SHM_SEEDGEN) $(FUZZ_SHM_SEEDS)
	@echo "fuzz-shm: running $(FUZZ_SHM_BIN) for $(FUZZ_SECONDS) s (log: $(FUZZ_SHM_LOG))"
	@rc=0; CICADA_LOG=error $(FUZZ_SHM_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=20 \
		-print_final_stats=1 -report_slow_units=100000 -artifact_prefix=$(FUZZ_DIR)/shm-crashes/ \
		$(FUZZ_SHM_CORPUS) $(FUZZ_SHM_SEEDS) >$(FUZZ_SHM_LOG) 2>&1 || rc=$$?; \
	n=$$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' $(FUZZ_SHM_LOG) | tail -n 1); \
	[ -n "$$n" ] || n=$$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' $(FUZZ_SHM_LOG) | tail -n 1); \
	[ -n "$$n" ] || n=$$(sed -n 's/^#\([0-9]*\).*/\1/p' $(FUZZ_SHM_LOG) | tail -n 1); \
	c=$$(bash tests/fuzz/count-crashes.sh $(FUZZ_SHM_LOG) $$rc); \
	if [ $$c -ne 0 ]; then tail -n 60 $(FUZZ_SHM_LOG); fi; \
	echo "fuzz-shm: $${n:-0} executions, $$c crashes"; \
	[ $$c -eq 0 ]

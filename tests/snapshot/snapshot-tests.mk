# snapshot-tests.mk: tests of the snapshot format. `make all` builds
# test_snapshot (library cases on host buffers) and snap_speed (a
# throughput check, not a test); `make test-snapshot` runs test_snapshot
# and test_cli.sh; `make fuzz-manifest` runs libFuzzer over
# snap_manifest_parse for FUZZ_SECONDS on a corpus seeded by
# manifest_seeds, printing "fuzz-manifest: N executions, M crashes".

SNAPTEST_DIR   := $(BUILD)/tests/snapshot
SNAPTEST_BIN   := $(SNAPTEST_DIR)/test_snapshot
SNAPTEST_SPEED := $(SNAPTEST_DIR)/snap_speed
SNAPTEST_SEEDS := $(SNAPTEST_DIR)/manifest_seeds
# With session/'s image stream and criu log reader, which test_snapshot
# also covers (they use the format's file helpers).
SNAPTEST_CFLAGS := $(CFLAGS) -D_GNU_SOURCE $(SESSION_CFLAGS)
SNAPTEST_LIBS  := $(SESSION_LIB) $(SNAPSHOT_LIB)
SNAPTEST_LINK  := $(SNAPTEST_LIBS) $(SNAPSHOT_LDLIBS) -Wl,-rpath,'$$ORIGIN/../../lib/deps'

$(SNAPTEST_DIR)/%: tests/snapshot/%.c $(SNAPTEST_LIBS) | $(GEN)/manifest.pb-c.h
	@mkdir -p $(@D)
	$(CC) $(SNAPTEST_CFLAGS) -o $@ $< $(SNAPTEST_LINK)

.PHONY: test-snapshot fuzz-manifest snap-speed
all: $(SNAPTEST_BIN) $(SNAPTEST_SPEED) $(SNAPTEST_SEEDS)

test-snapshot: $(SNAPTEST_BIN) $(SNAPSHOT_BIN)
	@$(SNAPTEST_BIN)
	@bash tests/snapshot/test_cli.sh $(BUILD)

snap-speed: $(SNAPTEST_SPEED)
	$(SNAPTEST_SPEED)

# The fuzz target, built with clang from the library's sources.
SFUZZ_DIR    := $(SNAPTEST_DIR)/fuzz
SFUZZ_BIN    := $(SFUZZ_DIR)/fuzz_manifest
SFUZZ_LOG    := $(SFUZZ_DIR)/fuzz.log
SFUZZ_SAN    := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
SFUZZ_SRCS   := tests/snapshot/fuzz_manifest.c $(SNAPSHOT_SRCS) $(GEN)/manifest.pb-c.c
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60

$(SFUZZ_BIN): $(SFUZZ_SRCS) $(SNAPSHOT_HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) -O1 -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -pthread -D_GNU_SOURCE \
		$(SFUZZ_SAN) -I$(GEN) $(SNAPSHOT_CFLAGS) -o $@ $(SFUZZ_SRCS) $(SNAPSHOT_LDLIBS)

# The stream decoders (migration images: session/'s tree.c; GPU
# snapshots), same way.
SFUZZ_STREAM := $(SFUZZ_DIR)/fuzz_stream
SFUZZ_STREAM_SRCS := tests/snapshot/fuzz_stream.c $(SNAPSHOT_SRCS) session/tree.c session/tree_pack.c \
                     $(GEN)/manifest.pb-c.c
$(SFUZZ_STREAM): $(SFUZZ_STREAM_SRCS) $(SNAPSHOT_HDRS) session/criu_images.h session/tree_pack.h
	@mkdir -p $(@D)
	$(FUZZ_CC) -O1 -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -pthread -D_GNU_SOURCE \
		$(SFUZZ_SAN) -I$(GEN) $(SESSION_CFLAGS) -o $@ $(SFUZZ_STREAM_SRCS) $(SNAPSHOT_LDLIBS)

.PHONY: fuzz-stream
fuzz-stream: $(SFUZZ_STREAM)
	@mkdir -p $(SFUZZ_DIR)/stream-corpus $(SFUZZ_DIR)/crashes
	@rc=0; $(SFUZZ_STREAM) -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -print_final_stats=1 \
		-artifact_prefix=$(SFUZZ_DIR)/crashes/ $(SFUZZ_DIR)/stream-corpus >$(SFUZZ_DIR)/stream.log 2>&1 || rc=$$?; \
	n=$$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' $(SFUZZ_DIR)/stream.log | tail -n 1); \
	c=$$(bash tests/fuzz/count-crashes.sh $(SFUZZ_DIR)/stream.log $$rc); \
	if [ $$c -ne 0 ]; then tail -n 60 $(SFUZZ_DIR)/stream.log; fi; \
	echo "fuzz-stream: $${n:-0} executions, $$c crashes"; \
	[ $$c -eq 0 ]

fuzz-manifest: $(SFUZZ_BIN) $(SNAPTEST_SEEDS)
	@mkdir -p $(SFUZZ_DIR)/seeds $(SFUZZ_DIR)/corpus $(SFUZZ_DIR)/crashes
	@$(SNAPTEST_SEEDS) $(SFUZZ_DIR)/seeds
	@echo "fuzz-manifest: running $(SFUZZ_BIN) for $(FUZZ_SECONDS) s (log: $(SFUZZ_LOG))"
	@rc=0; $(SFUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -print_final_stats=1 -report_slow_units=100000 \
		-artifact_prefix=$(SFUZZ_DIR)/crashes/ $(SFUZZ_DIR)/corpus $(SFUZZ_DIR)/seeds \
		>$(SFUZZ_LOG) 2>&1 || rc=$$?; \
	n=$$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' $(SFUZZ_LOG) | tail -n 1); \
	c=$$(bash tests/fuzz/count-crashes.sh $(SFUZZ_LOG) $$rc); \
	if [ $$c -ne 0 ]; then tail -n 60 $(SFUZZ_LOG); fi; \
	echo "fuzz-manifest: $${n:-0} executions, $$c crashes"; \
	[ $$c -eq 0 ]

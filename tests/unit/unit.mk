# unit.mk: the cmocka unit tests (tests/unit/): the handle table, the
# replay log's compaction, VMM placement, the shm ring, and the generated
# call tables against calls.tbl. Built with `all` where cmocka is
# installed; `make unit` builds and runs them (run-unit.sh), as does the
# suite's test 'unit'. The gpu-server's tests link its objects (all but
# main.o) with the stub libcuda and run on the CPU stand-in.

UNIT_DIR   := $(BUILD)/tests/unit
UNIT_NAMES := test_handles test_replay test_vmm_place test_shm test_calls
UNIT_BINS  := $(addprefix $(UNIT_DIR)/,$(UNIT_NAMES))
UNIT_CFLAGS := $(CFLAGS) -D_GNU_SOURCE -Igpu-server -Isession $(SNAPSHOT_CFLAGS)
UNIT_SERVER := $(filter-out $(BUILD)/gpu-server/front/main.o,$(SERVER_OBJS)) $(WIRE_LIB) $(SNAPSHOT_LIB)
# libcmocka.so.0 is copied beside the tests, so that they also run on a
# GPU node that has no libcmocka installed.
UNIT_CMOCKA := $(UNIT_DIR)/libcmocka.so.0
UNIT_RPATH := -Wl,-rpath,'$$ORIGIN' -Wl,-rpath,'$$ORIGIN/../../lib/deps'
UNIT_LINK  := -L$(CUDA_STUBS) -lcuda $(LDLIBS_RPC) $(SNAPSHOT_LDLIBS) -lcmocka \
              -Wl,-rpath,$(abspath $(dir $(FAKECUDA_LIB))) $(UNIT_RPATH)
# The client's generated stubs, with hooks that note what each calls (test_calls dlopens it).
UNIT_CLIENT := $(UNIT_DIR)/libcalls_client.so

.PHONY: unit
ifneq ($(wildcard /usr/include/cmocka.h),)
all: $(UNIT_BINS) $(UNIT_CLIENT) $(UNIT_CMOCKA)
endif

$(UNIT_CMOCKA):
	@mkdir -p $(@D)
	cp -L $$(ldconfig -p | awk '$$1 == "libcmocka.so.0" && /x86-64/ { print $$NF; exit }') $@

unit: $(UNIT_BINS) $(UNIT_CLIENT) $(UNIT_CMOCKA) $(FAKECUDA_LIB)
	@bash tests/unit/run-unit.sh $(BUILD)

$(UNIT_DIR)/test_shm: tests/unit/test_shm.c $(WIRE_LIB)
	@mkdir -p $(@D)
	$(CC) $(UNIT_CFLAGS) -o $@ $< $(WIRE_LIB) $(LDLIBS_RPC) -lcmocka $(UNIT_RPATH)

$(UNIT_DIR)/test_%: tests/unit/test_%.c $(UNIT_SERVER) $(FAKECUDA_LIB) gpu-server/gpu-server.h
	@mkdir -p $(@D)
	$(CC) $(UNIT_CFLAGS) -o $@ $< $(UNIT_SERVER) $(UNIT_LINK)
$(UNIT_DIR)/test_calls: $(UNIT_CLIENT) tests/unit/calls_seen.h

$(UNIT_CLIENT): tests/unit/calls_client_stub.c tests/unit/calls_seen.h $(BUILD)/gen/client_calls.o $(BUILD)/gen/cicada_xdr.o
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE -Iinterposer -Itests/unit -shared -o $@ $< $(BUILD)/gen/client_calls.o \
		$(BUILD)/gen/cicada_xdr.o $(LDLIBS_RPC)

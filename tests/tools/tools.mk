# tools.mk: helper programs for the fault tests.

TOOLS_DIR := $(BUILD)/tests/tools

$(TOOLS_DIR)/fault_client: tests/tools/fault_client.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< -L$(CUDA_STUBS) -lcuda -Wl,-rpath-link,$(CUDA_STUBS)

$(TOOLS_DIR)/wire_abuse: tests/tools/wire_abuse.c $(WIRE_LIB) $(GEN)/cicada.h nvml/nvml-wire.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE -Invml -o $@ $< $(WIRE_LIB) -ltirpc -Wl,-rpath,'$$ORIGIN/../../lib/deps'

all: $(TOOLS_DIR)/fault_client $(TOOLS_DIR)/wire_abuse

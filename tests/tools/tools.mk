# tools.mk: helper programs for the fault tests.

TOOLS_DIR := $(BUILD)/tests/tools

$(TOOLS_DIR)/fault_client: tests/tools/fault_client.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< -L$(CUDA_STUBS) -lcuda -Wl,-rpath-link,$(CUDA_STUBS)

$(TOOLS_DIR)/wire_abuse: tests/tools/wire_abuse.c $(WIRE_LIB) | $(GEN)/cicada.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE -o $@ $< $(WIRE_LIB) $(LDLIBS_RPC) -Wl,-rpath,'$$ORIGIN/../../lib/deps'

$(TOOLS_DIR)/reaper: tests/tools/reaper.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $<

$(TOOLS_DIR)/tcp_hold: tests/tools/tcp_hold.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< -pthread

$(TOOLS_DIR)/uring_hold: tests/tools/uring_hold.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $<

all: $(TOOLS_DIR)/fault_client $(TOOLS_DIR)/wire_abuse $(TOOLS_DIR)/reaper $(TOOLS_DIR)/tcp_hold $(TOOLS_DIR)/uring_hold

# The never-crash sweep: callers generated from cuda.h for every exported
# driver function (wire/gen-driver.py sweep).
$(GEN)/sweep_calls.c: wire/gen-driver.py wire/cuda_h.py
	@mkdir -p $(@D)
	$(GEN_DRIVER) sweep $(GEN_DRIVER_IN) > $@.tmp && mv $@.tmp $@
$(TOOLS_DIR)/sweep: tests/tools/sweep.c tests/tools/sweep.h $(GEN)/sweep_calls.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Wno-deprecated-declarations -D_GNU_SOURCE -Itests/tools -o $@ tests/tools/sweep.c \
		$(GEN)/sweep_calls.c -L$(CUDA_STUBS) -lcuda -ldl -Wl,-rpath-link,$(CUDA_STUBS)
all: $(TOOLS_DIR)/sweep

# iproute2's ip, with the libraries it needs beyond libc, for the
# migration tests' network namespaces on a GPU node that lacks it
# (tests/tools/ip runs it from here). Skipped where this machine has none.
$(TOOLS_DIR)/iproute/.stamp:
	@mkdir -p $(@D)
	if [ -x /usr/sbin/ip ]; then cp -L /usr/sbin/ip $(@D)/ip.bin && \
		ldd /usr/sbin/ip | awk '$$3 ~ /^\// && $$1 !~ /^(libc\.so|ld-linux)/ { print $$3 }' | xargs -r -I{} cp -L {} $(@D)/; fi
	touch $@
bundle: $(TOOLS_DIR)/iproute/.stamp

# The hostile-tenant tests' tools (tests/security): raw-protocol clients
# (raw.c: their hello), a snapshot forger, a timed first CUDA call, and a
# squatter on control sockets' names.
SEC_TOOLS := $(TOOLS_DIR)/shm_race $(TOOLS_DIR)/snap_request $(TOOLS_DIR)/flood $(TOOLS_DIR)/own_region
$(SEC_TOOLS): $(TOOLS_DIR)/%: tests/security/%.c tests/security/raw.c tests/security/raw.h $(WIRE_LIB) $(GEN)/cicada.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE -Itests/security -o $@ $< tests/security/raw.c $(WIRE_LIB) $(LDLIBS_RPC) \
		-Wl,-rpath,'$$ORIGIN/../../lib/deps'
$(TOOLS_DIR)/snap_forge: tests/security/snap_forge.c $(SNAPSHOT_LIB) | $(GEN)/manifest.pb-c.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE $(SNAPSHOT_CFLAGS) -o $@ $< $(SNAPSHOT_LIB) $(SNAPSHOT_LDLIBS) \
		-Wl,-rpath,'$$ORIGIN/../../lib/deps'
$(TOOLS_DIR)/first_call: tests/security/first_call.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< -L$(CUDA_STUBS) -lcuda -Wl,-rpath-link,$(CUDA_STUBS)
$(TOOLS_DIR)/ctl_squat: tests/security/ctl_squat.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $<
all: $(SEC_TOOLS) $(TOOLS_DIR)/snap_forge $(TOOLS_DIR)/first_call $(TOOLS_DIR)/ctl_squat

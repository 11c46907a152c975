# criu-plugin.mk: cicada.so, Cicada's CRIU plugin, alone in its own
# directory ($(BUILD)/lib/criu) for criu's -L. It exports only the plugin
# descriptor, so its code never binds to criu's same-named symbols.

PLUGIN_SRCS := criu-plugin/plugin.c criu-plugin/preflight.c criu-plugin/watch.c
PLUGIN_OBJS := $(PLUGIN_SRCS:%.c=$(BUILD)/%.o)
PLUGIN_SO   := $(BUILD)/lib/criu/cicada.so
CRIU_INCLUDE ?= /usr/local/include

$(BUILD)/criu-plugin/%.o: criu-plugin/%.c | $(GEN)/cicada.h $(GEN)/manifest.pb-c.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE -I$(CRIU_INCLUDE) $(SNAPSHOT_CFLAGS) $(SESSION_CFLAGS) -c $< -o $@

$(PLUGIN_SO): $(PLUGIN_OBJS) $(SESSION_LIB) $(WIRE_LIB) $(SNAPSHOT_LIB) criu-plugin/exports.map
	@mkdir -p $(@D)
	$(CC) -shared -pthread -o $@ $(PLUGIN_OBJS) $(SESSION_LIB) $(WIRE_LIB) $(SNAPSHOT_LIB) \
		-Wl,--version-script=criu-plugin/exports.map -Wl,-Bsymbolic \
		-Wl,-rpath,'$$ORIGIN/../deps' $(LDLIBS_RPC) $(SNAPSHOT_LDLIBS)

all: $(PLUGIN_SO)

# The hardware-breakpoint probe that build/bin/criu runs once per boot.
HWBP_PROBE := $(BUILD)/libexec/cicada-hwbp-probe
$(HWBP_PROBE): criu-plugin/hwbp_probe.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE -o $@ $<
all: $(HWBP_PROBE)

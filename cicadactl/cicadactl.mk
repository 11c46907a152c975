# cicadactl.mk: cicadactl, the operator's command (cicadactl/cicadactl.h).
# It speaks the gpu-server's admin socket, and finds criu and its
# plugins as gpu-migrate does (session/).

CTL_SRCS := cicadactl/main.c cicadactl/ask.c cicadactl/list.c cicadactl/verbs.c
CTL_OBJS := $(CTL_SRCS:%.c=$(BUILD)/%.o)
CTL_BIN := $(BUILD)/bin/cicadactl

$(BUILD)/cicadactl/%.o: cicadactl/%.c | $(GEN)/cicada.h $(GEN)/manifest.pb-c.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE $(SESSION_CFLAGS) -Icicadactl -c $< -o $@

$(CTL_BIN): $(CTL_OBJS) $(SESSION_LIB) $(WIRE_LIB) $(SNAPSHOT_LIB)
	@mkdir -p $(@D)
	$(CC) -o $@ $(CTL_OBJS) $(SESSION_LIB) $(WIRE_LIB) $(SNAPSHOT_LIB) $(LDLIBS_RPC) $(SNAPSHOT_LDLIBS) \
		-Wl,-rpath,'$$ORIGIN/../lib/deps'

all: $(CTL_BIN)

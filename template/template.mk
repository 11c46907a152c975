# template.mk: gpu-template, which saves a warmed-up process as a template
# and starts copies of it (template/template.h). It runs criu, and finds
# it and Cicada's plugin as gpu-migrate does (session/).

TEMPLATE_SRCS := template/main.c template/run.c template/save.c template/start.c template/criu.c
TEMPLATE_OBJS := $(TEMPLATE_SRCS:%.c=$(BUILD)/%.o)
TEMPLATE_BIN := $(BUILD)/bin/gpu-template

$(BUILD)/template/%.o: template/%.c | $(GEN)/cicada.h $(GEN)/manifest.pb-c.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE $(SESSION_CFLAGS) -Itemplate -c $< -o $@

$(TEMPLATE_BIN): $(TEMPLATE_OBJS) $(SESSION_LIB) $(WIRE_LIB) $(SNAPSHOT_LIB)
	@mkdir -p $(@D)
	$(CC) -o $@ $(TEMPLATE_OBJS) $(SESSION_LIB) $(WIRE_LIB) $(SNAPSHOT_LIB) $(LDLIBS_RPC) $(SNAPSHOT_LDLIBS) \
		-Wl,-rpath,'$$ORIGIN/../lib/deps'

all: $(TEMPLATE_BIN)

# nvml.mk: libnvidia-ml.so.1, Cicada's NVML replacement, in $(BUILD)/lib
# beside libcuda.so.1. It has no connection of its own: it links that
# libcuda.so.1 (the interposer, found through $ORIGIN) and asks through
# its cicada_nvml_query. Only the log functions come from libwire.a.

NVML_SRCS := nvml/init.c nvml/handles.c nvml/system.c nvml/device.c nvml/status.c nvml/unsupported.c
NVML_OBJS := $(NVML_SRCS:%.c=$(BUILD)/%.o)
NVML_LIB  := $(BUILD)/lib/libnvidia-ml.so.1

$(BUILD)/nvml/%.o: nvml/%.c | $(GEN)/cicada.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE -Invml -c $< -o $@

$(NVML_LIB): $(NVML_OBJS) $(WIRE_LIB) $(INTERPOSER_LIB) nvml/exports.map
	@mkdir -p $(@D)
	$(CC) -shared -pthread -o $@ $(NVML_OBJS) $(WIRE_LIB) -Wl,-soname,libnvidia-ml.so.1 \
		-Wl,--version-script=nvml/exports.map -L$(BUILD)/lib -Wl,--no-as-needed -l:libcuda.so.1 \
		-Wl,-rpath,'$$ORIGIN'

all: $(NVML_LIB)

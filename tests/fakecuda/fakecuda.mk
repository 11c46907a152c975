# CPU stand-in for libcuda.so.1, used only by the tests (CI has no GPU).
# Included by the top-level Makefile, which sets BUILD, CUDA, CC and CFLAGS.

FAKECUDA_DIR  := tests/fakecuda
FAKECUDA_SRCS := $(addprefix $(FAKECUDA_DIR)/, context.c device.c errors.c kernels.c \
                 launch.c memory.c module.c registry.c stream.c vmm.c graph.c texture.c absent.c misc.c link.c tensormap.c userobj.c jit.c green.c)
FAKECUDA_OBJS := $(FAKECUDA_SRCS:%.c=$(BUILD)/%.o)
FAKECUDA_LIB  := $(BUILD)/tests/fakecuda/libcuda.so.1
# Driver entry points often ignore some of their arguments (flags, options).
FAKECUDA_CFLAGS := -Wno-unused-parameter -Isnapshot-format

FAKECUDA_JIT  := $(BUILD)/tests/fakecuda/libnvidia-ptxjitcompiler.so.1

all: $(FAKECUDA_LIB) $(FAKECUDA_JIT)

$(BUILD)/$(FAKECUDA_DIR)/%.o: $(FAKECUDA_DIR)/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(FAKECUDA_CFLAGS) -c -o $@ $<

# The per-thread default stream forms (_ptds, _ptsz) of what it serves,
# made as the interposer's are (wire/gen-driver.py).
$(BUILD)/$(FAKECUDA_DIR)/ptds.c: wire/gen-driver.py wire/cuda_h.py $(FAKECUDA_OBJS)
	$(GEN_DRIVER) ptds $(GEN_DRIVER_IN) $(FAKECUDA_OBJS) > $@.tmp && mv $@.tmp $@
$(BUILD)/$(FAKECUDA_DIR)/ptds.o: $(BUILD)/$(FAKECUDA_DIR)/ptds.c
	$(CC) $(CFLAGS) -c -o $@ $<

$(FAKECUDA_LIB): $(FAKECUDA_OBJS) $(BUILD)/$(FAKECUDA_DIR)/ptds.o
	$(CC) -shared -pthread -Wl,-soname,libcuda.so.1 -o $@ $^ -ldl

# The compiler the stand-in maps when it compiles PTX (jit.c).
$(FAKECUDA_JIT): $(FAKECUDA_DIR)/jitcompiler.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -shared -Wl,-soname,libnvidia-ptxjitcompiler.so.1 -o $@ $<

# The stand-in must define every driver function the gpu-server calls: a
# worker on it would otherwise die of a missing symbol at its first use.
$(BUILD)/tests/fakecuda/.covers-server: $(FAKECUDA_LIB) $(SERVER_BIN)
	@nm -D --undefined-only $(SERVER_BIN) | awk '$$2 ~ /^cu/ { print $$2 }' | sort >$@.need
	@nm -D --defined-only $(FAKECUDA_LIB) | awk '$$3 ~ /^cu/ { print $$3 }' | sort >$@.have
	@missing=$$(comm -23 $@.need $@.have); rm -f $@.need $@.have; \
	if [ -n "$$missing" ]; then echo "fakecuda: the gpu-server calls what the stand-in lacks:" $$missing >&2; \
		exit 1; fi; touch $@
all: $(BUILD)/tests/fakecuda/.covers-server

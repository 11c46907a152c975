# CPU stand-in for libcuda.so.1, used only by the tests (CI has no GPU).
# Included by the top-level Makefile, which sets BUILD, CUDA, CC and CFLAGS.

FAKECUDA_DIR  := tests/fakecuda
FAKECUDA_SRCS := $(addprefix $(FAKECUDA_DIR)/, context.c device.c errors.c kernels.c \
                 launch.c memory.c module.c registry.c stream.c vmm.c graph.c texture.c)
FAKECUDA_OBJS := $(FAKECUDA_SRCS:%.c=$(BUILD)/%.o)
FAKECUDA_LIB  := $(BUILD)/tests/fakecuda/libcuda.so.1
# Driver entry points often ignore some of their arguments (flags, options).
FAKECUDA_CFLAGS := -Wno-unused-parameter

all: $(FAKECUDA_LIB)

$(BUILD)/$(FAKECUDA_DIR)/%.o: $(FAKECUDA_DIR)/%.c $(FAKECUDA_DIR)/fakecuda.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(FAKECUDA_CFLAGS) -c -o $@ $<

$(FAKECUDA_LIB): $(FAKECUDA_OBJS)
	$(CC) -shared -pthread -Wl,-soname,libcuda.so.1 -o $@ $^ -ldl

# interposer.mk: libcicada.so, the drop-in libcuda.so.1, and the library
# folder ($(BUILD)/lib) where libcuda.so.1 names it.

INTERPOSER_SRCS := interposer/client.c interposer/current.c interposer/context.c interposer/hostmem.c interposer/devmem.c interposer/copy.c interposer/transfer.c interposer/copy_pool.c \
                   interposer/module.c interposer/launch.c interposer/device.c interposer/loader.c \
                   interposer/control.c interposer/limit.c interposer/proc_address.c interposer/export_tables.c interposer/compute_cache.c interposer/attributes.c \
                   interposer/integrity.c interposer/ids.c interposer/stream.c \
                   interposer/unsupported.c interposer/graph.c interposer/mempool.c interposer/hostfn.c interposer/array.c \
                   interposer/nvml_bridge.c interposer/jit.c interposer/link.c interposer/managed.c interposer/mapped.c interposer/graph_node.c interposer/graph_stage.c \
                   interposer/vmm.c \
                   interposer/trace.c interposer/stats.c interposer/answers.c interposer/lanes.c interposer/ipc.c \
                   interposer/tensormap.c interposer/userobj.c
INTERPOSER_BASE := $(INTERPOSER_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/gen/client_calls.o $(BUILD)/gen/error_names.o
INTERPOSER_OBJS := $(BUILD)/interposer/served.o $(BUILD)/gen/driver_ptds.o $(BUILD)/gen/driver_missing.o \
                   $(BUILD)/gen/driver_trace.o
INTERPOSER_LIB := $(BUILD)/lib/libcicada.so
GEN_DRIVER := python3 wire/gen-driver.py
GEN_DRIVER_IN := $(CC) $(CUDA)/include $(CUDA_STUBS)/libcuda.so

# The rest of the driver API, from cuda.h: per-thread-stream forms of what
# the objects above serve, and every other exported name failing cleanly.
$(GEN)/driver_%.c: wire/gen-driver.py wire/cuda_h.py $(INTERPOSER_BASE)
	@mkdir -p $(@D)
	$(GEN_DRIVER) $* $(GEN_DRIVER_IN) $(INTERPOSER_BASE) > $@.tmp && mv $@.tmp $@
$(BUILD)/gen/driver_%.o: $(GEN)/driver_%.c
	$(CC) $(CFLAGS) -D_GNU_SOURCE -Iinterposer -c $< -o $@

# The hand-written objects as one, each served cuX renamed impl_cuX (its
# exported cuX, generated, reports failures: trace.c).
$(GEN)/driver_rename.txt: wire/gen-driver.py wire/cuda_h.py $(INTERPOSER_BASE)
	@mkdir -p $(@D)
	$(GEN_DRIVER) rename $(GEN_DRIVER_IN) $(INTERPOSER_BASE) > $@.tmp && mv $@.tmp $@
$(BUILD)/interposer/served.o: $(INTERPOSER_BASE) $(GEN)/driver_rename.txt
	$(LD) -r -o $@.tmp $(INTERPOSER_BASE)
	objcopy --redefine-syms=$(GEN)/driver_rename.txt $@.tmp $@ && rm -f $@.tmp

$(GEN)/error_names.c: interposer/gen-errors.sh
	@mkdir -p $(@D)
	sh $< $(CUDA)/include/cuda.h > $@

$(BUILD)/interposer/%.o: interposer/%.c | $(GEN)/cicada.h $(GEN)/client_calls.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE -Iinterposer -c $< -o $@
$(BUILD)/gen/client_calls.o: $(GEN)/client_calls.c | $(GEN)/client_calls.h $(GEN)/cicada.h
	$(CC) $(CFLAGS) -D_GNU_SOURCE -Iinterposer -c $< -o $@
$(BUILD)/gen/error_names.o: $(GEN)/error_names.c
	$(CC) $(CFLAGS) -c $< -o $@

$(INTERPOSER_LIB): $(INTERPOSER_OBJS) $(WIRE_LIB) interposer/exports.map
	@mkdir -p $(@D)
	$(CC) -shared -pthread -o $@ $(INTERPOSER_OBJS) $(WIRE_LIB) -Wl,-soname,libcuda.so.1 \
		-Wl,--version-script=interposer/exports.map -Wl,-z,nodelete \
		-Wl,-rpath,'$$ORIGIN/deps' $(LDLIBS_RPC) -lxxhash -ldl
	ln -sf libcicada.so $(BUILD)/lib/libcuda.so.1

all: $(INTERPOSER_LIB)

# The generated driver sources are kept (make would delete them as
# intermediates, and their .d files would then ask for them again).
.SECONDARY: $(GEN)/driver_ptds.c $(GEN)/driver_missing.c $(GEN)/driver_trace.c

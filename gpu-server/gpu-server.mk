# gpu-server.mk: the gpu-server daemon (links the real libcuda.so.1).

SERVER_SRCS := gpu-server/main.c gpu-server/pool.c gpu-server/admit.c gpu-server/worker.c gpu-server/dispatch.c gpu-server/procs.c gpu-server/session.c gpu-server/handoff.c gpu-server/handles.c \
               gpu-server/device.c gpu-server/memory.c gpu-server/module.c gpu-server/modcache.c \
               gpu-server/auth.c gpu-server/peer.c gpu-server/pinned.c gpu-server/primary.c gpu-server/devmem.c gpu-server/alloc.c gpu-server/replay.c \
               gpu-server/checkpoint.c gpu-server/restore.c gpu-server/snapio.c gpu-server/globals.c \
               gpu-server/output.c gpu-server/graph.c gpu-server/graph_node.c gpu-server/graph_stage.c gpu-server/hostfn.c gpu-server/lanes.c gpu-server/ordered.c gpu-server/array.c \
               gpu-server/nvml.c gpu-server/nvml_real.c gpu-server/nvml_cuda.c gpu-server/jit.c gpu-server/link.c gpu-server/vmm.c gpu-server/vmm_place.c gpu-server/objects.c gpu-server/objects_save.c gpu-server/objects_restore.c \
               gpu-server/migrate_in.c gpu-server/precopy.c gpu-server/devhash.c gpu-server/preload.c \
               gpu-server/gpus.c gpu-server/placement.c gpu-server/ipc.c gpu-server/ipc_save.c gpu-server/tensormap.c gpu-server/privsep.c
# With the CRIU plugin's requests (request.c), as gpu-migrate: an incoming
# migration whose copy may not run has its restored session ended.
SERVER_SHARED := criu-plugin/request.c criu-plugin/session_file.c
SERVER_OBJS := $(SERVER_SRCS:%.c=$(BUILD)/%.o) $(SERVER_SHARED:%.c=$(BUILD)/%.o) $(BUILD)/gen/server_calls.o \
               $(BUILD)/gen/devhash_image.o
SERVER_BIN := $(BUILD)/bin/gpu-server

$(BUILD)/gpu-server/%.o: gpu-server/%.c | $(GEN)/cicada.h $(GEN)/server_calls.h $(GEN)/manifest.pb-c.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE -Igpu-server -Invml -Icriu-plugin $(SNAPSHOT_CFLAGS) -c $< -o $@
$(BUILD)/gen/server_calls.o: $(GEN)/server_calls.c | $(GEN)/server_calls.h $(GEN)/cicada.h $(GEN)/manifest.pb-c.h
	$(CC) $(CFLAGS) -Wno-deprecated-declarations -D_GNU_SOURCE -Igpu-server -c $< -o $@

# The device hashing kernel (devhash.cu): SASS for Hopper, PTX that any
# newer GPU compiles; embedded as an array (devhash_image.c).
DEVHASH_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_75,code=compute_75
$(BUILD)/gpu-server/devhash.fatbin: gpu-server/devhash.cu snapshot-format/devhash.h
	@mkdir -p $(@D)
	$(NVCC) -fatbin -Isnapshot-format $(DEVHASH_ARCH) -o $@ $<
$(GEN)/devhash_image.c: $(BUILD)/gpu-server/devhash.fatbin
	python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); \
		print("/* generated from devhash.fatbin */\n#include <stddef.h>\n" \
		"const unsigned char devhash_image[] __attribute__((aligned(8))) = {" + \
		",".join(str(b) for b in d) + "};\nconst size_t devhash_image_size = %d;" % len(d))' $< > $@
$(BUILD)/gen/devhash_image.o: $(GEN)/devhash_image.c
	$(CC) $(CFLAGS) -c $< -o $@

$(SERVER_BIN): $(SERVER_OBJS) $(WIRE_LIB) $(SNAPSHOT_LIB)
	@mkdir -p $(@D)
	$(CC) -pthread -o $@ $^ -L$(CUDA_STUBS) -lcuda $(LDLIBS_RPC) $(SNAPSHOT_LDLIBS) -Wl,-rpath,'$$ORIGIN/../lib/deps'

all: $(SERVER_BIN)

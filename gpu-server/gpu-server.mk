# gpu-server.mk: the gpu-server daemon (links the real libcuda.so.1).

# Four parts, each a folder with one header, each calling only the parts
# below it (gpu-server.h says what each holds): front -> checkpoint ->
# calls -> state.
SERVER_FRONT      := main pool admin admit hello placement sm_share auth tokens handoff session privsep worker migrate_in criu_run
SERVER_CHECKPOINT := checkpoint restore snapio objects_save objects_restore ipc_save devhash precopy preload
SERVER_CALLS      := dispatch device alloc memory module array graph graph_node graph_stage graph_copy hostfn \
                     lanes output vmm ipc tensormap jit link nvml nvml_real nvml_cuda nvml_put profile
SERVER_STATE      := procs handles replay devmem quota tenant_policy green stat ordered primary gpus globals vmm_place objects modcache peer pinned \
                     hostarea
SERVER_SRCS := $(SERVER_FRONT:%=gpu-server/front/%.c) $(SERVER_CHECKPOINT:%=gpu-server/checkpoint/%.c) \
               $(SERVER_CALLS:%=gpu-server/calls/%.c) $(SERVER_STATE:%=gpu-server/state/%.c)
# With the session library's requests (request.c), as gpu-migrate: an
# incoming migration whose copy may not run has its restored session ended;
# its image stream (tree.c) and criu log reader, to take one in; and which
# criu runs it (criu_path.c).
SERVER_SHARED := session/request.c session/session_file.c session/tree.c session/tree_pack.c \
                 session/criu_log.c session/criu_path.c
SERVER_OBJS := $(SERVER_SRCS:%.c=$(BUILD)/%.o) $(SERVER_SHARED:%.c=$(BUILD)/%.o) $(BUILD)/gen/server_calls.o \
               $(BUILD)/gen/devhash_image.o
SERVER_BIN := $(BUILD)/bin/gpu-server

$(BUILD)/gpu-server/%.o: gpu-server/%.c | $(GEN)/cicada.h $(GEN)/server_calls.h $(GEN)/manifest.pb-c.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE -Igpu-server $(SESSION_CFLAGS) $(SNAPSHOT_CFLAGS) -c $< -o $@
$(BUILD)/gen/server_calls.o: $(GEN)/server_calls.c | $(GEN)/server_calls.h $(GEN)/cicada.h $(GEN)/manifest.pb-c.h
	$(CC) $(CFLAGS) -Wno-deprecated-declarations -D_GNU_SOURCE -Igpu-server -c $< -o $@

# The device hashing kernel (devhash.cu): SASS for Hopper, PTX that any
# newer GPU compiles; embedded as an array (devhash_image.c).
DEVHASH_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_75,code=compute_75
$(BUILD)/gpu-server/devhash.fatbin: gpu-server/checkpoint/devhash.cu snapshot-format/devhash.h
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

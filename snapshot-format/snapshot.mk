# snapshot.mk: the GPU snapshot format: protoc-c generates the manifest
# code from manifest.proto into $(GEN) (never committed), the library
# goes into libsnapshot.a (position independent, for the gpu-server and
# the CRIU plugin), and gpu-snapshot is the inspection tool. Others link
# $(SNAPSHOT_LIB) $(SNAPSHOT_LDLIBS) and compile with $(SNAPSHOT_CFLAGS).

SNAPSHOT_SRCS   := snapshot-format/util.c snapshot-format/manifest.c snapshot-format/writer.c \
                   snapshot-format/memory.c snapshot-format/reader.c snapshot-format/transfer.c \
                   snapshot-format/key.c
SNAPSHOT_GEN    := $(GEN)/manifest.pb-c.c $(GEN)/manifest.pb-c.h
SNAPSHOT_HDRS   := snapshot-format/snapshot.h snapshot-format/internal.h snapshot-format/devhash.h \
                   $(GEN)/manifest.pb-c.h
SNAPSHOT_OBJS   := $(SNAPSHOT_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/gen/manifest.pb-c.o
SNAPSHOT_LIB    := $(BUILD)/snapshot-format/libsnapshot.a
SNAPSHOT_LDLIBS := -lprotobuf-c -lzstd -lxxhash -lcrypto -pthread
SNAPSHOT_CFLAGS := -Isnapshot-format
SNAPSHOT_BIN    := $(BUILD)/bin/gpu-snapshot

$(GEN)/%.pb-c.c $(GEN)/%.pb-c.h: snapshot-format/%.proto
	@mkdir -p $(GEN)
	protoc-c --c_out=$(GEN) --proto_path=snapshot-format $*.proto

$(BUILD)/gen/manifest.pb-c.o: $(GEN)/manifest.pb-c.c $(GEN)/manifest.pb-c.h
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/snapshot-format/%.o: snapshot-format/%.c | $(GEN)/manifest.pb-c.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE $(SNAPSHOT_CFLAGS) -c $< -o $@

$(SNAPSHOT_LIB): $(SNAPSHOT_OBJS)
	ar rcs $@ $^

$(SNAPSHOT_BIN): $(BUILD)/snapshot-format/gpu-snapshot.o $(SNAPSHOT_LIB)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(SNAPSHOT_LDLIBS) -Wl,-rpath,'$$ORIGIN/../lib/deps'

all: $(SNAPSHOT_LIB) $(SNAPSHOT_BIN)

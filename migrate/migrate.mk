# migrate.mk: gpu-migrate. It speaks to the application's control socket
# and to gpu-servers with the session library (session/), and moves
# images with its image stream.

MIGRATE_SRCS := migrate/main.c migrate/whole.c migrate/gpu_only.c migrate/staging.c migrate/progress.c \
                migrate/guard.c
MIGRATE_OBJS := $(MIGRATE_SRCS:%.c=$(BUILD)/%.o)
MIGRATE_SHARED := $(SESSION_LIB)
MIGRATE_BIN := $(BUILD)/bin/gpu-migrate

$(BUILD)/migrate/%.o: migrate/%.c | $(GEN)/cicada.h $(GEN)/manifest.pb-c.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE $(SESSION_CFLAGS) $(SNAPSHOT_CFLAGS) -c $< -o $@

$(MIGRATE_BIN): $(MIGRATE_OBJS) $(MIGRATE_SHARED) $(WIRE_LIB) $(SNAPSHOT_LIB)
	@mkdir -p $(@D)
	$(CC) -o $@ $(MIGRATE_OBJS) $(MIGRATE_SHARED) $(WIRE_LIB) $(SNAPSHOT_LIB) $(LDLIBS_RPC) $(SNAPSHOT_LDLIBS) \
		-Wl,-rpath,'$$ORIGIN/../lib/deps'

all: $(MIGRATE_BIN)

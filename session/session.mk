# session.mk: libsession.a, what gpu-server, gpu-migrate and the CRIU
# plugin share about a process's GPU session (session/session.h), the
# image stream that moves a process to another node among it
# (criu_images.h). Position independent: the plugin links it into
# cicada.so. It uses libwire.a and libsnapshot.a: link it before them.

SESSION_SRCS := session/ctl_find.c session/exec.c session/pause.c session/request.c session/session_file.c session/criu_path.c \
                session/tree.c session/tree_pack.c session/criu_log.c
SESSION_OBJS := $(SESSION_SRCS:%.c=$(BUILD)/%.o)
SESSION_LIB  := $(BUILD)/session/libsession.a
SESSION_CFLAGS := -Isession $(SNAPSHOT_CFLAGS)

$(BUILD)/session/%.o: session/%.c | $(GEN)/cicada.h $(GEN)/manifest.pb-c.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE $(SESSION_CFLAGS) -c $< -o $@

$(SESSION_LIB): $(SESSION_OBJS)
	@rm -f $@
	ar rcs $@ $^

all: $(SESSION_LIB)

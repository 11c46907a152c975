/*
 * session.h: what gpu-server, gpu-migrate and the CRIU plugin share about
 * a process's GPU session: its control socket (ctl_find.c finds it;
 * pause.c: pause, resume, pre-copy rounds), requests to a gpu-server to
 * checkpoint, restore or release it (request.c), the session files a
 * restore reads from CRIU's image directory (session_file.c), which
 * criu to run (criu_path.c) and running it (exec.c); and
 * (criu_images.h) moving that image directory to another node and
 * reading why criu failed from its log. Built as libsession.a, over wire/
 * and the snapshot library.
 */
#ifndef CICADA_SESSION_H
#define CICADA_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include "wire.h"
#include "criu_images.h"

#define TOKEN_HEX_MAX (2 * CICADA_TOKEN_MAX + 1)

/* One process's GPU session, as the plugin and gpu-migrate know it. */
struct gpu_session {
	int pid;
	int vpid;                            /* its pid in its own pid namespace */
	int ctl;                             /* connection to its control socket */
	char ticket[CICADA_TICKET_LEN + 1];
	char server[300];
	char token_hex[TOKEN_HEX_MAX];       /* in memory only: never written to the images */
	char token_file[420];                /* where the process read it ("-": nowhere) */
	unsigned uid;                        /* the process's user: the token file must be its */
	char parent[CICADA_PARENT_MAX];      /* checkpoint: incremental on this snapshot, or "" */
	char gpus[64];                       /* restore: onto these GPUs first ("": CICADA_RESTORE_GPUS) */
};

/* ctl_find.c: pid's control socket, proven its own (-1: none); the pid
 * a process has in its own pid namespace. */
int session_ctl_dial(int pid);
int session_ctl_wait(int pid, int ms);       /* 0 once it listens (at most ms) */
#define SESSION_CTL_WAIT_MS 2000             /* what the tools give one just checkpointed */
int session_ns_pid(int pid);
int session_proc_status(int pid, const char *key, char *value, size_t len);   /* -1: none */

/* pause.c */
int session_pause(struct gpu_session *s, char *err);
int session_send_resume(struct gpu_session *s, char *err);
int session_precopy(int pid, int dirfd, const char *name, const char *parent, uint64_t fig[3], char *err);

/* request.c */
int server_request(const struct gpu_session *s, hello_op op, int dirfd, char *ticket_out, char *err);

/* session_file.c */
void snapshot_name(int pid, char *buf, size_t len);
int session_file_write(int dirfd, const struct gpu_session *s, char *err);
int session_file_read(int dirfd, const char *name, struct gpu_session *s, char *err);
int session_file_pid(const char *name);
void session_token_load(struct gpu_session *s, const char *path);
int token_file_hex(const char *path, char *hex, size_t len, char *err);
size_t token_from_hex(const char *hex, char *out, size_t len);

/* exec.c: argv (argv[0] a path) run to its end within timeout_s, its
 * fd 3 keep_fd if >= 0: 0 with its exit status (127: not run), or -1
 * with err (it was killed at the deadline, or could not start). */
int session_exec(char *const argv[], int keep_fd, int timeout_s, int *status, char *err);

/* criu_path.c: fills whichever of the two is empty (""); NULL skips one. */
void criu_default_paths(char *criu, size_t criu_len, char *plugins, size_t plugins_len);

#endif

/*
 * cicada-criu.h: the inside of Cicada's CRIU plugin (cicada.so). plugin.c
 * holds the hooks; pause.c talks to the application's control socket;
 * request.c asks a gpu-server to checkpoint, restore or release a
 * session; session_file.c keeps, in CRIU's image directory, what a
 * restore needs to know about each process's session.
 */
#ifndef CICADA_CRIU_H
#define CICADA_CRIU_H

#include <stddef.h>
#include "wire.h"

#define TOKEN_HEX_MAX (2 * CICADA_TOKEN_MAX + 1)

/* One process's GPU session, as the plugin knows it. */
struct gpu_session {
	int pid;
	int ctl;                             /* connection to its control socket */
	char ticket[CICADA_TICKET_LEN + 1];
	char server[300];
	char token_hex[TOKEN_HEX_MAX];       /* in memory only: never written to the images */
	char token_file[420];                /* where the process read it ("-": nowhere) */
	unsigned uid;                        /* the process's user: the token file must be its */
	char parent[CICADA_PARENT_MAX];      /* checkpoint: incremental on this snapshot, or "" */
	char gpus[64];                       /* restore: onto these GPUs first ("": CICADA_RESTORE_GPUS) */
};

/* criu's own logger (exported by the criu binary). */
void print_on_level(unsigned int level, const char *format, ...);
#define plugin_error(fmt, ...) print_on_level(1, "cicada: " fmt "\n", ##__VA_ARGS__)
#define plugin_info(fmt, ...) print_on_level(3, "cicada-info: " fmt "\n", ##__VA_ARGS__)

/* pause.c */
int session_pause(struct gpu_session *s, char *err);
int session_send_resume(struct gpu_session *s, char *err);
int session_precopy(int pid, int dirfd, const char *name, const char *parent, uint64_t fig[3], char *err);

/* preflight.c */
int task_dumpable(int pid, char *err);

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

#endif

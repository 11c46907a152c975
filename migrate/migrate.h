/*
 * migrate.h: gpu-migrate, which moves a running CUDA application that
 * uses Cicada to another gpu-server: the whole process (CRIU, restored
 * by the target node's gpu-server) or only its GPU state (the process
 * stays; its session continues on the target). main.c reads the command
 * line and reports; whole.c and gpu_only.c move; staging.c keeps what
 * moves; progress.c shows the transfer and holds the test hooks; guard.c
 * resumes a frozen source if gpu-migrate dies. Every function returns 0, or -1 with one line in err
 * (WIRE_ERRLEN), and leaves the application running on the source.
 */
#ifndef CICADA_MIGRATE_H
#define CICADA_MIGRATE_H

#include <stdint.h>
#include "session.h"

struct migrate_opts {
	int pid;
	char target[300];                    /* tcp:host:port or unix:/path; "" for local */
	int gpu_only;
	int gpu;                             /* --gpu N, -1 if not given */
	char gpus[64];                      /* --gpu: the GPUs to restore onto, first */
	char token_hex[TOKEN_HEX_MAX];       /* the target's token, "-" for none */
	char migration_token_hex[TOKEN_HEX_MAX];   /* its migration token (OP_MIGRATE), "" for none */
	char criu[1200], plugins[1200], work_dir[1024];
	int timeout_s;                       /* each of dump, transfer, restore */
	int json;
	int precopy;                         /* pre-copy rounds (--no-precopy); gpu-only: to another node */
	int streams;                         /* TCP connections for the images (and pre-copy rounds) */
	int page_server;                     /* whole: pages to the target's criu page-server (--no-page-server) */
};

#define MIGRATE_STREAMS 8

struct migrate_result {
	const char *mode;                    /* "whole" or "gpu-only" */
	int pid;
	double downtime_s, total_s;
	uint64_t wire_bytes;                 /* bytes sent to the target */
	uint64_t state_bytes;                /* what they hold, before zstd */
	uint64_t final_bytes;                /* sent while the process was frozen */
	double dump_s, send_s, restore_s;    /* whole: the downtime's parts */
	double target_pages_s, target_criu_s;   /* whole: within restore_s, the target's wait for the
						    page server, and its criu restore (GPU state included) */
	int rounds;                          /* pre-copy rounds */
	int streams;                         /* connections that carried the images */
	int new_pid;                         /* whole: the pid on the target */
	char target[300];
	int in_doubt;                        /* failed, but where it runs is not known: err says what to do */
};

/* whole.c, gpu_only.c */
int migrate_whole(const struct migrate_opts *o, struct migrate_result *r, char *err);
int migrate_gpu_only(const struct migrate_opts *o, struct migrate_result *r, char *err);
const char *migrate_token(const struct migrate_opts *o);

/* progress.c */
double migrate_now(void);
void progress_start(uint64_t expected);
int progress_update(void *ctx, uint64_t bytes);  /* a snap_progress callback */
void progress_end(void);
int migrate_fault_is(const char *what);
void migrate_fault_cut(const char *what, const int *fds);
uint64_t dir_bytes(int dirfd, int depth);
void snapshot_sizes(int dirfd, const char *name, uint64_t *device, uint64_t *stored);

/* staging.c */
struct staging {
	char path[1100];
	int fd;
};
int staging_make(const char *work_dir, struct staging *s, char *err);
void staging_remove(struct staging *s);

/* whole.c: the migration stream to a target, which gpu_only.c's pre-copy uses too */
int target_open(const struct migrate_opts *o, const char *join, char *key, char *err);
int target_answer(int fd, int timeout_s, const char *target, struct hello_res *r, char *err);
int streams_open(const struct migrate_opts *o, const char *key, int *fds, struct migrate_result *r, char *err);
void streams_close(int *fds, int n);
int send_part(const struct staging *st, const int *fds, const char *only, const char *skip, char mark,
	      const char *sub, struct migrate_result *r, uint64_t *part, char *err);
int precopy(const struct migrate_opts *o, const struct staging *st, const int *fds, struct migrate_result *r,
	    char *last, char *err);

/* guard.c */
int guard_start(int pid, struct staging *st, char *err);
void guard_disarm(void);

#endif

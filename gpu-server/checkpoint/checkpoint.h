/*
 * checkpoint.h: checkpoints, restores and a migration's memory (pre-copy
 * rounds, preloading), and the worker's fields of these and the front
 * alone (struct worker_ckpt: the session's owner and ticket, who asks).
 * Above calls/ (a restore replays calls through the dispatcher and
 * recreates objects through their handlers) and state/.
 */
#ifndef CICADA_GPU_SERVER_CHECKPOINT_H
#define CICADA_GPU_SERVER_CHECKPOINT_H

#include "calls/calls.h"

struct precopy;
struct preload;

/* The worker's fields of checkpoint/ and of front/ alone (w->ckpt). */
struct worker_ckpt {
	struct precopy *precopy;             /* a migration's pre-copy round */
	struct preload *preload;             /* a migration's memory, coming in */
	int regions_lost;                    /* restored: the client must share them again */
	uid_t owner_uid;                     /* the session's unix user; -1 until known */
	char owner[48];                      /* its identity: "uid N", "token"; "" until known */
	int req_class;                       /* the request being served: REQ_* */
	uid_t req_uid;                       /* REQ_USER: its uid */
	int req_stream;                      /* its snapshot comes over the connection */
	char ticket[CICADA_TICKET_LEN + 1];  /* the session's */
};

/* Who a request comes from (session.c sets it, restore.c checks owners;
 * REQ_UNKNOWN, where nothing set it, restores nothing from a directory). */
enum { REQ_UNKNOWN, REQ_PRIVILEGED, REQ_USER, REQ_REMOTE };

/* devhash.c: pieces of device memory hashed on the GPU */
struct snap_range;
void devhash_prepare(void);
void devhash_load(CUdevice dev);
int devhash_ranges(struct worker *w, const struct snap_range *ranges, size_t n, uint64_t *out);

/* precopy.c: a migration's pre-copy rounds */
void precopy_end(struct worker *w);
/* objects_save.c, objects_restore.c: the objects in a checkpoint */
struct snap_writer;
int objects_save(struct worker *w, struct snap_writer *wr, struct Cicada__Manifest *m, char *err);
void objects_save_free(struct Cicada__Manifest *m);
int objects_use_event(const struct Cicada__Manifest *m, uint64_t id);
int objects_restore_upto(struct worker *w, const struct Cicada__Manifest *m, uint64_t seq, char *err);
int objects_restore(struct worker *w, const struct Cicada__Manifest *m, char *err);
/* preload.c: a migration's device memory, loaded before its restore */
void preload_start(struct worker *w, int ctl);
int preload_wait(struct worker *w, int lfd, struct wire_buf *hello, int timeout,
		 int (*accept)(int lfd, struct wire_buf *hello));
int preload_attach(struct worker *w);
int preload_in_place(void *ctx, uint64_t va, uint64_t size, uint64_t sum);
void preload_end(struct worker *w);

/* checkpoint.c, restore.c */
int worker_quiesce(struct worker *w, char *err);
int worker_checkpoint(struct worker *w, int dirfd, const char *name, const char *parent, char *err);
int worker_restore(struct worker *w, int dirfd, const char *name, char *err);

/* snapio.c: what checkpoints and restores share (below both) */
struct snap_memory_ops;
void worker_memory_ops(struct worker *w, struct snap_memory_ops *ops);
/* ipc.c, ipc_save.c: CUDA IPC between the clients of one server, and
 * through checkpoints */
int ipc_save(struct worker *w, struct Cicada__Manifest *m, char *err);
void ipc_save_free(struct Cicada__Manifest *m);
int ipc_save_graphs(const struct Cicada__Manifest *m, char *err);
int ipc_restore(struct worker *w, const struct Cicada__Manifest *m, char *err);
int ipc_resume(struct worker *w, char *err);

#endif

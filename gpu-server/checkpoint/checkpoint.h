/*
 * checkpoint.h: checkpoints, restores and a migration's memory (pre-copy
 * rounds, preloading). Above calls/ (a restore replays calls through the
 * dispatcher and recreates objects through their handlers) and state/.
 */
#ifndef CICADA_GPU_SERVER_CHECKPOINT_H
#define CICADA_GPU_SERVER_CHECKPOINT_H

#include "calls/calls.h"

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
struct preload;
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

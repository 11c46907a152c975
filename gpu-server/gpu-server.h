/*
 * gpu-server.h: the gpu-server's internal interface: the per-client worker,
 * its handle table, and the procedure table generated from wire/calls.tbl.
 */
#ifndef CICADA_GPU_SERVER_H
#define CICADA_GPU_SERVER_H

#include <cuda.h>
#include "wire.h"

#define MAX_HOST_REGIONS CICADA_MAX_REGIONS

enum handle_kind { H_FREE, H_CTX, H_MODULE, H_FUNCTION, H_LIBRARY, H_KERNEL, H_STREAM, H_EVENT };

struct handle_entry {
	enum handle_kind kind;
	void *real;
};

struct host_region {
	void *base;                          /* the server's mapping */
	size_t size;
	unsigned flags;
};

struct worker {
	struct wire_stream stream;
	struct shm_segment shm;
	int sock;
	char peer[128];
	const char *cache_dir;
	CUresult pending;                    /* first error of a pipelined call */
	struct handle_entry *handles;
	unsigned nhandles, cap_handles;
	struct host_region regions[MAX_HOST_REGIONS];
	void *scratch_in, *scratch_out;      /* pinned, CICADA_CHUNK_MAX each */
	int exiting;
};

#define HANDLE_BASE 0x1000u

CUresult handle_get(struct worker *w, enum handle_kind kind, uint64_t id, void **real);
uint64_t handle_put(struct worker *w, enum handle_kind kind, void *real);
void handle_drop(struct worker *w, enum handle_kind kind, uint64_t id);
enum handle_kind handle_kind_of(struct worker *w, uint64_t id);

/* The procedure table (generated). */
enum { PROC_ASYNC = 1, PROC_SYNCPOINT = 2 };

typedef CUresult (*hand_fn)(struct worker *w, void *args, void *res);
typedef CUresult (*scalar_fn)(struct worker *w, const uint64_t *in, uint64_t *out);

struct proc_desc {
	unsigned proc;
	const char *name;
	xdrproc_t xargs;
	size_t args_size;
	xdrproc_t xres;
	size_t res_size;
	hand_fn hand;
	scalar_fn scalar;
	unsigned nin, nout;
	unsigned flags;
};

extern const struct proc_desc server_procs[];

static inline uint64_t float_to_u64(float f)
{
	union { float f; uint32_t u; } v = { .f = f };
	return v.u;
}

/* primary.c: wrap_* calls named in calls.tbl */
void primary_note_warm(CUdevice dev);
CUresult wrap_cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult wrap_cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active);
CUresult wrap_cuDevicePrimaryCtxReset_v2(CUdevice dev);

/* worker.c */
#define ARGS_MAX 1024
int worker_main(int control_fd, const char *cache_dir);
void worker_index_procs(void);
int worker_decode(struct worker *w, const struct wire_buf *in, struct wire_call_hdr *hdr,
		  const struct proc_desc **desc, void *args);
void worker_free_args(unsigned proc, const struct proc_desc *d, void *args);
int worker_serve(struct worker *w);

/* modcache.c */
int modcache_lookup(const char *dir, const image_hash *hash, void **image, size_t *size);
void modcache_store(const char *dir, const image_hash *hash, const void *image, size_t size);
void image_hash_compute(const void *image, size_t size, image_hash *out);

/* auth.c */
int token_load(const char *path, char *token, size_t len, char *err);
int token_equal(const char *expected, const char *given, size_t given_len);

#endif

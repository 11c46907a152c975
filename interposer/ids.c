/*
 * ids.c: the unique ids the driver gives contexts and streams
 * (cuCtxGetId, cuStreamGetId). cuBLAS and cuBLASLt key their per-context
 * and per-stream caches on them, asking through export table 21318c60
 * (EXPORT-TABLES.md 4.8). The ids are handed out here, in the application,
 * from one counter per kind: an id is never given twice in the process,
 * even when the server reuses a handle, and ids stay the same when the
 * session moves to another server.
 */
#include <pthread.h>
#include <stdlib.h>
#include "interposer.h"

enum id_kind { ID_CONTEXT, ID_STREAM, ID_LEGACY, ID_PER_THREAD };

struct id_entry {
	enum id_kind kind;
	CUcontext ctx;                       /* the context the object lives in */
	uint64_t key;                        /* stream handle, or the thread (per-thread stream) */
	unsigned long long id;
};

static pthread_mutex_t ids_lock = PTHREAD_MUTEX_INITIALIZER;
static struct id_entry *ids;
static size_t nids, cap_ids;
static unsigned long long next_ctx_id = 1, next_stream_id = 1;

static struct id_entry *find(enum id_kind kind, CUcontext ctx, uint64_t key)
{
	for (size_t i = 0; i < nids; i++)
		if (ids[i].kind == kind && ids[i].key == key && (kind == ID_STREAM || ids[i].ctx == ctx))
			return &ids[i];
	return NULL;
}

static struct id_entry *add(enum id_kind kind, CUcontext ctx, uint64_t key)
{
	if (nids == cap_ids) {
		size_t cap = cap_ids ? 2 * cap_ids : 64;
		struct id_entry *n = realloc(ids, cap * sizeof(*n));

		if (!n)
			return NULL;
		ids = n;
		cap_ids = cap;
	}
	ids[nids] = (struct id_entry){ kind, ctx, key,
				       kind == ID_CONTEXT ? next_ctx_id++ : next_stream_id++ };
	return &ids[nids++];
}

/* The id of (kind, ctx, key), given on first use. */
static CUresult id_of(enum id_kind kind, CUcontext ctx, uint64_t key, unsigned long long *out)
{
	struct id_entry *e;

	pthread_mutex_lock(&ids_lock);
	if (!(e = find(kind, ctx, key)))
		e = add(kind, ctx, key);
	if (e)
		*out = e->id;
	pthread_mutex_unlock(&ids_lock);
	return e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static void forget(int (*match)(const struct id_entry *, const void *), const void *what)
{
	pthread_mutex_lock(&ids_lock);
	for (size_t i = 0; i < nids;)
		if (match(&ids[i], what))
			ids[i] = ids[--nids];
		else
			i++;
	pthread_mutex_unlock(&ids_lock);
}

static int in_context(const struct id_entry *e, const void *ctx)
{
	return e->ctx == (CUcontext)ctx;
}

static int is_stream(const struct id_entry *e, const void *stream)
{
	return e->kind == ID_STREAM && e->key == handle_id(stream);
}

/* A destroyed context takes its ids (and those of its streams) along. */
void ids_forget_ctx(CUcontext ctx)
{
	forget(in_context, ctx);
}

void ids_forget_stream(CUstream stream)
{
	forget(is_stream, stream);
}

CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
	if (!ctxId)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ctx && !(ctx = ctx_current()))
		return CUDA_ERROR_INVALID_CONTEXT;
	return id_of(ID_CONTEXT, ctx, 0, ctxId);
}

/* The id of stream in ctx (NULL: the current context). A NULL stream is
 * the legacy default stream, or the thread's own one if per_thread. */
CUresult stream_id(CUcontext ctx, CUstream stream, int per_thread, unsigned long long *out)
{
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ctx && !(ctx = ctx_current()))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!stream)
		stream = per_thread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
	if (stream == CU_STREAM_LEGACY)
		return id_of(ID_LEGACY, ctx, 0, out);
	if (stream == CU_STREAM_PER_THREAD)
		return id_of(ID_PER_THREAD, ctx, (uint64_t)pthread_self(), out);
	return id_of(ID_STREAM, ctx, handle_id(stream), out);
}

CUresult CUDAAPI cuStreamGetId(CUstream hStream, unsigned long long *streamId)
{
	return stream_id(NULL, hStream, 0, streamId);
}

CUresult CUDAAPI cuStreamGetId_ptsz(CUstream hStream, unsigned long long *streamId);
CUresult CUDAAPI cuStreamGetId_ptsz(CUstream hStream, unsigned long long *streamId)
{
	return stream_id(NULL, hStream, 1, streamId);
}

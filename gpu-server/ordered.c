/*
 * ordered.c: the stream-ordered allocator. cuMemAllocAsync takes memory
 * from the worker's arena at once (usable in stream order, and earlier);
 * cuMemFreeAsync records an event on the stream and the memory returns to
 * the arena when the event has completed. Completed frees are collected at
 * the next allocation (of any kind), and all of them before a pause or
 * when memory runs out. Allocating or freeing inside a graph capture (a
 * graph memory node) is not offered.
 */
#include <stdlib.h>
#include "gpu-server.h"

struct ordered_free {
	uint64_t va;
	CUevent done;
};

/* Returns to the arena the frees whose stream got there (all, if wait). */
void ordered_collect(struct worker *w, int wait)
{
	unsigned i = 0;

	while (i < w->nfrees) {
		struct ordered_free *f = &w->frees[i];

		if (wait)
			cuEventSynchronize(f->done);
		else if (cuEventQuery(f->done) != CUDA_SUCCESS) {
			i++;
			continue;
		}
		cuEventDestroy(f->done);
		devmem_free(w, f->va);
		*f = w->frees[--w->nfrees];
	}
}

static int pending_free(struct worker *w, uint64_t va)
{
	for (unsigned i = 0; i < w->nfrees; i++)
		if (w->frees[i].va == va)
			return 1;
	return 0;
}

static CUresult refuse_capture(struct worker *w, CUstream stream)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	CUresult err = cuStreamIsCapturing(stream, &st);

	if (err || st == CU_STREAM_CAPTURE_STATUS_NONE)
		return err;
	log_warn("client %s: stream-ordered allocation inside a graph capture is not supported", w->peer);
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* Every allocation: frees the streams have passed go back first, and
 * when memory runs out, the worker waits for all pending frees. */
CUresult ordered_alloc(struct worker *w, uint64_t size, uint64_t *va)
{
	CUresult err;

	if (w->nfrees)
		ordered_collect(w, 0);
	err = devmem_alloc(w, size, va);
	if (err == CUDA_ERROR_OUT_OF_MEMORY && w->nfrees) {
		ordered_collect(w, 1);
		err = devmem_alloc(w, size, va);
	}
	return err;
}

/* A free while a stream-ordered free of the same memory is pending is a
 * double free. */
CUresult ordered_free(struct worker *w, uint64_t va)
{
	return pending_free(w, va) ? CUDA_ERROR_INVALID_VALUE : devmem_free(w, va);
}

CUresult wrap_cuMemAllocAsync(struct worker *w, CUdeviceptr *dptr, size_t size, CUstream stream)
{
	CUresult err = refuse_capture(w, stream);

	return err ? err : wrap_cuMemAlloc_v2(w, dptr, size);
}

CUresult wrap_cuMemFreeAsync(struct worker *w, CUdeviceptr dptr, CUstream stream)
{
	struct ordered_free *f;
	uint64_t base, size;
	CUevent done;
	CUresult err;

	if (devmem_range(w, dptr, &base, &size) || base != dptr || pending_free(w, dptr))
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = refuse_capture(w, stream)))
		return err;
	if (w->nfrees == w->cap_frees) {
		unsigned cap = w->cap_frees ? 2 * w->cap_frees : 64;
		if (!(f = realloc(w->frees, cap * sizeof(*f))))
			return CUDA_ERROR_OUT_OF_MEMORY;
		w->frees = f;
		w->cap_frees = cap;
	}
	if ((err = cuEventCreate(&done, CU_EVENT_DISABLE_TIMING)))
		return err;
	if ((err = cuEventRecord(done, stream))) {
		cuEventDestroy(done);
		return err;
	}
	w->frees[w->nfrees++] = (struct ordered_free){ dptr, done };
	return CUDA_SUCCESS;
}

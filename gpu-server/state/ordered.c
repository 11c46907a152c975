/*
 * ordered.c: the stream-ordered allocator. cuMemAllocAsync takes memory
 * from the worker's arena at once (usable in stream order, and earlier);
 * cuMemFreeAsync records an event on the stream and the memory returns to
 * the arena when the event has completed. Completed frees are collected at
 * the next allocation (of any kind), and all of them before a pause or
 * when memory runs out. Allocating or freeing inside a graph capture
 * makes a graph memory node: that is the driver's, as natively (cuBLAS
 * does it for its workspace); the worker remembers the addresses such
 * nodes hand out, since that memory is freed by the driver, not the arena.
 */
#include <stdlib.h>
#include "state.h"

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

static int capturing(CUstream stream)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;

	return cuStreamIsCapturing(stream, &st) == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}

static int is_graph_mem(struct worker *w, uint64_t va)
{
	for (unsigned i = 0; i < w->ngraph_mem; i++)
		if (w->graph_mem[i] == va)
			return 1;
	return 0;
}

CUresult ordered_note_graph_mem(struct worker *w, uint64_t va)
{
	if (is_graph_mem(w, va))
		return CUDA_SUCCESS;
	if (w->ngraph_mem == w->cap_graph_mem) {
		unsigned cap = w->cap_graph_mem ? 2 * w->cap_graph_mem : 16;
		uint64_t *m = realloc(w->graph_mem, cap * sizeof(*m));
		if (!m)
			return CUDA_ERROR_OUT_OF_MEMORY;
		w->graph_mem = m;
		w->cap_graph_mem = cap;
	}
	w->graph_mem[w->ngraph_mem++] = va;
	return CUDA_SUCCESS;
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
	if (is_graph_mem(w, va))
		return cuMemFree((CUdeviceptr)va);
	return pending_free(w, va) ? CUDA_ERROR_INVALID_VALUE : devmem_free(w, va);
}

/* cuMemAllocAsync: from the arena, or, in a capture, the driver's graph
 * memory. */
CUresult ordered_alloc_async(struct worker *w, CUdeviceptr *dptr, size_t size, CUstream stream)
{
	uint64_t va;
	CUresult err;

	if (!capturing(stream)) {
		if (!(err = ordered_alloc(w, size, &va)))
			*dptr = (CUdeviceptr)va;
		return err;
	}
	if ((err = cuMemAllocAsync(dptr, size, stream)))
		return err;
	return ordered_note_graph_mem(w, *dptr);
}

/* cuMemFreeAsync: back to the arena once the stream gets there. */
CUresult ordered_free_async(struct worker *w, CUdeviceptr dptr, CUstream stream)
{
	struct ordered_free *f;
	uint64_t base, size;
	CUevent done;
	CUresult err;

	if (!dptr)
		return CUDA_SUCCESS;
	if (is_graph_mem(w, dptr) || capturing(stream))
		return cuMemFreeAsync(dptr, stream);
	if (devmem_range(w, dptr, &base, &size) || base != dptr || pending_free(w, dptr))
		return CUDA_ERROR_INVALID_VALUE;
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

/*
 * alloc.c: the driver's allocation calls that calls.tbl routes here,
 * answered from the worker's arena (devmem.c) through the stream-ordered
 * allocator (ordered.c).
 */
#include <stdlib.h>
#include "calls.h"

CUresult wrap_cuMemAlloc_v2(struct worker *w, CUdeviceptr *dptr, size_t bytesize)
{
	uint64_t va;
	CUresult err = ordered_alloc(w, bytesize, &va);

	if (!err)
		*dptr = (CUdeviceptr)va;
	return err;
}

/* A program's own cap (CICADA_MEMORY_LIMIT, interposer/limit.c): the
 * lower of it and the server's quota, never more. Answers the quota
 * the session has now. */
CUresult hand_session_quota(struct worker *w, void *args, void *res)
{
	const scalars *a = args;
	scalar_res *r = res;

	if (a->v.v_len != 1)
		return CUDA_ERROR_INVALID_VALUE;
	quota_lower(w, a->v.v_val[0]);
	if (!(r->v.v_val = malloc(sizeof(uint64_t))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	r->v.v_val[0] = w->quota;
	r->v.v_len = 1;
	return CUDA_SUCCESS;
}

/* A program's own cap on its SMs (CICADA_SM_LIMIT, interposer/limit.c):
 * fewer than its share, never more (green.c). Answers the SMs it has. */
CUresult hand_session_sms(struct worker *w, void *args, void *res)
{
	const scalars *a = args;
	scalar_res *r = res;

	if (a->v.v_len != 1 || a->v.v_val[0] > 65535)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(r->v.v_val = malloc(sizeof(uint64_t))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	r->v.v_val[0] = (uint64_t)green_lower(w, (unsigned)a->v.v_val[0]);
	r->v.v_len = 1;
	return CUDA_SUCCESS;
}

/* The GPU's figures, or the session's quota as the total (quota.c). */
CUresult wrap_cuMemGetInfo_v2(struct worker *w, size_t *free_b, size_t *total)
{
	CUresult err = cuMemGetInfo(free_b, total);

	if (!err)
		quota_mem_info(w, free_b, total);
	return err;
}

/* The driver's cuMemFree waits for the device's work first, and programs
 * count on it (Thrust frees its scratch memory right after launching the
 * kernels that use it): the arena may unmap the memory at once, so the
 * worker waits too. An error of earlier work is reported later, as a
 * pipelined call's is. */
CUresult wrap_cuMemFree_v2(struct worker *w, CUdeviceptr dptr)
{
	CUresult err = cuCtxSynchronize();

	if (err && w->calls->pending == CUDA_SUCCESS)
		w->calls->pending = err;
	return ordered_free(w, dptr);
}

/* Rows aligned like the driver's own (512 bytes on current GPUs). */
CUresult wrap_cuMemAllocPitch_v2(struct worker *w, CUdeviceptr *dptr, size_t *pitch, size_t width,
				 size_t height, unsigned int elem)
{
	size_t p = (width + 511) / 512 * 512;

	if (!width || !height || (elem != 4 && elem != 8 && elem != 16))
		return CUDA_ERROR_INVALID_VALUE;
	*pitch = p;
	return wrap_cuMemAlloc_v2(w, dptr, p * height);
}

/* Arena allocations answer for themselves; module globals ask the driver. */
CUresult wrap_cuMemGetAddressRange_v2(struct worker *w, CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	uint64_t base, size;

	if (devmem_range(w, dptr, &base, &size))
		return cuMemGetAddressRange(pbase, psize, dptr);
	*pbase = (CUdeviceptr)base;
	*psize = (size_t)size;
	return CUDA_SUCCESS;
}

CUresult wrap_cuMemAllocAsync(struct worker *w, CUdeviceptr *dptr, size_t size, CUstream stream)
{
	return ordered_alloc_async(w, dptr, size, stream);
}

CUresult wrap_cuMemFreeAsync(struct worker *w, CUdeviceptr dptr, CUstream stream)
{
	return ordered_free_async(w, dptr, stream);
}

/*
 * memory.c: copy handlers. Remote clients send data inline, through the
 * worker's pinned scratch buffers. Local clients copy through shared
 * memory: pinned allocations they made as memfd regions that the worker
 * maps and registers (direct DMA), or the staging slots for pageable data.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "calls.h"

static CUresult stream_of(struct worker *w, uint64_t id, CUstream *s)
{
	return handle_get(w, H_STREAM, id, (void **)s);
}

/* in: the stream, flags and the operations as the client laid them out
 * (cuStreamBatchMemOp_v2); the driver checks each. */
CUresult hand_stream_batch_mem_op(struct worker *w, void *args, void *res)
{
	batch_mem_op_args *a = args;
	CUstreamBatchMemOpParams ops[BATCH_MEM_OPS_MAX];
	unsigned n = a->ops.ops_len / (unsigned)sizeof(ops[0]);
	CUstream s;
	CUresult err;

	if (!n || n > BATCH_MEM_OPS_MAX || a->ops.ops_len % sizeof(ops[0]))
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = stream_of(w, a->stream, &s)))
		return err;
	memcpy(ops, a->ops.ops_val, a->ops.ops_len);
	return cuStreamBatchMemOp(s, n, ops, a->flags);
}

static CUresult copy_htod(CUdeviceptr dst, const void *src, size_t n, CUstream s, int async, int drain)
{
	CUresult err;

	if (!async)
		return cuMemcpyHtoD(dst, src, n);
	err = cuMemcpyHtoDAsync(dst, src, n, s);
	return err || !drain ? err : cuStreamSynchronize(s);
}

static CUresult copy_dtoh(void *dst, CUdeviceptr src, size_t n, CUstream s, int async, int drain)
{
	CUresult err;

	if (!async)
		return cuMemcpyDtoH(dst, src, n);
	err = cuMemcpyDtoHAsync(dst, src, n, s);
	return err || !drain ? err : cuStreamSynchronize(s);
}

CUresult hand_memcpy_htod(struct worker *w, void *args, void *res)
{
	htod_args *a = args;
	CUstream s;
	CUresult err = stream_of(w, a->stream, &s);

	/* The scratch buffer is reused by the next call: drain async copies. */
	return err ? err : copy_htod(a->dst, a->data.data_val, a->data.data_len, s, a->async, 1);
}

CUresult hand_memcpy_htod_async(struct worker *w, void *args, void *res)
{
	return hand_memcpy_htod(w, args, res);
}

CUresult hand_memcpy_dtoh(struct worker *w, void *args, void *res)
{
	dtoh_args *a = args;
	bytes_res *r = res;
	CUstream s;
	CUresult err;

	if (a->size > CICADA_CHUNK_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = stream_of(w, a->stream, &s)))
		return err;
	err = copy_dtoh(w->calls->scratch_out, a->src, a->size, s, a->async, 1);
	if (err)
		return err;
	r->data.data_val = w->calls->scratch_out;
	r->data.data_len = a->size;
	return CUDA_SUCCESS;
}

/* Finds the worker's address of a client host range, or NULL. */
static char *shm_host(struct worker *w, const shm_copy_args *a)
{
	if (!w->calls->shm.hdr)
		return NULL;
	if (a->region == 0)
		return a->slot < 0 ? NULL : shm_slot(&w->calls->shm, (unsigned)a->slot, a->size);
	if (a->region >= MAX_HOST_REGIONS || !w->calls->regions[a->region].base)
		return NULL;
	if (a->offset > w->calls->regions[a->region].size || a->size > w->calls->regions[a->region].size - a->offset)
		return NULL;
	return (char *)w->calls->regions[a->region].base + a->offset;
}

static CUresult shm_copy(struct worker *w, shm_copy_args *a)
{
	char *host = shm_host(w, a);
	int staged = a->region == 0;
	CUstream s;
	CUresult err;

	if (!host)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = stream_of(w, a->stream, &s)))
		goto out;
	if (a->to_device)
		err = copy_htod(a->device, host, a->size, s, a->async, staged);
	else
		err = copy_dtoh(host, a->device, a->size, s, a->async, staged);
out:
	if (!staged)
		return err;
	/* Staged copies report through the slot, never twice. */
	if (!a->async && output_waiting())
		atomic_store(&w->calls->shm.hdr->output_pending, 1);
	atomic_store(&w->calls->shm.hdr->slot_err[a->slot], err);
	shm_slot_set(&w->calls->shm, a->slot, a->to_device ? SLOT_FREE : SLOT_READY);
	return CUDA_SUCCESS;
}

CUresult hand_memcpy_shm(struct worker *w, void *args, void *res)
{
	return shm_copy(w, args);
}

CUresult hand_memcpy_shm_async(struct worker *w, void *args, void *res)
{
	return shm_copy(w, args);
}

/* The worker's side of a region: the client's memory file, or with
 * CICADA_REGION_OWN anonymous memory of its own (the client keeps it
 * coherent with its pages as a mirror: interposer/mapped.c). */
static void *region_map(const host_region_args *a, int fd)
{
	struct stat st;

	if (a->flags & CICADA_REGION_OWN)
		return hostarea_map_at(a->at, a->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
				       -1, 0);
	/* sealed: a client that shrank it under the mapping would fault us */
	if (fstat(fd, &st) || (uint64_t)st.st_size < a->size || !shm_fd_sealed(fd))
		return NULL;
	return hostarea_map_at(a->at, a->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
}

CUresult hand_host_region_map(struct worker *w, void *args, void *res)
{
	host_region_args *a = args;
	host_region_res *r = res;
	struct host_region *reg;
	unsigned flags = CU_MEMHOSTREGISTER_PORTABLE;
	CUresult err = CUDA_ERROR_INVALID_VALUE;
	int fd = -1;

	if (!(a->flags & CICADA_REGION_OWN) && (fd = wire_recv_fd_within(w->sock, CLIENT_FD_TIMEOUT_MS)) < 0) {
		w->calls->exiting = 1;
		return CUDA_ERROR_OPERATING_SYSTEM;
	}
	if (!a->region || a->region >= MAX_HOST_REGIONS || w->calls->regions[a->region].base || !a->size)
		goto out;
	/* the worker's own memory counts against --max-staged (a client's
	 * memory file is the client's own) */
	if ((a->flags & CICADA_REGION_OWN) && client_pinned_take(w, a->size, "pinned memory of its own")) {
		err = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	reg = &w->calls->regions[a->region];
	reg->base = region_map(a, fd);
	if (!reg->base || reg->base == MAP_FAILED) {
		err = reg->base ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
		reg->base = NULL;
		if (a->flags & CICADA_REGION_OWN)
			client_pinned_give(a->size);
		goto out;
	}
	reg->size = a->size;
	reg->flags = a->flags;
	r->host_at = (uint64_t)(uintptr_t)reg->base;
	/* With unified addressing every pinned page is the device's too, at
	 * its host address (the client maps its side at host_at). */
	flags |= CU_MEMHOSTREGISTER_DEVICEMAP;
	/* Portable registrations belong to no context: the worker's own one
	 * serves, whatever the client's thread has current (it may be none,
	 * as when a restored session is re-shared). */
	cuCtxPushCurrent(w->base_ctx);
	/* The program may pin memory while a capture runs (the worker's
	 * captures run on this thread, where a global-mode capture forbids
	 * registering): the application's call is not a stream operation. */
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	cuThreadExchangeStreamCaptureMode(&mode);
	err = cuMemHostRegister(reg->base, a->size, flags);
	/* every such page is the device's: its pointer goes back whatever the
	 * client asked (cuMemHostGetDevicePointer works on all pinned memory
	 * under unified addressing) */
	if (!err)
		err = cuMemHostGetDevicePointer((CUdeviceptr *)&r->device_ptr, reg->base, 0);
	cuThreadExchangeStreamCaptureMode(&mode);
	cuCtxPopCurrent(NULL);
	if (err) {
		hostarea_unmap(reg->base, a->size);
		reg->base = NULL;
		if (a->flags & CICADA_REGION_OWN)
			client_pinned_give(a->size);
	}
out:
	if (fd >= 0)
		close(fd);
	return err;
}

CUresult hand_host_region_unmap(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	struct host_region *reg;

	if (a->v.v_len != 1 || !a->v.v_val[0] || a->v.v_val[0] >= MAX_HOST_REGIONS)
		return CUDA_ERROR_INVALID_VALUE;
	reg = &w->calls->regions[a->v.v_val[0]];
	if (!reg->base)
		return CUDA_ERROR_INVALID_VALUE;
	if (reg->staged) {
		/* a graph's copy node stages in it: the mapping stays (the
		 * client's pages live on in it) until the worker ends; the
		 * region's number is free again */
		log_info("client %s: pinned memory a graph copy node stages in stays mapped", w->peer);
		reg->base = NULL;
		reg->staged = 0;
		return CUDA_SUCCESS;
	}
	cuCtxPushCurrent(w->base_ctx);
	cuMemHostUnregister(reg->base);
	cuCtxPopCurrent(NULL);
	hostarea_unmap(reg->base, reg->size);
	if (reg->flags & CICADA_REGION_OWN)
		client_pinned_give(reg->size);
	reg->base = NULL;
	return CUDA_SUCCESS;
}

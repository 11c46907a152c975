/*
 * copy.c: host<->device copies (1D, and 2D row by row) as the program
 * asks for them: kernels' writes to mapped memory are read back first
 * (mapped.c), managed memory is copied on the device (managed.c), and
 * pageable memory on a capturing stream is staged for the graph. The
 * bytes themselves move through transfer.c, below. Copies with an array
 * on either side are array.c's, above: it calls copy_2d here.
 */
#include "interposer.h"

/* --- pageable memory copied on a capturing stream ---
 * The copy belongs to the graph: its data moves at every launch, from or
 * to the program's memory as it is then. It goes through a pinned buffer
 * shared with the worker: a host node copies the program's memory into it
 * (or out of it), and a copy node moves it to or from the device. The
 * buffer lives as long as the process (a graph may be launched at any
 * time). Without shared memory (a remote server) the worker stages it in
 * a buffer of its own, and the bytes cross the host function channel
 * (hostfn.c). */
struct staged_copy {
	void *user, *pinned;
	size_t n;
};

static void CUDA_CB stage_in(void *p)
{
	struct staged_copy *c = p;

	memcpy(c->pinned, c->user, c->n);
}

static void CUDA_CB stage_out(void *p)
{
	struct staged_copy *c = p;

	memcpy(c->user, c->pinned, c->n);
}

/* Whether host memory of the program must be staged for a capture. */
static int pageable_capture(const void *host, size_t n, CUstream stream, int async)
{
	struct host_range hr;

	return async && n && host_range_valid(host, n) && stream_capturing(stream) && !hostmem_find(host, n, &hr);
}

static CUresult captured_copy(CUdeviceptr dev, void *host, size_t n, CUstream stream, int to_device)
{
	struct staged_copy *c;
	CUresult err;

	if ((err = client_connect()))
		return err;
	if (!client_shm())
		return hostfn_stage_copy(stream, dev, host, n, to_device);
	if (!(c = malloc(sizeof(*c))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	*c = (struct staged_copy){ host, NULL, n };
	if ((err = cuMemHostAlloc(&c->pinned, n, 0))) {
		free(c);
		return err;
	}
	if (to_device)
		err = cuLaunchHostFunc(stream, stage_in, c) ?: copy_htod_host(dev, c->pinned, n, stream, 1);
	else
		err = copy_dtoh_host(c->pinned, dev, n, stream, 1) ?: cuLaunchHostFunc(stream, stage_out, c);
	if (err) {                               /* (the capture is broken now anyway) */
		cuMemFreeHost(c->pinned);
		free(c);
	}
	return err;
}

static CUresult copy_htod(CUdeviceptr dst, const void *src, size_t n, CUstream stream, int async)
{
	mapped_before_copy(src, n, async);      /* kernels' writes to mapped memory first */
	if (managed_contains(src, n))            /* its data is on the device */
		return async ? rpc_cuMemcpyDtoDAsync_v2(dst, (CUdeviceptr)(uintptr_t)src, n, stream) :
			       rpc_cuMemcpyDtoD_v2(dst, (CUdeviceptr)(uintptr_t)src, n);
	if (pageable_capture(src, n, stream, async))
		return captured_copy(dst, (void *)src, n, stream, 1);
	return copy_htod_host(dst, src, n, stream, async);
}

static CUresult copy_dtoh(void *dst, CUdeviceptr src, size_t n, CUstream stream, int async)
{
	mapped_before_copy(dst, n, async);
	if (managed_contains(dst, n))
		return async ? rpc_cuMemcpyDtoDAsync_v2((CUdeviceptr)(uintptr_t)dst, src, n, stream) :
			       rpc_cuMemcpyDtoD_v2((CUdeviceptr)(uintptr_t)dst, src, n);
	if (pageable_capture(dst, n, stream, async))
		return captured_copy(src, dst, n, stream, 0);
	return copy_dtoh_host(dst, src, n, stream, async);
}

CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
	return copy_htod(dst, src, n, NULL, 0);
}

CUresult CUDAAPI cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
	return copy_dtoh(dst, src, n, NULL, 0);
}

CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream stream)
{
	return copy_htod(dst, src, n, stream, 1);
}

CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream stream)
{
	return copy_dtoh(dst, src, n, stream, 1);
}

/* A copy between two places already known to be host or device memory. */
static CUresult copy_row(CUdeviceptr dst, int dst_dev, CUdeviceptr src, int src_dev, size_t n, CUstream stream,
			 int async)
{
	if (dst_dev && src_dev)
		return async ? rpc_cuMemcpyDtoDAsync_v2(dst, src, n, stream) : rpc_cuMemcpyDtoD_v2(dst, src, n);
	if (dst_dev)
		return copy_htod(dst, (const void *)(uintptr_t)src, n, stream, async);
	if (src_dev)
		return copy_dtoh((void *)(uintptr_t)dst, src, n, stream, async);
	if (n && (!host_range_valid((void *)(uintptr_t)dst, n) || !host_range_valid((void *)(uintptr_t)src, n)))
		return CUDA_ERROR_INVALID_VALUE;
	memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
	return CUDA_SUCCESS;
}

/* Unified addressing: known device allocations are device memory. */
static CUresult copy_any(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream, int async)
{
	return copy_row(dst, devmem_contains(dst), src, devmem_contains(src), n, stream, async);
}

CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return copy_any(dst, src, n, NULL, 0);
}

CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream)
{
	return copy_any(dst, src, n, stream, 1);
}

/* Between two GPUs' memory: device addresses are unified across the
 * client's GPUs (one arena, a slice each), so a peer copy is a
 * device-to-device copy that the worker's driver routes. */
CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t n)
{
	if (!dst_ctx || !src_ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	return rpc_cuMemcpyDtoD_v2(dst, src, n);
}

CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t n,
				   CUstream stream)
{
	if (!dst_ctx || !src_ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	return rpc_cuMemcpyDtoDAsync_v2(dst, src, n, stream);
}

/* One side of a 2D copy: its address at row y, and whether it is device
 * memory (unified memory is classified by address). Arrays: array.c. */
static CUresult copy_2d_side(CUmemorytype type, const void *host, CUdeviceptr dev, size_t x, size_t y,
			     size_t pitch, CUdeviceptr *addr, int *is_dev)
{
	if (type == CU_MEMORYTYPE_ARRAY)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (type != CU_MEMORYTYPE_HOST && type != CU_MEMORYTYPE_DEVICE && type != CU_MEMORYTYPE_UNIFIED)
		return CUDA_ERROR_INVALID_VALUE;
	*addr = (type == CU_MEMORYTYPE_HOST ? (CUdeviceptr)(uintptr_t)host : dev) + y * pitch + x;
	*is_dev = type == CU_MEMORYTYPE_DEVICE || (type == CU_MEMORYTYPE_UNIFIED && devmem_contains(*addr));
	return CUDA_SUCCESS;
}

/* A 2D copy of linear memory (array.c has those with an array on either
 * side) as one copy when both sides are dense, else row by row. */
CUresult copy_2d(const CUDA_MEMCPY2D *p, CUstream stream, int async)
{
	CUdeviceptr dst, src;
	int dst_dev, src_dev;
	CUresult err;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	if (!p->WidthInBytes || !p->Height)
		return CUDA_SUCCESS;
	if (p->Height > 1 && (p->srcPitch < p->WidthInBytes + p->srcXInBytes ||
			      p->dstPitch < p->WidthInBytes + p->dstXInBytes))
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = copy_2d_side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, p->srcPitch,
				&src, &src_dev)) ||
	    (err = copy_2d_side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, p->dstPitch,
				&dst, &dst_dev)))
		return err;
	if (p->Height == 1 || (p->srcPitch == p->WidthInBytes && p->dstPitch == p->WidthInBytes))
		return copy_row(dst, dst_dev, src, src_dev, p->WidthInBytes * p->Height, stream, async);
	for (size_t y = 0; y < p->Height && !err; y++)
		err = copy_row(dst + y * p->dstPitch, dst_dev, src + y * p->srcPitch, src_dev, p->WidthInBytes, stream,
			       async);
	return err;
}

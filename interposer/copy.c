/*
 * copy.c: host<->device copies (1D, and 2D row by row), routed by where
 * the host memory lives:
 *  - a pinned region shared with a local worker: one message, direct DMA;
 *  - other memory of a local client: streamed through the staging slots,
 *    with the application's memcpy overlapping the worker's DMA;
 *  - a remote client: inline chunks in the messages.
 */
#include "interposer.h"

static CUresult copy_htod_host(CUdeviceptr dst, const void *src, size_t n, CUstream stream, int async);
static CUresult copy_dtoh_host(void *dst, CUdeviceptr src, size_t n, CUstream stream, int async);
static unsigned next_slot;

static CUresult region_copy(CUdeviceptr dev, const struct host_range *hr, size_t n, CUstream stream,
			    int async, int to_device)
{
	shm_copy_args a = { .device = dev, .region = hr->region, .offset = hr->offset, .size = n,
			    .stream = handle_id(stream), .async = async, .to_device = to_device, .slot = -1 };
	scalar_res r = { 0 };

	if (async)
		return rpc_memcpy_shm_async_locked(&a);
	return rpc_memcpy_shm_locked(&a, &r);
}

static CUresult slot_wait(struct shm_segment *seg, unsigned slot, uint32_t state)
{
	if (shm_slot_wait(seg, slot, state, client_socket(), client_wait_polls()))
		return client_lost("the server stopped answering");
	return CUDA_SUCCESS;
}

static CUresult slot_request(struct shm_segment *seg, unsigned slot, CUdeviceptr dev, size_t n,
			     CUstream stream, int async, int to_device)
{
	shm_copy_args a = { .device = dev, .region = 0, .size = n, .stream = handle_id(stream),
			    .async = async, .to_device = to_device, .slot = (int)slot };

	atomic_store(&seg->hdr->slot_state[slot], SLOT_BUSY);
	return rpc_memcpy_shm_async_locked(&a);
}

/* A synchronous staged copy had no reply to bring device output with it:
 * if the worker has some, ask for it now (it comes before the reply). */
static CUresult take_output(struct shm_segment *seg, int async, CUresult err)
{
	uint64_t none = 0;
	scalars a = { { 0, &none } };
	scalar_res r = { 0 };
	CUresult e;

	if (async || !atomic_exchange(&seg->hdr->output_pending, 0))
		return err;
	e = rpc_output_flush_locked(&a, &r);
	xdr_free((xdrproc_t)xdr_scalar_res, (char *)&r);
	return err ? err : e;
}

static CUresult staged_htod(struct shm_segment *seg, CUdeviceptr dst, const char *src, size_t n,
			    CUstream stream, int async)
{
	unsigned nslots = seg->hdr->nslots, used = 0, first = next_slot;
	size_t chunk = seg->hdr->slot_size;
	CUresult err = CUDA_SUCCESS;

	for (size_t off = 0; off < n && !err; off += chunk, used++) {
		unsigned slot = next_slot++ % nslots;
		size_t len = n - off < chunk ? n - off : chunk;

		if ((err = slot_wait(seg, slot, SLOT_FREE)))
			return err;
		copy_parallel(shm_slot(seg, slot, 0), src + off, len);
		err = slot_request(seg, slot, dst + off, len, stream, async, 1);
	}
	/* The copy is done when the worker has emptied every slot we used. */
	for (unsigned i = 0; i < used && i < nslots; i++) {
		unsigned slot = (first + used - 1 - i) % nslots;
		CUresult e = slot_wait(seg, slot, SLOT_FREE);
		if (!e)
			e = (CUresult)atomic_load(&seg->hdr->slot_err[slot]);
		if (!err)
			err = e;
	}
	return take_output(seg, async, err);
}

static CUresult staged_dtoh(struct shm_segment *seg, char *dst, CUdeviceptr src, size_t n,
			    CUstream stream, int async)
{
	unsigned nslots = seg->hdr->nslots, base = next_slot;
	size_t chunk = seg->hdr->slot_size, chunks = (n + chunk - 1) / chunk, sent = 0, done = 0;
	CUresult err = CUDA_SUCCESS;

	next_slot += (unsigned)chunks;
	while (done < chunks) {
		while (sent < chunks && sent - done < nslots && !err) {
			unsigned slot = (unsigned)((base + sent) % nslots);
			size_t len = n - sent * chunk < chunk ? n - sent * chunk : chunk;
			if (!(err = slot_wait(seg, slot, SLOT_FREE)))
				err = slot_request(seg, slot, src + sent * chunk, len, stream, async, 0);
			sent++;
		}
		if (err == CUDA_ERROR_DEVICE_UNAVAILABLE)
			return err;
		unsigned slot = (unsigned)((base + done) % nslots);
		size_t len = n - done * chunk < chunk ? n - done * chunk : chunk;
		CUresult e = slot_wait(seg, slot, SLOT_READY);
		if (e)
			return e;
		e = (CUresult)atomic_load(&seg->hdr->slot_err[slot]);
		if (!e)
			copy_parallel(dst + done * chunk, shm_slot(seg, slot, 0), len);
		atomic_store(&seg->hdr->slot_state[slot], SLOT_FREE);
		if (!err)
			err = e;
		done++;
	}
	return take_output(seg, async, err);
}

static CUresult inline_htod(CUdeviceptr dst, const char *src, size_t n, CUstream stream, int async)
{
	CUresult err = lanes_copy((char *)src, dst, n, stream, async, 1);

	if (err != LANES_UNUSED)
		return err;
	err = CUDA_SUCCESS;

	for (size_t off = 0; off < n && !err; off += CICADA_CHUNK_MAX) {
		size_t len = n - off < CICADA_CHUNK_MAX ? n - off : CICADA_CHUNK_MAX;
		htod_args a = { .dst = dst + off, .stream = handle_id(stream), .async = async,
				.data = { (u_int)len, (char *)src + off } };
		scalar_res r = { 0 };

		if (async || off + len < n)
			err = rpc_memcpy_htod_async_locked(&a);
		else
			err = rpc_memcpy_htod_locked(&a, &r);
	}
	return err;
}

/* Without shared memory: DTOH_DEPTH chunks asked for at once, so the
 * worker reads the next while this one crosses the link; a whole chunk
 * is decoded straight into dst (its size is the decoder's limit, so the
 * reply cannot overrun it), a last, shorter one through scratch. */
#define DTOH_DEPTH 4

static CUresult inline_dtoh(char *dst, CUdeviceptr src, size_t n, CUstream stream, int async)
{
	struct { uint32_t xid; size_t off, len; } ring[DTOH_DEPTH];
	char *scratch = client_scratch();
	unsigned head = 0, count = 0;
	size_t sent = 0;
	CUresult err = lanes_copy(dst, src, n, stream, async, 0), e;

	if (err != LANES_UNUSED)
		return err;
	err = CUDA_SUCCESS;

	while (sent < n || count) {
		while (!err && sent < n && count < DTOH_DEPTH) {
			size_t len = n - sent < CICADA_CHUNK_MAX ? n - sent : CICADA_CHUNK_MAX;
			dtoh_args a = { .src = src + sent, .size = len, .stream = handle_id(stream), .async = async };
			unsigned at = (head + count) % DTOH_DEPTH;

			if ((err = client_send_locked(P_memcpy_dtoh, (xdrproc_t)xdr_dtoh_args, &a, sent == 0, &ring[at].xid)))
				break;
			ring[at].off = sent;
			ring[at].len = len;
			count++;
			sent += len;
		}
		if (!count)
			break;
		{
			size_t off = ring[head].off, len = ring[head].len;
			char *into = len == CICADA_CHUNK_MAX ? dst + off : scratch;
			bytes_res r = { 0, { 0, into } };

			e = client_reply_locked(P_memcpy_dtoh, ring[head].xid, (xdrproc_t)xdr_bytes_res, &r);
			if (!e && r.data.data_len != len)
				e = client_lost("short copy from the server");
			if (!e && into == scratch)
				memcpy(dst + off, scratch, len);
			if (e && !err)
				err = e;         /* the rest is read all the same (a lost link answers at once) */
			head = (head + 1) % DTOH_DEPTH;
			count--;
		}
	}
	return err;
}

/* From host memory that is known not to be managed (managed.c's flush). */
CUresult copy_htod_device(CUdeviceptr dst, const void *src, size_t n)
{
	return copy_htod_host(dst, src, n, NULL, 0);
}

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

static int stream_capturing(CUstream stream)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;

	return graph_capturing() && cuStreamIsCapturing(stream, &st) == CUDA_SUCCESS &&
	       st == CU_STREAM_CAPTURE_STATUS_ACTIVE;
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

CUresult copy_htod(CUdeviceptr dst, const void *src, size_t n, CUstream stream, int async)
{
	mapped_before_copy(src, n, async);      /* kernels' writes to mapped memory first */
	if (managed_contains(src, n))            /* its data is on the device */
		return async ? rpc_cuMemcpyDtoDAsync_v2(dst, (CUdeviceptr)(uintptr_t)src, n, stream) :
			       rpc_cuMemcpyDtoD_v2(dst, (CUdeviceptr)(uintptr_t)src, n);
	if (pageable_capture(src, n, stream, async))
		return captured_copy(dst, (void *)src, n, stream, 1);
	return copy_htod_host(dst, src, n, stream, async);
}

static CUresult copy_htod_host(CUdeviceptr dst, const void *src, size_t n, CUstream stream, int async)
{
	struct host_range hr;
	struct shm_segment *seg;
	CUresult err;

	if (!n)
		return CUDA_SUCCESS;
	if (!host_range_valid(src, n))
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = client_connect()))
		return err;
	client_lock();
	seg = client_shm();
	if (seg && hostmem_find(src, n, &hr))
		err = region_copy(dst, &hr, n, stream, async, 1);
	else if (seg)
		err = staged_htod(seg, dst, src, n, stream, async);
	else
		err = inline_htod(dst, src, n, stream, async);
	client_unlock();
	return err;
}

/* Into host memory that is known not to be managed (managed.c's fetch). */
CUresult copy_dtoh_device(void *dst, CUdeviceptr src, size_t n)
{
	return copy_dtoh_host(dst, src, n, NULL, 0);
}

CUresult copy_dtoh(void *dst, CUdeviceptr src, size_t n, CUstream stream, int async)
{
	mapped_before_copy(dst, n, async);
	if (managed_contains(dst, n))
		return async ? rpc_cuMemcpyDtoDAsync_v2((CUdeviceptr)(uintptr_t)dst, src, n, stream) :
			       rpc_cuMemcpyDtoD_v2((CUdeviceptr)(uintptr_t)dst, src, n);
	if (pageable_capture(dst, n, stream, async))
		return captured_copy(src, dst, n, stream, 0);
	return copy_dtoh_host(dst, src, n, stream, async);
}

static CUresult copy_dtoh_host(void *dst, CUdeviceptr src, size_t n, CUstream stream, int async)
{
	struct host_range hr;
	struct shm_segment *seg;
	CUresult err;

	if (!n)
		return CUDA_SUCCESS;
	if (!host_range_valid(dst, n))
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = client_connect()))
		return err;
	client_lock();
	seg = client_shm();
	if (seg && hostmem_find(dst, n, &hr))
		err = region_copy(src, &hr, n, stream, async, 0);
	else if (seg)
		err = staged_dtoh(seg, dst, src, n, stream, async);
	else
		err = inline_dtoh(dst, src, n, stream, async);
	client_unlock();
	return err;
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
	return copy_row(dst, hostmem_is_device(dst), src, hostmem_is_device(src), n, stream, async);
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
	*is_dev = type == CU_MEMORYTYPE_DEVICE || (type == CU_MEMORYTYPE_UNIFIED && hostmem_is_device(*addr));
	return CUDA_SUCCESS;
}

/* A 2D copy as one copy when both sides are dense, else row by row. */
static CUresult copy_2d(const CUDA_MEMCPY2D *p, CUstream stream, int async)
{
	CUdeviceptr dst, src;
	int dst_dev, src_dev;
	CUresult err;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	if (p->srcMemoryType == CU_MEMORYTYPE_ARRAY || p->dstMemoryType == CU_MEMORYTYPE_ARRAY)
		return copy_2d_array(p, stream, async);
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

CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
	return copy_2d(pCopy, NULL, 0);
}

CUresult CUDAAPI cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{
	return copy_2d(pCopy, NULL, 0);
}

CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
	return copy_2d(pCopy, hStream, 1);
}

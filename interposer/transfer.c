/*
 * transfer.c: the bytes of a host<->device copy, moved by where the host
 * memory lives:
 *  - a pinned region shared with a local worker: one message, direct DMA;
 *  - other memory of a local client: streamed through the staging slots,
 *    with the application's memcpy overlapping the worker's DMA;
 *  - a remote client: inline chunks in the messages (or bulk lanes).
 * The host memory is taken as it is: managed and mapped memory, and
 * copies on a capturing stream, are copy.c's, above. managed.c, mapped.c
 * and hostmem.c move their bytes through here too. Which memory is a
 * shared region, hostmem.c (above) tells through copy_set_region_finder.
 */
#include "interposer.h"

/* Whether [p, p + n) lies in a pinned region shared with the worker,
 * and where (hostmem.c's table, registered from its constructor). */
static int no_region(const void *p, size_t n, struct host_range *out)
{
	return 0;
}

static int (*region_find)(const void *p, size_t n, struct host_range *out) = no_region;

void copy_set_region_finder(int (*find)(const void *p, size_t n, struct host_range *out))
{
	region_find = find;
}

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

CUresult copy_htod_host(CUdeviceptr dst, const void *src, size_t n, CUstream stream, int async)
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
	if (seg && region_find(src, n, &hr))
		err = region_copy(dst, &hr, n, stream, async, 1);
	else if (seg)
		err = staged_htod(seg, dst, src, n, stream, async);
	else
		err = inline_htod(dst, src, n, stream, async);
	client_unlock();
	return err;
}

/* From host memory that is known not to be managed (managed.c's flush). */
CUresult copy_htod_device(CUdeviceptr dst, const void *src, size_t n)
{
	return copy_htod_host(dst, src, n, NULL, 0);
}

CUresult copy_dtoh_host(void *dst, CUdeviceptr src, size_t n, CUstream stream, int async)
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
	if (seg && region_find(dst, n, &hr))
		err = region_copy(src, &hr, n, stream, async, 0);
	else if (seg)
		err = staged_dtoh(seg, dst, src, n, stream, async);
	else
		err = inline_dtoh(dst, src, n, stream, async);
	client_unlock();
	return err;
}

/* Into host memory that is known not to be managed (managed.c's fetch). */
CUresult copy_dtoh_device(void *dst, CUdeviceptr src, size_t n)
{
	return copy_dtoh_host(dst, src, n, NULL, 0);
}

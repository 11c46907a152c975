/*
 * mapped.c: mapped host memory the worker cannot reach (any pinned or
 * registered memory of a remote client once its device pointer is asked
 * for, and registered pages a local worker cannot share): the device sees
 * a mirror, device memory of the same size, kept coherent with the
 * program's bytes at the points where CUDA makes host and device agree.
 *
 * A mirror remembers, for each 4 KiB block, a hash (XXH3) of the bytes
 * both sides last agreed on. Before device work (client.c's device work
 * hook: launches, graph launches, copies, memsets) every block whose host
 * bytes hash otherwise is written to the device, and work that may write
 * device memory leaves the mirrors pending. At a synchronisation (context,
 * stream or event synchronisation, a query that answers done, a blocking
 * copy) pending mirrors are read back, and each block whose device bytes
 * hash otherwise than agreed (a kernel wrote it) is copied into the
 * program's memory; the others keep what the host holds. Only a context
 * synchronisation ends pending (work on another stream may still run).
 *
 * So host writes reach kernels launched after them, and kernels' writes
 * reach the host at the next synchronisation; a block both sides wrote
 * between two such points keeps the device's bytes. That is mapped memory
 * without concurrent access: the host must not touch it while kernels
 * that use it run, as with managed memory (managed.c). The program's
 * pages are never protected, so system calls may read and write them.
 *
 * A pinned region of a local client that moves to a worker that cannot
 * share its pages (a --gpu-only move to another node) is mirrored too:
 * there the device memory is the worker's own pinned copy, at the device
 * address the region had (mapped_adopt).
 */
#include <pthread.h>
#include <stdlib.h>
#include <xxhash.h>
#include "interposer.h"

#define MBLOCK 4096u
#define PULL_CHUNK (4u << 20)                /* read back this much at a time */

struct mirror {
	char *host;
	size_t size;
	CUdeviceptr dev;
	uint64_t *agreed;                    /* one hash per block */
	int read_only;                       /* never written back (CU_MEMHOSTREGISTER_READ_ONLY) */
	int borrowed;                        /* dev is a carried region's (hostmem.c), not freed here */
	CUcontext ctx;                       /* current where it was made (mapped_flush's thread has none) */
};

static struct mirror *mirrors;
static unsigned nmirrors, cap_mirrors;
static volatile int any;                     /* read without the lock */
static int pending, in_hook;
static char *pull_buf;
/* taken after the client lock, never before it */
static pthread_mutex_t mr_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

static size_t blocks_of(size_t size)
{
	return (size + MBLOCK - 1) / MBLOCK;
}

static size_t block_len(const struct mirror *m, size_t b)
{
	return m->size - b * MBLOCK < MBLOCK ? m->size - b * MBLOCK : MBLOCK;
}

/* Writes the blocks the host changed, a run of them at a time. */
static CUresult push(struct mirror *m)
{
	size_t nb = blocks_of(m->size), run = 0;
	CUresult err = CUDA_SUCCESS;

	for (size_t b = 0; b <= nb && !err; b++) {
		uint64_t h = b < nb ? XXH3_64bits(m->host + b * MBLOCK, block_len(m, b)) : 0;

		if (b < nb && h != m->agreed[b]) {
			m->agreed[b] = h;
			run++;
			continue;
		}
		if (run) {
			size_t from = (b - run) * MBLOCK, to = b < nb ? b * MBLOCK : m->size;

			err = copy_htod_device(m->dev + from, m->host + from, to - from);
			run = 0;
		}
	}
	return err;
}

/* Copies into the program's memory the blocks a kernel changed. */
static CUresult pull(struct mirror *m)
{
	CUresult err = CUDA_SUCCESS;

	if (m->read_only)
		return CUDA_SUCCESS;
	if (!pull_buf && !(pull_buf = malloc(PULL_CHUNK)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t off = 0; off < m->size && !err; off += PULL_CHUNK) {
		size_t len = m->size - off < PULL_CHUNK ? m->size - off : PULL_CHUNK;

		if ((err = copy_dtoh_device(pull_buf, m->dev + off, len)))
			break;
		for (size_t at = 0; at < len; at += MBLOCK) {
			size_t b = (off + at) / MBLOCK, n = block_len(m, b);
			uint64_t h = XXH3_64bits(pull_buf + at, n);

			if (h != m->agreed[b]) {
				memcpy(m->host + off + at, pull_buf + at, n);
				m->agreed[b] = h;
			}
		}
	}
	return err;
}

/* Reads pending mirrors back; full: every stream has drained (a context
 * synchronisation), so they are pending no more. The caller holds the
 * client lock. */
static void read_back(int full)
{
	if (!any || !pending || in_hook)
		return;
	pthread_mutex_lock(&mr_lock);
	in_hook = 1;
	for (unsigned i = 0; i < nmirrors; i++)
		if (pull(&mirrors[i]))
			log_error("mapped memory at %p: reading back the device's copy failed", mirrors[i].host);
	if (full)
		pending = 0;
	in_hook = 0;
	pthread_mutex_unlock(&mr_lock);
}

static void device_work_hook(unsigned proc)
{
	int writes = device_work_writes(proc);

	if (!any || in_hook || writes < 0)
		return;
	pthread_mutex_lock(&mr_lock);
	in_hook = 1;
	for (unsigned i = 0; i < nmirrors; i++)
		if (push(&mirrors[i]))
			log_error("mapped memory at %p: writing it to the device failed", mirrors[i].host);
	if (writes && nmirrors)
		pending = 1;
	in_hook = 0;
	pthread_mutex_unlock(&mr_lock);
}

static void synced_hook(unsigned proc)
{
	switch (proc) {
	case P_cuCtxSynchronize:
	case P_cuCtxSynchronize_v2:
		read_back(1);
		break;
	case P_cuStreamSynchronize:
	case P_cuStreamQuery:
	case P_cuEventSynchronize:
	case P_cuEventQuery:
		read_back(0);
		break;
	}
}

static struct mirror *mirror_of(const char *host, size_t n)
{
	for (unsigned i = 0; i < nmirrors; i++)
		if (host + n > mirrors[i].host && host < mirrors[i].host + mirrors[i].size)
			return &mirrors[i];
	return NULL;
}

/* A blocking copy synchronises: kernels' writes first. So does any copy
 * of mapped memory itself, whose bytes must be the device's. */
void mapped_before_copy(const void *host, size_t n, int async)
{
	int mine;

	if (!any || !pending)
		return;
	client_lock();
	pthread_mutex_lock(&mr_lock);
	mine = !async || mirror_of(host, n ? n : 1);
	pthread_mutex_unlock(&mr_lock);
	if (mine)
		read_back(0);
	client_unlock();
}

static int add_mirror(const struct mirror *m)
{
	struct mirror *p;

	if (nmirrors == cap_mirrors) {
		p = realloc(mirrors, (cap_mirrors ? cap_mirrors * 2 : 16) * sizeof(*p));
		if (!p)
			return -1;
		mirrors = p;
		cap_mirrors = cap_mirrors ? cap_mirrors * 2 : 16;
	}
	mirrors[nmirrors++] = *m;
	return 0;
}

static void start_hooks(void)
{
	if (any)
		return;
	client_set_device_work_hook(device_work_hook);
	client_set_synced_hook(synced_hook);
	any = 1;
}

/* Gives [host, host + size) a device mirror holding its bytes now. */
CUresult mapped_add(char *host, size_t size, int read_only, CUdeviceptr *dev)
{
	struct mirror m = { .host = host, .size = size, .read_only = read_only, .ctx = ctx_current() };
	CUresult err;

	if (!host_range_valid(host, size) || !size)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(m.agreed = malloc(blocks_of(size) * sizeof(*m.agreed))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if ((err = devmem_alloc(&m.dev, size))) {
		free(m.agreed);
		return err;
	}
	client_lock();
	pthread_mutex_lock(&mr_lock);
	in_hook = 1;                             /* (its own copy is no device work to act on) */
	for (size_t b = 0; b < blocks_of(size); b++)
		m.agreed[b] = XXH3_64bits(host + b * MBLOCK, block_len(&m, b));
	err = copy_htod_device(m.dev, host, size);
	in_hook = 0;
	if (!err && add_mirror(&m))
		err = CUDA_ERROR_OUT_OF_MEMORY;
	if (!err)
		start_hooks();
	pthread_mutex_unlock(&mr_lock);
	client_unlock();
	if (err) {
		devmem_free(m.dev);
		free(m.agreed);
		return err;
	}
	*dev = m.dev;
	return CUDA_SUCCESS;
}

/* Makes dev, the worker's copy of a carried pinned region that already
 * holds the host's bytes, the mirror of [host, host + size), in place of
 * any mirror it had. The caller holds the client lock. */
CUresult mapped_adopt(char *host, size_t size, CUdeviceptr dev, CUcontext ctx)
{
	struct mirror m = { .host = host, .size = size, .dev = dev, .borrowed = 1, .ctx = ctx }, *old;
	CUresult err = CUDA_SUCCESS;

	if (!(m.agreed = malloc(blocks_of(size) * sizeof(*m.agreed))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t b = 0; b < blocks_of(size); b++)
		m.agreed[b] = XXH3_64bits(host + b * MBLOCK, block_len(&m, b));
	pthread_mutex_lock(&mr_lock);
	if ((old = mirror_of(host, size)) && old->host == host) {
		free(old->agreed);
		*old = m;
	} else if (add_mirror(&m)) {
		free(m.agreed);
		err = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (!err)
		start_hooks();
	pthread_mutex_unlock(&mr_lock);
	return err;
}

/* Drops host's mirror; read_back: kernels' writes are read back first
 * (cuMemHostUnregister: the pages live on). */
void mapped_remove(const char *host, int read_back_first)
{
	struct mirror m = { 0 };

	client_lock();
	pthread_mutex_lock(&mr_lock);
	for (unsigned i = 0; i < nmirrors; i++)
		if (mirrors[i].host == host) {
			in_hook = 1;
			if (read_back_first && pending && pull(&mirrors[i]))
				log_error("mapped memory at %p: reading back the device's copy failed", host);
			in_hook = 0;
			m = mirrors[i];
			mirrors[i] = mirrors[--nmirrors];
			break;
		}
	pthread_mutex_unlock(&mr_lock);
	client_unlock();
	if (m.dev && !m.borrowed)
		devmem_free(m.dev);
	free(m.agreed);
}

/* Before a checkpoint: the device's copy must be whole, and the host's
 * must hold what kernels wrote (the snapshot takes the one, CRIU the
 * other). The caller holds the client lock; its thread (the control
 * socket's) has no context: each mirror's own is used. */
void mapped_flush(void)
{
	if (!any)
		return;
	pthread_mutex_lock(&mr_lock);
	in_hook = 1;
	for (unsigned i = 0; i < nmirrors; i++) {
		struct mirror *m = &mirrors[i];
		int pushed = !ctx_current() && m->ctx && !cuCtxPushCurrent_v2(m->ctx);

		if (pending && pull(m))
			log_error("mapped memory at %p: reading back the device's copy failed", m->host);
		if (push(m))
			log_error("mapped memory at %p: writing it to the device failed", m->host);
		if (pushed)
			cuCtxPopCurrent_v2(NULL);
	}
	pending = 0;
	in_hook = 0;
	pthread_mutex_unlock(&mr_lock);
}

/*
 * snapio.c: what a worker's checkpoints and restores share (checkpoint.c,
 * restore.c, and a migration's preload.c): pinned host buffers, the
 * memory operations through which the snapshot library moves device
 * memory (its pinned buffers: pinned.c; the images a snapshot brought:
 * modcache.c).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "checkpoint.h"
#include "snapshot.h"

/* --- device memory moves for snapshot-format --- */

static void *mem_alloc_host(void *ctx, size_t size)
{
	return worker_pinned(ctx, size);
}

static void mem_free_host(void *ctx, void *buf, size_t size)
{
	worker_pinned_free(buf, size);
}

/* One copy between device memory at va and buf (out: from the device),
 * with ctx current. */
static CUresult copy_via(CUcontext ctx, uint64_t va, void *buf, size_t size, int out)
{
	CUresult err = cuCtxSetCurrent(ctx);

	if (err)
		return err;
	return out ? cuMemcpyDtoH(buf, (CUdeviceptr)va, size) : cuMemcpyHtoD((CUdeviceptr)va, buf, size);
}

/* The context a copy of va goes through first: that of the GPU whose
 * memory backs the application's VMM mapping there (it may be reachable
 * from that GPU only, as NCCL's buffers are), else the first GPU's. */
static CUcontext copy_ctx(struct worker *w, uint64_t va)
{
	CUdevice dev = vmm_device_of(w, va);
	CUcontext ctx = dev >= 0 && primary_held(dev) ? primary_ctx(w, dev) : NULL;

	return ctx ? ctx : w->base_ctx;
}

/* A copy between device memory at va and a pinned buffer, through the
 * context copy_ctx names, else through each other GPU's the worker
 * holds. */
static int mem_copy(struct worker *w, uint64_t va, void *buf, size_t size, int out)
{
	CUcontext first = copy_ctx(w, va), ctx;
	CUresult err = copy_via(first, va, buf, size, out), first_err = err;

	for (CUdevice dev = 0; err && dev < w->nreal; dev++) {
		ctx = primary_held(dev) ? primary_ctx(w, dev) : NULL;
		if (ctx && ctx != first && !(err = copy_via(ctx, va, buf, size, out)))
			log_debug("0x%llx (%zu bytes): copied through GPU %d", (unsigned long long)va, size, (int)dev);
	}
	cuCtxSetCurrent(w->base_ctx);
	if (err)
		log_warn("%s device memory at 0x%llx (%zu bytes) failed: error %d", out ? "reading" : "writing",
			 (unsigned long long)va, size, (int)first_err);
	return err ? -1 : 0;
}

static int mem_read(void *ctx, uint64_t va, void *buf, size_t size)
{
	return mem_copy(ctx, va, buf, size, 1);
}

static int mem_write(void *ctx, uint64_t va, const void *buf, size_t size)
{
	return mem_copy(ctx, va, (void *)buf, size, 0);     /* (copy_via only reads it) */
}

static int mem_hash(void *ctx, const struct snap_range *ranges, size_t n, uint64_t *out)
{
	return devhash_ranges(ctx, ranges, n, out);
}

/* For checkpoints (the session quiesced: its memory holds still) and
 * restores. */
void worker_memory_ops(struct worker *w, struct snap_memory_ops *ops)
{
	*ops = (struct snap_memory_ops){ .ctx = w, .alloc_host = mem_alloc_host, .free_host = mem_free_host,
					 .read = mem_read, .write = mem_write, .thread_start = hostarea_thread,
					 .thread_join = hostarea_join, .hash = mem_hash, .stable = 1 };
}

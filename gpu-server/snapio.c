/*
 * snapio.c: what a worker's checkpoints and restores share (checkpoint.c,
 * restore.c, and a migration's preload.c): pinned host buffers, the
 * memory operations through which the snapshot library moves device
 * memory, and the module images that a restored snapshot brought with it.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "gpu-server.h"
#include "snapshot.h"

/* --- device memory moves for snapshot-format --- */

/* Pinned host buffers for moving device memory: mapped in the worker's
 * own area and registered, not cuMemAllocHost'd, which the driver would
 * map where it places module variables (wire/hostarea.c says why that
 * matters). */
void *worker_pinned(struct worker *w, size_t size)
{
	void *p = hostarea_map(size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	cuCtxSetCurrent(w->base_ctx);
	if (cuMemHostRegister(p, size, CU_MEMHOSTREGISTER_PORTABLE)) {
		hostarea_unmap(p, size);
		return NULL;
	}
	return p;
}

void worker_pinned_free(void *p, size_t size)
{
	cuMemHostUnregister(p);
	hostarea_unmap(p, size);
}

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

/* --- module images --- */

struct image {
	image_hash hash;
	void *data;
	size_t size;
};

struct image_table {
	struct image *v;
	size_t n;
};

/* Module images that came with a snapshot (the local cache may lack them). */
int worker_image_find(struct worker *w, const image_hash *hash, void **data, size_t *size)
{
	struct image_table *t = w->images;

	for (size_t i = 0; t && i < t->n; i++) {
		if (t->v[i].hash.lo != hash->lo || t->v[i].hash.hi != hash->hi)
			continue;
		if (!(*data = malloc(t->v[i].size)))
			return -1;
		memcpy(*data, t->v[i].data, t->v[i].size);
		*size = t->v[i].size;
		return 0;
	}
	return -1;
}

/* Keeps the module images of the snapshot r reads. */
int worker_images_load(struct worker *w, struct snap_reader *r, const Cicada__Manifest *m, char *err)
{
	struct image_table *t = calloc(1, sizeof(*t));

	if (!t || !(t->v = calloc(m->n_images + 1, sizeof(*t->v)))) {
		free(t);
		wire_fail(err, "out of memory");
		return -1;
	}
	w->images = t;
	for (size_t i = 0; i < m->n_images; i++, t->n++) {
		struct image *im = &t->v[i];
		im->hash.lo = m->images[i]->hash_lo;
		im->hash.hi = m->images[i]->hash_hi;
		if (snap_read_image(r, i, &im->data, &im->size, err))
			return -1;
	}
	return 0;
}

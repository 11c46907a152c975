/*
 * checkpoint.c: writes a paused session's GPU state as a snapshot: the
 * replay log, the device allocations and chunks of the arena, the module
 * globals the client looked up, the module images, the application's own
 * virtual memory (vmm.c), graphs, arrays and texture objects (objects.c),
 * and the device memory (snapshot-format/ compresses and checksums it, in
 * parallel).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "checkpoint.h"
#include "snapshot.h"

/* One error buffer serves the wire and the snapshot library (wire.h). */
_Static_assert(SNAP_ERRLEN == WIRE_ERRLEN, "one error-buffer size");

/* Finishes all device work of every context the client has. */
int worker_quiesce(struct worker *w, char *err)
{
	CUcontext ctx;
	CUresult rc;

	if (w->calls->captures) {
		wire_fail(err, "a CUDA graph capture is in progress; try again when it has ended");
		return -1;
	}
	for (unsigned i = 0; i < w->nhandles; i++) {
		if (w->handles[i].kind != H_CTX)
			continue;
		ctx = w->handles[i].real;
		if ((rc = cuCtxPushCurrent(ctx)))
			goto fail;
		rc = cuCtxSynchronize();
		cuCtxPopCurrent(&ctx);
		if (rc && w->calls->pending == CUDA_SUCCESS)
			w->calls->pending = rc;      /* reported to the client later */
	}
	ordered_collect(w, 1);
	return 0;
fail:
	wire_fail(err, "cannot synchronise a context (error %d)", (int)rc);
	return -1;
}

/* --- the manifest --- */

struct building {
	struct worker *w;
	Cicada__Manifest *m;
	struct snap_writer *wr;
	char *err;
};

static int add_image(struct building *b, const struct replay_entry *e)
{
	module_load_args a;
	void *image;
	size_t size;
	XDR x;
	int rc;

	memset(&a, 0, sizeof(a));
	xdrmem_create(&x, (char *)e->args, (unsigned)e->len, XDR_DECODE);
	rc = xdr_module_load_args(&x, &a) ? 0 : -1;
	xdr_destroy(&x);
	if (!rc && modcache_lookup(b->w, &a.hash, &image, &size) &&
	    worker_image_find(b->w, &a.hash, &image, &size)) {
		wire_fail(b->err, "module image %016llx%016llx is in no cache",
			 (unsigned long long)a.hash.hi, (unsigned long long)a.hash.lo);
		rc = -1;
	} else if (!rc) {
		rc = snap_write_image(b->wr, a.hash.lo, a.hash.hi, image, size, b->err);
		free(image);
	}
	xdr_free((xdrproc_t)xdr_module_load_args, (char *)&a);
	return rc;
}

static int add_record(void *ctx, const struct replay_entry *e)
{
	struct building *b = ctx;
	Cicada__Record *r = calloc(1, sizeof(*r));
	const struct proc_desc *d = worker_proc(e->proc);

	if (!r)
		return -1;
	cicada__record__init(r);
	b->m->records[b->m->n_records++] = r;
	r->seq = e->seq;
	r->proc = e->proc;
	r->has_handle = r->has_parent = r->has_ctx = r->has_args = r->has_chunks_before = 1;
	r->chunks_before = e->chunks;
	r->has_gpus_before = 1;
	r->gpus_before = e->gpus;
	r->handle = e->handle;
	r->parent = e->parent;
	r->ctx = e->ctx;
	r->args.data = (uint8_t *)e->args;
	r->args.len = e->len;
	r->name = (char *)(d ? d->name : "?");
	return e->proc == P_module_load ? add_image(b, e) : 0;
}

/* The client's GPU 0, as the snapshot describes it. */
static void gpu_info(const struct worker *w, Cicada__Gpu *g, char *name, size_t len, CUuuid *uuid)
{
	CUdevice dev = w->ngpus ? w->gpu[0] : 0;
	size_t total = 0;

	cicada__gpu__init(g);
	cuDeviceGetName(name, (int)len, dev);
	cuDeviceGetUuid(uuid, dev);
	cuDriverGetVersion(&g->driver_version);
	cuDeviceTotalMem(&total, dev);
	cuDeviceGetAttribute(&g->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
	cuDeviceGetAttribute(&g->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
	g->name = name;
	g->uuid.data = (uint8_t *)uuid->bytes;
	g->uuid.len = sizeof(uuid->bytes);
	g->total_memory = total;
	g->has_uuid = g->has_driver_version = g->has_total_memory = 1;
	g->has_cc_major = g->has_cc_minor = 1;
}

/* Arena allocations and chunks, module globals, and the memory ranges
 * whose bytes the snapshot keeps (chunks, then globals). */
static void add_memory(struct building *b, struct snap_range *ranges, Cicada__Allocation *allocs,
		       Cicada__Chunk *chunks, Cicada__Global *globals)
{
	struct worker *w = b->w;
	Cicada__Manifest *m = b->m;
	unsigned nglobals;
	const struct replay_global *g = replay_globals(w, &nglobals);
	size_t n = 0;

	for (unsigned i = 0; i < m->n_allocations; i++) {
		cicada__allocation__init(&allocs[i]);
		devmem_get(w, 0, i, &allocs[i].va, &allocs[i].size);
		m->allocations[i] = &allocs[i];
	}
	for (unsigned i = 0; i < m->n_chunks; i++, n++) {
		cicada__chunk__init(&chunks[i]);
		devmem_get(w, 1, i, &chunks[i].va, &chunks[i].size);
		m->chunks[i] = &chunks[i];
		ranges[n] = (struct snap_range){ chunks[i].va, chunks[i].size };
	}
	for (unsigned i = 0; i < nglobals && i < m->n_globals; i++, n++) {
		cicada__global__init(&globals[i]);
		globals[i].va = g[i].va;
		globals[i].size = g[i].size;
		globals[i].parent = g[i].parent;
		m->globals[i] = &globals[i];
		ranges[n] = (struct snap_range){ g[i].va, g[i].size };
	}
	vmm_ranges(w, ranges + n);
}

struct manifest_parts {
	Cicada__Manifest m;
	Cicada__Gpu gpu;
	char gpu_name[256];
	CUuuid uuid;
	uint32_t gpu_order[CICADA_MAX_GPUS];
	Cicada__Allocation *allocs;
	Cicada__Chunk *chunks;
	Cicada__Global *globals;
	struct snap_range *ranges;
	size_t nranges;
};

static void parts_free(struct manifest_parts *p)
{
	for (size_t i = 0; p->m.records && i < p->m.n_records; i++)
		free(p->m.records[i]);
	free(p->m.records);
	free(p->m.allocations);
	free(p->m.chunks);
	free(p->m.globals);
	free(p->allocs);
	free(p->chunks);
	free(p->globals);
	free(p->ranges);
	vmm_save_free(&p->m);
	ipc_save_free(&p->m);
	objects_save_free(&p->m);
}

static int parts_alloc(struct worker *w, struct manifest_parts *p, size_t nglobals)
{
	size_t nrec = replay_count(w), na = devmem_count(w, 0), nc = devmem_count(w, 1);

	p->m.records = calloc(nrec + 1, sizeof(*p->m.records));
	p->m.allocations = calloc(na + 1, sizeof(*p->m.allocations));
	p->m.chunks = calloc(nc + 1, sizeof(*p->m.chunks));
	p->m.globals = calloc(nglobals + 1, sizeof(*p->m.globals));
	p->allocs = calloc(na + 1, sizeof(*p->allocs));
	p->chunks = calloc(nc + 1, sizeof(*p->chunks));
	p->globals = calloc(nglobals + 1, sizeof(*p->globals));
	p->nranges = nc + nglobals + vmm_ranges(w, NULL);
	p->ranges = calloc(p->nranges + 1, sizeof(*p->ranges));
	p->m.n_allocations = na;
	p->m.n_chunks = nc;
	p->m.n_globals = nglobals;
	return p->m.records && p->m.allocations && p->m.chunks && p->m.globals && p->allocs &&
	       p->chunks && p->globals && p->ranges ? 0 : -1;
}

/* A parent that cannot be used costs only the saving: the snapshot is
 * then written whole. */
static const char *use_parent(struct snap_writer *wr, const char *name, const char *parent)
{
	char why[WIRE_ERRLEN];

	if (!parent || !parent[0])
		return NULL;
	if (!snap_writer_parent(wr, parent, why))
		return parent;
	log_info("checkpoint %s is written whole: %s", name, why);
	return NULL;
}

int worker_checkpoint(struct worker *w, int dirfd, const char *name, const char *parent, char *err)
{
	struct manifest_parts p;
	struct building b = { w, &p.m, NULL, err };
	struct snap_memory_ops ops;
	unsigned nglobals;
	struct timespec t0, t1;
	size_t skipped, unread;
	int rc = -1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	replay_globals(w, &nglobals);
	err[0] = 0;
	memset(&p, 0, sizeof(p));
	cicada__manifest__init(&p.m);
	if (w->replay_broken) {
		wire_fail(err, "the replay log is incomplete (the worker ran out of memory)");
		return -1;
	}
	if (worker_quiesce(w, err))
		return -1;
	replay_note_events(w);
	if (parts_alloc(w, &p, nglobals) || vmm_save(w, &p.m)) {
		wire_fail(err, "out of memory");
		goto out;
	}
	if (ipc_save(w, &p.m, err))
		goto out;
	gpu_info(w, &p.gpu, p.gpu_name, sizeof(p.gpu_name), &p.uuid);
	p.m.gpu = &p.gpu;
	p.m.gpu_count = (uint32_t)w->ngpus;
	p.m.has_gpu_count = 1;
	for (unsigned i = 0; i < w->ngpu_order; i++)
		p.gpu_order[i] = w->gpu_order[i];
	p.m.gpu_order = p.gpu_order;
	p.m.n_gpu_order = w->ngpu_order;
	devmem_arena(w, &p.m.arena_va, &p.m.arena_size);
	p.m.current_ctx = w->current_ctx;
	p.m.has_arena_va = p.m.has_arena_size = p.m.has_current_ctx = 1;
	/* whose it is: only they restore it (restore.c); the key signs it */
	p.m.owner = w->ckpt->owner[0] ? w->ckpt->owner : NULL;
	p.m.owner_uid = (uint32_t)w->ckpt->owner_uid;
	p.m.has_owner_uid = w->ckpt->owner_uid != (uid_t)-1;
	worker_memory_ops(w, &ops);
	if (!(b.wr = snap_writer_begin(dirfd, name, err)))
		goto out;
	parent = use_parent(b.wr, name, parent);
	add_memory(&b, p.ranges, p.allocs, p.chunks, p.globals);
	if (objects_save(w, b.wr, &p.m, err) || ipc_save_graphs(&p.m, err) || replay_each(w, add_record, &b) ||
	    snap_write_memory(b.wr, p.ranges, p.nranges, &ops, err)) {
		if (!err[0])
			wire_fail(err, "out of memory");
		snap_writer_abort(b.wr);
		goto out;
	}
	skipped = snap_writer_skipped(b.wr);
	unread = snap_writer_unread(b.wr);
	rc = snap_writer_commit(b.wr, &p.m, err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (!rc)
		log_info("checkpoint %s: %zu records, %zu allocations, %.3f s%s%s", name, p.m.n_records,
			 p.m.n_allocations, (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
			 parent ? ", incremental on " : "", parent ? parent : "");
	if (!rc && skipped)
		log_info("checkpoint %s: %zu pieces unchanged, left to the parent, %zu of them unread (device hashes)",
			 name, skipped, unread);
out:
	cuCtxSetCurrent(w->base_ctx);
	parts_free(&p);
	return rc;
}

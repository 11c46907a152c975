/*
 * preload.c: the device memory of a migration coming in, loaded while the
 * program still runs on its source. migrate_in.c takes a worker from the
 * pool for it (OP_PRELOAD) and passes it each pre-copy round as it
 * arrives (the round's snapshot directory, as a descriptor, on the
 * connection it handed over). The worker writes every piece the round
 * stores into physical memory of its own, chunk by chunk as the round
 * describes the arena, mapped meanwhile at a scratch address. The final
 * restore then comes to this worker (the CRIU plugin names its ticket):
 * the scratch mappings go, the chunks are mapped at their own addresses
 * as they are (devmem.c takes them), and only the pieces that changed
 * since the last round are written. Whatever fails costs only the
 * saving: the restore writes whatever it does not find in place.
 */
#include <poll.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "checkpoint.h"
#include "snapshot.h"

#define SCRATCH_BASE 0x400000000000ull       /* 64 TiB: clear of the arena and host mappings */
#define SCRATCH_SIZE (1ull << 40)

struct pre_chunk {
	uint64_t va, size, at;               /* at: its scratch address */
	CUmemGenericAllocationHandle h;
	int mapped, taken;
};

struct pre_piece {
	uint64_t va, size, sum;
};

struct preload {
	struct worker *w;
	int ctl;                             /* migrate_in's connection */
	uint64_t gran, next;                 /* scratch addresses handed out */
	int reserved;
	struct pre_chunk *chunks;
	unsigned nchunks, cap_chunks;
	struct pre_piece *pieces;            /* what the device holds, by va */
	unsigned npieces, cap_pieces;
	uint64_t bytes;
	int skipped;                         /* the round held chunks left to the restore */
	_Atomic unsigned in_place;           /* pieces the restore did not write */
};

static struct pre_chunk *chunk_at(struct preload *p, uint64_t va, uint64_t size)
{
	for (unsigned i = 0; i < p->nchunks; i++)
		if (va >= p->chunks[i].va && size <= p->chunks[i].size && va - p->chunks[i].va <= p->chunks[i].size - size)
			return &p->chunks[i];
	return NULL;
}

static struct pre_piece *piece_at(struct preload *p, uint64_t va)
{
	for (unsigned i = 0; i < p->npieces; i++)
		if (p->pieces[i].va == va)
			return &p->pieces[i];
	return NULL;
}

/* Physical memory for a chunk of the round, mapped at a scratch address. */
static int chunk_make(struct preload *p, uint64_t va, uint64_t size)
{
	CUmemAccessDesc access[CICADA_MAX_GPUS];
	struct pre_chunk c = { .va = va, .size = size, .at = SCRATCH_BASE + p->next };
	CUdevice dev = devmem_device(p->w, va);

	if (chunk_at(p, va, size) || size % p->gran || p->next + size > SCRATCH_SIZE || dev < 0 || !primary_held(dev) ||
	    array_grow((void **)&p->chunks, &p->cap_chunks, p->nchunks, sizeof(c)) ||
	    devmem_create(p->w, va, size, &c.h))
		return -1;
	if (cuMemMap(c.at, size, 0, c.h, 0)) {
		cuMemRelease(c.h);
		return -1;
	}
	c.mapped = 1;
	p->chunks[p->nchunks++] = c;         /* (released at the end even if access fails) */
	if (cuMemSetAccess(c.at, size, access, devmem_access(p->w, dev, access)))
		return -1;
	p->next += size;
	return 0;
}

static int scratch_reserve(struct preload *p)
{
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
	CUdeviceptr got = 0;

	if (p->reserved)
		return 0;
	if (cuCtxGetDevice(&prop.location.id) ||
	    cuMemGetAllocationGranularity(&p->gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ||
	    cuMemAddressReserve(&got, SCRATCH_SIZE, p->gran, SCRATCH_BASE, 0))
		return -1;
	if (got != SCRATCH_BASE) {
		cuMemAddressFree(got, SCRATCH_SIZE);
		return -1;
	}
	p->reserved = 1;
	return 0;
}

/* --- one round --- */

static int have(struct preload *p, uint64_t va, uint64_t size, uint64_t sum)
{
	struct pre_piece *pc = piece_at(p, va);

	return pc && pc->size == size && pc->sum == sum;
}

/* The round's ops (ctx: the worker): what an earlier round wrote stays. */
static int have_loaded(void *ctx, uint64_t va, uint64_t size, uint64_t sum)
{
	return have(((struct worker *)ctx)->ckpt->preload, va, size, sum);
}

/* A piece outside the arena's chunks (a final snapshot holds module
 * globals too) is left to the restore. */
static int write_scratch(void *ctx, uint64_t va, const void *buf, size_t size)
{
	struct preload *p = ((struct worker *)ctx)->ckpt->preload;
	struct pre_chunk *c = chunk_at(p, va, size);

	if (!c)
		return 0;
	cuCtxSetCurrent(p->w->base_ctx);
	return cuMemcpyHtoD(c->at + (va - c->va), buf, size) ? -1 : 0;
}

/* A round that failed midway may have written any piece it stores: those
 * are no longer known to be in place (the restore writes them from the
 * round's files); what earlier rounds loaded elsewhere stays. */
static void forget_pieces(struct preload *p, const Cicada__Manifest *m)
{
	for (size_t i = 0; i < m->n_pieces; i++) {
		struct pre_piece *pc = m->pieces[i]->in_parent ? NULL : piece_at(p, m->pieces[i]->va);
		if (pc)
			pc->size = 0;
	}
}

static int note_pieces(struct preload *p, const Cicada__Manifest *m)
{
	for (size_t i = 0; i < m->n_pieces; i++) {
		const Cicada__Piece *pc = m->pieces[i];
		struct pre_piece *at = piece_at(p, pc->va);

		if (!at) {
			if (array_grow((void **)&p->pieces, &p->cap_pieces, p->npieces, sizeof(*at)))
				return -1;
			at = &p->pieces[p->npieces++];
		}
		*at = (struct pre_piece){ pc->va, pc->size, pc->checksum };
	}
	return 0;
}

/* Loads the round whose snapshot directory is dirfd. */
static int load_round(struct preload *p, int dirfd, char *err)
{
	struct snap_memory_ops ops;
	struct snap_reader *r = snap_reader_open(dirfd, NULL, err);
	const Cicada__Manifest *m;
	int rc = -1;

	if (!r)
		return -1;
	m = snap_reader_manifest(r);
	worker_memory_ops(p->w, &ops);
	ops.write = write_scratch;
	ops.have = have_loaded;
	ops.hash = NULL;
	if (scratch_reserve(p)) {
		wire_fail(err, "no scratch device addresses");
		goto out;
	}
	/* Only on GPUs whose contexts the worker holds: taking another now would
	 * move the module variables the restore loads before it (restore.c);
	 * the restore writes those chunks itself, from the round's files. */
	p->skipped = 0;
	for (size_t i = 0; i < m->n_chunks; i++) {
		if (chunk_at(p, m->chunks[i]->va, m->chunks[i]->size))
			continue;
		if (!primary_held(devmem_device(p->w, m->chunks[i]->va))) {
			p->skipped = 1;
			continue;
		}
		if (chunk_make(p, m->chunks[i]->va, m->chunks[i]->size)) {
			wire_fail(err, "no device memory for a chunk of %llu bytes",
				 (unsigned long long)m->chunks[i]->size);
			goto out;
		}
	}
	if (!snap_read_memory(r, &ops, err) && !note_pieces(p, m))
		rc = 0;
	else
		forget_pieces(p, m);
	p->bytes = m->data_size;
out:
	snap_reader_close(r);
	return rc;
}

/* --- the worker's side of OP_PRELOAD --- */

void preload_start(struct worker *w, int ctl)
{
	struct preload *p = calloc(1, sizeof(*p));

	if (!p) {
		close(ctl);
		return;
	}
	p->w = w;
	p->ctl = ctl;
	w->ckpt->preload = p;
	log_info("preloading a migration's device memory (session %.8s)", w->ckpt->ticket);
}

/* A command from migrate_in: 1 to go on, 0 once it has gone (EOF). A
 * round (tag 'R') loaded is dropped from its files; the final snapshot
 * of a frozen process (tag 'G': it came while criu still dumped the
 * process) is kept, for the restore reads it should a piece be missing. */
static int command(struct preload *p)
{
	char err[WIRE_ERRLEN], tag = 0;
	int dirfd = wire_recv_fd_tagged(p->ctl, &tag);
	uint64_t t0 = wire_now_ns();

	if (dirfd < 0)
		return 0;
	if (load_round(p, dirfd, err)) {
		log_warn("preload: a pre-copy round was not loaded (%s); the restore writes what it holds", err);
	} else if (tag == 'G' || p->skipped) {
		/* (a round with chunks left to the restore keeps its files) */
		log_info("preload: %s loaded in %.3f s (%llu bytes stored)",
			 tag == 'G' ? "the final snapshot" : "a pre-copy round, its files kept for GPUs not started yet,",
			 (wire_now_ns() - t0) / 1e9, (unsigned long long)p->bytes);
	} else {
		/* what the round held is in device memory now: its pages go */
		log_info("preload: a pre-copy round loaded in %.3f s (%llu bytes stored, %llu freed)",
			 (wire_now_ns() - t0) / 1e9, (unsigned long long)p->bytes,
			 (unsigned long long)snap_drop_data(dirfd));
	}
	close(dirfd);
	return 1;
}

/* Waits for the restore on lfd, loading the rounds that come meanwhile:
 * the connection passed to lfd, or -1 once migrate_in is gone without one
 * (or nobody came within timeout seconds). */
int preload_wait(struct worker *w, int lfd, struct wire_buf *hello, int timeout,
		 int (*accept)(int lfd, struct wire_buf *hello))
{
	struct preload *p = w->ckpt->preload;
	struct pollfd f[2] = { { .fd = p->ctl, .events = POLLIN }, { .fd = lfd, .events = POLLIN } };
	int fd;

	for (;;) {
		if (poll(f, 2, timeout * 1000) <= 0)
			return -1;
		if (f[0].revents && !command(p))
			return -1;
		if (f[0].revents)
			continue;                    /* rounds first: the restore needs them */
		if ((fd = accept(lfd, hello)) != -2)
			return fd;
	}
}

/* Releases what the restore did not take, and the scratch addresses. */
static unsigned release(struct preload *p)
{
	unsigned taken = 0;

	cuCtxSetCurrent(p->w->base_ctx);
	for (unsigned i = 0; i < p->nchunks; i++) {
		if (p->chunks[i].mapped)
			cuMemUnmap(p->chunks[i].at, p->chunks[i].size);
		p->chunks[i].mapped = 0;
		if (p->chunks[i].taken)
			taken++;
		else
			cuMemRelease(p->chunks[i].h);
	}
	if (p->reserved)
		cuMemAddressFree(SCRATCH_BASE, SCRATCH_SIZE);
	p->reserved = 0;
	p->nchunks = 0;
	return taken;
}

/* --- the restore in this worker --- */

static int take(void *ctx, uint64_t va, uint64_t size, CUmemGenericAllocationHandle *h)
{
	struct preload *p = ctx;

	for (unsigned i = 0; i < p->nchunks; i++)
		if (p->chunks[i].va == va && p->chunks[i].size == size && !p->chunks[i].taken) {
			p->chunks[i].taken = 1;
			*h = p->chunks[i].h;
			return 0;
		}
	return -1;
}

/* The restore's ops->have (ctx: the worker): the same bytes, in a chunk
 * the restore took as it was. */
int preload_in_place(void *ctx, uint64_t va, uint64_t size, uint64_t sum)
{
	struct preload *p = ((struct worker *)ctx)->ckpt->preload;
	struct pre_chunk *c = p ? chunk_at(p, va, size) : NULL;

	if (!c || !c->taken || !have(p, va, size, sum))
		return 0;
	p->in_place++;
	return 1;
}

/* Before the replay: the scratch mappings go (the memory stays), and the
 * arena's chunks come from here; 1 if there is anything. */
int preload_attach(struct worker *w)
{
	struct preload *p = w->ckpt->preload;

	if (!p)
		return 0;
	if (!p->nchunks) {
		release(p);                  /* the restore needs the room */
		return 0;
	}
	cuCtxSetCurrent(w->base_ctx);
	for (unsigned i = 0; i < p->nchunks; i++)
		if (p->chunks[i].mapped && !cuMemUnmap(p->chunks[i].at, p->chunks[i].size))
			p->chunks[i].mapped = 0;
	if (p->reserved && !cuMemAddressFree(SCRATCH_BASE, SCRATCH_SIZE))
		p->reserved = 0;
	devmem_set_source(w, take, p);
	log_info("restore: %u chunks preloaded (the last round stored %llu bytes)", p->nchunks,
		 (unsigned long long)p->bytes);
	return 1;
}

/* After the restore, or when the worker ends: what was not taken goes. */
void preload_end(struct worker *w)
{
	struct preload *p = w->ckpt->preload;
	unsigned n, taken;

	if (!p)
		return;
	devmem_set_source(w, NULL, NULL);
	n = p->nchunks;
	taken = release(p);
	if (n)
		log_info("preload: %u of %u chunks were used as they were, %u pieces were in place", taken, n,
			 (unsigned)p->in_place);
	close(p->ctl);
	free(p->chunks);
	free(p->pieces);
	free(p);
	w->ckpt->preload = NULL;
}

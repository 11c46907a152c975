/*
 * memory.c: device memory to and from the data files, in parallel.
 * Ranges are cut into pieces of SNAP_PIECE_SIZE; a pool of threads takes
 * pieces in turn, each thread with its own host buffer (from the caller's
 * ops), compression buffer and zstd context. Writing: read, XXH3-64,
 * compress (raw if that does not shrink it), append to the thread's own
 * data file (one file would serialise the writes in the kernel: tmpfs
 * manages some 2.5 GB/s into one file, 30 GB/s into sixteen). Reading:
 * pread, decompress, check the checksum, write. The first failure stops
 * the pool and names its piece. An incremental snapshot's writer leaves
 * out each piece whose bytes its parent chain holds already (same va,
 * size and checksum); its reader takes those from the chain. Where the
 * caller hashes device memory where it is (ops->hash, devhash.h), a piece
 * whose hash equals its parent's is left out without being read, and
 * every piece records the hash of its bytes for the next snapshot.
 * snap_verify is here too: it reads every piece as a restore would,
 * without a device, then the module images (reader.c opens the snapshot
 * and finds pieces in its chain; nothing there calls this file).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>
#include "devhash.h"
#include "internal.h"

struct pool {
	struct snap_writer *w;            /* writing, or */
	struct snap_reader *r;            /* reading */
	const struct snap_memory_ops *ops;
	Cicada__Piece *pieces;            /* writing: filled in here */
	Cicada__Piece **rpieces;          /* reading: from the manifest */
	size_t n;
	int threads, level;
	atomic_uint thread;               /* the next thread's index */
	atomic_size_t next;
	atomic_int failed;
	pthread_mutex_t lock;
	char *err;
};

/* Per-thread buffers: raw device bytes and a zstd frame. */
struct bufs {
	void *raw;
	void *z;
	size_t zcap;
};

static int pool_fail(struct pool *p, const Cicada__Piece *pc, const char *fmt, ...)
{
	char why[SNAP_ERRLEN], size[32];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&p->lock);
	if (!atomic_exchange(&p->failed, 1))
		snap_fail(p->err, "device memory piece at 0x%llx (%s): %s",
			  (unsigned long long)pc->va, snap_size_str(size, sizeof(size), pc->size), why);
	pthread_mutex_unlock(&p->lock);
	return -1;
}

/* The next piece to do, or p->n once done or failed. */
static size_t pool_next(struct pool *p)
{
	size_t i = atomic_fetch_add(&p->next, 1);

	return atomic_load(&p->failed) || i >= p->n ? p->n : i;
}

static void bufs_put(struct pool *p, struct bufs *b)
{
	if (b->raw)
		p->ops->free_host(p->ops->ctx, b->raw, SNAP_PIECE_SIZE);
	free(b->z);
	*b = (struct bufs){ 0 };
}

/* A thread's buffers, made when its first piece needs them: pinned host
 * memory costs milliseconds, and where every piece is left to a parent
 * or already in place none is needed. 0, or -1 with none held. */
static int bufs_need(struct pool *p, struct bufs *b)
{
	if (b->raw)
		return 0;
	b->zcap = ZSTD_compressBound(SNAP_PIECE_SIZE);
	b->raw = p->ops->alloc_host(p->ops->ctx, SNAP_PIECE_SIZE);
	b->z = malloc(b->zcap);
	if (b->raw && b->z)
		return 0;
	bufs_put(p, b);
	return -1;
}

static int write_piece(struct pool *p, Cicada__Piece *pc, struct bufs *b, ZSTD_CCtx *cctx,
		       unsigned t)
{
	struct snap_data *d = &p->w->data[t];
	size_t z;

	struct snap_reader *owner;

	if (pc->in_parent)
		return 0;                    /* its device hash said: unchanged */
	if (!cctx || bufs_need(p, b))
		return pool_fail(p, pc, "out of memory for a writing thread");
	if (p->ops->read(p->ops->ctx, pc->va, b->raw, pc->size))
		return pool_fail(p, pc, "reading device memory failed");
	pc->checksum = XXH3_64bits(b->raw, pc->size);
	if (p->ops->hash && !(p->ops->stable && pc->has_device_hash)) {   /* of exactly these bytes */
		pc->device_hash = devhash_bytes(b->raw, pc->size);
		pc->has_device_hash = 1;
	}
	if (p->w->parent && snap_chain_find(p->w->parent, pc->va, pc->size, pc->checksum, &owner)) {
		pc->has_in_parent = pc->in_parent = 1;
		atomic_fetch_add(&p->w->skipped, 1);
		return 0;                    /* unchanged since the parent */
	}
	z = snap_worth_compressing(cctx, b->z, b->zcap, b->raw, pc->size, p->level) ?
		    ZSTD_compressCCtx(cctx, b->z, b->zcap, b->raw, pc->size, p->level) : pc->size;
	pc->has_compressed = 1;
	pc->compressed = !ZSTD_isError(z) && z < pc->size;
	pc->stored_size = pc->compressed ? z : pc->size;
	pc->has_file = 1;
	pc->file = t;
	pc->offset = d->size;
	d->size += pc->stored_size;
	if (snap_key.set) {
		pc->mac.data = malloc(SNAP_MAC_LEN);
		pc->mac.len = SNAP_MAC_LEN;
		pc->has_mac = 1;
		if (!pc->mac.data || snap_mac(pc->va, pc->size, pc->compressed ? b->z : b->raw, pc->stored_size,
					       pc->mac.data))
			return pool_fail(p, pc, "cannot sign it");
	}
	if (snap_pwrite_all(d->fd, pc->compressed ? b->z : b->raw, pc->stored_size, pc->offset))
		return pool_fail(p, pc, "writing a data file: %s", strerror(errno));
	return 0;
}

static void *write_thread(void *arg)
{
	struct pool *p = arg;
	struct bufs b = { 0 };
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	unsigned t = atomic_fetch_add(&p->thread, 1);
	size_t i;

	while ((i = pool_next(p)) < p->n)
		write_piece(p, &p->pieces[i], &b, cctx, t);
	ZSTD_freeCCtx(cctx);
	bufs_put(p, &b);
	return NULL;
}

static int read_piece(struct pool *p, size_t i, struct bufs *b, ZSTD_DCtx *dctx)
{
	const Cicada__Piece *pc = p->rpieces[i], *st = pc;
	struct snap_reader *r = p->r;
	char name[SNAP_NAME_MAX];
	ssize_t got;
	size_t n;

	if (p->ops->have && p->ops->have(p->ops->ctx, pc->va, pc->size, pc->checksum))
		return 0;                    /* in place already (a preloaded migration) */
	if (!dctx || bufs_need(p, b))
		return pool_fail(p, pc, "out of memory for a reading thread");
	if (pc->in_parent) {                 /* found when the chain was opened */
		st = r->src[i].pc;
		r = r->src[i].r;
	}
	got = snap_pread_full(r->datafd[st->file], st->compressed ? b->z : b->raw, st->stored_size, st->offset);
	pc = st;
	snap_data_name(name, pc->file);
	if (got < 0)
		return pool_fail(p, pc, "reading %s: %s", name, strerror(errno));
	if ((uint64_t)got < pc->stored_size)
		return pool_fail(p, pc, "%s truncated", name);
	if (snap_key.set && !snap_mac_ok(pc->va, pc->size, pc->compressed ? b->z : b->raw, pc->stored_size, &pc->mac))
		return pool_fail(p, pc, "its code does not match this server's key: forged or changed");
	if (pc->compressed) {
		n = ZSTD_decompressDCtx(dctx, b->raw, pc->size, b->z, pc->stored_size);
		if (ZSTD_isError(n))
			return pool_fail(p, pc, "cannot decompress: %s", ZSTD_getErrorName(n));
		if (n != pc->size)
			return pool_fail(p, pc, "decompressed to %zu bytes", n);
	}
	if (XXH3_64bits(b->raw, pc->size) != pc->checksum)
		return pool_fail(p, pc, "checksum mismatch");
	if (p->ops->write && p->ops->write(p->ops->ctx, pc->va, b->raw, pc->size))
		return pool_fail(p, pc, "writing device memory failed");
	return 0;
}

static void *read_thread(void *arg)
{
	struct pool *p = arg;
	struct bufs b = { 0 };
	ZSTD_DCtx *dctx = ZSTD_createDCtx();
	size_t i;

	while ((i = pool_next(p)) < p->n)
		read_piece(p, i, &b, dctx);
	ZSTD_freeDCtx(dctx);
	bufs_put(p, &b);
	return NULL;
}

/* Runs fn on p->threads threads, the caller's among them. */
static int pool_run(struct pool *p, void *(*fn)(void *))
{
	int started = 1;
	pthread_t *tids;

	if (!p->n)
		return 0;
	tids = calloc(p->threads, sizeof(*tids));
	pthread_mutex_init(&p->lock, NULL);
	for (; tids && started < p->threads; started++)
		if (p->ops->thread_start ? p->ops->thread_start(&tids[started], fn, p) :
					   pthread_create(&tids[started], NULL, fn, p))
			break;
	fn(p);
	for (int i = 1; i < started; i++)
		if (p->ops->thread_join)
			p->ops->thread_join(tids[i], NULL);
		else
			pthread_join(tids[i], NULL);
	pthread_mutex_destroy(&p->lock);
	free(tids);
	return atomic_load(&p->failed) ? -1 : 0;
}

static int ops_ok(const struct snap_memory_ops *ops, int writing, char *err)
{
	if (!ops || !ops->alloc_host || !ops->free_host || (writing ? !ops->read : !ops->write))
		return snap_fail(err, "incomplete memory operations");
	return 0;
}

/* Appends the pieces of ranges to w->pieces (not yet counted in
 * w->n_pieces); *added says how many. */
static int add_pieces(struct snap_writer *w, const struct snap_range *ranges, size_t n,
		      size_t *added, char *err)
{
	size_t count = 0, k = w->n_pieces;
	Cicada__Piece *pieces;

	for (size_t i = 0; i < n; i++) {
		if (ranges[i].va + ranges[i].size < ranges[i].va)
			return snap_fail(err, "range at 0x%llx wraps around", (unsigned long long)ranges[i].va);
		count += ranges[i].size / SNAP_PIECE_SIZE + !!(ranges[i].size % SNAP_PIECE_SIZE);
	}
	if (count > SNAP_MAX_ENTRIES - w->n_pieces)
		return snap_fail(err, "too much device memory for one snapshot");
	pieces = realloc(w->pieces, (k + count + 1) * sizeof(*pieces));
	if (!pieces)
		return snap_fail(err, "out of memory for %zu pieces", count);
	w->pieces = pieces;
	for (size_t i = 0; i < n; i++)
		for (uint64_t off = 0; off < ranges[i].size; off += SNAP_PIECE_SIZE) {
			pieces[k] = (Cicada__Piece)CICADA__PIECE__INIT;
			pieces[k].va = ranges[i].va + off;
			pieces[k++].size = ranges[i].size - off < SNAP_PIECE_SIZE ?
					   ranges[i].size - off : SNAP_PIECE_SIZE;
		}
	*added = count;
	return 0;
}

/* Data files for that many writing threads: thread t appends to file t. */
static int add_data_files(struct snap_writer *w, int threads, char *err)
{
	char name[SNAP_NAME_MAX];

	for (; w->n_data < (unsigned)threads; w->n_data++) {
		snap_data_name(name, w->n_data);
		w->data[w->n_data] = (struct snap_data){
			snap_openat(w->fd, name, O_WRONLY | O_CREAT | O_EXCL, 0600), 0 };
		if (w->data[w->n_data].fd < 0)
			return snap_fail(err, "creating %s: %s", name, snap_open_why(errno));
	}
	return 0;
}

/* With device hashes: each piece whose hash is its parent's piece's is
 * left to the parent, unread, with the parent's checksum. Best effort: a
 * piece without a hash is read and compared as before. */
static void hash_pieces(struct snap_writer *w, Cicada__Piece *pieces, size_t n, const struct snap_memory_ops *ops)
{
	struct snap_range *r = ops->hash && n ? calloc(n, sizeof(*r)) : NULL;
	uint64_t *h = r ? calloc(n, sizeof(*h)) : NULL;
	const Cicada__Piece *par;

	for (size_t i = 0; h && i < n; i++)
		r[i] = (struct snap_range){ pieces[i].va, pieces[i].size };
	if (h && !ops->hash(ops->ctx, r, n, h))
		for (size_t i = 0; i < n; i++) {
			if (ops->stable && h[i]) {   /* the bytes to be read are these */
				pieces[i].device_hash = h[i];
				pieces[i].has_device_hash = 1;
			}
			par = h[i] && w->parent ? snap_piece_at(w->parent, pieces[i].va, pieces[i].size) : NULL;
			if (!par || !par->has_device_hash || par->device_hash != h[i])
				continue;
			pieces[i].checksum = par->checksum;
			pieces[i].device_hash = h[i];
			pieces[i].has_device_hash = pieces[i].has_in_parent = pieces[i].in_parent = 1;
			atomic_fetch_add(&w->skipped, 1);
			atomic_fetch_add(&w->unread, 1);
		}
	free(r);
	free(h);
}

int snap_write_memory(struct snap_writer *w, const struct snap_range *ranges, size_t n,
		      const struct snap_memory_ops *ops, char *err)
{
	struct pool p = { .w = w, .ops = ops, .level = snap_zstd_level(), .err = err };

	if (ops_ok(ops, 1, err) || add_pieces(w, ranges, n, &p.n, err))
		return -1;
	p.threads = snap_threads(p.n);
	if (p.n && add_data_files(w, p.threads, err))
		return -1;
	p.pieces = w->pieces + w->n_pieces;
	hash_pieces(w, p.pieces, p.n, ops);
	if (pool_run(&p, write_thread))
		return -1;
	w->n_pieces += p.n;
	return 0;
}

static void *heap_alloc(void *ctx, size_t size)
{
	return malloc(size);
}

static void heap_free(void *ctx, void *buf, size_t size)
{
	free(buf);
}

/* Reads every piece of r and checks it, writing it to the device through
 * ops (NULL: only checks). */
static int pieces_read(struct snap_reader *r, const struct snap_memory_ops *ops, char *err)
{
	static const struct snap_memory_ops check_only = { .alloc_host = heap_alloc,
							   .free_host = heap_free };
	const Cicada__Manifest *m = r->m;
	struct pool p = { .r = r, .ops = ops ? ops : &check_only, .rpieces = m->pieces,
			  .n = m->n_pieces, .threads = snap_threads(m->n_pieces), .err = err };

	return pool_run(&p, read_thread);
}

int snap_read_memory(struct snap_reader *r, const struct snap_memory_ops *ops, char *err)
{
	return ops_ok(ops, 0, err) ? -1 : pieces_read(r, ops, err);
}

/* The pieces checked as a restore reads them, then the module images. */
int snap_verify(struct snap_reader *r, char *err)
{
	void *data;
	size_t size;

	if (pieces_read(r, NULL, err))
		return -1;
	for (size_t i = 0; i < r->m->n_images; i++) {
		if (snap_read_image(r, i, &data, &size, err))
			return -1;
		free(data);
	}
	return 0;
}


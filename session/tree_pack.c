/*
 * tree_pack.c: the chunks of one compressible file of an image stream
 * (tree.c's mode 1: CRIU's page images), read and compressed by several
 * threads and sent in order (tree_pack.h, for tree.c alone). A whole
 * move sends a process's memory as one page image; one thread
 * compressing it at a time held the frozen phase to what zstd does on
 * one core, far below the link's speed.
 *
 * Each chunk is either a zstd frame (level 1) or raw, as before, so the
 * stream is unchanged. A chunk whose samples do not shrink by a tenth
 * (snap_worth_compressing, as for snapshot pieces) is sent raw without
 * compressing the rest: tensors and other random-looking data cost no
 * compression time. CICADA_PACK_THREADS sets
 * the threads per stream (default 4; 1 does it all on the sender's).
 *
 * The sender takes chunk i from slot i % SLOTS when a worker has filled
 * it; a worker takes the next chunk once its slot is free. The lowest
 * chunk not yet sent always has its slot, so the pipeline cannot jam.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include "criu_images.h"
#include "snapshot.h"
#include "tree_pack.h"

#define PACK_WORKERS_MAX 16

enum slot_state { SLOT_FREE, SLOT_BUSY, SLOT_READY, SLOT_FAILED };

struct slot {
	uint8_t *raw, *z;
	size_t n, zlen;
	int packed;
	enum slot_state state;
};

struct pack {
	int fd;
	uint64_t size, chunk, nchunks, next;      /* next: the next chunk a worker takes */
	unsigned nslots;
	struct slot *slots;
	size_t zcap;
	int stop;
	pthread_mutex_t lock;
	pthread_cond_t changed;
};

static unsigned pack_threads(void)
{
	const char *e = getenv("CICADA_PACK_THREADS");
	long n = e && *e ? strtol(e, NULL, 10) : 4;

	return n < 1 ? 1 : n > PACK_WORKERS_MAX ? PACK_WORKERS_MAX : (unsigned)n;
}

/* Compresses s->raw into s->z when that pays (samples decide first). */
static void pack_chunk(ZSTD_CCtx *c, struct slot *s, size_t zcap)
{
	size_t z;

	s->packed = 0;
	if (!snap_worth_compressing(c, s->z, zcap, s->raw, s->n, 1))
		return;
	z = ZSTD_compressCCtx(c, s->z, zcap, s->raw, s->n, 1);
	if (!ZSTD_isError(z) && z < s->n / 10 * 9) {
		s->zlen = z;
		s->packed = 1;
	}
}

/* Reads and packs chunk i into its slot (with the lock not held). */
static void fill(struct pack *p, ZSTD_CCtx *c, uint64_t i)
{
	struct slot *s = &p->slots[i % p->nslots];
	uint64_t off = i * p->chunk;

	s->n = p->size - off < p->chunk ? (size_t)(p->size - off) : p->chunk;
	if (snap_pread_full(p->fd, s->raw, s->n, off) != (ssize_t)s->n) {
		s->state = SLOT_FAILED;
		return;
	}
	pack_chunk(c, s, p->zcap);
}

static void *worker(void *arg)
{
	struct pack *p = arg;
	ZSTD_CCtx *c = ZSTD_createCCtx();
	uint64_t i;

	pthread_mutex_lock(&p->lock);
	while (c && !p->stop && p->next < p->nchunks) {
		i = p->next++;
		while (!p->stop && p->slots[i % p->nslots].state != SLOT_FREE)
			pthread_cond_wait(&p->changed, &p->lock);
		if (p->stop)
			break;
		p->slots[i % p->nslots].state = SLOT_BUSY;
		pthread_mutex_unlock(&p->lock);
		fill(p, c, i);
		pthread_mutex_lock(&p->lock);
		if (p->slots[i % p->nslots].state == SLOT_BUSY)
			p->slots[i % p->nslots].state = SLOT_READY;
		pthread_cond_broadcast(&p->changed);
	}
	if (!c) {
		p->stop = 1;                    /* the sender sees no chunk come */
		pthread_cond_broadcast(&p->changed);
	}
	pthread_mutex_unlock(&p->lock);
	ZSTD_freeCCtx(c);
	return NULL;
}

/* Sends chunk i once a worker has filled it: 0, -1 (the link failed:
 * put said why), or 1 (no chunk came: it could not be read or packed). */
static int send_chunk(struct pack *p, uint64_t i, const struct tree_pack_out *out)
{
	struct slot *s = &p->slots[i % p->nslots];
	uint8_t word[4];
	int rc;

	pthread_mutex_lock(&p->lock);
	while (s->state != SLOT_READY && s->state != SLOT_FAILED && !p->stop)
		pthread_cond_wait(&p->changed, &p->lock);
	rc = s->state == SLOT_READY ? 0 : 1;
	pthread_mutex_unlock(&p->lock);
	if (rc)
		return rc;
	snap_put_le(word, s->packed ? (uint32_t)s->zlen | TREE_ZCHUNK_FLAG : (uint32_t)s->n, 4);
	rc = out->put(out->ctx, word, 4) || out->put(out->ctx, s->packed ? s->z : s->raw, s->packed ? s->zlen : s->n)
	     ? -1 : 0;
	if (!rc && out->logical)
		*out->logical += s->n;
	pthread_mutex_lock(&p->lock);
	s->state = SLOT_FREE;
	pthread_cond_broadcast(&p->changed);
	pthread_mutex_unlock(&p->lock);
	return rc;
}

static int pack_init(struct pack *p, int fd, uint64_t size, size_t chunk, unsigned nslots)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->changed, NULL);
	p->fd = fd, p->size = size, p->chunk = chunk;
	p->nchunks = (size + chunk - 1) / chunk;
	p->nslots = nslots;
	p->zcap = ZSTD_compressBound(chunk);
	p->slots = calloc(nslots, sizeof(*p->slots));
	if (!p->slots)
		return -1;
	for (unsigned k = 0; k < nslots; k++)
		if (!(p->slots[k].raw = malloc(chunk)) || !(p->slots[k].z = malloc(p->zcap)))
			return -1;
	return 0;
}

static void pack_free(struct pack *p)
{
	for (unsigned k = 0; p->slots && k < p->nslots; k++) {
		free(p->slots[k].raw);
		free(p->slots[k].z);
	}
	free(p->slots);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->changed);
}

/* Runs the workers and sends every chunk: 0, or -1 with why in err. */
static int pack_run(struct pack *p, unsigned nworkers, const struct tree_pack_out *out, const char *name,
		    char *err)
{
	pthread_t tids[PACK_WORKERS_MAX];
	unsigned started = 0;
	int rc = 0;

	for (; started < nworkers; started++)
		if (pthread_create(&tids[started], NULL, worker, p))
			break;
	if (!started)
		rc = snap_fail(err, "%s: cannot start a thread to compress it", name);
	for (uint64_t i = 0; !rc && i < p->nchunks; i++)
		if ((rc = send_chunk(p, i, out)) > 0)
			rc = snap_fail(err, "%s: changed while sent, or out of memory to compress it", name);
	pthread_mutex_lock(&p->lock);
	p->stop = 1;
	pthread_cond_broadcast(&p->changed);
	pthread_mutex_unlock(&p->lock);
	for (unsigned k = 0; k < started; k++)
		pthread_join(tids[k], NULL);
	return rc;
}

int tree_pack_send(int fd, uint64_t size, size_t chunk, const struct tree_pack_out *out, const char *name,
		   char *err)
{
	unsigned nworkers = pack_threads();
	uint64_t nchunks = (size + chunk - 1) / chunk;
	struct pack p;
	int rc;

	if (nworkers > nchunks)
		nworkers = nchunks ? (unsigned)nchunks : 1;
	if (pack_init(&p, fd, size, chunk, 2 * nworkers)) {
		pack_free(&p);
		return snap_fail(err, "out of memory for the image stream");
	}
	rc = pack_run(&p, nworkers, out, name, err);
	pack_free(&p);
	return rc;
}

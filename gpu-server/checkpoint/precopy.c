/*
 * precopy.c: a migration's pre-copy rounds, run by the worker while its
 * application goes on. gpu-migrate asks through the application's control
 * socket; the client forwards the request (precopy, then precopy_status
 * until done). A thread writes the arena's chunks, as they are at the
 * round's start, as a snapshot of device memory only into gpu-migrate's
 * staging directory, incremental on the previous round: only the pieces
 * whose bytes changed are compressed and stored. It reads through its own
 * non-blocking streams, so the application's kernels are not held up; a
 * chunk freed meanwhile reads as zeros (the frozen, final checkpoint
 * stores whatever is there then). The directory comes as a descriptor
 * (gpu-migrate's, passed on by the client over its unix socket): the
 * worker writes nowhere a path names, and the parent must be the round
 * before, beside it.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "checkpoint.h"
#include "snapshot.h"

struct precopy {
	struct worker *w;
	pthread_t thread;
	int dirfd;
	char name[CICADA_NAME_MAX + 1], parent[CICADA_PARENT_MAX + 1];
	struct snap_range *ranges;
	size_t nranges;
	_Atomic int state;                   /* precopy_state */
	uint64_t pieces, unchanged, unread, stored;
	char err[WIRE_ERRLEN];
};

static __thread CUstream round_stream;     /* each writing thread's own */

static void *round_alloc(void *ctx, size_t size)
{
	struct worker *w = ctx;

	cuCtxSetCurrent(w->base_ctx);
	if (!round_stream && cuStreamCreate(&round_stream, CU_STREAM_NON_BLOCKING))
		return NULL;
	return worker_pinned(w, size);
}

static void round_free(void *ctx, void *buf, size_t size)
{
	worker_pinned_free(buf, size);
	if (round_stream)
		cuStreamDestroy(round_stream);
	round_stream = NULL;
}

static int round_read(void *ctx, uint64_t va, void *buf, size_t size)
{
	return devmem_read_live(ctx, va, buf, size, round_stream);
}

static int round_hash(void *ctx, const struct snap_range *ranges, size_t n, uint64_t *out)
{
	return devhash_ranges(ctx, ranges, n, out);
}

/* The arena's chunks go in the round's manifest too: a target that
 * preloads the rounds makes them before the restore (preload.c). */
static Cicada__Chunk *round_chunks(struct precopy *p, Cicada__Manifest *m)
{
	Cicada__Chunk *c = calloc(p->nranges + 1, sizeof(*c));

	if (!c || !(m->chunks = calloc(p->nranges + 1, sizeof(*m->chunks)))) {
		free(c);
		snprintf(p->err, sizeof(p->err), "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < p->nranges; i++) {
		cicada__chunk__init(&c[i]);
		c[i].va = p->ranges[i].va;
		c[i].size = p->ranges[i].size;
		m->chunks[i] = &c[i];
	}
	m->n_chunks = p->nranges;
	return c;
}

static void *round_thread(void *arg)
{
	struct precopy *p = arg;
	struct snap_memory_ops ops = { .ctx = p->w, .alloc_host = round_alloc, .free_host = round_free,
				       .read = round_read, .thread_start = hostarea_thread, .thread_join = hostarea_join,
				       .hash = round_hash };
	Cicada__Manifest m = CICADA__MANIFEST__INIT;
	Cicada__Chunk *chunks;
	struct snap_writer *wr;
	char why[WIRE_ERRLEN];
	int rc;

	cuCtxSetCurrent(p->w->base_ctx);
	if (!(wr = snap_writer_begin(p->dirfd, p->name, p->err)))
		goto out;
	if (p->parent[0] && snap_writer_parent(wr, p->parent, why))
		log_info("pre-copy round %s is written whole: %s", p->name, why);
	if (snap_write_memory(wr, p->ranges, p->nranges, &ops, p->err) || !(chunks = round_chunks(p, &m))) {
		snap_writer_abort(wr);
		goto out;
	}
	p->unchanged = snap_writer_skipped(wr);
	p->unread = snap_writer_unread(wr);
	rc = snap_writer_commit(wr, &m, p->err);
	free(m.chunks);
	free(chunks);
	if (rc)
		goto out;
	p->stored = m.data_size;
	for (size_t i = 0; i < p->nranges; i++)
		p->pieces += (p->ranges[i].size + SNAP_PIECE_SIZE - 1) / SNAP_PIECE_SIZE;
	p->state = PRECOPY_DONE;
	return NULL;
out:
	p->state = PRECOPY_FAILED;
	return NULL;
}

/* The round before, beside this one: "../../precopy-K/NAME". */
static int parent_ok(const char *parent, const char *name)
{
	unsigned k;
	int n = 0;

	return !parent[0] || (sscanf(parent, "../../precopy-%u/%n", &k, &n) == 1 && n > 0 && !strcmp(parent + n, name));
}

static const char *check_request(struct worker *w, const precopy_args *a, int *dirfd)
{
	struct ucred cred;
	struct stat st;

	if (peer_cred(w->sock, &cred))   /* a unix client, on this node, which passed the directory first */
		return "pre-copy needs a client on the server's node";
	*dirfd = wire_recv_fd_within(w->sock, CLIENT_FD_TIMEOUT_MS);
	if (*dirfd < 0 || fstat(*dirfd, &st) || !S_ISDIR(st.st_mode))
		return "no staging directory came with the request";
	if (w->ckpt->precopy && w->ckpt->precopy->state == PRECOPY_RUNNING)
		return "a pre-copy round is running already";
	if (!a->name[0] || strchr(a->name, '/') || a->name[0] == '.' || !parent_ok(a->parent, a->name))
		return "not a snapshot name, or not a parent beside it";
	return NULL;
}

static void precopy_reset(struct worker *w)
{
	struct precopy *p = w->ckpt->precopy;

	if (!p)
		return;
	if (p->state != PRECOPY_IDLE)
		hostarea_join(p->thread, NULL);
	if (p->dirfd >= 0)
		close(p->dirfd);
	free(p->ranges);
	memset(p, 0, sizeof(*p));
	p->dirfd = -1;
	p->w = w;
}

CUresult hand_precopy(struct worker *w, void *args, void *res)
{
	precopy_args *a = args;
	precopy_res *r = res;
	const char *why;
	struct precopy *p;
	int dirfd = -1;

	r->message = strdup("");
	if ((why = check_request(w, a, &dirfd))) {
		if (dirfd >= 0)
			close(dirfd);
		free(r->message);
		r->message = strdup(why);
		r->state = PRECOPY_FAILED;
		return r->message ? CUDA_ERROR_NOT_PERMITTED : CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (!w->ckpt->precopy && (w->ckpt->precopy = calloc(1, sizeof(*w->ckpt->precopy))))
		w->ckpt->precopy->dirfd = -1;
	if (!(p = w->ckpt->precopy) || !r->message) {
		close(dirfd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	precopy_reset(w);
	p->dirfd = dirfd;
	snprintf(p->name, sizeof(p->name), "%s", a->name);
	snprintf(p->parent, sizeof(p->parent), "%s", a->parent);
	p->nranges = devmem_count(w, 1);
	if (!(p->ranges = calloc(p->nranges + 1, sizeof(*p->ranges))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (unsigned i = 0; i < p->nranges; i++)
		devmem_get(w, 1, i, &p->ranges[i].va, &p->ranges[i].size);
	p->state = PRECOPY_RUNNING;
	if (hostarea_thread(&p->thread, round_thread, p)) {
		p->state = PRECOPY_IDLE;
		return CUDA_ERROR_OPERATING_SYSTEM;
	}
	r->state = PRECOPY_RUNNING;
	return CUDA_SUCCESS;
}

CUresult hand_precopy_status(struct worker *w, void *args, void *res)
{
	struct precopy *p = w->ckpt->precopy;
	precopy_res *r = res;

	r->state = p ? (precopy_state)p->state : PRECOPY_IDLE;
	r->message = strdup(r->state == PRECOPY_FAILED ? p->err : "");
	if (r->state == PRECOPY_DONE || r->state == PRECOPY_FAILED) {
		r->pieces = p->pieces;
		r->unchanged = p->unchanged;
		r->stored = p->stored;
		log_info("client %s: pre-copy round %s %s: %llu pieces, %llu unchanged (%llu unread), %llu bytes stored",
			 w->peer, p->name, r->state == PRECOPY_DONE ? "done" : "failed", (unsigned long long)p->pieces,
			 (unsigned long long)p->unchanged, (unsigned long long)p->unread, (unsigned long long)p->stored);
		precopy_reset(w);
	}
	return CUDA_SUCCESS;
}

/* The worker ends or pauses: a round still running is waited for. */
void precopy_end(struct worker *w)
{
	precopy_reset(w);
	free(w->ckpt->precopy);
	w->ckpt->precopy = NULL;
}

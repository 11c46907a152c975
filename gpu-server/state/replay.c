/*
 * replay.c: the worker's replay log. Calls marked 'record' in calls.tbl
 * are kept, with their XDR arguments, while what they created or changed
 * lives: destroying a handle drops its records, and those of the handles
 * made from it (a module's functions), so the log stays compact; but a
 * stream's creation leaves how many streams its context had alive then
 * (stream_peak), since the driver's area keeps the mark of the most; a
 * checkpoint adds, once, each timing event recorded (event_recorded). A
 * restoring worker replays the log in order; each call that created a
 * handle binds the same handle id again, so the client's handles stay
 * valid. Module globals the client looked up are tracked here too: their
 * memory is part of a snapshot.
 */
#include <stdlib.h>
#include <string.h>
#include "state.h"

struct record {
	struct record *next;
	uint64_t seq, handle, parent, ctx;
	uint64_t chunks;                     /* arena chunks mapped then */
	unsigned gpus;                       /* GPU contexts taken then (gpu_order) */
	unsigned streams;                    /* a stream's creation, or stream_peak: its context's streams alive */
	unsigned proc;
	size_t len;
	char args[];
};

#define STACKS_MAX 16

struct replay_log {
	struct record *head, **tail;
	uint64_t seq;
	struct replay_global *globals;
	unsigned nglobals, cap_globals;
	struct { uint64_t ctx; size_t bytes; } stacks[STACKS_MAX];   /* per-thread stack, per context */
	unsigned nstacks;
};

static struct replay_log *log_of(struct worker *w)
{
	if (!w->replay && (w->replay = calloc(1, sizeof(*w->replay))))
		w->replay->tail = &w->replay->head;
	return w->replay;
}

/* Encodes args with xargs into a new record. */
static struct record *record_new(xdrproc_t xargs, void *args)
{
	struct record *r;
	XDR x;
	unsigned len;

	len = (unsigned)xdr_sizeof(xargs, args);
	if (!(r = calloc(1, sizeof(*r) + len)))
		return NULL;
	xdrmem_create(&x, r->args, len, XDR_ENCODE);
	if (!xargs(&x, args)) {
		xdr_destroy(&x);
		free(r);
		return NULL;
	}
	r->len = xdr_getpos(&x);
	xdr_destroy(&x);
	return r;
}

static int stream_made(unsigned proc)
{
	return proc == P_cuStreamCreate || proc == P_cuStreamCreateWithPriority;
}

/* The client's streams alive in context ctx: their creations in the log
 * (a restore's replay counts the same ones). */
static unsigned live_streams(const struct replay_log *l, uint64_t ctx)
{
	unsigned n = 0;

	for (const struct record *r = l->head; r; r = r->next)
		n += stream_made(r->proc) && r->ctx == ctx;
	return n;
}

static void append(struct worker *w, struct replay_log *l, struct record *r, unsigned proc, uint64_t handle,
		   uint64_t parent)
{
	r->seq = ++l->seq;
	r->proc = proc;
	r->handle = handle;
	r->ctx = w->current_ctx;
	r->chunks = devmem_count(w, 1);
	r->gpus = w->ngpu_order;
	r->parent = parent ? parent : (handle_kind_of(w, r->handle) == H_CTX ? 0 : w->current_ctx);
	*l->tail = r;
	l->tail = &r->next;
	if (stream_made(proc))
		r->streams = live_streams(l, r->ctx);
	log_debug("kept %s as record %llu (context %llu)", worker_proc(proc) ? worker_proc(proc)->name : "?",
		  (unsigned long long)r->seq, (unsigned long long)r->ctx);
}

/* Keeps a record the worker makes itself (of scalars v[0..n-1]), as if
 * made in context ctx (out of memory: checkpoints will fail). */
static int append_scalars(struct worker *w, struct replay_log *l, unsigned proc, uint64_t ctx, uint64_t parent,
			  uint64_t *v, unsigned n)
{
	scalars a = { { n, v } };
	uint64_t cur = w->current_ctx;
	struct record *r;

	if (!(r = record_new((xdrproc_t)xdr_scalars, &a))) {
		w->replay_broken = 1;
		return -1;
	}
	w->current_ctx = ctx;
	append(w, l, r, proc, 0, parent);
	w->current_ctx = cur;
	return 0;
}

/* The driver grows a context's per-thread stack, and with it the local
 * memory it allocates, when a kernel that needs more is launched; where
 * the next module's variables land depends on it, in that context and in
 * the others, which share the driver's area. So a growth seen since the
 * last record, in any context the client holds (a kernel may have grown
 * one that is not current), is kept as the cuCtxSetLimit a restore
 * replays, in that context, before this record. The contexts are those
 * records made (up to STACKS_MAX), each followed from what its stack was
 * when made; the context skip (the one a program's own cuCtxSetLimit just
 * set) only starts again from what it has now. */
static int stack_of(struct worker *w, uint64_t ctx, size_t *now)
{
	return handle_kind_of(w, ctx) != H_CTX || cuCtxSetCurrent(w->handles[ctx - HANDLE_BASE].real) ||
	       cuCtxGetLimit(now, CU_LIMIT_STACK_SIZE) ? -1 : 0;
}

static void follow_stack(struct worker *w, struct replay_log *l, uint64_t ctx)
{
	CUcontext cur = NULL;
	size_t now;
	unsigned i;

	for (i = 0; i < l->nstacks && l->stacks[i].ctx != ctx; i++)
		;                            /* (a context gone may have left its id) */
	if (i == STACKS_MAX || cuCtxGetCurrent(&cur))
		return;
	if (!stack_of(w, ctx, &now)) {
		l->stacks[i] = (typeof(l->stacks[0])){ ctx, now };
		l->nstacks += i == l->nstacks;
	}
	cuCtxSetCurrent(cur);
}

static void keep_growth(struct worker *w, struct replay_log *l, uint64_t ctx, size_t now)
{
	uint64_t v[2] = { CU_LIMIT_STACK_SIZE, now };

	if (append_scalars(w, l, P_cuCtxSetLimit, ctx, ctx, v, 2))
		return;
	log_debug("client %s: the stack of context %llu grew to %zu bytes a thread; kept for a restore", w->peer,
		  (unsigned long long)ctx, now);
}

static void note_stack(struct worker *w, struct replay_log *l, uint64_t skip)
{
	CUcontext cur = NULL;
	size_t now;

	if (!l->nstacks || cuCtxGetCurrent(&cur))
		return;
	for (unsigned i = 0; i < l->nstacks;) {
		if (handle_kind_of(w, l->stacks[i].ctx) != H_CTX) {
			l->stacks[i] = l->stacks[--l->nstacks];   /* gone: its slot serves another */
			continue;
		}
		if (!stack_of(w, l->stacks[i].ctx, &now) && now != l->stacks[i].bytes) {
			l->stacks[i].bytes = now;
			if (l->stacks[i].ctx != skip)
				keep_growth(w, l, l->stacks[i].ctx, now);
		}
		i++;
	}
	cuCtxSetCurrent(cur);
}

/* Keeps a successful call. The parent is the handle it derives from (its
 * first handle argument), else the context it was made in. */
void replay_note(struct worker *w, const struct proc_desc *d, void *args, uint64_t parent)
{
	struct replay_log *l = log_of(w);
	struct record *r;

	if ((d->flags & PROC_CREATES) && !w->created)
		return;                      /* an existing handle came back */
	if (l)
		note_stack(w, l, d->proc == P_cuCtxSetLimit ? w->current_ctx : 0);
	if (!l || !(r = record_new(d->xargs, args))) {
		log_error("cannot record %s: out of memory; checkpoints will fail", d->name);
		w->replay_broken = 1;
		return;
	}
	append(w, l, r, d->proc, (d->flags & PROC_CREATES) ? w->created : 0, parent);
	if (handle_kind_of(w, r->handle) == H_CTX)
		follow_stack(w, l, r->handle);
	if (d->proc == P_stream_peak)
		r->streams = (unsigned)((scalars *)args)->v.v_val[0];
}

void replay_note_global(struct worker *w, uint64_t parent, uint64_t va, uint64_t size)
{
	struct replay_log *l = log_of(w);
	struct replay_global *g;

	if (!l)
		return;
	for (unsigned i = 0; i < l->nglobals; i++)
		if (l->globals[i].va == va)
			return;
	if (l->nglobals == l->cap_globals) {
		unsigned cap = l->cap_globals ? 2 * l->cap_globals : 32;
		if (!(g = realloc(l->globals, cap * sizeof(*g))))
			return;
		l->globals = g;
		l->cap_globals = cap;
	}
	l->globals[l->nglobals++] = (struct replay_global){ va, size, parent };
}

/* What a destroyed stream's creation r leaves in its place: how many
 * streams its context had alive then (NULL: out of memory; prune_peaks
 * drops it if another mark covers it). */
static struct record *peak_of(const struct record *r)
{
	uint64_t n = r->streams < STREAM_PEAK_MAX ? r->streams : STREAM_PEAK_MAX;
	scalars a = { { 1, &n } };
	struct record *q;

	if (!(q = record_new((xdrproc_t)xdr_scalars, &a)))
		return NULL;
	*q = (struct record){ .seq = r->seq, .ctx = r->ctx, .parent = r->ctx, .chunks = r->chunks, .gpus = r->gpus,
			      .streams = (unsigned)n, .proc = P_stream_peak, .len = q->len };
	return q;
}

/* Whether mark r is covered: by a mark as high before it in its context,
 * or by one right after it, with nothing between. */
static int peak_covered(const struct replay_log *l, const struct record *r)
{
	const struct record *q = r->next;

	if (q && q->proc == P_stream_peak && q->ctx == r->ctx && q->streams >= r->streams)
		return 1;
	for (q = l->head; q != r; q = q->next)
		if (q->proc == P_stream_peak && q->ctx == r->ctx && q->streams >= r->streams)
			return 1;
	return 0;
}

static void prune_peaks(struct replay_log *l)
{
	struct record **p, *r;

	for (p = &l->head; (r = *p);) {
		if (r->proc == P_stream_peak && peak_covered(l, r)) {
			*p = r->next;
			free(r);
		} else {
			p = &r->next;
		}
	}
}

/* Forgets everything made from handle id, recursively (and a context's
 * loads of library kernels: handles.c). */
void replay_drop(struct worker *w, uint64_t id)
{
	struct replay_log *l = w->replay;
	struct record **p, *r, *peak;
	uint64_t child;
	int peaks = 0;

	if (!l || !id)
		return;
	for (unsigned i = 0; i < l->nglobals;)
		if (l->globals[i].parent == id)
			l->globals[i] = l->globals[--l->nglobals];
		else
			i++;
	for (p = &l->head; (r = *p);) {
		if (r->handle != id && r->parent != id && !(r->proc == P_func_load && r->ctx == id)) {
			p = &r->next;
			continue;
		}
		peak = r->handle == id && stream_made(r->proc) ? peak_of(r) : NULL;
		*p = r->next;
		child = r->handle != id ? r->handle : 0;
		if (peak) {                  /* in the creation's place */
			peak->next = r->next;
			*p = peak;
			p = &peak->next;
			peaks = 1;
		}
		free(r);
		if (child) {
			handle_forget(w, child);
			replay_drop(w, child);
			p = &l->head;                /* the list changed under us */
		}
	}
	if (peaks)
		prune_peaks(l);
	l->tail = &l->head;
	for (r = l->head; r; r = r->next)
		l->tail = &r->next;
	if (w->current_ctx == id)
		w->current_ctx = 0;
}

/* The seq of the last record made (0: none yet). */
uint64_t replay_seq(const struct worker *w)
{
	return w->replay ? w->replay->seq : 0;
}

/* --- snapshot support: the live log and globals --- */

unsigned replay_count(const struct worker *w)
{
	unsigned n = 0;

	for (const struct record *r = w->replay ? w->replay->head : NULL; r; r = r->next)
		n++;
	return n;
}

/* Calls fn for each live record, oldest first. */
int replay_each(const struct worker *w, replay_fn fn, void *ctx)
{
	for (const struct record *r = w->replay ? w->replay->head : NULL; r; r = r->next) {
		struct replay_entry e = { r->seq, r->proc, r->handle, r->parent, r->ctx, r->chunks, r->gpus, r->args, r->len };
		if (fn(ctx, &e))
			return -1;
	}
	return 0;
}

/* The module variables tracked, n of them. */
const struct replay_global *replay_globals(const struct worker *w, unsigned *n)
{
	*n = w->replay ? w->replay->nglobals : 0;
	return w->replay ? w->replay->globals : NULL;
}

/* A restore's replay of the mark a destroyed stream left (peak_of): as
 * many streams as its context had alive then are alive at once again,
 * beside the ones the replay made, and are destroyed. */
CUresult hand_stream_peak(struct worker *w, void *args, void *res)
{
	CUstream s[STREAM_PEAK_MAX];
	scalars *a = args;
	unsigned want, n = 0, have;
	CUresult err = CUDA_SUCCESS;

	if (a->v.v_len != 1 || a->v.v_val[0] > STREAM_PEAK_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	want = (unsigned)a->v.v_val[0];
	have = w->replay ? live_streams(w->replay, w->current_ctx) : 0;
	while (have + n < want && !(err = cuStreamCreate(&s[n], CU_STREAM_NON_BLOCKING)))
		n++;
	while (n)
		cuStreamDestroy(s[--n]);
	return err;
}

/* A timing event recorded before a checkpoint must come back recorded:
 * cuEventElapsedTime on one never recorded fails with
 * CUDA_ERROR_INVALID_HANDLE, and PyTorch's DDP reads its timing events a
 * step after it recorded them. So at a checkpoint each event that the
 * log made and that measures (its elapsed time to itself reads) is kept,
 * once, as an event_recorded record in its context, which a restore
 * replays by recording it there again. */
static void keep_recorded(struct worker *w, struct replay_log *l, const struct record *made)
{
	uint64_t id = made->handle;

	if (!append_scalars(w, l, P_event_recorded, made->ctx, id, &id, 1))
		w->handles[id - HANDLE_BASE].loaded = 1;
}

void replay_note_events(struct worker *w)
{
	struct replay_log *l = w->replay;
	CUcontext was = NULL, ctx;
	struct handle_entry *e;
	float ms;

	if (!l || cuCtxGetCurrent(&was))
		return;
	for (struct record *r = l->head; r; r = r->next) {
		if (handle_kind_of(w, r->handle) != H_EVENT || (e = &w->handles[r->handle - HANDLE_BASE])->loaded)
			continue;
		if (r->ctx && !handle_get(w, H_CTX, r->ctx, (void **)&ctx))
			cuCtxSetCurrent(ctx);
		if (!cuEventElapsedTime(&ms, (CUevent)e->real, (CUevent)e->real))
			keep_recorded(w, l, r);
	}
	cuCtxSetCurrent(was);
}

/* A restore's replay of event_recorded: the event is recorded in its
 * context (current: the record's), and has completed. */
CUresult hand_event_recorded(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	CUevent ev;
	CUresult err;

	if (a->v.v_len != 1)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = handle_get(w, H_EVENT, a->v.v_val[0], (void **)&ev)) || (err = cuEventRecord(ev, NULL)) ||
	    (err = cuEventSynchronize(ev)))
		return err;
	w->handles[a->v.v_val[0] - HANDLE_BASE].loaded = 1;
	return CUDA_SUCCESS;
}

/* A function's first use in a context, as the log keeps it (its parent:
 * the function); handles.c calls it (handles_on_load). */
void replay_note_load(struct worker *w, uint64_t id)
{
	const struct proc_desc *d = worker_proc(P_func_load);
	scalars a = { { 1, &id } };

	if (d)
		replay_note(w, d, &a, id);
}

/* Lets an id go, from the handle table and the log. */
void handle_drop(struct worker *w, enum handle_kind kind, uint64_t id)
{
	handle_forget(w, id);
	replay_drop(w, id);
}

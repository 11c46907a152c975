/*
 * test_replay.c: unit tests of the replay log's compaction
 * (gpu-server/state/replay.c). Calls are noted as dispatch.c's after_call notes
 * them (the parent: a scalar call's first handle argument, else the one
 * a hand call names, else the current context) and handles dropped as
 * handle_drop drops them; the log, as a snapshot writes it (replay_each),
 * must keep what a restore needs and nothing made from what is gone.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "gpu-server.h"

#define P(n) ((void *)(uintptr_t)(0x7000 + (n)))   /* stand-ins for driver handles */
#define MAXREC 64

struct rec {
	unsigned proc;
	uint64_t seq, handle, parent, ctx, v[4];      /* v: a scalar record's arguments */
	unsigned nv;
};
struct log { struct rec r[MAXREC]; unsigned n; };

static int collect(void *ctx, const struct replay_entry *e)
{
	struct log *l = ctx;
	struct rec *r = &l->r[l->n++];
	uint64_t buf[8];
	scalars a = { { 0, buf } };
	XDR x;

	*r = (struct rec){ e->proc, e->seq, e->handle, e->parent, e->ctx, { 0 }, 0 };
	xdrmem_create(&x, (char *)e->args, (unsigned)e->len, XDR_DECODE);
	a.v.v_val = NULL;
	if (worker_proc(e->proc)->xargs == (xdrproc_t)xdr_scalars && xdr_scalars(&x, &a)) {
		r->nv = a.v.v_len < 4 ? a.v.v_len : 4;
		memcpy(r->v, a.v.v_val, r->nv * sizeof(uint64_t));
		xdr_free((xdrproc_t)xdr_scalars, (char *)&a);
	}
	xdr_destroy(&x);
	return l->n == MAXREC;
}

static struct log *snapshot(struct worker *w)
{
	static struct log l;

	l.n = 0;
	assert_int_equal(replay_each(w, collect, &l), 0);
	assert_int_equal(l.n, replay_count(w));
	for (unsigned i = 1; i < l.n; i++)
		assert_true(l.r[i].seq > l.r[i - 1].seq);        /* oldest first */
	return &l;
}

/* A scalar call with arguments v (n of them), as after_call notes it;
 * kind: what it creates (H_FREE: nothing), real its driver handle. */
static uint64_t note(struct worker *w, unsigned proc, enum handle_kind kind, void *real, const uint64_t *v, unsigned n)
{
	const struct proc_desc *d = worker_proc(proc);
	scalars a = { { n, (uint64_t *)v } };

	assert_non_null(d);
	assert_true(d->flags & PROC_RECORD);
	w->created = kind != H_FREE ? handle_put(w, kind, real) : 0;
	replay_note(w, d, &a, d->scalar && d->parent_arg >= 0 ? v[d->parent_arg] : 0);
	return w->created;
}

/* A hand call naming a parent (module_get_function and the like). */
static uint64_t note_hand(struct worker *w, unsigned proc, void *args, enum handle_kind kind, void *real,
			  uint64_t parent)
{
	w->created = kind != H_FREE ? handle_put(w, kind, real) : 0;
	replay_note(w, worker_proc(proc), args, parent);
	return w->created;
}

static uint64_t module(struct worker *w, int n)
{
	module_load_args a;

	memset(&a, 0, sizeof(a));
	a.hash.lo = (unsigned)n;
	return note_hand(w, P_module_load, &a, H_MODULE, P(100 + n), 0);
}

static uint64_t function(struct worker *w, uint64_t mod, int n)
{
	handle_name_args a = { mod, (char *)"kernel" };

	return note_hand(w, P_module_get_function, &a, H_FUNCTION, P(200 + n), mod);
}

static int count_proc(const struct log *l, unsigned proc)
{
	int n = 0;

	for (unsigned i = 0; i < l->n; i++)
		n += l->r[i].proc == proc;
	return n;
}

static int setup(void **state)
{
	struct worker *w = calloc(1, sizeof(*w));

	if (!w)
		return -1;
	w->current_ctx = handle_put(w, H_CTX, P(1));      /* made before the log began */
	*state = w;
	return 0;
}

static int teardown(void **state)
{
	struct worker *w = *state;

	for (int i = 0; i < 100 && replay_count(w); i++) {   /* frees what is left */
		struct log *l = snapshot(w);
		replay_drop(w, l->r[0].handle ? l->r[0].handle : l->r[0].parent);
	}
	free(w->replay);
	free(w->handles);
	free(w);
	return 0;
}

static void created_then_destroyed_leaves_nothing(void **state)
{
	struct worker *w = *state;
	uint64_t flags = 0, ctx = w->current_ctx;
	uint64_t e = note(w, P_cuEventCreate, H_EVENT, P(10), &flags, 1);
	struct log *l = snapshot(w);

	assert_int_equal(l->n, 1);
	assert_int_equal(l->r[0].proc, P_cuEventCreate);
	assert_int_equal(l->r[0].handle, e);
	assert_int_equal(l->r[0].parent, ctx);
	assert_int_equal(l->r[0].ctx, ctx);
	handle_drop(w, H_EVENT, e);
	assert_int_equal(replay_count(w), 0);
	assert_int_equal(handle_kind_of(w, e), H_FREE);
	assert_int_equal(handle_kind_of(w, ctx), H_CTX);    /* its parent lives */
	assert_int_equal(replay_seq(w), 1);
}

/* A creating call that gave back an existing handle adds nothing. */
static void existing_handle_not_kept(void **state)
{
	struct worker *w = *state;
	uint64_t flags = 0;

	w->created = 0;
	replay_note(w, worker_proc(P_cuEventCreate), &(scalars){ { 1, &flags } }, 0);
	assert_int_equal(replay_count(w), 0);
}

static void children_of_dropped_parent_go(void **state)
{
	struct worker *w = *state;
	uint64_t flags = 0, e = note(w, P_cuEventCreate, H_EVENT, P(10), &flags, 1);
	uint64_t m = module(w, 1), other = module(w, 2), f = function(w, m, 1), g = function(w, other, 2);
	uint64_t set[3] = { f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024 };
	handle_name_args glob = { m, (char *)"var" };
	unsigned n;
	struct log *l;

	note(w, P_cuFuncSetAttribute, H_FREE, NULL, set, 3);
	note_hand(w, P_module_get_global, &glob, H_FREE, NULL, m);
	replay_note_global(w, m, 0x1000, 64);
	replay_note_global(w, m, 0x1000, 64);              /* once */
	replay_note_global(w, other, 0x2000, 8);
	replay_globals(w, &n);
	assert_int_equal(n, 2);
	assert_int_equal(replay_count(w), 7);

	handle_drop(w, H_MODULE, m);
	l = snapshot(w);
	assert_int_equal(l->n, 3);                         /* the event, the other module and its function */
	assert_int_equal(l->r[0].handle, e);
	assert_int_equal(l->r[1].handle, other);
	assert_int_equal(l->r[2].handle, g);
	assert_int_equal(handle_kind_of(w, f), H_FREE);     /* the child handle went too */
	assert_int_equal(handle_kind_of(w, g), H_FUNCTION);
	assert_int_equal(replay_globals(w, &n)[0].parent, other);
	assert_int_equal(n, 1);
	/* the grandchild's records (its attribute) went with it */
	assert_int_equal(count_proc(l, P_cuFuncSetAttribute), 0);
}

/* Attribute sets are replayed in order: the log's last one for an
 * attribute is the value set last (a restore ends where the program was);
 * they go with their function. */
static void repeated_sets_keep_the_last(void **state)
{
	struct worker *w = *state;
	uint64_t f = function(w, module(w, 1), 1);
	const uint64_t attr = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, other = CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT;
	uint64_t last = 0;
	struct log *l;

	note(w, P_cuFuncSetAttribute, H_FREE, NULL, (uint64_t[]){ f, attr, 1024 }, 3);
	note(w, P_cuFuncSetAttribute, H_FREE, NULL, (uint64_t[]){ f, other, 50 }, 3);
	note(w, P_cuFuncSetAttribute, H_FREE, NULL, (uint64_t[]){ f, attr, 4096 }, 3);
	l = snapshot(w);
	for (unsigned i = 0; i < l->n; i++)
		if (l->r[i].proc == P_cuFuncSetAttribute && l->r[i].v[1] == attr) {
			assert_int_equal(l->r[i].parent, f);
			last = l->r[i].v[2];
		}
	assert_int_equal(last, 4096);
	assert_int_equal(count_proc(l, P_cuFuncSetAttribute), 3);
	handle_drop(w, H_FUNCTION, f);
	l = snapshot(w);
	assert_int_equal(l->n, 1);                          /* the module alone */
	assert_int_equal(l->r[0].proc, P_module_load);
}

/* A context dropped takes what was made in it and the loads of functions
 * noted in it (func_load), not what lives in another context. */
static void context_drop(void **state)
{
	struct worker *w = *state;
	uint64_t c1 = w->current_ctx, c2 = handle_put(w, H_CTX, P(2)), flags = 0, config = 1;
	uint64_t e1 = note(w, P_cuEventCreate, H_EVENT, P(10), &flags, 1);
	uint64_t f = function(w, module(w, 1), 1), e2;
	struct log *l;

	w->current_ctx = c2;
	e2 = note(w, P_cuEventCreate, H_EVENT, P(11), &flags, 1);
	note(w, P_cuCtxSetCacheConfig, H_FREE, NULL, &config, 1);
	replay_note(w, worker_proc(P_func_load), &(scalars){ { 1, &f } }, f);
	l = snapshot(w);
	assert_int_equal(l->n, 6);
	assert_int_equal(l->r[5].ctx, c2);
	handle_drop(w, H_CTX, c2);
	l = snapshot(w);
	assert_int_equal(l->n, 3);
	assert_int_equal(l->r[0].handle, e1);
	assert_int_equal(l->r[2].handle, f);
	assert_int_equal(count_proc(l, P_func_load), 0);
	assert_int_equal(count_proc(l, P_cuCtxSetCacheConfig), 0);
	assert_int_equal(handle_kind_of(w, e2), H_FREE);
	assert_int_equal(handle_kind_of(w, e1), H_EVENT);
	assert_int_equal(w->current_ctx, 0);                /* the current one went */
	(void)c1;
}

/* A destroyed stream leaves the most streams its context had alive (the
 * driver's area keeps that mark); a mark another covers goes. */
static void streams_leave_their_peak(void **state)
{
	struct worker *w = *state;
	uint64_t flags = 0, s1 = note(w, P_cuStreamCreate, H_STREAM, P(20), &flags, 1);
	uint64_t s2 = note(w, P_cuStreamCreate, H_STREAM, P(21), &flags, 1);
	struct log *l;

	handle_drop(w, H_STREAM, s1);
	l = snapshot(w);
	assert_int_equal(l->n, 2);
	assert_int_equal(l->r[0].proc, P_stream_peak);
	assert_int_equal(l->r[0].v[0], 1);
	assert_int_equal(l->r[1].handle, s2);
	handle_drop(w, H_STREAM, s2);
	l = snapshot(w);
	assert_int_equal(l->n, 1);                          /* the mark of 1 is covered by 2 */
	assert_int_equal(l->r[0].proc, P_stream_peak);
	assert_int_equal(l->r[0].v[0], 2);
	assert_int_equal(l->r[0].parent, w->current_ctx);
	/* one more stream, made and gone, adds no mark: 2 covers it */
	handle_drop(w, H_STREAM, note(w, P_cuStreamCreate, H_STREAM, P(22), &flags, 1));
	l = snapshot(w);
	assert_int_equal(l->n, 1);
	assert_int_equal(l->r[0].v[0], 2);
}

/* Ids that name nothing, and 0, drop nothing. */
static void drop_nothing(void **state)
{
	struct worker *w = *state;
	uint64_t flags = 0, ids[] = { 0, 1, 2, HANDLE_BASE + 999, UINT64_MAX };

	note(w, P_cuEventCreate, H_EVENT, P(10), &flags, 1);
	function(w, module(w, 1), 1);
	for (unsigned i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		replay_drop(w, ids[i]);
	assert_int_equal(replay_count(w), 3);
	assert_int_equal(replay_seq(w), 3);
}

/* After drops the log still appends at its end (its tail was mended). */
static void append_after_drop(void **state)
{
	struct worker *w = *state;
	uint64_t flags = 0, a = note(w, P_cuEventCreate, H_EVENT, P(10), &flags, 1);
	uint64_t b = note(w, P_cuEventCreate, H_EVENT, P(11), &flags, 1), c;
	struct log *l;

	handle_drop(w, H_EVENT, b);
	c = note(w, P_cuEventCreate, H_EVENT, P(12), &flags, 1);
	l = snapshot(w);
	assert_int_equal(l->n, 2);
	assert_int_equal(l->r[0].handle, a);
	assert_int_equal(l->r[1].handle, c);
	assert_int_equal(l->r[1].seq, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(created_then_destroyed_leaves_nothing), T(existing_handle_not_kept), T(children_of_dropped_parent_go),
		T(repeated_sets_keep_the_last), T(context_drop), T(streams_leave_their_peak), T(drop_nothing),
		T(append_after_drop),
	};

	worker_index_procs();
	return cmocka_run_group_tests_name("replay", tests, NULL, NULL);
}

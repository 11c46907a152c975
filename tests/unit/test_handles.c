/*
 * test_handles.c: unit tests of the worker's handle table
 * (gpu-server/state/handles.c): ids given, kinds checked, the special ids (0,
 * the default streams), forget and reuse, find and set, and hostile ids
 * (out of range, wrapped, freed, a restore naming a huge id) refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <cmocka.h>
#include "gpu-server.h"

#define P(n) ((void *)(uintptr_t)(0x5000 + (n)))   /* stand-ins for driver handles */

static int setup(void **state)
{
	struct worker *w = calloc(1, sizeof(*w));

	*state = w;
	return w ? 0 : -1;
}

static int teardown(void **state)
{
	struct worker *w = *state;

	free(w->handles);
	free(w);
	return 0;
}

static void put_get_kinds(void **state)
{
	struct worker *w = *state;
	uint64_t s = handle_put(w, H_STREAM, P(1)), e = handle_put(w, H_EVENT, P(2));
	void *real = NULL;

	assert_int_equal(s, HANDLE_BASE);
	assert_int_equal(e, HANDLE_BASE + 1);
	assert_int_equal(w->created, e);
	assert_int_equal(handle_get(w, H_STREAM, s, &real), CUDA_SUCCESS);
	assert_ptr_equal(real, P(1));
	assert_int_equal(handle_get(w, H_EVENT, e, &real), CUDA_SUCCESS);
	assert_ptr_equal(real, P(2));
	/* the wrong kind is refused, and leaves *real alone */
	real = P(99);
	assert_int_equal(handle_get(w, H_EVENT, s, &real), CUDA_ERROR_INVALID_HANDLE);
	assert_int_equal(handle_get(w, H_MODULE, e, &real), CUDA_ERROR_INVALID_HANDLE);
	assert_ptr_equal(real, P(99));
	assert_int_equal(handle_kind_of(w, s), H_STREAM);
	assert_int_equal(handle_kind_of(w, e), H_EVENT);
}

static void put_same_real_returns_same_id(void **state)
{
	struct worker *w = *state;
	uint64_t a = handle_put(w, H_CTX, P(1));

	assert_int_equal(handle_put(w, H_CTX, P(1)), a);         /* primary contexts repeat */
	assert_int_not_equal(handle_put(w, H_STREAM, P(1)), a);  /* the same pointer as another kind */
	assert_int_equal(w->nhandles, 2);
}

/* A function asked for may be a library kernel; a kernel may not be asked
 * for as a function's other kinds, nor a function as a kernel. */
static void function_accepts_kernel(void **state)
{
	struct worker *w = *state;
	uint64_t k = handle_put(w, H_KERNEL, P(1)), f = handle_put(w, H_FUNCTION, P(2));
	void *real = NULL;

	w->handles[f - HANDLE_BASE].loaded = 1;     /* loaded already: no driver call */
	assert_int_equal(handle_get(w, H_FUNCTION, f, &real), CUDA_SUCCESS);
	assert_ptr_equal(real, P(2));
	assert_int_equal(handle_get(w, H_KERNEL, f, &real), CUDA_ERROR_INVALID_HANDLE);
	assert_int_equal(handle_get(w, H_KERNEL, k, &real), CUDA_SUCCESS);
	assert_ptr_equal(real, P(1));
	w->handles[k - HANDLE_BASE].loaded = w->current_ctx + 1;   /* loaded in this context */
	real = NULL;
	assert_int_equal(handle_get(w, H_FUNCTION, k, &real), CUDA_SUCCESS);
	assert_ptr_equal(real, P(1));
	assert_int_equal(handle_get(w, H_STREAM, k, &real), CUDA_ERROR_INVALID_HANDLE);
}

static void special_ids(void **state)
{
	struct worker *w = *state;
	void *real = P(99);

	handle_put(w, H_STREAM, P(1));
	for (uint64_t id = 0; id <= 2; id++) {       /* NULL, legacy, per-thread streams */
		assert_int_equal(handle_get(w, H_STREAM, id, &real), CUDA_SUCCESS);
		assert_ptr_equal(real, (void *)(uintptr_t)id);
	}
	/* 0 is "none" for every kind; 1 and 2 are streams only */
	assert_int_equal(handle_get(w, H_CTX, 0, &real), CUDA_SUCCESS);
	assert_null(real);
	assert_int_equal(handle_get(w, H_EVENT, 1, &real), CUDA_ERROR_INVALID_HANDLE);
	assert_int_equal(handle_get(w, H_CTX, 2, &real), CUDA_ERROR_INVALID_HANDLE);
	assert_int_equal(handle_get(w, H_STREAM, 3, &real), CUDA_ERROR_INVALID_HANDLE);
	assert_int_equal(handle_kind_of(w, 0), H_FREE);
	assert_int_equal(handle_kind_of(w, 1), H_FREE);
}

static const uint64_t hostile[] = {
	3, HANDLE_BASE - 1, HANDLE_BASE + 3, HANDLE_BASE + 256, UINT32_MAX, UINT32_MAX + (uint64_t)HANDLE_BASE,
	(1ull << 32) + HANDLE_BASE, (1ull << 63) + HANDLE_BASE, UINT64_MAX, UINT64_MAX - HANDLE_BASE,
	(uint64_t)-1 - 2,
};

static void hostile_ids_refused(void **state)
{
	struct worker *w = *state;
	void *real;

	for (int i = 0; i < 3; i++)
		handle_put(w, H_STREAM, P(i));
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		uint64_t id = hostile[i];

		real = P(99);
		assert_int_equal(handle_get(w, H_STREAM, id, &real), CUDA_ERROR_INVALID_HANDLE);
		assert_ptr_equal(real, P(99));
		assert_int_equal(handle_kind_of(w, id), H_FREE);
		handle_set(w, id, P(77));                /* ignored */
		handle_forget(w, id);                    /* ignored */
		handle_drop(w, H_STREAM, id);
	}
	assert_int_equal(w->nhandles, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(handle_get(w, H_STREAM, HANDLE_BASE + i, &real), CUDA_SUCCESS);
		assert_ptr_equal(real, P(i));
	}
}

/* The table's memory past its last entry (capacity not yet used, stale)
 * is never read as an entry, whatever it holds. */
static void past_the_end_refused(void **state)
{
	struct worker *w = *state;
	uint64_t v[1] = { HANDLE_BASE + 3 };
	scalars a = { { 1, v } };
	void *real = NULL;

	w->handles = calloc(8, sizeof(*w->handles));
	assert_non_null(w->handles);
	for (int i = 0; i < 8; i++)
		w->handles[i] = (struct handle_entry){ .kind = i < 3 ? H_STREAM : H_FUNCTION, .loaded = 1, .real = P(i) };
	w->cap_handles = 8;
	w->nhandles = 3;
	handles_on_forget(w, NULL);
	assert_int_equal(handle_get(w, H_FUNCTION, HANDLE_BASE + 3, &real), CUDA_ERROR_INVALID_HANDLE);
	assert_null(real);
	assert_int_equal(handle_kind_of(w, HANDLE_BASE + 3), H_FREE);
	assert_int_equal(hand_func_load(w, &a, NULL), CUDA_ERROR_INVALID_HANDLE);
	handle_set(w, HANDLE_BASE + 3, P(77));
	assert_ptr_equal(w->handles[3].real, P(3));
	assert_int_equal(handle_find(w, H_FUNCTION, P(3)), 0);
	assert_int_equal(handle_get(w, H_STREAM, HANDLE_BASE + 2, &real), CUDA_SUCCESS);
	/* a new handle takes the next slot, made afresh */
	assert_int_equal(handle_put(w, H_EVENT, P(3)), HANDLE_BASE + 3);
	assert_int_equal(handle_kind_of(w, HANDLE_BASE + 3), H_EVENT);
}

static void forget_and_reuse(void **state)
{
	struct worker *w = *state;
	uint64_t a = handle_put(w, H_EVENT, P(1)), b = handle_put(w, H_EVENT, P(2));
	void *real = NULL;

	handle_forget(w, a);
	assert_int_equal(handle_kind_of(w, a), H_FREE);
	assert_int_equal(handle_get(w, H_EVENT, a, &real), CUDA_ERROR_INVALID_HANDLE);
	assert_int_equal(handle_find(w, H_EVENT, P(1)), 0);
	handle_forget(w, a);                         /* twice: harmless */
	/* the freed slot serves the next one; the other is untouched */
	assert_int_equal(handle_put(w, H_STREAM, P(3)), a);
	assert_int_equal(handle_get(w, H_EVENT, a, &real), CUDA_ERROR_INVALID_HANDLE);
	assert_int_equal(handle_get(w, H_STREAM, a, &real), CUDA_SUCCESS);
	assert_ptr_equal(real, P(3));
	assert_int_equal(handle_get(w, H_EVENT, b, &real), CUDA_SUCCESS);
	assert_ptr_equal(real, P(2));
	assert_int_equal(w->nhandles, 2);
}

static uint64_t forgotten;
static enum handle_kind forgotten_kind;
static void on_forget(struct worker *w, enum handle_kind kind, uint64_t id)
{
	forgotten = id;
	forgotten_kind = kind;
}

static void forget_hook(void **state)
{
	struct worker *w = *state;
	uint64_t a = handle_put(w, H_EVENT, P(1));

	handles_on_forget(w, on_forget);
	forgotten = 0;
	handle_forget(w, a);
	assert_int_equal(forgotten, a);
	assert_int_equal(forgotten_kind, H_EVENT);
	forgotten = 0;
	handle_forget(w, a);                         /* already free: no news */
	handle_forget(w, UINT64_MAX);
	assert_int_equal(forgotten, 0);
}

static void find_and_set(void **state)
{
	struct worker *w = *state;
	uint64_t a = handle_put(w, H_MODULE, P(1));
	void *real;

	assert_int_equal(handle_find(w, H_MODULE, P(1)), a);
	assert_int_equal(handle_find(w, H_LIBRARY, P(1)), 0);
	assert_int_equal(handle_find(w, H_MODULE, P(2)), 0);
	assert_int_equal(handle_find(w, H_MODULE, NULL), 0);
	handle_set(w, a, P(2));
	assert_int_equal(handle_find(w, H_MODULE, P(2)), a);
	assert_int_equal(handle_find(w, H_MODULE, P(1)), 0);
	assert_int_equal(handle_get(w, H_MODULE, a, &real), CUDA_SUCCESS);
	assert_ptr_equal(real, P(2));
	assert_int_equal(handle_kind_of(w, a), H_MODULE);
}

/* Many handles: the table grows past its first allocation intact. */
static void growth(void **state)
{
	struct worker *w = *state;
	void *real;

	for (unsigned i = 0; i < 1000; i++)
		assert_int_equal(handle_put(w, H_EVENT, P(i)), HANDLE_BASE + i);
	for (unsigned i = 0; i < 1000; i++) {
		assert_int_equal(handle_get(w, H_EVENT, HANDLE_BASE + i, &real), CUDA_SUCCESS);
		assert_ptr_equal(real, P(i));
	}
	assert_int_equal(handle_get(w, H_EVENT, HANDLE_BASE + 1000, &real), CUDA_ERROR_INVALID_HANDLE);
}

/* A restore binds the recorded id; a gap fills with free slots. */
static void restore_binds_recorded_id(void **state)
{
	struct worker *w = *state;
	void *real;

	w->replay_id = HANDLE_BASE + 10;
	assert_int_equal(handle_put(w, H_STREAM, P(1)), HANDLE_BASE + 10);
	assert_int_equal(w->replay_id, 0);
	for (unsigned i = 0; i < 10; i++)
		assert_int_equal(handle_kind_of(w, HANDLE_BASE + i), H_FREE);
	assert_int_equal(handle_get(w, H_STREAM, HANDLE_BASE + 10, &real), CUDA_SUCCESS);
	/* an id taken already is refused */
	w->replay_id = HANDLE_BASE + 10;
	assert_int_equal(handle_put(w, H_STREAM, P(2)), 0);
	w->replay_id = 0;
	/* a new handle takes the first free slot of the gap */
	assert_int_equal(handle_put(w, H_EVENT, P(3)), HANDLE_BASE);
}

/* A snapshot's record naming an id no restore may bind (below the base,
 * past HANDLE_MAX, or one that wraps in 32 bits) binds nothing, and does
 * not grow the table. */
static void restore_refuses_hostile_id(void **state)
{
	struct worker *w = *state;
	const uint64_t bad[] = { 1, HANDLE_BASE - 1, HANDLE_BASE + HANDLE_MAX, HANDLE_BASE + (1ull << 32) + 5,
				 HANDLE_BASE + (1ull << 32), UINT64_MAX };

	for (int i = 0; i < 6; i++)
		handle_put(w, H_EVENT, P(i));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		w->replay_id = bad[i];
		assert_int_equal(handle_put(w, H_STREAM, P(100 + i)), 0);
		assert_int_equal(w->nhandles, 6);
		for (int j = 0; j < 6; j++)
			assert_int_equal(handle_kind_of(w, HANDLE_BASE + j), H_EVENT);
	}
	w->replay_id = 0;
}

/* hand_func_load, the replay of a first use, checks its id as strictly. */
static void func_load_refuses(void **state)
{
	struct worker *w = *state;
	uint64_t s = handle_put(w, H_STREAM, P(1)), f = handle_put(w, H_FUNCTION, P(2));
	uint64_t v[2] = { 0, 0 };
	scalars a = { { 1, v } };

	handle_forget(w, f);
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		v[0] = hostile[i];
		assert_int_equal(hand_func_load(w, &a, NULL), CUDA_ERROR_INVALID_HANDLE);
	}
	v[0] = s;                                    /* not a function */
	assert_int_equal(hand_func_load(w, &a, NULL), CUDA_ERROR_INVALID_HANDLE);
	v[0] = f;                                    /* freed */
	assert_int_equal(hand_func_load(w, &a, NULL), CUDA_ERROR_INVALID_HANDLE);
	a.v.v_len = 2;                               /* malformed */
	assert_int_equal(hand_func_load(w, &a, NULL), CUDA_ERROR_INVALID_HANDLE);
	a.v.v_len = 0;
	assert_int_equal(hand_func_load(w, &a, NULL), CUDA_ERROR_INVALID_HANDLE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(put_get_kinds), T(put_same_real_returns_same_id), T(function_accepts_kernel), T(special_ids),
		T(hostile_ids_refused), T(past_the_end_refused), T(forget_and_reuse), T(forget_hook), T(find_and_set), T(growth),
		T(restore_binds_recorded_id), T(restore_refuses_hostile_id), T(func_load_refuses),
	};

	return cmocka_run_group_tests_name("handles", tests, NULL, NULL);
}

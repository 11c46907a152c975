/*
 * handles.c: the worker's handle table. Clients never see the driver's
 * handles, only small ids, so a restored worker can bind the same ids to
 * new driver objects. Stream ids 0, 1 (legacy) and 2 (per-thread) are the
 * driver's own special values and pass through.
 */
#include <stdlib.h>
#include "state.h"

static int kind_matches(enum handle_kind want, enum handle_kind have)
{
	return want == have || (want == H_FUNCTION && have == H_KERNEL);
}

/* Functions and library kernels are loaded lazily: by the driver at
 * their first launch, where the code it uploads takes device memory from
 * the same places as module variables; a restore, which launches
 * nothing, would place later modules' variables elsewhere. So the worker
 * loads each itself at its first use (enumerated functions need that
 * anyway: else attribute queries fail with CUDA_ERROR_FUNCTION_NOT_LOADED)
 * and keeps the load in the replay log, where a restore makes it again.
 * A library kernel has a function in each context: its first use in a
 * context (cuKernelGetFunction there is enough) loads its library's module
 * there. So that first use is kept too, for each context (up to 64 of
 * them), whether or not the function then still needed cuFuncLoad; a
 * program that takes turns between its GPUs adds nothing more. The
 * kernel counts as loaded in the context it was last used in. */
static uint64_t loaded_key(const struct worker *w, const struct handle_entry *e)
{
	return e->kind == H_KERNEL ? w->current_ctx + 1 : 1;
}

/* The bit of context ctx in a kernel's in_ctxs, a gone context's bit
 * serving again (-1: 64 contexts alive have theirs). */
static int ctx_bit(struct worker *w, uint64_t ctx)
{
	unsigned i, n = w->nkernel_ctxs;

	for (i = 0; i < n && w->kernel_ctxs[i] != ctx; i++)
		;
	if (i < n)
		return (int)i;
	for (i = 0; i < n && w->kernel_ctxs[i] != ~0ull; i++)
		;
	if (i == 64)
		return -1;
	w->nkernel_ctxs += i == n;
	w->kernel_ctxs[i] = ctx;
	return (int)i;
}

/* A context gone: its bit is free for another. */
static void handles_ctx_gone(struct worker *w, uint64_t ctx)
{
	for (unsigned i = 0; i < w->nkernel_ctxs; i++) {
		if (w->kernel_ctxs[i] != ctx)
			continue;
		w->kernel_ctxs[i] = ~0ull;   /* no context has that id */
		for (unsigned j = 0; j < w->nhandles; j++)
			w->handles[j].in_ctxs &= ~(1ull << i);
	}
}

/* Whether library kernel e was used in the current context already (a
 * program taking turns between its GPUs then asks the driver nothing). */
static int used_here(struct worker *w, struct handle_entry *e)
{
	int bit = e->kind == H_KERNEL && e->loaded ? ctx_bit(w, w->current_ctx) : -1;

	if (bit < 0 || !(e->in_ctxs >> bit & 1))
		return 0;
	e->loaded = loaded_key(w, e);
	return 1;
}

static CUresult function_load(struct worker *w, struct handle_entry *e, int *keep)
{
	CUfunctionLoadingState st = CU_FUNCTION_LOADING_STATE_LOADED;
	CUfunction f = (CUfunction)e->real;
	CUresult err = CUDA_SUCCESS;
	int bit = e->kind == H_KERNEL ? ctx_bit(w, w->current_ctx) : -1;

	*keep = !e->loaded || (bit >= 0 && !(e->in_ctxs >> bit & 1));
	if (e->kind == H_KERNEL)
		err = cuKernelGetFunction(&f, (CUkernel)e->real);
	if (!err)
		err = cuFuncIsLoaded(&st, f);
	if (err == CUDA_SUCCESS && st != CU_FUNCTION_LOADING_STATE_LOADED) {
		err = cuFuncLoad(f);
		*keep = 1;
	}
	log_debug("use of %s %llu in context %llu: %s", e->kind == H_KERNEL ? "kernel" : "function",
		  (unsigned long long)(e - w->handles) + HANDLE_BASE, (unsigned long long)w->current_ctx,
		  err ? "cannot load it" : *keep ? "kept" : "loaded and kept already");
	e->loaded = err == CUDA_SUCCESS ? loaded_key(w, e) : 0;
	if (!err && bit >= 0)
		e->in_ctxs |= 1ull << bit;
	return err;
}

static void (*load_hook)(struct worker *w, uint64_t id);

/* hook learns of each function's first use in a context that is kept
 * (the replay log records it: replay.c's replay_note_load). */
void handles_on_load(void (*hook)(struct worker *w, uint64_t id))
{
	load_hook = hook;
}

CUresult handle_get(struct worker *w, enum handle_kind kind, uint64_t id, void **real)
{
	struct handle_entry *e;
	CUresult err;
	int keep;

	if (id == 0 || (kind == H_STREAM && id <= 2)) {
		*real = (void *)(uintptr_t)id;
		return CUDA_SUCCESS;
	}
	if (id < HANDLE_BASE || id - HANDLE_BASE >= w->nhandles)
		return CUDA_ERROR_INVALID_HANDLE;
	e = &w->handles[id - HANDLE_BASE];
	if (!kind_matches(kind, e->kind))
		return CUDA_ERROR_INVALID_HANDLE;
	*real = e->real;
	if (kind != H_FUNCTION || e->loaded == loaded_key(w, e) || used_here(w, e))
		return CUDA_SUCCESS;
	if (!(err = function_load(w, e, &keep)) && keep)
		if (load_hook)
			load_hook(w, id);
	return err;
}

/* A restore's replay of a first use (note_load): loads the function. */
CUresult hand_func_load(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	struct handle_entry *e;
	int keep;

	if (a->v.v_len != 1 || handle_kind_of(w, a->v.v_val[0]) == H_FREE ||
	    !kind_matches(H_FUNCTION, handle_kind_of(w, a->v.v_val[0])))
		return CUDA_ERROR_INVALID_HANDLE;
	e = &w->handles[a->v.v_val[0] - HANDLE_BASE];
	return e->loaded == loaded_key(w, e) ? CUDA_SUCCESS : function_load(w, e, &keep);
}

enum handle_kind handle_kind_of(struct worker *w, uint64_t id)
{
	if (id < HANDLE_BASE || id - HANDLE_BASE >= w->nhandles)
		return H_FREE;
	return w->handles[id - HANDLE_BASE].kind;
}

/* Makes slot index exist (free entries fill any gap). */
static int handle_reserve(struct worker *w, unsigned index)
{
	while (index >= w->nhandles) {
		if (w->nhandles == w->cap_handles) {
			unsigned cap = w->cap_handles ? 2 * w->cap_handles : 256;
			struct handle_entry *n = realloc(w->handles, cap * sizeof(*n));
			if (!n)
				return -1;
			w->handles = n;
			w->cap_handles = cap;
		}
		w->handles[w->nhandles++] = (struct handle_entry){ .kind = H_FREE };
	}
	return 0;
}

/* Registers real, or returns its existing id (primary contexts repeat).
 * While a restore replays the log, the new entry takes the recorded id. */
uint64_t handle_put(struct worker *w, enum handle_kind kind, void *real)
{
	unsigned i, slot = w->nhandles;

	for (i = 0; i < w->nhandles; i++) {
		if (w->handles[i].kind == kind && w->handles[i].real == real) {
			if (kind == H_FUNCTION)
				log_debug("function %u came back", HANDLE_BASE + i);
			w->handles[i].loaded = 0;    /* a new function may have an old one's handle */
			w->handles[i].in_ctxs = 0;
			return HANDLE_BASE + i;
		}
		if (w->handles[i].kind == H_FREE && slot == w->nhandles)
			slot = i;
	}
	if (w->replay_id) {
		/* (the id is a snapshot's word: past HANDLE_MAX it would grow the
		 * table without bound, or wrap to another slot) */
		if (w->replay_id < HANDLE_BASE || w->replay_id - HANDLE_BASE >= HANDLE_MAX)
			return 0;
		slot = (unsigned)(w->replay_id - HANDLE_BASE);
		if (handle_reserve(w, slot) || w->handles[slot].kind != H_FREE)
			return 0;
		w->replay_id = 0;
	} else if (handle_reserve(w, slot)) {
		return 0;
	}
	w->handles[slot].kind = kind;
	w->handles[slot].loaded = 0;
	w->handles[slot].in_ctxs = 0;
	w->handles[slot].real = real;
	w->created = HANDLE_BASE + slot;
	return w->created;
}

/* The id real already has as kind, or 0 (nothing is registered). */
uint64_t handle_find(struct worker *w, enum handle_kind kind, const void *real)
{
	for (unsigned i = 0; real && i < w->nhandles; i++)
		if (w->handles[i].kind == kind && w->handles[i].real == real)
			return HANDLE_BASE + i;
	return 0;
}

/* Binds id, of its kind still, to another driver object. */
void handle_set(struct worker *w, uint64_t id, void *real)
{
	if (id >= HANDLE_BASE && id - HANDLE_BASE < w->nhandles)
		w->handles[id - HANDLE_BASE].real = real;
}

/* hook learns of every id let go, before its slot is free (one hook: ipc.c's). */
void handles_on_forget(struct worker *w, void (*hook)(struct worker *w, enum handle_kind kind, uint64_t id))
{
	w->on_forget = hook;
}

void handle_forget(struct worker *w, uint64_t id)
{
	if (id < HANDLE_BASE || id - HANDLE_BASE >= w->nhandles)
		return;
	if (w->on_forget && w->handles[id - HANDLE_BASE].kind != H_FREE)
		w->on_forget(w, w->handles[id - HANDLE_BASE].kind, id);
	if (w->handles[id - HANDLE_BASE].kind == H_CTX)
		handles_ctx_gone(w, id);
	w->handles[id - HANDLE_BASE].kind = H_FREE;
}

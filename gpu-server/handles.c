/*
 * handles.c: the worker's handle table. Clients never see the driver's
 * handles, only small ids, so a restored worker can bind the same ids to
 * new driver objects. Stream ids 0, 1 (legacy) and 2 (per-thread) are the
 * driver's own special values and pass through.
 */
#include <stdlib.h>
#include "gpu-server.h"

static int kind_matches(enum handle_kind want, enum handle_kind have)
{
	return want == have || (want == H_FUNCTION && have == H_KERNEL);
}

/* Functions reach the client by enumeration (module_functions), which,
 * under lazy loading, leaves them unloaded, where the application's
 * cuModuleGetFunction would have loaded them: the first use loads one
 * (else attribute queries fail with CUDA_ERROR_FUNCTION_NOT_LOADED). */
static CUresult function_load(struct handle_entry *e)
{
	CUfunctionLoadingState st = CU_FUNCTION_LOADING_STATE_LOADED;
	CUresult err = cuFuncIsLoaded(&st, (CUfunction)e->real);

	if (err == CUDA_SUCCESS && st != CU_FUNCTION_LOADING_STATE_LOADED)
		err = cuFuncLoad((CUfunction)e->real);
	e->loaded = err == CUDA_SUCCESS;
	return err;
}

CUresult handle_get(struct worker *w, enum handle_kind kind, uint64_t id, void **real)
{
	if (id == 0 || (kind == H_STREAM && id <= 2)) {
		*real = (void *)(uintptr_t)id;
		return CUDA_SUCCESS;
	}
	if (id < HANDLE_BASE || id - HANDLE_BASE >= w->nhandles)
		return CUDA_ERROR_INVALID_HANDLE;
	struct handle_entry *e = &w->handles[id - HANDLE_BASE];
	if (!kind_matches(kind, e->kind))
		return CUDA_ERROR_INVALID_HANDLE;
	*real = e->real;
	return e->kind == H_FUNCTION && !e->loaded ? function_load(e) : CUDA_SUCCESS;
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
			w->handles[i].loaded = 0;    /* a new function may have an old one's handle */
			return HANDLE_BASE + i;
		}
		if (w->handles[i].kind == H_FREE && slot == w->nhandles)
			slot = i;
	}
	if (w->replay_id) {
		slot = (unsigned)(w->replay_id - HANDLE_BASE);
		if (w->replay_id < HANDLE_BASE || handle_reserve(w, slot) || w->handles[slot].kind != H_FREE)
			return 0;
		w->replay_id = 0;
	} else if (handle_reserve(w, slot)) {
		return 0;
	}
	w->handles[slot].kind = kind;
	w->handles[slot].loaded = 0;
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

void handle_forget(struct worker *w, uint64_t id)
{
	if (id >= HANDLE_BASE && id - HANDLE_BASE < w->nhandles)
		w->handles[id - HANDLE_BASE].kind = H_FREE;
}

void handle_drop(struct worker *w, enum handle_kind kind, uint64_t id)
{
	handle_forget(w, id);
	replay_drop(w, id);
}

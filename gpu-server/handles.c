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
	return CUDA_SUCCESS;
}

enum handle_kind handle_kind_of(struct worker *w, uint64_t id)
{
	if (id < HANDLE_BASE || id - HANDLE_BASE >= w->nhandles)
		return H_FREE;
	return w->handles[id - HANDLE_BASE].kind;
}

/* Registers real, or returns its existing id (primary contexts repeat). */
uint64_t handle_put(struct worker *w, enum handle_kind kind, void *real)
{
	unsigned i, free_slot = w->nhandles;

	for (i = 0; i < w->nhandles; i++) {
		if (w->handles[i].kind == kind && w->handles[i].real == real)
			return HANDLE_BASE + i;
		if (w->handles[i].kind == H_FREE && free_slot == w->nhandles)
			free_slot = i;
	}
	if (free_slot == w->nhandles) {
		if (w->nhandles == w->cap_handles) {
			unsigned cap = w->cap_handles ? 2 * w->cap_handles : 256;
			struct handle_entry *n = realloc(w->handles, cap * sizeof(*n));
			if (!n)
				return 0;
			w->handles = n;
			w->cap_handles = cap;
		}
		w->nhandles++;
	}
	w->handles[free_slot].kind = kind;
	w->handles[free_slot].real = real;
	return HANDLE_BASE + free_slot;
}

void handle_drop(struct worker *w, enum handle_kind kind, uint64_t id)
{
	if (id >= HANDLE_BASE && id - HANDLE_BASE < w->nhandles)
		w->handles[id - HANDLE_BASE].kind = H_FREE;
}

/*
 * pinned.c: the worker's pinned host buffers (copies, bulk lanes, host
 * function staging, checkpoints), and the bound on what it pins on its
 * client's behalf for as long as the client wants (staged copies of
 * pageable memory, pinned memory carried by a --gpu-only move):
 * --max-staged, CICADA_STAGED_MAX in the worker's environment (a worker
 * serves one client), so no tenant pins the node's memory without end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include "state.h"

#define CLIENT_PINNED_DEFAULT (8ull << 30)

static uint64_t client_pinned;

static uint64_t client_pinned_max(void)
{
	const char *e = getenv("CICADA_STAGED_MAX");
	unsigned long long v;

	return e && sscanf(e, "%llu", &v) == 1 ? (uint64_t)v : CLIENT_PINNED_DEFAULT;
}

/* Takes size bytes of the bound: 0, or -1 (logged) past it. */
int client_pinned_take(struct worker *w, uint64_t size, const char *what)
{
	uint64_t max = client_pinned_max();

	if (size > max || client_pinned > max - size) {
		log_warn("client %s: %llu more bytes of %s would pass --max-staged (%llu bytes held); refused", w->peer,
			 (unsigned long long)size, what, (unsigned long long)client_pinned);
		return -1;
	}
	client_pinned += size;
	return 0;
}

void client_pinned_give(uint64_t size)
{
	client_pinned -= size < client_pinned ? size : client_pinned;
}

/* Pinned host buffers for moving device memory: mapped in the worker's
 * own area and registered, not cuMemAllocHost'd, which the driver would
 * map where it places module variables (state/hostarea.c says why that
 * matters). */
void *worker_pinned(struct worker *w, size_t size)
{
	void *p = hostarea_map(size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	cuCtxSetCurrent(w->base_ctx);
	if (cuMemHostRegister(p, size, CU_MEMHOSTREGISTER_PORTABLE)) {
		hostarea_unmap(p, size);
		return NULL;
	}
	return p;
}

void worker_pinned_free(void *p, size_t size)
{
	cuMemHostUnregister(p);
	hostarea_unmap(p, size);
}

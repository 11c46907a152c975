/*
 * pinned.c: the worker's pinned host buffers (copies, bulk lanes, host
 * function staging, checkpoints).
 */
#include <sys/mman.h>
#include "state.h"

/* Pinned host buffers for moving device memory: mapped in the worker's
 * own area and registered, not cuMemAllocHost'd, which the driver would
 * map where it places module variables (wire/hostarea.c says why that
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

/*
 * primary.c: the worker creates its first GPU's primary context (before
 * any client arrives on a node of one GPU: that is most of CUDA's
 * start-up cost), and keeps its own reference for good: its pinned
 * buffers live there. It holds another GPU's primary context the same way
 * once the client uses that GPU. The client must not see that: the
 * context reports itself active only while the client holds retains, and
 * releasing or resetting it frees what the client made, not the context.
 */
#include "state.h"

static int warm[PRIMARY_DEVICES_MAX];          /* the worker holds a reference of its own */

static int is_warm(CUdevice dev)
{
	return dev >= 0 && dev < PRIMARY_DEVICES_MAX && warm[dev];
}

static void (*taken_hook)(struct worker *w, CUdevice dev);

/* Calls hook, with the context current, for each GPU's primary context
 * the worker takes from now on (devhash.c loads its module there). */
void primary_on_take(void (*hook)(struct worker *w, CUdevice dev))
{
	taken_hook = hook;
}

/* A GPU's primary context, retained once for the worker's own use (its
 * copies into the memory there, the arena's chunks), or NULL. */
CUcontext primary_ctx(struct worker *w, CUdevice dev)
{
	static CUcontext held[PRIMARY_DEVICES_MAX];

	if (dev < 0 || dev >= PRIMARY_DEVICES_MAX)
		return NULL;
	if (!held[dev] && cuDevicePrimaryCtxRetain(&held[dev], dev))
		held[dev] = NULL;
	else if (!warm[dev] && taken_hook && !cuCtxPushCurrent(held[dev])) {
		taken_hook(w, dev);
		cuCtxPopCurrent(NULL);
	}
	if (held[dev])
		warm[dev] = 1;
	return held[dev];
}

/* Whether the worker holds GPU dev's primary context (takes nothing). */
int primary_held(CUdevice dev)
{
	return is_warm(dev);
}

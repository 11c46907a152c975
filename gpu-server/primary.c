/*
 * primary.c: the worker creates its first GPU's primary context (before
 * any client arrives on a node of one GPU: that is most of CUDA's
 * start-up cost), and keeps its own reference for good: its pinned
 * buffers live there. It holds another GPU's primary context the same way
 * once the client uses that GPU. The client must not see that: the
 * context reports itself active only while the client holds retains, and
 * releasing or resetting it frees what the client made, not the context.
 */
#include "gpu-server.h"

#define MAX_WARM_DEVICES 64

static int warm[MAX_WARM_DEVICES];          /* the worker holds a reference of its own */
static int client_refs[MAX_WARM_DEVICES];   /* the client's retains not yet released */

static int is_warm(CUdevice dev)
{
	return dev >= 0 && dev < MAX_WARM_DEVICES && warm[dev];
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
	static CUcontext held[MAX_WARM_DEVICES];

	if (dev < 0 || dev >= MAX_WARM_DEVICES)
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

/* What a native context's destruction frees: every allocation the client
 * made on its GPU. The context itself stays, holding the worker's own
 * buffers. */
static CUresult clear_client_state(struct worker *w, CUdevice dev)
{
	uint64_t va, size;
	CUresult err;

	cuCtxPushCurrent(primary_ctx(w, dev));
	err = cuCtxSynchronize();
	cuCtxPopCurrent(NULL);
	for (unsigned i = 0; i < devmem_count(w, 0);) {
		devmem_get(w, 0, i, &va, &size);
		if (devmem_device(w, va) != dev || devmem_free(w, va))
			i++;
	}
	return err;
}

/* The worker holds a GPU's primary context from the client's first use of
 * it: the arena's memory there must outlive the client's contexts. */
CUresult wrap_cuDevicePrimaryCtxRetain(struct worker *w, CUcontext *pctx, CUdevice dev)
{
	CUresult err = primary_ctx(w, dev) ? cuDevicePrimaryCtxRetain(pctx, dev) : CUDA_ERROR_INVALID_DEVICE;

	if (!err && is_warm(dev))
		client_refs[dev]++;
	return err;
}

/* The worker's own reference never goes: a client that releases more
 * than it retained is told so, as the driver would, instead of taking
 * the context (and the worker's buffers in it) away. */
CUresult wrap_cuDevicePrimaryCtxRelease_v2(struct worker *w, CUdevice dev)
{
	CUresult err;

	if (!is_warm(dev))
		return cuDevicePrimaryCtxRelease(dev);
	if (!client_refs[dev])
		return CUDA_ERROR_INVALID_CONTEXT;
	if ((err = cuDevicePrimaryCtxRelease(dev)))
		return err;
	if (!--client_refs[dev])
		clear_client_state(w, dev);
	return CUDA_SUCCESS;
}

CUresult wrap_cuDevicePrimaryCtxGetState(struct worker *w, CUdevice dev, unsigned int *flags, int *active)
{
	CUresult err = cuDevicePrimaryCtxGetState(dev, flags, active);

	if (!err && is_warm(dev))
		*active = client_refs[dev] > 0;
	return err;
}

/* A real reset would free the worker's own buffers (pinned scratch, the
 * registered staging area, the arena) under it: the worker frees what is
 * the client's instead. Its modules, streams and events stay until the
 * session ends. */
CUresult wrap_cuDevicePrimaryCtxReset_v2(struct worker *w, CUdevice dev)
{
	CUresult err;

	if (!is_warm(dev))
		return cuDevicePrimaryCtxReset(dev);
	err = clear_client_state(w, dev);
	log_info("client %s reset device %d's primary context: its allocations are freed", w->peer, (int)dev);
	return err == CUDA_ERROR_INVALID_CONTEXT ? CUDA_SUCCESS : err;
}

/* Names a device's primary context without leaving it active (a retain
 * and release); the id is the one a later retain returns. */
CUresult hand_primary_ctx_handle(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	scalar_res *r = res;
	CUdevice dev;
	CUcontext ctx;
	CUresult err;

	if (a->v.v_len != 1)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = device_in(w, a->v.v_val[0], &dev)))
		return err;
	if (!primary_ctx(w, dev))            /* held, so the id names a context that stays */
		return CUDA_ERROR_INVALID_DEVICE;
	if ((err = cuDevicePrimaryCtxRetain(&ctx, dev)))
		return err;
	cuDevicePrimaryCtxRelease(dev);
	return one_scalar(r, handle_put(w, H_CTX, ctx));
}

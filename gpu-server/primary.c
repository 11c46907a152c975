/*
 * primary.c: the worker creates device 0's primary context before any
 * client arrives (that is most of CUDA's start-up cost). The client must
 * not see that warm-up: its first retain takes the context over, and
 * until then the context reports itself inactive.
 */
#include "gpu-server.h"

#define MAX_WARM_DEVICES 64

static int warm[MAX_WARM_DEVICES];

void primary_note_warm(CUdevice dev)
{
	if (dev >= 0 && dev < MAX_WARM_DEVICES)
		warm[dev] = 1;
}

static int is_warm(CUdevice dev)
{
	return dev >= 0 && dev < MAX_WARM_DEVICES && warm[dev];
}

CUresult wrap_cuDevicePrimaryCtxRetain(struct worker *w, CUcontext *pctx, CUdevice dev)
{
	CUresult err = cuDevicePrimaryCtxRetain(pctx, dev);

	if (!err && is_warm(dev)) {
		cuDevicePrimaryCtxRelease(dev);
		warm[dev] = 0;
	}
	return err;
}

CUresult wrap_cuDevicePrimaryCtxGetState(struct worker *w, CUdevice dev, unsigned int *flags, int *active)
{
	CUresult err = cuDevicePrimaryCtxGetState(dev, flags, active);

	if (!err && is_warm(dev))
		*active = 0;
	return err;
}

CUresult wrap_cuDevicePrimaryCtxReset_v2(struct worker *w, CUdevice dev)
{
	if (is_warm(dev)) {
		cuDevicePrimaryCtxRelease(dev);
		warm[dev] = 0;
	}
	return cuDevicePrimaryCtxReset(dev);
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
	dev = (CUdevice)a->v.v_val[0];
	if ((err = cuDevicePrimaryCtxRetain(&ctx, dev)))
		return err;
	cuDevicePrimaryCtxRelease(dev);
	return one_scalar(r, handle_put(w, H_CTX, ctx));
}

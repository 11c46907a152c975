/*
 * context.c: contexts made and destroyed (cuCtxCreate, cuCtxDestroy) and
 * their scheduling flags, which say how the client waits for replies.
 * The thread's current context is current.c's; the server's worker is
 * told which context to use only when a call needs it (client.c). A
 * destroyed context leaves the thread's stack, its ids (ids.c) and its
 * context-local storage (export_tables.c): this file calls them all, and
 * none of them calls it.
 */
#include "interposer.h"

void client_set_server_ctx(CUcontext ctx, int known);

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
	uint64_t in[2] = { flags, (uint64_t)dev }, out[1];
	CUresult err;

	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	err = client_scalar_call(P_ctx_create, 0, in, 2, out, 1);
	answers_flush();
	if (err)
		return err;
	*pctx = (CUcontext)(uintptr_t)out[0];
	client_wait_mode(flags);
	ctx_push(*pctx);
	client_set_server_ctx(*pctx, 1);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
	if (params && (params->execAffinityParams || params->numExecAffinityParams || params->cigParams)) {
		log_info("cuCtxCreate_v4: execution affinity and CIG contexts are not supported through Cicada");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return ctx_create(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return ctx_create(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
	CUresult err = rpc_cuCtxDestroy_v2(ctx);

	if (err == CUDA_SUCCESS) {
		ctx_forget(ctx);
		ids_forget_ctx(ctx);
		cls_forget(ctx);
		client_set_server_ctx(NULL, 0);
	}
	return err;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
	CUresult err = rpc_cuDevicePrimaryCtxSetFlags_v2(dev, flags);

	if (!err)
		client_wait_mode(flags);
	return err;
}

CUresult CUDAAPI cuCtxSetFlags(unsigned int flags)
{
	CUresult err = rpc_cuCtxSetFlags(flags);

	if (!err)
		client_wait_mode(flags);
	return err;
}

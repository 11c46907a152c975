/*
 * context.c: each application thread's current context, kept here in the
 * application (as the driver keeps it per thread). The server's worker is
 * told which context to use only when a call needs it (client.c). A
 * context's scheduling flags say how the client waits for replies.
 */
#include "interposer.h"

#define CTX_STACK_MAX 64

static __thread CUcontext ctx_stack[CTX_STACK_MAX];
static __thread int ctx_depth;

void client_set_server_ctx(CUcontext ctx, int known);

CUcontext ctx_current(void)
{
	return ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
}

void ctx_push(CUcontext ctx)
{
	if (ctx_depth < CTX_STACK_MAX)
		ctx_stack[ctx_depth++] = ctx;
}

/* A destroyed context leaves this thread's stack. */
void ctx_forget(CUcontext ctx)
{
	int j = 0;

	for (int i = 0; i < ctx_depth; i++)
		if (ctx_stack[i] != ctx)
			ctx_stack[j++] = ctx_stack[i];
	ctx_depth = j;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = ctx_current();
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
	CUresult err = client_connect();

	if (err)
		return err;
	if (ctx_depth)
		ctx_stack[ctx_depth - 1] = ctx;
	else if (ctx)
		ctx_push(ctx);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx)
{
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (ctx_depth == CTX_STACK_MAX)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ctx_push(ctx);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
	if (!ctx_depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	ctx_depth--;
	if (pctx)
		*pctx = ctx_stack[ctx_depth];
	return CUDA_SUCCESS;
}

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

/* A device's primary context, named without being activated: the runtime
 * asks for it (export table 6bd5fb6c, slot 2) before it retains it. */
CUresult client_primary_ctx(CUdevice dev, CUcontext *out)
{
	uint64_t in = (uint64_t)dev, id;
	CUresult err = client_scalar_call(P_primary_ctx_handle, 0, &in, 1, &id, 1);

	if (!err)
		*out = (CUcontext)(uintptr_t)id;
	return err;
}

static const struct client_hooks context_hooks = { .current = ctx_current };

__attribute__((constructor)) static void context_hook(void)
{
	client_add_hooks(&context_hooks);
}

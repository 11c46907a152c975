/*
 * current.c: each application thread's current context, kept here in the
 * application (as the driver keeps it per thread): the stack that
 * cuCtxPushCurrent and cuCtxPopCurrent move, and cuCtxSetCurrent and
 * cuCtxGetCurrent. It calls nothing but the connection; what creates and
 * destroys contexts is context.c, above it.
 */
#include "interposer.h"

#define CTX_STACK_MAX 64

static __thread CUcontext ctx_stack[CTX_STACK_MAX];
static __thread int ctx_depth;

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

static const struct client_hooks context_hooks = { .current = ctx_current };

__attribute__((constructor)) static void context_hook(void)
{
	client_add_hooks(&context_hooks);
}

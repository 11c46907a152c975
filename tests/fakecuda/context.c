/*
 * Contexts of the stand-in: each device's primary context with its
 * reference count, contexts made by cuCtxCreate, and the per-thread stack
 * of current contexts.  A context that goes away (destroy, last primary
 * release, reset) frees everything it owns; its struct is kept so that a
 * thread still holding it as current gets CUDA_ERROR_INVALID_CONTEXT
 * rather than a use-after-free. FAKECUDA_EXIT_MS holds a process's exit
 * that long, as a driver tearing down its contexts does.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "fakecuda.h"

#define STACK_MAX 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct fc_ctx primaries[FC_MAX_DEVICES];
static int primary_refs[FC_MAX_DEVICES], primary_registered[FC_MAX_DEVICES];

static __thread struct fc_ctx *stack[STACK_MAX];
static __thread int depth;

static const size_t default_limits[CU_LIMIT_MAX] = {
	[CU_LIMIT_STACK_SIZE] = 1024,
	[CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20,
	[CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20,
	[CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
	[CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
	[CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 32,
};

static void ctx_reset(struct fc_ctx *ctx, unsigned flags)
{
	size_t i;

	ctx->flags = flags;
	for (i = 0; i < CU_LIMIT_MAX; i++)
		ctx->limits[i] = default_limits[i];
}

/* As the real driver does, a context takes device addresses of its own
 * from the process's default mapping area, top down, when it is made, and
 * its module variables come after it (module.c): so how many contexts a
 * process made before a module load moves that module's variables,
 * whatever GPU they were on, and a restore must make them in the same
 * order. The addresses are not given back. */
#define CTX_WINDOW (64ull << 20)

/* FAKECUDA_TAKEN=ADDR:SIZE: the first context made also holds [ADDR,
 * ADDR + SIZE) for itself, as a driver may hold addresses where a
 * gpu-server means to place the application's reservations. */
static void take_fixed(void)
{
	static int done;
	const char *e = getenv("FAKECUDA_TAKEN");
	unsigned long long at, size;

	if (done++ || !e || sscanf(e, "%llx:%llx", &at, &size) != 2 || !size)
		return;
	mmap((void *)(uintptr_t)at, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
	     -1, 0);
}

/* FAKECUDA_SHIFT_MIB=N: the first context made also takes N MiB more of
 * the driver's own area (top down), so that module globals land N MiB
 * lower than in a process without it, as a driver that had used more of
 * its area before loading a module would put them. */
static void shift_area(void)
{
	static int done;
	const char *e = getenv("FAKECUDA_SHIFT_MIB");
	unsigned long mib;

	if (done++ || !e || (mib = strtoul(e, NULL, 10)) == 0)
		return;
	mmap(NULL, mib << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

void fc_ctx_place(struct fc_ctx *c)
{
	if (c->placed)
		return;
	c->placed = 1;
	take_fixed();
	shift_area();
	mmap(NULL, CTX_WINDOW, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

/* The current context as made current: a green context's view stays
 * one (green.c). */
CUresult fc_current_view(struct fc_ctx **out)
{
	TRY(fc_need_init());
	CHECK(depth && stack[depth - 1]->live, CUDA_ERROR_INVALID_CONTEXT);
	if (out)
		*out = stack[depth - 1];
	return CUDA_SUCCESS;
}

/* The current context; a green context's is its primary's. */
CUresult fc_current(struct fc_ctx **out)
{
	struct fc_ctx *c;

	TRY(fc_current_view(&c));
	if (out)
		*out = c->base ? c->base : c;
	return CUDA_SUCCESS;
}

/* ctx as given (a view stays one), checked. */
static CUresult given(CUcontext ctx, struct fc_ctx **out)
{
	struct fc_ctx *c = (struct fc_ctx *)ctx;

	TRY(fc_need_init());
	CHECK(fc_obj_has(c, FC_CTX) && c->live, CUDA_ERROR_INVALID_CONTEXT);
	*out = c;
	return CUDA_SUCCESS;
}

/* ctx, or the current one when ctx is NULL; a view's primary. */
static CUresult resolve(CUcontext ctx, struct fc_ctx **out)
{
	struct fc_ctx *c;

	if (!ctx)
		return fc_current(out);
	TRY(given(ctx, &c));
	*out = c->base ? c->base : c;
	return CUDA_SUCCESS;
}

static void unstack(struct fc_ctx *c)
{
	int i, j = 0;

	for (i = 0; i < depth; i++)
		if (stack[i] != c)
			stack[j++] = stack[i];
	depth = j;
}

/* A destroyed green context leaves the calling thread's stack. */
void fc_ctx_forget(struct fc_ctx *c)
{
	unstack(c);
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	struct fc_ctx *p = &primaries[dev];

	TRY(fc_check_dev(dev));
	CHECK_ARG(pctx);
	pthread_mutex_lock(&lock);
	p->primary = 1;
	p->dev = dev;
	if (!primary_registered[dev])
		primary_registered[dev] = !fc_obj_add(p, FC_CTX, NULL, NULL);
	if (!primary_refs[dev]++) {
		p->live = 1;
		p->peers = 0;
		ctx_reset(p, p->flags);
		fc_ctx_place(p);
	}
	pthread_mutex_unlock(&lock);
	*pctx = (CUcontext)p;
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	int refs;

	TRY(fc_check_dev(dev));
	pthread_mutex_lock(&lock);
	refs = primary_refs[dev] ? --primary_refs[dev] : -1;
	if (!refs)
		primaries[dev].live = 0;
	pthread_mutex_unlock(&lock);
	CHECK(refs >= 0, CUDA_ERROR_INVALID_CONTEXT);
	if (!refs)
		fc_obj_drop_ctx(&primaries[dev]);
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
	TRY(fc_check_dev(dev));
	fc_obj_drop_ctx(&primaries[dev]);
	pthread_mutex_lock(&lock);
	ctx_reset(&primaries[dev], 0);
	primaries[dev].peers = 0;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	TRY(fc_check_dev(dev));
	CHECK_ARG(flags && active);
	pthread_mutex_lock(&lock);
	*flags = primaries[dev].flags;
	*active = primary_refs[dev] > 0;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
	TRY(fc_check_dev(dev));
	CHECK_ARG(!(flags & ~CU_CTX_FLAGS_MASK));
	pthread_mutex_lock(&lock);
	primaries[dev].flags = flags;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

/* Peer access, as the driver checks it: to another device's context, once. */
CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags)
{
	struct fc_ctx *c, *p;

	TRY(fc_current(&c));
	CHECK_ARG(!flags);
	TRY(resolve(peer, &p));
	CHECK(peer && p->dev != c->dev, CUDA_ERROR_INVALID_DEVICE);
	CHECK(!(c->peers & 1u << p->dev), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
	c->peers |= 1u << p->dev;
	return CUDA_SUCCESS;
}

CUresult cuCtxDisablePeerAccess(CUcontext peer)
{
	struct fc_ctx *c, *p;

	TRY(fc_current(&c));
	TRY(resolve(peer, &p));
	CHECK(peer && c->peers & 1u << p->dev, CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
	c->peers &= ~(1u << p->dev);
	return CUDA_SUCCESS;
}

CUresult cuCtxCreate(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
	struct fc_ctx *c;

	TRY(fc_check_dev(dev));
	CHECK_ARG(pctx && !(flags & ~CU_CTX_FLAGS_MASK));
	CHECK(depth < STACK_MAX, CUDA_ERROR_OUT_OF_MEMORY);
	c = calloc(1, sizeof(*c));
	if (!c || fc_obj_add(c, FC_CTX, NULL, NULL)) {
		free(c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	c->dev = dev;
	c->live = 1;
	ctx_reset(c, flags);
	fc_ctx_place(c);
	stack[depth++] = c;
	*pctx = (CUcontext)c;
	return CUDA_SUCCESS;
}

/* The pre-12.5 signature, for cuGetProcAddress callers asking for older versions. */
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return cuCtxCreate(pctx, NULL, flags, dev);
}

CUresult cuCtxDestroy(CUcontext ctx)
{
	struct fc_ctx *c = (struct fc_ctx *)ctx;

	TRY(fc_need_init());
	CHECK(fc_obj_has(c, FC_CTX) && !c->primary && !c->base && fc_obj_del(c, FC_CTX), CUDA_ERROR_INVALID_CONTEXT);
	c->live = 0;
	fc_obj_drop_ctx(c);
	unstack(c);
	return CUDA_SUCCESS;	/* c is leaked on purpose, see above */
}

CUresult cuCtxPushCurrent(CUcontext ctx)
{
	struct fc_ctx *c;

	TRY(fc_need_init());
	CHECK(ctx, CUDA_ERROR_INVALID_CONTEXT);
	TRY(given(ctx, &c));
	CHECK(depth < STACK_MAX, CUDA_ERROR_OUT_OF_MEMORY);
	stack[depth++] = c;
	return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *pctx)
{
	TRY(fc_need_init());
	CHECK(depth, CUDA_ERROR_INVALID_CONTEXT);
	depth--;
	if (pctx)
		*pctx = (CUcontext)stack[depth];
	return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	TRY(fc_need_init());
	CHECK_ARG(pctx);
	*pctx = depth ? (CUcontext)stack[depth - 1] : NULL;
	return CUDA_SUCCESS;
}

/* NULL pops; otherwise replace the top of the stack (or push on an empty one). */
CUresult cuCtxSetCurrent(CUcontext ctx)
{
	struct fc_ctx *c = NULL;

	TRY(fc_need_init());
	if (ctx)
		TRY(given(ctx, &c));
	if (!c)
		depth -= depth > 0;
	else
		stack[depth ? depth - 1 : depth++] = c;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice_v2(CUdevice *dev, CUcontext ctx)
{
	struct fc_ctx *c;

	TRY(resolve(ctx, &c));
	CHECK_ARG(dev);
	*dev = c->dev;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *dev)
{
	return cuCtxGetDevice_v2(dev, NULL);
}

CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
	struct fc_ctx *c;

	TRY(resolve(ctx, &c));
	CHECK_ARG(version);
	*version = FC_VERSION;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetFlags(unsigned int *flags)
{
	struct fc_ctx *c;

	TRY(fc_current(&c));
	CHECK_ARG(flags);
	*flags = c->flags;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetLimit(size_t *value, CUlimit limit)
{
	struct fc_ctx *c;

	TRY(fc_current(&c));
	CHECK_ARG(value && (unsigned)limit < CU_LIMIT_MAX);
	*value = c->limits[limit];
	return CUDA_SUCCESS;
}

/* A context's per-thread stack grows to bytes (a launch that needs it,
 * or cuCtxSetLimit): as the driver does, it takes local memory for the
 * growth, every thread the device may run at once, from the process's
 * default mapping area (top down), never given back; so module variables
 * placed after it land lower, in any context. */
#define FC_THREADS (8192ull)

void fc_ctx_stack(struct fc_ctx *c, size_t bytes)
{
	size_t len;

	if (bytes <= c->limits[CU_LIMIT_STACK_SIZE])
		return;
	len = ((bytes - c->limits[CU_LIMIT_STACK_SIZE]) * FC_THREADS + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
	c->limits[CU_LIMIT_STACK_SIZE] = bytes;
	mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
	struct fc_ctx *c;

	TRY(fc_current(&c));
	CHECK_ARG((unsigned)limit < CU_LIMIT_MAX);
	if (limit == CU_LIMIT_STACK_SIZE && value > c->limits[limit])
		fc_ctx_stack(c, value);
	else
		c->limits[limit] = value;
	return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
	struct fc_ctx *c;

	return resolve(ctx, &c);
}

CUresult cuCtxSynchronize(void)
{
	return fc_current(NULL);
}

CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
	TRY(fc_current(NULL));
	if (least)
		*least = 0;
	if (greatest)
		*greatest = -5;
	return CUDA_SUCCESS;
}

/* (FAKECUDA_EXIT_MS: the driver's teardown at exit takes time) */
__attribute__((destructor)) static void slow_exit(void)
{
	const char *e = getenv("FAKECUDA_EXIT_MS");

	if (e && atoi(e) > 0)
		usleep((useconds_t)atoi(e) * 1000);
}

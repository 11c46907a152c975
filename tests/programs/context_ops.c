/*
 * context_ops: primary context retain/state/release, a created context
 * alongside it, the context stack (push/pop and cuCtxGetCurrent after
 * each step), device and API version of a context, a limit round trip,
 * allocations living in two contexts, synchronize and destroy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static void expect_current(const char *what, CUcontext want)
{
	CUcontext cur = NULL;

	CHECK(cuCtxGetCurrent(&cur));
	if (cur != want)
		fail("current context after %s is not the expected one", what);
	printf("context_ops: current after %s OK\n", what);
}

static void fill_check(const char *what, CUdeviceptr d, size_t n, unsigned seed,
		       int write)
{
	unsigned char *want = xmalloc(n), *got = xmalloc(n);

	for (size_t i = 0; i < n; i++)
		want[i] = (unsigned char)(i * 7 + seed);
	if (write)
		CHECK(cuMemcpyHtoD(d, want, n));
	memset(got, 0, n);
	CHECK(cuMemcpyDtoH(got, d, n));
	if (memcmp(got, want, n))
		fail("%s: data differs", what);
	printf("context_ops: %s data OK\n", what);
	free(want);
	free(got);
}

/* As a program built with CUDA 13 finds them by name: cuGetProcAddress
 * gives cuCtxCreate's _v4 ABI (with CUctxCreateParams) and
 * cuStreamGetCtx's _v2 (with a green context), never an older one. */
static void created_by_name(CUdevice dev)
{
	CUresult (*create)(CUcontext *, CUctxCreateParams *, unsigned int, CUdevice);
	CUresult (*get_ctx)(CUstream, CUcontext *, CUgreenCtx *);
	CUdriverProcAddressQueryResult q;
	CUgreenCtx green = (CUgreenCtx)&q;
	unsigned int flags = 0;
	void *fn = NULL;
	CUcontext c, was, of = NULL;
	CUstream s;

	CHECK(cuCtxGetCurrent(&was));
	CHECK(cuGetProcAddress("cuCtxCreate", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
	create = (CUresult (*)(CUcontext *, CUctxCreateParams *, unsigned int, CUdevice))fn;
	CHECK(create(&c, NULL, CU_CTX_SCHED_BLOCKING_SYNC, dev));
	CHECK(cuCtxGetFlags(&flags));
	printf("context_ops: cuCtxCreate found by name, scheduling flags %#x\n", flags & CU_CTX_SCHED_MASK);
	CHECK(cuGetProcAddress("cuStreamGetCtx", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
	get_ctx = (CUresult (*)(CUstream, CUcontext *, CUgreenCtx *))fn;
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(get_ctx(s, &of, &green));
	printf("context_ops: cuStreamGetCtx found by name: %s context, green context %s\n",
	       of == c ? "its" : "ANOTHER", green ? "SET" : "none");
	CHECK(cuStreamDestroy(s));
	CHECK(cuCtxDestroy(c));
	CHECK(cuCtxSetCurrent(was));
}

int main(void)
{
	size_t n = 1 << 20, limit = 0;
	CUcontext primary, ctx2, popped;
	unsigned int flags = 0, api = 0;
	CUdeviceptr d1, d2;
	CUdevice dev, cdev;
	int active = 0;

	start("context_ops");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));

	CHECK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	CHECK(cuDevicePrimaryCtxRetain(&primary, dev));
	CHECK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	printf("context_ops: primary active after retain = %d\n", active);
	if (active != 1)
		fail("primary context not active after retain");
	CHECK(cuCtxSetCurrent(primary));
	expect_current("cuCtxSetCurrent(primary)", primary);

	CHECK(cuCtxCreate(&ctx2, NULL, 0, dev));
	if (ctx2 == primary)
		fail("cuCtxCreate returned the primary context");
	expect_current("cuCtxCreate", ctx2);
	CHECK(cuCtxGetDevice(&cdev));
	if (cdev != dev)
		fail("cuCtxGetDevice gave another device");
	printf("context_ops: cuCtxGetDevice OK\n");
	CHECK(cuCtxGetApiVersion(ctx2, &api));
	if (api == 0)
		fail("cuCtxGetApiVersion gave 0");
	printf("context_ops: api version OK\n");
	created_by_name(dev);

	CHECK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096));
	CHECK(cuCtxGetLimit(&limit, CU_LIMIT_STACK_SIZE));
	printf("context_ops: stack limit = %zu\n", limit);
	if (limit != 4096)
		fail("stack limit %zu after setting 4096", limit);

	CHECK(cuMemAlloc(&d2, n));
	fill_check("created context alloc", d2, n, 3, 1);

	CHECK(cuCtxPopCurrent(&popped));
	if (popped != ctx2)
		fail("cuCtxPopCurrent popped the wrong context");
	expect_current("cuCtxPopCurrent", primary);
	CHECK(cuMemAlloc(&d1, n));
	fill_check("primary context alloc", d1, n, 5, 1);

	CHECK(cuCtxPushCurrent(ctx2));
	expect_current("cuCtxPushCurrent", ctx2);
	fill_check("created context alloc again", d2, n, 3, 0);
	CHECK(cuCtxSynchronize());
	CHECK(cuMemFree(d2));
	CHECK(cuCtxPopCurrent(&popped));
	if (popped != ctx2)
		fail("second cuCtxPopCurrent popped the wrong context");
	CHECK(cuCtxDestroy(ctx2));
	expect_current("cuCtxDestroy", primary);

	fill_check("primary context alloc after destroy", d1, n, 5, 0);
	CHECK(cuCtxSynchronize());
	CHECK(cuMemFree(d1));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	CHECK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	printf("context_ops: primary active after release = %d\n", active);
	if (active != 0)
		fail("primary context still active after its only release");
	printf("context_ops: PASS\n");
	return 0;
}

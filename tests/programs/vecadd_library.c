/*
 * vecadd_library: loads kernels_a.fatbin with cuLibraryLoadData, gets
 * vec_add as a CUkernel and launches it twice: once passing the CUkernel
 * cast to CUfunction, once through cuKernelGetFunction. Both results are
 * checked against the CPU. Then sets and reads attributes through the
 * kernel and the function, which name the same code, as a library does
 * before every launch, and a context limit.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

static void run(const char *how, CUfunction fn, CUdeviceptr da, CUdeviceptr db,
		CUdeviceptr dc, int n, const float *a, const float *b, float *c)
{
	size_t bytes = (size_t)n * sizeof(float);
	void *args[] = { &da, &db, &dc, &n };
	double err;

	CHECK(cuMemsetD32(dc, 0, n));
	CHECK(cuLaunchKernel(fn, GRID(n), 1, 1, BLOCK, 1, 1, 0, NULL, args, NULL));
	CHECK(cuCtxSynchronize());
	CHECK(cuMemcpyDtoH(c, dc, bytes));
	err = vecadd_max_err(a, b, c, n);
	printf("vecadd_library: %s n=%d max_err=%g %s\n", how, n, err,
	       err == 0 ? "OK" : "BAD");
	if (err != 0)
		fail("vec_add via %s differs from CPU", how);
}

static void show(const char *what, CUkernel kern, CUfunction fn)
{
	int k = -1, f = -1;

	CHECK(cuKernelGetAttribute(&k, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, kern, 0));
	CHECK(cuFuncGetAttribute(&f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fn));
	printf("vecadd_library: after %s: kernel %d function %d\n", what, k, f);
}

/* A kernel's attribute is its device's: set in another context, then
 * back in this one, it ends as this one set it. */
static void cross_context(CUkernel kern, CUfunction fn)
{
	const CUfunction_attribute dyn = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
	CUcontext mine, other;
	CUdevice dev;

	CHECK(cuCtxGetCurrent(&mine));
	CHECK(cuCtxGetDevice(&dev));
	CHECK(cuCtxCreate(&other, NULL, 0, dev));
	CHECK(cuCtxSetCurrent(mine));
	CHECK(cuKernelSetAttribute(dyn, 3000, kern, dev));
	CHECK(cuCtxSetCurrent(other));
	CHECK(cuKernelSetAttribute(dyn, 2000, kern, dev));
	CHECK(cuCtxSetCurrent(mine));
	CHECK(cuKernelSetAttribute(dyn, 3000, kern, dev));
	show("3000 here, 2000 in another context, 3000 here again", kern, fn);
	CHECK(cuCtxDestroy(other));
	CHECK(cuCtxSetCurrent(mine));
}

static void attributes(CUkernel kern, CUfunction fn)
{
	const CUfunction_attribute dyn = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
	int version = 0, v = 0;
	size_t fifo = 0;

	show("nothing", kern, fn);
	for (int i = 0; i < 3; i++)
		CHECK(cuKernelSetAttribute(dyn, 1000, kern, 0));
	show("kernel set 1000 three times", kern, fn);
	CHECK(cuFuncSetAttribute(fn, dyn, 2000));
	show("function set 2000", kern, fn);
	CHECK(cuKernelSetAttribute(dyn, 1000, kern, 0));
	show("kernel set 1000 again", kern, fn);
	printf("vecadd_library: kernel set -5: error %d\n", (int)cuKernelSetAttribute(dyn, -5, kern, 0));
	for (int i = 0; i < 200; i++) {   /* what a library does per launch */
		CHECK(cuKernelSetAttribute(dyn, 1000, kern, 0));
		CHECK(cuDriverGetVersion(&version));
		CHECK(cuKernelGetAttribute(&v, dyn, kern, 0));
	}
	show("200 launches' worth", kern, fn);
	cross_context(kern, fn);
	CHECK(cuCtxGetLimit(&fifo, CU_LIMIT_PRINTF_FIFO_SIZE));
	CHECK(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, fifo * 2));
	CHECK(cuCtxGetLimit(&fifo, CU_LIMIT_PRINTF_FIFO_SIZE));
	printf("vecadd_library: printf fifo doubled: %zu\n", fifo);
	CHECK(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, fifo / 2));
}

int main(void)
{
	int n = 1 << 20;
	size_t bytes = (size_t)n * sizeof(float);
	CUdeviceptr da, db, dc;
	CUfunction fn;
	CUcontext ctx;
	CUlibrary lib;
	CUkernel kern;
	CUdevice dev;
	float *a, *b, *c;
	void *image;

	start("vecadd_library");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));

	image = load_kernel("kernels_a.fatbin", NULL);
	CHECK(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
	CHECK(cuLibraryGetKernel(&kern, lib, "vec_add"));

	a = xmalloc(bytes);
	b = xmalloc(bytes);
	c = xmalloc(bytes);
	fill_inputs(a, b, n);
	CHECK(cuMemAlloc(&da, bytes));
	CHECK(cuMemAlloc(&db, bytes));
	CHECK(cuMemAlloc(&dc, bytes));
	CHECK(cuMemcpyHtoD(da, a, bytes));
	CHECK(cuMemcpyHtoD(db, b, bytes));

	run("kernel_as_function", (CUfunction)kern, da, db, dc, n, a, b, c);
	CHECK(cuKernelGetFunction(&fn, kern));
	run("cuKernelGetFunction", fn, da, db, dc, n, a, b, c);
	attributes(kern, fn);

	CHECK(cuMemFree(da));
	CHECK(cuMemFree(db));
	CHECK(cuMemFree(dc));
	CHECK(cuLibraryUnload(lib));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	free(a);
	free(b);
	free(c);
	free(image);
	printf("vecadd_library: PASS\n");
	return 0;
}

/*
 * vecadd_library: loads kernels_a.fatbin with cuLibraryLoadData, gets
 * vec_add as a CUkernel and launches it twice: once passing the CUkernel
 * cast to CUfunction, once through cuKernelGetFunction. Both results are
 * checked against the CPU.
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

/*
 * vecadd_cubin: loads kernels_a.cubin from memory with cuModuleLoadData
 * and checks vec_add on 1M floats against the CPU.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

int main(void)
{
	int n = 1 << 20;
	size_t bytes = (size_t)n * sizeof(float);
	CUdeviceptr da, db, dc;
	CUfunction fn;
	CUcontext ctx;
	CUmodule mod;
	CUdevice dev;
	float *a, *b, *c;
	void *image;
	double err;

	start("vecadd_cubin");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));

	image = load_kernel("kernels_a.cubin", NULL);
	CHECK(cuModuleLoadData(&mod, image));
	CHECK(cuModuleGetFunction(&fn, mod, "vec_add"));

	a = xmalloc(bytes);
	b = xmalloc(bytes);
	c = xmalloc(bytes);
	fill_inputs(a, b, n);
	CHECK(cuMemAlloc(&da, bytes));
	CHECK(cuMemAlloc(&db, bytes));
	CHECK(cuMemAlloc(&dc, bytes));
	CHECK(cuMemcpyHtoD(da, a, bytes));
	CHECK(cuMemcpyHtoD(db, b, bytes));

	void *args[] = { &da, &db, &dc, &n };
	CHECK(cuLaunchKernel(fn, GRID(n), 1, 1, BLOCK, 1, 1, 0, NULL, args, NULL));
	CHECK(cuCtxSynchronize());
	CHECK(cuMemcpyDtoH(c, dc, bytes));

	err = vecadd_max_err(a, b, c, n);
	printf("vecadd_cubin: n=%d max_err=%g %s\n", n, err, err == 0 ? "OK" : "BAD");
	if (err != 0)
		fail("vec_add result differs from CPU");

	CHECK(cuMemFree(da));
	CHECK(cuMemFree(db));
	CHECK(cuMemFree(dc));
	CHECK(cuModuleUnload(mod));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	free(a);
	free(b);
	free(c);
	free(image);
	printf("vecadd_cubin: PASS\n");
	return 0;
}

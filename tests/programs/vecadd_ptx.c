/*
 * vecadd_ptx: JIT-compiles kernels_a.ptx with cuModuleLoadDataEx and a
 * few JIT options (error log buffer and size, optimization level), then
 * checks vec_add on 1M floats against the CPU.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

int main(void)
{
	int n = 1 << 20;
	size_t bytes = (size_t)n * sizeof(float);
	char log[8192] = "";
	CUjit_option opts[] = {
		CU_JIT_ERROR_LOG_BUFFER,
		CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
		CU_JIT_OPTIMIZATION_LEVEL,
	};
	void *vals[] = {
		log,
		(void *)(uintptr_t)sizeof(log),
		(void *)(uintptr_t)3,
	};
	CUdeviceptr da, db, dc;
	CUfunction fn;
	CUcontext ctx;
	CUmodule mod;
	CUdevice dev;
	CUresult r;
	float *a, *b, *c;
	char *ptx;
	double err;

	start("vecadd_ptx");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));

	ptx = load_kernel("kernels_a.ptx", NULL);
	r = cuModuleLoadDataEx(&mod, ptx, 3, opts, vals);
	if (r != CUDA_SUCCESS) {
		printf("vecadd_ptx: jit error log: %s\n", log);
		CHECK(r);
	}
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
	printf("vecadd_ptx: n=%d max_err=%g %s\n", n, err, err == 0 ? "OK" : "BAD");
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
	free(ptx);
	printf("vecadd_ptx: PASS\n");
	return 0;
}

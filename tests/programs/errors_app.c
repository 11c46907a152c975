/*
 * errors_app: calls that must fail, and how. A bogus cuMemFree, a
 * missing kernel name, a garbage module image, and a launch with too
 * many threads per block; afterwards the context must still run vec_add.
 * cuMemFree is also called twice, as the runtime calls it, through
 * cuGetProcAddress (the trace test reads what Cicada logs of it).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

static void expect(const char *what, CUresult got, CUresult want)
{
	printf("errors_app: %s -> %s\n", what, errname(got));
	if (got != want)
		fail("%s returned %s, want %s", what, errname(got), errname(want));
}

static void vecadd(CUfunction fn, int n)
{
	size_t bytes = (size_t)n * sizeof(float);
	float *a = xmalloc(bytes), *b = xmalloc(bytes), *c = xmalloc(bytes);
	CUdeviceptr da, db, dc;
	double err;

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
	printf("errors_app: vec_add after errors n=%d max_err=%g %s\n", n, err,
	       err == 0 ? "OK" : "BAD");
	if (err != 0)
		fail("vec_add after errors differs from CPU");
	CHECK(cuMemFree(da));
	CHECK(cuMemFree(db));
	CHECK(cuMemFree(dc));
	free(a);
	free(b);
	free(c);
}

int main(void)
{
	unsigned char garbage[64];
	CUresult r_launch, r_sync;
	CUresult (*mem_free)(CUdeviceptr);
	CUdeviceptr da, db, dc;
	CUmodule mod, bad_mod;
	CUfunction fn, nofn;
	CUcontext ctx;
	CUdevice dev;
	void *image;
	int n = 4096;

	start("errors_app");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	image = load_kernel("kernels_a.cubin", NULL);
	CHECK(cuModuleLoadData(&mod, image));
	CHECK(cuModuleGetFunction(&fn, mod, "vec_add"));

	expect("cuMemFree(bogus pointer)",
	       cuMemFree((CUdeviceptr)0x1234), CUDA_ERROR_INVALID_VALUE);
	CHECK(cuGetProcAddress("cuMemFree", (void **)&mem_free, 13000, 0, NULL));
	expect("cuMemFree from cuGetProcAddress(bogus pointer)",
	       mem_free((CUdeviceptr)0x1234), CUDA_ERROR_INVALID_VALUE);
	expect("the same again", mem_free((CUdeviceptr)0x1234), CUDA_ERROR_INVALID_VALUE);
	expect("cuModuleGetFunction(no_such_kernel)",
	       cuModuleGetFunction(&nofn, mod, "no_such_kernel"),
	       CUDA_ERROR_NOT_FOUND);

	/* Neither ELF nor fatbin; NUL-terminated so a PTX parse stops. */
	for (int i = 0; i < 63; i++)
		garbage[i] = (unsigned char)(0x80 + (i * 37) % 0x7f);
	garbage[63] = 0;
	if (cuModuleLoadData(&bad_mod, garbage) == CUDA_SUCCESS)
		fail("cuModuleLoadData accepted 64 bytes of garbage");
	printf("errors_app: cuModuleLoadData(garbage) -> error\n");

	/* 2048 threads per block is over every device's limit. */
	CHECK(cuMemAlloc(&da, n * sizeof(float)));
	CHECK(cuMemAlloc(&db, n * sizeof(float)));
	CHECK(cuMemAlloc(&dc, n * sizeof(float)));
	void *args[] = { &da, &db, &dc, &n };
	r_launch = cuLaunchKernel(fn, 2, 1, 1, 2048, 1, 1, 0, NULL, args, NULL);
	r_sync = cuCtxSynchronize();
	if (r_launch != CUDA_ERROR_INVALID_VALUE && r_sync != CUDA_ERROR_INVALID_VALUE)
		fail("launch with 2048 threads: launch %s, sync %s",
		     errname(r_launch), errname(r_sync));
	if ((r_launch != CUDA_SUCCESS && r_launch != CUDA_ERROR_INVALID_VALUE) ||
	    (r_sync != CUDA_SUCCESS && r_sync != CUDA_ERROR_INVALID_VALUE))
		fail("launch with 2048 threads: unexpected launch %s, sync %s",
		     errname(r_launch), errname(r_sync));
	printf("errors_app: bad_launch_error_seen\n");
	CHECK(mem_free(da));
	CHECK(cuMemFree(db));
	CHECK(cuMemFree(dc));

	vecadd(fn, n);

	CHECK(cuModuleUnload(mod));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	free(image);
	printf("errors_app: PASS\n");
	return 0;
}

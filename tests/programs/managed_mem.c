/*
 * managed_mem: managed memory as programs use it: one pointer written on
 * the host, read and written by kernels, read on the host after the
 * synchronisation; copies and memsets to and from it; prefetches and
 * advice; a second allocation freed and made again. Prints what it
 * computed, so that a run through Cicada must print what a native run
 * prints (on devices with or without concurrent managed access).
 */
#include <stdio.h>
#include <stdlib.h>
#include "common.h"

#define N (300 * 1000)                         /* several of Cicada's blocks, not a whole number */

static double sum(const float *x, int n)
{
	double s = 0;

	for (int i = 0; i < n; i++)
		s += x[i];
	return s;
}

static void launch(CUfunction f, void **args)
{
	CHECK(cuLaunchKernel(f, GRID(N), 1, 1, BLOCK, 1, 1, 0, NULL, args, NULL));
	CHECK(cuCtxSynchronize());
}

int main(void)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction scale, saxpy;
	CUdeviceptr x, y, d;
	float *hx, *hy, f = 2.0f, a = 0.5f, *tmp;
	int n = N, managed = 0;
	CUmemLocation host = { .type = CU_MEM_LOCATION_TYPE_HOST, .id = 0 };
	void *scale_args[] = { &x, &f, &n }, *saxpy_args[] = { &a, &x, &y, &n };

	start("managed_mem");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuDeviceGetAttribute(&managed, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, dev));
	printf("managed memory supported: %d\n", managed);
	CHECK(cuModuleLoadData(&mod, load_kernel("kernels_a.cubin", NULL)));
	CHECK(cuModuleGetFunction(&scale, mod, "scale"));
	CHECK(cuModuleGetFunction(&saxpy, mod, "saxpy"));

	CHECK(cuMemAllocManaged(&x, N * sizeof(float), CU_MEM_ATTACH_GLOBAL));
	CHECK(cuMemAllocManaged(&y, N * sizeof(float), CU_MEM_ATTACH_GLOBAL));
	hx = (float *)(uintptr_t)x;
	hy = (float *)(uintptr_t)y;
	printf("new managed memory reads zero: %s\n", sum(hx, N) == 0 ? "yes" : "no");
	for (int i = 0; i < N; i++)
		hx[i] = (float)(i % 1000), hy[i] = 1.0f;
	launch(scale, scale_args);                /* the kernel sees the host's writes */
	printf("after scale: x[0..3] %.1f %.1f %.1f %.1f, sum %.1f\n", hx[0], hx[1], hx[2], hx[999], sum(hx, N));
	for (int i = 0; i < N; i += 2)
		hx[i] = 1.0f;                     /* the host writes again, every other element */
	launch(saxpy, saxpy_args);
	printf("after saxpy: y[0..1] %.2f %.2f, sum %.2f\n", hy[0], hy[1], sum(hy, N));

	CHECK(cuMemsetD32(y, 0x3f800000u, N / 2));  /* 1.0f, first half */
	CHECK(cuCtxSynchronize());
	printf("after memset: sum %.2f\n", sum(hy, N));
	tmp = xmalloc(N * sizeof(float));
	for (int i = 0; i < N; i++)
		tmp[i] = 3.0f;
	CHECK(cuMemcpyHtoD(x, tmp, N * sizeof(float)));  /* into managed, from the host */
	printf("after copy in: sum %.1f\n", sum(hx, N));
	hx[7] = 100.0f;
	CHECK(cuMemAlloc(&d, N * sizeof(float)));
	CHECK(cuMemcpy(d, x, N * sizeof(float)));          /* managed to device, unified */
	CHECK(cuMemcpyDtoH(tmp, d, N * sizeof(float)));
	printf("after copy out: sum %.1f, [7] %.1f\n", sum(tmp, N), tmp[7]);
	CHECK(cuMemcpyDtoH(hy, d, N * sizeof(float)));     /* device to managed, by its host pointer */
	printf("copied into managed on the host side: sum %.1f\n", sum(hy, N));

	CHECK(cuMemAdvise_v2(x, N * sizeof(float), CU_MEM_ADVISE_SET_READ_MOSTLY, host));
	CHECK(cuMemPrefetchAsync_v2(x, N * sizeof(float), host, 0, NULL));
	CHECK(cuStreamSynchronize(NULL));
	printf("after prefetch to the host: [7] %.1f\n", hx[7]);

	CHECK(cuMemFree(y));
	CHECK(cuMemAllocManaged(&y, 4096, CU_MEM_ATTACH_GLOBAL));
	((int *)(uintptr_t)y)[10] = 42;
	CHECK(cuMemcpyDtoH(tmp, y, 4096));
	printf("a second managed allocation: %d\n", ((int *)tmp)[10]);
	CHECK(cuMemFree(x));
	CHECK(cuMemFree(y));
	CHECK(cuMemFree(d));
	free(tmp);
	printf("done\n");
	return 0;
}

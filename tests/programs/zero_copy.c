/*
 * zero_copy: kernels write and read mapped pinned host memory directly
 * (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP). Through Cicada this
 * needs a local gpu-server (shared memory), so it runs only there. With
 * unified addressing the host pointer is the device pointer too, and a
 * kernel given the host pointer itself (as NCCL gives its work queues)
 * reaches the memory.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* Kernels write and read mapped host memory directly. */
static void test_zero_copy(void)
{
	int n = 100003;
	size_t bytes = (size_t)n * sizeof(unsigned);
	unsigned v = 0x600dcafe, *h;
	CUfunction fill, inc;
	CUdeviceptr dp;
	CUmodule mod;
	void *image;
	int bad = 0;

	image = load_kernel("kernels_b.cubin", NULL);
	CHECK(cuModuleLoadData(&mod, image));
	CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
	CHECK(cuModuleGetFunction(&inc, mod, "inc_u32"));
	CHECK(cuMemHostAlloc((void **)&h, bytes, CU_MEMHOSTALLOC_DEVICEMAP));
	CHECK(cuMemHostGetDevicePointer(&dp, h, 0));
	memset(h, 0, bytes);

	void *fargs[] = { &dp, &v, &n };
	CHECK(cuLaunchKernel(fill, GRID(n), 1, 1, BLOCK, 1, 1, 0, NULL, fargs, NULL));
	CHECK(cuCtxSynchronize());
	for (int i = 0; i < n; i++)
		if (h[i] != v)
			bad++;
	printf("zero_copy: zero-copy kernel write n=%d mismatches=%d\n", n, bad);
	if (bad)
		fail("kernel writes to mapped host memory not seen");

	for (int i = 0; i < n; i++)
		h[i] = (unsigned)i * 3;
	void *iargs[] = { &dp, &n };
	CHECK(cuLaunchKernel(inc, GRID(n), 1, 1, BLOCK, 1, 1, 0, NULL, iargs, NULL));
	CHECK(cuCtxSynchronize());
	for (int i = 0; i < n; i++)
		if (h[i] != (unsigned)i * 3 + 1)
			bad++;
	printf("zero_copy: zero-copy kernel read-modify-write n=%d mismatches=%d\n",
	       n, bad);
	if (bad)
		fail("kernel read-modify-write of mapped host memory wrong");

	printf("zero_copy: the device pointer is the host pointer: %s\n", dp == (CUdeviceptr)(uintptr_t)h ? "yes" : "no");
	if (dp == (CUdeviceptr)(uintptr_t)h) {
		CUdeviceptr hp = (CUdeviceptr)(uintptr_t)(h + 1);
		int m = n - 1;
		void *hargs[] = { &hp, &m };

		CHECK(cuLaunchKernel(inc, GRID(m), 1, 1, BLOCK, 1, 1, 0, NULL, hargs, NULL));
		CHECK(cuCtxSynchronize());
		for (int i = 1; i < n; i++)
			if (h[i] != (unsigned)i * 3 + 2)
				bad++;
		printf("zero_copy: kernel given the host pointer n=%d mismatches=%d\n", m, bad);
		if (bad)
			fail("a kernel given the host pointer missed the memory");
	}

	CHECK(cuMemFreeHost(h));
	CHECK(cuModuleUnload(mod));
	free(image);
}

int main(void)
{
	CUcontext ctx;
	CUdevice dev;

	start("zero_copy");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	test_zero_copy();
	CHECK(cuDevicePrimaryCtxRelease(dev));
	printf("zero_copy: PASS\n");
	return 0;
}

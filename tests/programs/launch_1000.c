/*
 * launch_1000: many small launches queued back to back. 1000 inc_u32
 * launches through cuLaunchKernel with one synchronize at the end, then
 * 100 through cuLaunchKernelEx with a launch attribute, then 100 passing
 * the parameters as one buffer in `extra`. Every element must count them.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static void verify(const char *what, CUdeviceptr d, unsigned *h, int n,
		   unsigned want)
{
	int bad = 0;

	CHECK(cuMemcpyDtoH(h, d, (size_t)n * sizeof(unsigned)));
	for (int i = 0; i < n; i++)
		if (h[i] != want)
			bad++;
	printf("launch_1000: %s n=%d expect=%u mismatches=%d\n", what, n, want, bad);
	if (bad)
		fail("%s: %d elements differ from %u", what, bad, want);
}

int main(void)
{
	int n = 1 << 16, least, greatest;
	size_t bytes = (size_t)n * sizeof(unsigned);
	CUlaunchAttribute attr;
	CUlaunchConfig cfg;
	CUdeviceptr d;
	CUfunction inc;
	CUcontext ctx;
	CUstream s;
	CUmodule mod;
	CUdevice dev;
	unsigned *h;
	void *image;

	start("launch_1000");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	image = load_kernel("kernels_b.cubin", NULL);
	CHECK(cuModuleLoadData(&mod, image));
	CHECK(cuModuleGetFunction(&inc, mod, "inc_u32"));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(cuMemAlloc(&d, bytes));
	CHECK(cuMemsetD32(d, 0, n));
	CHECK(cuCtxSynchronize());
	h = xmalloc(bytes);

	void *args[] = { &d, &n };
	for (int i = 0; i < 1000; i++)
		CHECK(cuLaunchKernel(inc, GRID(n), 1, 1, BLOCK, 1, 1, 0, s, args, NULL));
	CHECK(cuStreamSynchronize(s));
	verify("1000 cuLaunchKernel", d, h, n, 1000);

	CHECK(cuCtxGetStreamPriorityRange(&least, &greatest));
	memset(&attr, 0, sizeof(attr));
	attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
	attr.value.priority = greatest;
	memset(&cfg, 0, sizeof(cfg));
	cfg.gridDimX = GRID(n);
	cfg.gridDimY = 1;
	cfg.gridDimZ = 1;
	cfg.blockDimX = BLOCK;
	cfg.blockDimY = 1;
	cfg.blockDimZ = 1;
	cfg.sharedMemBytes = 0;
	cfg.hStream = s;
	cfg.attrs = &attr;
	cfg.numAttrs = 1;
	for (int i = 0; i < 100; i++)
		CHECK(cuLaunchKernelEx(&cfg, inc, args, NULL));
	CHECK(cuStreamSynchronize(s));
	verify("+100 cuLaunchKernelEx", d, h, n, 1100);

	/* inc_u32(unsigned *p, int n): p at offset 0, n at 8, 12 bytes. */
	unsigned char buf[16] __attribute__((aligned(8)));
	size_t buf_size = 12;
	memset(buf, 0, sizeof(buf));
	memcpy(buf, &d, sizeof(d));
	memcpy(buf + 8, &n, sizeof(n));
	void *extra[] = {
		CU_LAUNCH_PARAM_BUFFER_POINTER, buf,
		CU_LAUNCH_PARAM_BUFFER_SIZE, &buf_size,
		CU_LAUNCH_PARAM_END,
	};
	for (int i = 0; i < 100; i++)
		CHECK(cuLaunchKernel(inc, GRID(n), 1, 1, BLOCK, 1, 1, 0, s, NULL, extra));
	CHECK(cuStreamSynchronize(s));
	verify("+100 extra param buffer", d, h, n, 1200);

	CHECK(cuMemFree(d));
	CHECK(cuStreamDestroy(s));
	CHECK(cuModuleUnload(mod));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	free(h);
	free(image);
	printf("launch_1000: PASS\n");
	return 0;
}

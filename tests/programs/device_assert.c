/*
 * device_assert: a kernel whose threads fail device asserts. The driver
 * prints each failed assertion on the program's stderr when the program
 * synchronises, and the synchronisation reports the failure. Through
 * Cicada the worker's stderr is forwarded: the same lines must reach the
 * program's own stderr, before the synchronisation returns its error.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

int main(void)
{
	int host[8] = { 5, 4, 3, -1, 2, 1, 0, 7 }, n = 8;
	CUdeviceptr dv;
	CUfunction fn;
	CUcontext ctx;
	CUmodule mod;
	CUdevice dev;
	CUresult r;
	void *image;

	start("device_assert");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	image = load_kernel("kernels_assert.cubin", NULL);
	CHECK(cuModuleLoadData(&mod, image));
	CHECK(cuModuleGetFunction(&fn, mod, "check_positive"));
	CHECK(cuMemAlloc(&dv, sizeof(host)));
	CHECK(cuMemcpyHtoD(dv, host, sizeof(host)));

	void *args[] = { &dv, &n };
	CHECK(cuLaunchKernel(fn, 1, 1, 1, n, 1, 1, 0, NULL, args, NULL));
	printf("launched: two of %d elements are not positive\n", n);
	fflush(stdout);
	r = cuCtxSynchronize();
	fflush(stderr);
	printf("synchronise: %s\n", errname(r));
	free(image);
	return 0;
}

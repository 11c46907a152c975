/*
 * first_call: how long a fresh client waits for its session, for the
 * admission tests of tests/security: from the start of main to the
 * answer of its first CUDA calls (cuInit, which dials the gpu-server
 * and says hello, then cuDeviceGet and a context, which the worker
 * answers). Prints "first_call: served in N ms", or the error; exits 0
 * if served.
 */
#include <cuda.h>
#include <stdio.h>
#include <time.h>

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(void)
{
	double t0 = now_ms();
	const char *name = "?";
	CUcontext ctx;
	CUdevice dev;
	CUresult err;

	if ((err = cuInit(0)) || (err = cuDeviceGet(&dev, 0)) || (err = cuDevicePrimaryCtxRetain(&ctx, dev))) {
		cuGetErrorName(err, &name);
		printf("first_call: not served: %s after %.0f ms\n", name, now_ms() - t0);
		return 1;
	}
	printf("first_call: served in %.0f ms\n", now_ms() - t0);
	return 0;
}

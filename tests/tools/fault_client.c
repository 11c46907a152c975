/*
 * fault_client: a driver-API program that keeps making synchronous calls
 * for up to N seconds, for the fault tests. With "expect-failure" it
 * reports how long after its last successful call the first failure came
 * (the test kills its server meanwhile) and how long a further call takes;
 * with "expect-success" every call must succeed.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *name_of(CUresult err)
{
	const char *s = "?";

	cuGetErrorName(err, &s);
	return s;
}

int main(int argc, char **argv)
{
	int expect_failure = argc > 1 && !strcmp(argv[1], "expect-failure");
	double seconds = argc > 2 ? atof(argv[2]) : 5, start, last_ok;
	unsigned value = 7, back = 0;
	CUcontext ctx;
	CUdevice dev;
	CUdeviceptr d;
	CUresult err;

	if ((err = cuInit(0)) || (err = cuDeviceGet(&dev, 0)) || (err = cuDevicePrimaryCtxRetain(&ctx, dev)) ||
	    (err = cuCtxSetCurrent(ctx)) || (err = cuMemAlloc(&d, 4))) {
		printf("fault_client: setup failed: %s\n", name_of(err));
		return 1;
	}
	printf("fault_client: ready\n");
	fflush(stdout);
	start = last_ok = now_ms();
	while (now_ms() - start < seconds * 1e3) {
		err = cuMemcpyHtoD(d, &value, 4);
		if (!err)
			err = cuMemcpyDtoH(&back, d, 4);
		if (!err && back != value)
			err = CUDA_ERROR_UNKNOWN;
		if (err) {
			double failed = now_ms(), again;
			CUresult err2 = cuCtxSynchronize();
			again = now_ms() - failed;
			printf("fault_client: failed %.0f ms after the last success with %s; next call %s in %.1f ms\n",
			       failed - last_ok, name_of(err), name_of(err2), again);
			return expect_failure && failed - last_ok <= 1000 && err2 && again <= 1000 ? 0 : 1;
		}
		last_ok = now_ms();
		value++;
		usleep(1000);
	}
	printf("fault_client: no failure in %.0f s\n", seconds);
	return expect_failure ? 1 : 0;
}

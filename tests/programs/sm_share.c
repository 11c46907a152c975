/*
 * sm_share: which SMs a program's launches run on (gpu-server
 * --sm-share). It prints the SM count and memory the driver reports, then launches
 * sm_ids (each block writes the SM it ran on) on the NULL stream and on a
 * stream it made, and prints how many SMs each launch used and which.
 *
 *   sm_share               once
 *   sm_share hold FILE     again every 20 ms on the same stream, a line
 *                          each time the SMs change, until FILE exists
 *   sm_share ctx           and what cuCtxCreate answers (a context of its
 *                          own would run on every SM: refused under a share)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define BLOCKS 2048
#define SM_MAX 1024

static CUfunction ids;
static CUdeviceptr out;
static unsigned host[BLOCKS];

/* The SMs one launch on s ran on: how many, and their list in text. */
static int launch_on(CUstream s, char *list, size_t len)
{
	static unsigned char seen[SM_MAX];
	int n = BLOCKS, count = 0, at = 0;
	void *args[] = { &out, &n };

	CHECK(cuLaunchKernel(ids, BLOCKS, 1, 1, 1024, 1, 1, 0, s, args, NULL));   /* (2 blocks an SM at most) */
	CHECK(cuStreamSynchronize(s));
	CHECK(cuMemcpyDtoH(host, out, sizeof(host)));
	memset(seen, 0, sizeof(seen));
	for (int b = 0; b < BLOCKS; b++)
		if (host[b] < SM_MAX)
			seen[host[b]] = 1;
	list[0] = 0;
	for (int i = 0; i < SM_MAX; i++)
		if (seen[i]) {
			count++;
			if (at < (int)len - 8)
				at += snprintf(list + at, len - (size_t)at, "%s%d", at ? "," : "", i);
		}
	return count;
}

static void hold(CUstream s, const char *file)
{
	static char list[8192];
	int last = -1, n, rounds = 0;

	while (access(file, F_OK) && rounds++ < 3000) {
		n = launch_on(s, list, sizeof(list));
		if (n != last)
			printf("sm_share: stream ran on %d SMs: %s\n", n, list);
		fflush(stdout);
		last = n;
		usleep(20000);
	}
	printf("sm_share: done after %d rounds\n", rounds);
}

int main(int argc, char **argv)
{
	static char list[8192];
	CUcontext ctx;
	CUmodule mod;
	CUdevice dev;
	CUstream s;
	int sms;

	start("sm_share");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
	printf("sm_share: the device reports %d SMs\n", sms);
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	{
		size_t free_b, total;

		CHECK(cuMemGetInfo(&free_b, &total));
		printf("sm_share: the device has %zu MiB\n", total >> 20);
	}
	CHECK(cuModuleLoadData(&mod, load_kernel("kernels_a.cubin", NULL)));
	CHECK(cuModuleGetFunction(&ids, mod, "sm_ids"));
	CHECK(cuMemAlloc(&out, sizeof(host)));
	CHECK(cuStreamCreate(&s, 0));
	printf("sm_share: NULL stream ran on %d SMs\n", launch_on(NULL, list, sizeof(list)));
	printf("sm_share: stream ran on %d SMs: %s\n", launch_on(s, list, sizeof(list)), list);
	if (argc == 3 && !strcmp(argv[1], "hold"))
		hold(s, argv[2]);
	if (argc == 2 && !strcmp(argv[1], "ctx")) {
		CUcontext own;
		CUresult r = cuCtxCreate(&own, NULL, 0, dev);

		printf("sm_share: cuCtxCreate: %s\n", errname(r));
		if (!r) {
			CHECK(cuCtxDestroy(own));
			CHECK(cuCtxSetCurrent(ctx));
		}
	}
	CHECK(cuStreamDestroy(s));
	CHECK(cuMemFree(out));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	return 0;
}

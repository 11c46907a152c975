/*
 * quota_routes: a session's device memory quota (gpu-server
 * --memory-quota) through every allocation route it covers. Given the
 * quota in MiB, it checks that cuMemGetInfo answers it as the total,
 * then fills it by cuMemAlloc in 8 MiB pieces (the next one refused
 * with CUDA_ERROR_OUT_OF_MEMORY) and frees them, and asks once past it
 * by cuMemAllocPitch, cuMemAllocAsync (a stream-ordered pool),
 * cuMemCreate (the application's own VMM) and cuArrayCreate, each
 * refused as on a full GPU while an allocation within the quota by the
 * same route succeeds.
 * Prints one line a route and "quota_routes: PASS".
 */
#include <stdio.h>
#include <stdlib.h>
#include "common.h"

#define MIB ((size_t)1 << 20)
#define PIECE (8 * MIB)
#define MAX_PIECES 4096

static size_t q;

static void info(void)
{
	size_t free_b, total;

	CHECK(cuMemGetInfo(&free_b, &total));
	if (total != q || free_b > total)
		fail("cuMemGetInfo: total %zu, free %zu; the quota is %zu", total, free_b, q);
	printf("info: total is the quota (%zu MiB)\n", total / MIB);
}

static void fill(void)
{
	static CUdeviceptr p[MAX_PIECES];
	size_t n = 0, free_b, total;
	CUresult r = CUDA_SUCCESS;

	while (n < MAX_PIECES && !(r = cuMemAlloc(&p[n], PIECE)))
		n++;
	if (r != CUDA_ERROR_OUT_OF_MEMORY || n * PIECE > q || (n + 2) * PIECE < q)
		fail("cuMemAlloc: %zu pieces of 8 MiB, then %s (quota %zu MiB)", n, errname(r), q / MIB);
	CHECK(cuMemGetInfo(&free_b, &total));
	if (free_b >= PIECE * 2)
		fail("cuMemGetInfo: %zu MiB free with the quota full", free_b / MIB);
	while (n)
		CHECK(cuMemFree(p[--n]));
	printf("alloc: filled to the quota in 8 MiB pieces, the next refused (OUT_OF_MEMORY), freed\n");
}

static void pitch(void)
{
	CUdeviceptr p;
	size_t pitch_b;
	CUresult r = cuMemAllocPitch(&p, &pitch_b, 1 << 20, 2 * q / MIB, 4);

	if (r != CUDA_ERROR_OUT_OF_MEMORY)
		fail("cuMemAllocPitch past the quota: %s", errname(r));
	CHECK(cuMemAllocPitch(&p, &pitch_b, 1 << 20, 4, 4));
	CHECK(cuMemFree(p));
	printf("pitch: past the quota refused (OUT_OF_MEMORY), within it allocated\n");
}

static void pool(void)
{
	CUstream s;
	CUdeviceptr p;
	CUresult r;

	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	r = cuMemAllocAsync(&p, 2 * q, s);
	if (r == CUDA_SUCCESS)
		r = cuStreamSynchronize(s);
	if (r != CUDA_ERROR_OUT_OF_MEMORY)
		fail("cuMemAllocAsync past the quota: %s", errname(r));
	CHECK(cuMemAllocAsync(&p, PIECE, s));
	CHECK(cuMemFreeAsync(p, s));
	CHECK(cuStreamSynchronize(s));
	CHECK(cuStreamDestroy(s));
	printf("pool: past the quota refused (OUT_OF_MEMORY), within it allocated\n");
}

static void vmm(CUdevice dev)
{
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev } };
	CUmemGenericAllocationHandle h;
	size_t g;
	CUresult r;

	CHECK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	r = cuMemCreate(&h, (2 * q + g - 1) / g * g, &prop, 0);
	if (r != CUDA_ERROR_OUT_OF_MEMORY)
		fail("cuMemCreate past the quota: %s", errname(r));
	CHECK(cuMemCreate(&h, g, &prop, 0));
	CHECK(cuMemRelease(h));
	printf("vmm: past the quota refused (OUT_OF_MEMORY), within it created\n");
}

static void array(void)
{
	CUDA_ARRAY_DESCRIPTOR d = { .Width = 4096, .Height = 2 * q / (4096 * 4), .Format = CU_AD_FORMAT_FLOAT,
				    .NumChannels = 1 };
	CUarray a;
	CUresult r = cuArrayCreate(&a, &d);

	if (r != CUDA_ERROR_OUT_OF_MEMORY)
		fail("cuArrayCreate past the quota: %s", errname(r));
	d.Height = 64;
	CHECK(cuArrayCreate(&a, &d));
	CHECK(cuArrayDestroy(a));
	printf("array: past the quota refused (OUT_OF_MEMORY), within it created\n");
}

int main(int argc, char **argv)
{
	CUdevice dev;
	CUcontext ctx;

	start("quota_routes");
	if (argc != 2 || atoi(argv[1]) < 32)
		fail("usage: quota_routes QUOTA_MIB (32 or more)");
	q = (size_t)atoi(argv[1]) * MIB;
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	info();
	fill();
	pitch();
	pool();
	vmm(dev);
	array();
	fill();                              /* everything given back: the whole quota again */
	printf("quota_routes: PASS\n");
	return 0;
}

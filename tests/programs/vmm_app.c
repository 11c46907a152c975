/*
 * vmm_app: the application's own virtual memory management, as custom
 * allocators (PyTorch's expandable segments) use it: granularity, a
 * reservation, physical allocations mapped into it with access set,
 * kernels and copies on that memory, handles released while mapped,
 * a handle found again from an address, properties and access queried,
 * unmapping and mapping again, one allocation mapped twice, many small
 * reservations (more than a gpu-server's 1 GiB slab holds, some freed and
 * made again), and compressible memory where the device offers it.
 * Prints only what it
 * computed (no addresses), so that a run through Cicada must print what
 * a native run prints.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"

#define N (64 * 1024)

static double sum(CUdeviceptr p, int n)
{
	float *h = xmalloc(n * sizeof(float));
	double s = 0;

	CHECK(cuMemcpyDtoH(h, p, n * sizeof(float)));
	for (int i = 0; i < n; i++)
		s += h[i] * (double)(i % 7 + 1);
	free(h);
	return s;
}

static void set_rw(CUdeviceptr p, size_t size)
{
	CUmemAccessDesc d = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };

	CHECK(cuMemSetAccess(p, size, &d, 1));
}

#define SMALL 600

static int by_address(const void *a, const void *b)
{
	CUdeviceptr x = *(const CUdeviceptr *)a, y = *(const CUdeviceptr *)b;

	return x < y ? -1 : x > y;
}

/* SMALL reservations of one granule each, every other one freed and made
 * again: none overlaps another, and one allocation mapped into several of
 * them (first, middle, last) holds what was written through each. */
static void many_small(size_t gran, const CUmemAllocationProp *prop)
{
	static CUdeviceptr v[SMALL], sorted[SMALL];
	CUmemGenericAllocationHandle h;
	const int at[] = { 0, SMALL / 2 + 13, SMALL - 1 };
	unsigned seen = 0;
	int apart = 1;

	for (int i = 0; i < SMALL; i++)
		CHECK(cuMemAddressReserve(&v[i], gran, 0, 0, 0));
	for (int i = 1; i < SMALL; i += 2)
		CHECK(cuMemAddressFree(v[i], gran));
	for (int i = 1; i < SMALL; i += 2)
		CHECK(cuMemAddressReserve(&v[i], gran, 0, 0, 0));
	memcpy(sorted, v, sizeof(v));
	qsort(sorted, SMALL, sizeof(*sorted), by_address);
	for (int i = 1; i < SMALL; i++)
		apart &= sorted[i] >= sorted[i - 1] + gran;
	CHECK(cuMemCreate(&h, gran, prop, 0));
	for (unsigned k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
		unsigned word = 0;
		CHECK(cuMemMap(v[at[k]], gran, 0, h, 0));
		set_rw(v[at[k]], gran);
		CHECK(cuMemsetD32(v[at[k]] + 4 * k, 0x100u + k, 1));
		CHECK(cuMemcpyDtoH(&word, v[at[k]] + 4 * k, 4));
		seen += word;
		CHECK(cuMemUnmap(v[at[k]], gran));
	}
	CHECK(cuMemRelease(h));
	for (int i = 0; i < SMALL; i++)
		CHECK(cuMemAddressFree(v[i], gran));
	printf("%d small reservations, none overlapping: %s; written through three of them: %u\n", SMALL,
	       apart ? "yes" : "no", seen);
}

static void compressible(CUdevice dev, size_t gran, CUfunction scale)
{
	CUmemAllocationProp prop = { 0 }, got;
	CUmemGenericAllocationHandle h;
	CUdeviceptr va;
	int supported = 0, n = N;
	float f = 3.0f;
	void *args[] = { &va, &f, &n };

	cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED, dev);
	printf("generic compression supported: %d\n", supported);
	if (!supported)
		return;
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location = (CUmemLocation){ CU_MEM_LOCATION_TYPE_DEVICE, 0 };
	prop.allocFlags.compressionType = CU_MEM_ALLOCATION_COMP_GENERIC;
	CHECK(cuMemAddressReserve(&va, gran, 0, 0, 0));
	CHECK(cuMemCreate(&h, gran, &prop, 0));
	CHECK(cuMemGetAllocationPropertiesFromHandle(&got, h));
	printf("compressible allocation: compression type %d\n", got.allocFlags.compressionType);
	CHECK(cuMemMap(va, gran, 0, h, 0));
	set_rw(va, gran);
	CHECK(cuMemsetD32(va, 0x3f800000u, N));
	CHECK(cuLaunchKernel(scale, GRID(N), 1, 1, BLOCK, 1, 1, 0, NULL, args, NULL));
	printf("compressible memory scaled: %.1f\n", sum(va, N));
	CHECK(cuMemUnmap(va, gran));
	CHECK(cuMemRelease(h));
	CHECK(cuMemAddressFree(va, gran));
}

int main(void)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction scale, saxpy;
	CUmemAllocationProp prop = { 0 }, got;
	CUmemGenericAllocationHandle h1, h2, h3, again;
	CUmemLocation dev0 = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
	CUdeviceptr va, x, y, plain;
	size_t gran, rec, sz;
	unsigned long long flags = 0;
	unsigned type = 0;
	float a = 0.5f, f = 2.0f, *h;
	int n = N, vmm = 0;
	void *scale_args[] = { &x, &f, &n }, *saxpy_args[] = { &a, &x, &y, &n };

	start("vmm_app");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
	printf("virtual memory management supported: %d\n", vmm);
	CHECK(cuModuleLoadData(&mod, load_kernel("kernels_a.cubin", NULL)));
	CHECK(cuModuleGetFunction(&scale, mod, "scale"));
	CHECK(cuModuleGetFunction(&saxpy, mod, "saxpy"));

	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location = dev0;
	CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CHECK(cuMemGetAllocationGranularity(&rec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
	printf("granularity %zu, recommended %zu\n", gran, rec);
	sz = (N * sizeof(float) + gran - 1) / gran * gran;

	/* Two allocations side by side in one reservation, one access call. */
	CHECK(cuMemAddressReserve(&va, 3 * sz, 0, 0, 0));
	CHECK(cuMemCreate(&h1, sz, &prop, 0));
	CHECK(cuMemCreate(&h2, sz, &prop, 0));
	CHECK(cuMemMap(va, sz, 0, h1, 0));
	CHECK(cuMemMap(va + sz, sz, 0, h2, 0));
	set_rw(va, 2 * sz);
	x = va, y = va + sz;
	h = xmalloc(N * sizeof(float));
	for (int i = 0; i < N; i++)
		h[i] = (float)(i % 1000);
	CHECK(cuMemcpyHtoD(x, h, N * sizeof(float)));
	CHECK(cuMemsetD32(y, 0x3f800000u, N));                 /* 1.0f */
	CHECK(cuLaunchKernel(saxpy, GRID(N), 1, 1, BLOCK, 1, 1, 0, NULL, saxpy_args, NULL));
	CHECK(cuLaunchKernel(scale, GRID(N), 1, 1, BLOCK, 1, 1, 0, NULL, scale_args, NULL));
	CHECK(cuCtxSynchronize());
	printf("x scaled: %.1f, y = a x + 1: %.1f\n", sum(x, N), sum(y, N));

	/* Unified copies know it for device memory. */
	CHECK(cuMemcpy(x, (CUdeviceptr)(uintptr_t)h, N * sizeof(float)));
	CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, y));
	printf("copied back: %.1f, memory type %u\n", sum(x, N), type);
	CHECK(cuMemAlloc(&plain, N * sizeof(float)));
	CHECK(cuMemcpyDtoD(plain, y, N * sizeof(float)));
	printf("copied to cuMemAlloc memory: %.1f\n", sum(plain, N));

	/* The handle again from an address; its properties; the access. */
	CHECK(cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)(y + 4096)));
	CHECK(cuMemGetAllocationPropertiesFromHandle(&got, again));
	printf("retained: type %d, location %d/%d, same as created: %s\n", got.type, got.location.type,
	       got.location.id, again == h2 ? "yes" : "no");
	CHECK(cuMemRelease(again));
	CHECK(cuMemGetAccess(&flags, &dev0, y));
	printf("access flags %llu\n", flags);

	/* Released while mapped: the memory stays until unmapped. */
	CHECK(cuMemRelease(h1));
	CHECK(cuMemRelease(h2));
	printf("after release: %.1f\n", sum(y, N));

	/* Unmap the second and map a third there and, again, after it. */
	CHECK(cuMemUnmap(va + sz, sz));
	CHECK(cuMemCreate(&h3, sz, &prop, 0));
	CHECK(cuMemMap(va + sz, sz, 0, h3, 0));
	CHECK(cuMemMap(va + 2 * sz, sz, 0, h3, 0));
	set_rw(va + sz, 2 * sz);
	CHECK(cuMemcpyDtoD(va + sz, x, N * sizeof(float)));
	CHECK(cuLaunchKernel(scale, GRID(N), 1, 1, BLOCK, 1, 1, 0, NULL, scale_args, NULL));
	printf("remapped: %.1f, the second mapping sees it: %s\n", sum(va + 2 * sz, N),
	       sum(va + sz, N) == sum(va + 2 * sz, N) ? "yes" : "no");
	CHECK(cuMemRelease(h3));

	many_small(gran, &prop);
	compressible(dev, gran, scale);

	CHECK(cuMemUnmap(va, 3 * sz));
	CHECK(cuMemAddressFree(va, 3 * sz));
	CHECK(cuMemFree(plain));
	printf("done\n");
	free(h);
	return 0;
}

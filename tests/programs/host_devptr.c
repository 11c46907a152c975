/*
 * host_devptr: cuMemHostGetDevicePointer and the pointer attributes on
 * every kind of host memory the driver accepts: cuMemAllocHost,
 * cuMemHostAlloc with each flag, cuMemHostRegister with each flag, a
 * pointer inside such memory, and pageable memory it must refuse. Where
 * a device pointer comes back, a kernel adds one through it and the
 * host sees the change. It prints what it finds (results, never
 * addresses), so a run through Cicada must print what a native run does.
 * Whether the device pointer of allocated memory is its host address is
 * printed (a kernel may be given either); that of registered memory is
 * not: the worker maps the program's pages where it can, and the driver
 * gives back that address (docs: Limits). Through Cicada this needs a
 * local gpu-server: over TCP only mapped allocations reach the device.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"

#define N 4096                               /* unsigned values a buffer holds */

static CUfunction inc;

/* What the driver says of p (a buffer of N values, or inside one). */
static void probe(const char *kind, unsigned *p, int same_matters)
{
	CUdeviceptr dp = 0, attr = 0;
	unsigned flags = 0, bad = 0;
	int mapped = 0, n = N / 2;
	CUresult r = cuMemHostGetDevicePointer(&dp, p, 0);
	CUresult rf = cuMemHostGetFlags(&flags, p);
	CUresult rm = cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, (CUdeviceptr)(uintptr_t)p);
	CUresult ra = cuPointerGetAttribute(&attr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, (CUdeviceptr)(uintptr_t)p);

	printf("host_devptr: %-26s devptr %s%s flags %s/%u mapped %s/%d attr-devptr %s%s", kind, errname(r),
	       r || !same_matters ? "" : dp == (CUdeviceptr)(uintptr_t)p ? " (the host address)" : " (elsewhere)", errname(rf),
	       rf ? 0 : flags, errname(rm), rm ? -1 : mapped, errname(ra),
	       ra ? "" : attr == dp ? " (the same)" : " (another)");
	if (r) {
		printf("\n");
		return;
	}
	for (int i = 0; i < n; i++)
		p[i] = (unsigned)i;
	void *args[] = { &dp, &n };
	CHECK(cuLaunchKernel(inc, GRID(n), 1, 1, BLOCK, 1, 1, 0, NULL, args, NULL));
	CHECK(cuCtxSynchronize());
	for (int i = 0; i < n; i++)
		bad += p[i] != (unsigned)i + 1;
	printf(" kernel %s\n", bad ? "WRONG" : "reaches it");
}

static void allocated(const char *kind, unsigned flags, int legacy)
{
	unsigned *p;

	if (legacy)
		CHECK(cuMemAllocHost((void **)&p, N * sizeof(*p)));
	else
		CHECK(cuMemHostAlloc((void **)&p, N * sizeof(*p), flags));
	probe(kind, p, 1);
	probe("  (a pointer inside it)", p + 64, 1);
	CHECK(cuMemFreeHost(p));
}

static void registered(const char *kind, unsigned flags)
{
	size_t bytes = N * sizeof(unsigned);
	unsigned *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		fail("no memory");
	if (!kind) {
		probe("pageable (not registered)", p, 0);
		munmap(p, bytes);
		return;
	}
	CHECK(cuMemHostRegister(p, bytes, flags));
	probe(kind, p, 0);
	CHECK(cuMemHostUnregister(p));
	munmap(p, bytes);
}

int main(void)
{
	CUcontext ctx;
	CUmodule mod;
	CUdevice dev;
	int uva = 0;

	start("host_devptr");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDeviceGetAttribute(&uva, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, dev));
	CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
	CHECK(cuModuleLoadData(&mod, load_kernel("kernels_b.cubin", NULL)));
	CHECK(cuModuleGetFunction(&inc, mod, "inc_u32"));
	printf("host_devptr: unified addressing %d\n", uva);
	allocated("cuMemAllocHost", 0, 1);
	allocated("cuMemHostAlloc 0", 0, 0);
	allocated("cuMemHostAlloc PORTABLE", CU_MEMHOSTALLOC_PORTABLE, 0);
	allocated("cuMemHostAlloc DEVICEMAP", CU_MEMHOSTALLOC_DEVICEMAP, 0);
	allocated("cuMemHostAlloc WRITECOMBINED", CU_MEMHOSTALLOC_WRITECOMBINED, 0);
	registered("cuMemHostRegister 0", 0);
	registered("cuMemHostRegister PORTABLE", CU_MEMHOSTREGISTER_PORTABLE);
	registered("cuMemHostRegister DEVICEMAP", CU_MEMHOSTREGISTER_DEVICEMAP);
	registered(NULL, 0);
	CHECK(cuCtxDestroy(ctx));
	printf("host_devptr: done\n");
	return 0;
}

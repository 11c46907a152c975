/*
 * host_devptr: cuMemHostGetDevicePointer and the pointer attributes on
 * every kind of host memory the driver accepts: cuMemAllocHost,
 * cuMemHostAlloc with each flag, cuMemHostRegister with each flag, a
 * pointer inside such memory, and pageable memory it must refuse. Where
 * a device pointer comes back, a kernel adds one through it and the
 * host sees the change. Then host and kernels take turns on mapped
 * memory of each kind, the host reading after each kind of
 * synchronisation (context, stream, event, a blocking copy, a query).
 * It prints what it finds (results, never addresses), so a run through
 * Cicada must print what a native run does, over every transport (a
 * remote client's device sees a mirror of the memory, kept coherent at
 * those points). Whether the device pointer is its host address is
 * printed for mapped allocations only (DEVICEMAP; a kernel may be given
 * either): that of other pinned memory of a remote client is its mirror,
 * that of registered memory where the worker could map the program's
 * pages (docs: Limits).
 */
#define _GNU_SOURCE                          /* memfd_create */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

#define N 4096                               /* unsigned values a buffer holds */

static CUfunction inc, fill;

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
	probe(kind, p, flags & CU_MEMHOSTALLOC_DEVICEMAP);
	probe("  (a pointer inside it)", p + 64, flags & CU_MEMHOSTALLOC_DEVICEMAP);
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

#define TURNS_N (64 * 1024)                 /* values: 64 blocks of 4 KiB */

enum { BY_CTX, BY_STREAM, BY_EVENT, BY_COPY, BY_QUERY, BY_COUNT };
static const char *const by_name[BY_COUNT] = { "context sync", "stream sync", "event sync", "blocking copy",
					      "stream query" };

/* Waits for the work launched on s the way how says. */
static void wait_by(int how, CUstream s, CUevent e, CUdeviceptr scratch)
{
	unsigned v;

	switch (how) {
	case BY_CTX: CHECK(cuCtxSynchronize()); break;
	case BY_STREAM: CHECK(cuStreamSynchronize(s)); break;
	case BY_EVENT: CHECK(cuEventRecord(e, s)); CHECK(cuEventSynchronize(e)); break;
	case BY_COPY: CHECK(cuMemcpyDtoH(&v, scratch, sizeof(v))); break;
	default: {
		CUresult r;
		while ((r = cuStreamQuery(s)) == CUDA_ERROR_NOT_READY)
			;
		CHECK(r);
	}
	}
}

static unsigned mismatches(const unsigned *p, const unsigned *ref, int n)
{
	unsigned bad = 0;

	for (int i = 0; i < n; i++)
		bad += p[i] != ref[i];
	return bad;
}

/* Host and kernels take turns on p (TURNS_N values): each round the host
 * writes a few blocks, a kernel adds one to all, and the host reads
 * after one kind of synchronisation; then a kernel fills the first half
 * and the host reads that after a context synchronisation. */
static void turns(const char *kind, unsigned *p)
{
	unsigned *ref = xmalloc(TURNS_N * sizeof(*ref));
	int n = TURNS_N, half = TURNS_N / 2;
	CUdeviceptr dp, scratch;
	CUstream s;
	CUevent e;

	CHECK(cuMemHostGetDevicePointer(&dp, p, 0));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	CHECK(cuMemAlloc(&scratch, sizeof(unsigned)));
	for (int i = 0; i < n; i++)
		p[i] = ref[i] = (unsigned)i;
	for (int r = 0; r < 2 * BY_COUNT; r++) {
		int how = r % BY_COUNT, from = (r * 5 % 64) * 1024, count = 1024 * (1 + r % 3);
		CUstream on = how == BY_CTX || how == BY_COPY ? NULL : s;
		unsigned v = 0xc0de0000u + (unsigned)r;
		void *iargs[] = { &dp, &n }, *fargs[] = { &dp, &v, &half };

		for (int i = from; i < from + count && i < n; i++)
			p[i] = ref[i] = (unsigned)i * 7 + (unsigned)r;
		CHECK(cuLaunchKernel(inc, GRID(n), 1, 1, BLOCK, 1, 1, 0, on, iargs, NULL));
		wait_by(how, on, e, scratch);
		for (int i = 0; i < n; i++)
			ref[i]++;
		printf("host_devptr: turns on %-22s round %2d, host wrote %4d, kernel added, %-13s: mismatches %u\n",
		       kind, r, count, by_name[how], mismatches(p, ref, n));
		if (r % 4 == 3) {
			CHECK(cuLaunchKernel(fill, GRID(half), 1, 1, BLOCK, 1, 1, 0, NULL, fargs, NULL));
			CHECK(cuCtxSynchronize());
			for (int i = 0; i < half; i++)
				ref[i] = v;
			printf("host_devptr: turns on %-22s round %2d, kernel filled half, context sync: mismatches %u\n",
			       kind, r, mismatches(p, ref, n));
		}
	}
	CHECK(cuMemFree(scratch));
	CHECK(cuEventDestroy(e));
	CHECK(cuStreamDestroy(s));
	free(ref);
}

/* turns on registered memory; shared: a memory file mapped shared (pages
 * a local worker cannot take over), else private anonymous pages. After
 * unregistering, the host keeps what kernels wrote and the device pointer
 * is refused. */
static void turns_registered(const char *kind, unsigned flags, int shared)
{
	size_t bytes = TURNS_N * sizeof(unsigned);
	int fd = shared ? memfd_create("host_devptr", 0) : -1;
	unsigned *p;
	CUdeviceptr dp;
	CUresult r;

	if (shared && (fd < 0 || ftruncate(fd, (off_t)bytes)))
		fail("no memory file");
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, shared ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS, fd, 0);
	if (p == MAP_FAILED)
		fail("no memory");
	CHECK(cuMemHostRegister(p, bytes, flags));
	turns(kind, p);
	CHECK(cuMemHostUnregister(p));
	r = cuMemHostGetDevicePointer(&dp, p, 0);
	printf("host_devptr: %s unregistered: last value %u, devptr %s\n", kind, p[TURNS_N - 1], errname(r));
	munmap(p, bytes);
	if (fd >= 0)
		close(fd);
}

static void turns_allocated(const char *kind, unsigned flags)
{
	unsigned *p;

	CHECK(cuMemHostAlloc((void **)&p, TURNS_N * sizeof(unsigned), flags));
	turns(kind, p);
	CHECK(cuMemFreeHost(p));
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
	CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
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
	turns_registered("registered DEVICEMAP", CU_MEMHOSTREGISTER_DEVICEMAP, 0);
	turns_registered("registered 0", 0, 0);
	turns_registered("registered shared file", CU_MEMHOSTREGISTER_DEVICEMAP, 1);
	turns_allocated("cuMemHostAlloc 0", 0);
	turns_allocated("cuMemHostAlloc DEVICEMAP", CU_MEMHOSTALLOC_DEVICEMAP);
	CHECK(cuCtxDestroy(ctx));
	printf("host_devptr: done\n");
	return 0;
}

/*
 * zero_copy: kernels write and read mapped pinned host memory directly
 * (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP): true zero-copy with a
 * local gpu-server (shared memory), managed memory over a remote link. With
 * unified addressing the host pointer is the device pointer too, and a
 * kernel given the host pointer itself (as NCCL gives its work queues)
 * reaches the memory; so also where the place the worker names first is
 * taken in this process (as when another thread's freed pinned memory is
 * still mapped here). Pinned memory without DEVICEMAP (cuMemAllocHost,
 * cuMemHostAlloc PORTABLE, cuMemHostRegister with no flags) is reached by
 * its host address too, as unified addressing has it: a kernel given
 * that address, or one inside it, reads and writes the memory (over a
 * remote link the argument is pointed at the memory's device mirror).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

/* Pinned memory freed, its place then taken by a mapping of this
 * process, and pinned memory allocated again: the host pointer must still
 * be the device pointer. */
static void test_taken_place(void)
{
	size_t bytes = 1u << 20;
	void *a, *b, *block;
	CUdeviceptr dp;

	CHECK(cuMemHostAlloc(&a, bytes, CU_MEMHOSTALLOC_DEVICEMAP));
	CHECK(cuMemFreeHost(a));
	block = mmap(a, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	CHECK(cuMemHostAlloc(&b, bytes, CU_MEMHOSTALLOC_DEVICEMAP));
	CHECK(cuMemHostGetDevicePointer(&dp, b, 0));
	printf("zero_copy: allocated again where the first place is taken here, the device pointer is the host "
	       "pointer: %s\n", dp == (CUdeviceptr)(uintptr_t)b ? "yes" : "no");
	CHECK(cuMemFreeHost(b));
	if (block != MAP_FAILED)
		munmap(block, bytes);
}

/* A kernel given the host address of pinned memory that was not mapped
 * (how: 0 cuMemAllocHost, 1 cuMemHostAlloc PORTABLE, 2 cuMemHostRegister
 * of malloc'd pages), and an address inside it. */
static void test_host_address(CUfunction inc, int how)
{
	static const char *const names[] = { "cuMemAllocHost", "cuMemHostAlloc(PORTABLE)", "cuMemHostRegister" };
	int n = 50021, m = n - 7, bad = 0;
	size_t bytes = (size_t)n * sizeof(unsigned);
	unsigned *h, *raw = NULL;
	CUdeviceptr hp, mid;

	if (how == 0)
		CHECK(cuMemAllocHost((void **)&h, bytes));
	else if (how == 1)
		CHECK(cuMemHostAlloc((void **)&h, bytes, CU_MEMHOSTALLOC_PORTABLE));
	else {
		raw = malloc(bytes + 8192);
		h = (unsigned *)(((uintptr_t)raw + 4095) & ~(uintptr_t)4095);
		CHECK(cuMemHostRegister(h, bytes, 0));
	}
	for (int i = 0; i < n; i++)
		h[i] = (unsigned)i * 5;
	hp = (CUdeviceptr)(uintptr_t)h;
	mid = (CUdeviceptr)(uintptr_t)(h + 7);
	void *a1[] = { &hp, &n }, *a2[] = { &mid, &m };
	CHECK(cuLaunchKernel(inc, GRID(n), 1, 1, BLOCK, 1, 1, 0, NULL, a1, NULL));
	CHECK(cuLaunchKernel(inc, GRID(m), 1, 1, BLOCK, 1, 1, 0, NULL, a2, NULL));
	CHECK(cuCtxSynchronize());
	for (int i = 0; i < n; i++)
		if (h[i] != (unsigned)i * 5 + 1 + (i >= 7))
			bad++;
	printf("zero_copy: %s, kernels given its host address and one inside it: mismatches=%d\n", names[how], bad);
	if (bad)
		fail("a kernel given the host address of pinned memory missed it");
	if (raw) {
		CHECK(cuMemHostUnregister(h));
		free(raw);
	} else {
		CHECK(cuMemFreeHost(h));
	}
}

/* The same in a graph: a kernel node given the host address of
 * cuMemAllocHost memory, launched twice. */
static void test_host_address_graph(CUfunction inc)
{
	int n = 4099, bad = 0;
	unsigned *h;
	CUdeviceptr hp;
	CUDA_KERNEL_NODE_PARAMS k = { 0 };
	CUgraphNode node;
	CUgraphExec exec;
	CUgraph g;

	CHECK(cuMemAllocHost((void **)&h, (size_t)n * sizeof(unsigned)));
	for (int i = 0; i < n; i++)
		h[i] = (unsigned)i;
	hp = (CUdeviceptr)(uintptr_t)h;
	void *args[] = { &hp, &n };
	k.func = inc;
	k.gridDimX = GRID(n);
	k.gridDimY = k.gridDimZ = 1;
	k.blockDimX = BLOCK;
	k.blockDimY = k.blockDimZ = 1;
	k.kernelParams = args;
	CHECK(cuGraphCreate(&g, 0));
	CHECK(cuGraphAddKernelNode(&node, g, NULL, 0, &k));
	CHECK(cuGraphInstantiate(&exec, g, 0));
	CHECK(cuGraphLaunch(exec, NULL));
	CHECK(cuGraphLaunch(exec, NULL));
	CHECK(cuCtxSynchronize());
	for (int i = 0; i < n; i++)
		if (h[i] != (unsigned)i + 2)
			bad++;
	printf("zero_copy: a graph's kernel node given the host address of cuMemAllocHost memory, twice: "
	       "mismatches=%d\n", bad);
	if (bad)
		fail("a graph kernel node given the host address of pinned memory missed it");
	CHECK(cuGraphExecDestroy(exec));
	CHECK(cuGraphDestroy(g));
	CHECK(cuMemFreeHost(h));
}

static void test_host_addresses(void)
{
	void *image = load_kernel("kernels_b.cubin", NULL);
	CUfunction inc;
	CUmodule mod;

	CHECK(cuModuleLoadData(&mod, image));
	CHECK(cuModuleGetFunction(&inc, mod, "inc_u32"));
	for (int how = 0; how < 3; how++)
		test_host_address(inc, how);
	test_host_address_graph(inc);
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
	test_taken_place();
	test_host_addresses();
	CHECK(cuDevicePrimaryCtxRelease(dev));
	printf("zero_copy: PASS\n");
	return 0;
}

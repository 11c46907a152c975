/*
 * multi_gpu [MIB [STEPS [STEP_MS]]]: a program that uses two GPUs as
 * programs do natively. It lists the devices, checks peer access and its
 * errors, keeps MIB of a pattern on each GPU, copies between them
 * (cuMemcpyPeer, unified cuMemcpy, device-to-device), runs a kernel on GPU
 * 1 that reads GPU 0's memory, and reduces over both GPUs, then runs a
 * kernel on GPU 1 that needs more stack than a context starts with and
 * makes a context on GPU 0 after it, with streams made and destroyed and
 * a library kernel's first use there, then a module. Each GPU also keeps
 * a piece of VMM memory that only it may reach (as NCCL's buffers are).
 * Then STEPS steps (STEP_MS apart: time to checkpoint it) each change
 * both GPUs' memory and exchange a slice, and print the checksums. With
 * one GPU it says so and runs the steps on that one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

#define NDEV 2

struct gpu {
	CUcontext ctx;
	CUmodule cr, a;
	CUfunction fill, step, sum, add;
	CUdeviceptr buf, out;
	CUdeviceptr own;                     /* VMM memory only this GPU may reach */
	unsigned long long nown;             /* its u32 */
};

static struct gpu g[NDEV];
static unsigned long long n;                 /* u32 per device */
static int nd;                               /* GPUs used: 1 or 2 */

static void setup(int d, void *cr_image, void *a_image)
{
	CUdevice dev;
	unsigned seed = 17u + (unsigned)d, mode = 0;
	void *args[] = { &g[d].buf, &n, &seed, &mode };

	CHECK(cuDeviceGet(&dev, d));
	CHECK(cuDevicePrimaryCtxRetain(&g[d].ctx, dev));
	CHECK(cuCtxSetCurrent(g[d].ctx));
	CHECK(cuModuleLoadData(&g[d].cr, cr_image));     /* modules are per context */
	CHECK(cuModuleLoadData(&g[d].a, a_image));
	CHECK(cuModuleGetFunction(&g[d].fill, g[d].cr, "fill_pattern"));
	CHECK(cuModuleGetFunction(&g[d].step, g[d].cr, "step_pattern"));
	CHECK(cuModuleGetFunction(&g[d].sum, g[d].cr, "checksum"));
	CHECK(cuModuleGetFunction(&g[d].add, g[d].a, "vec_add"));
	CHECK(cuMemAlloc(&g[d].buf, n * 4));
	CHECK(cuMemAlloc(&g[d].out, 8));
	CHECK(cuLaunchKernel(g[d].fill, 64, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	CHECK(cuCtxSynchronize());
}

/* GPU d's own VMM memory: one granule, reachable by d alone, a pattern. */
static void setup_own(int d)
{
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .location = { CU_MEM_LOCATION_TYPE_DEVICE, d } };
	CUmemAccessDesc access = { { CU_MEM_LOCATION_TYPE_DEVICE, d }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	CUmemGenericAllocationHandle h;
	unsigned seed = 91u + (unsigned)d, mode = 0;
	void *args[] = { &g[d].own, &g[d].nown, &seed, &mode };
	size_t gran = 0;

	CHECK(cuCtxSetCurrent(g[d].ctx));
	CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CHECK(cuMemAddressReserve(&g[d].own, gran, 0, 0, 0));
	CHECK(cuMemCreate(&h, gran, &prop, 0));
	CHECK(cuMemMap(g[d].own, gran, 0, h, 0));
	CHECK(cuMemRelease(h));                 /* the mapping keeps it */
	CHECK(cuMemSetAccess(g[d].own, gran, &access, 1));
	g[d].nown = gran / 4;
	CHECK(cuLaunchKernel(g[d].fill, 64, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	CHECK(cuCtxSynchronize());
}

/* GPU d's checksum of count u32 at p, computed there. */
static unsigned long long checksum_of(int d, CUdeviceptr p, unsigned long long count)
{
	unsigned long long v = 0;
	void *args[] = { &p, &count, &g[d].out };

	CHECK(cuCtxSetCurrent(g[d].ctx));
	CHECK(cuMemsetD32(g[d].out, 0, 2));
	CHECK(cuLaunchKernel(g[d].sum, 64, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	CHECK(cuMemcpyDtoH(&v, g[d].out, 8));
	return v;
}

static unsigned long long checksum(int d)
{
	return checksum_of(d, g[d].buf, n);
}

/* GPU d's own VMM memory stepped, and its checksum. */
static unsigned long long step_own(int d, unsigned step)
{
	void *args[] = { &g[d].own, &g[d].nown, &step };

	CHECK(cuCtxSetCurrent(g[d].ctx));
	CHECK(cuLaunchKernel(g[d].step, 64, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	return checksum_of(d, g[d].own, g[d].nown);
}

static void peer_access(void)
{
	int can01 = 0, can10 = 0;
	CUresult again, self;

	CHECK(cuDeviceCanAccessPeer(&can01, 0, 1));
	CHECK(cuDeviceCanAccessPeer(&can10, 1, 0));
	printf("peer access 0->1 %d, 1->0 %d\n", can01, can10);
	if (!can01 || !can10)
		fail("the GPUs cannot reach each other's memory");
	CHECK(cuCtxSetCurrent(g[0].ctx));
	CHECK(cuCtxEnablePeerAccess(g[1].ctx, 0));
	again = cuCtxEnablePeerAccess(g[1].ctx, 0);
	self = cuCtxEnablePeerAccess(g[0].ctx, 0);
	printf("enable twice: %s; to its own device: %s\n", cu_error_name(again), cu_error_name(self));
	CHECK(cuCtxSetCurrent(g[1].ctx));
	CHECK(cuCtxEnablePeerAccess(g[0].ctx, 0));
}

/* A box of GPU 0's buffer (rows of 256 words, 8 rows a slice) to GPU 1's
 * t, packed, by cuMemcpy3DPeer and its stream form; b0 holds the buffer. */
static void copy_3d_peer(const unsigned *b0, unsigned *got, CUdeviceptr t)
{
	CUDA_MEMCPY3D_PEER c = { 0 };
	int same = 1;

	c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = g[0].buf + 16, c.srcContext = g[0].ctx;
	c.srcPitch = 1024, c.srcHeight = 8, c.srcY = 1, c.srcZ = 1;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = t, c.dstContext = g[1].ctx;
	c.dstPitch = 256, c.dstHeight = 6;
	c.WidthInBytes = 256, c.Height = 6, c.Depth = 3;
	for (int pass = 0; pass < 2; pass++) {
		CHECK(cuCtxSetCurrent(g[pass].ctx));
		CHECK(cuMemsetD8(t, 0, 256 * 6 * 3));
		if (pass)
			CHECK(cuMemcpy3DPeerAsync(&c, NULL));
		else
			CHECK(cuMemcpy3DPeer(&c));
		CHECK(cuMemcpyDtoH(got, t, 256 * 6 * 3));
		for (unsigned z = 0; z < 3; z++)
			for (unsigned y = 0; y < 6; y++)
				same &= !memcmp(got + (z * 6 + y) * 64, b0 + ((z + 1) * 8 + y + 1) * 256 + 4, 256);
	}
	printf("cuMemcpy3DPeer 0->1, a box, both forms: %s\n", same ? "same" : "DIFFERS");
}

/* Copies between the GPUs, each way a program has. */
static void copies(void)
{
	size_t bytes = n * 4, half = bytes / 2;
	unsigned *b0 = xmalloc(bytes), *b1 = xmalloc(bytes), *got = xmalloc(bytes);
	CUdeviceptr t;
	int ord0 = -1, ord1 = -1, same;

	CHECK(cuPointerGetAttribute(&ord0, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, g[0].buf));
	CHECK(cuPointerGetAttribute(&ord1, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, g[1].buf));
	printf("buffers on devices %d and %d\n", ord0, ord1);
	CHECK(cuCtxSetCurrent(g[0].ctx));
	CHECK(cuMemcpyDtoH(b0, g[0].buf, bytes));
	CHECK(cuCtxSetCurrent(g[1].ctx));
	CHECK(cuMemcpyDtoH(b1, g[1].buf, bytes));
	CHECK(cuMemAlloc(&t, bytes));
	CHECK(cuMemcpyPeer(t, g[1].ctx, g[0].buf, g[0].ctx, bytes));
	CHECK(cuMemcpyDtoH(got, t, bytes));
	printf("cuMemcpyPeer 0->1: %s\n", memcmp(b0, got, bytes) ? "DIFFERS" : "same");
	CHECK(cuCtxSetCurrent(g[0].ctx));
	CHECK(cuMemcpy(t, g[0].buf + half, half));       /* unified, from GPU 0's context */
	CHECK(cuMemcpyDtoD(t + half, g[1].buf, half));   /* GPU 1 to GPU 1, from GPU 0's context */
	CHECK(cuMemcpyDtoH(got, t, bytes));
	same = !memcmp(got, (char *)b0 + half, half) && !memcmp((char *)got + half, b1, half);
	printf("unified and device-to-device copies: %s\n", same ? "same" : "DIFFER");
	copy_3d_peer(b0, got, t);
	CHECK(cuMemFree(t));
	free(b0);
	free(b1);
	free(got);
}

/* A kernel on GPU 1 adds GPU 0's floats to its own (peer reads). */
static void peer_kernel(void)
{
	int m = 1 << 16;
	size_t bytes = (size_t)m * sizeof(float);
	float *a = xmalloc(bytes), *b = xmalloc(bytes), *c = xmalloc(bytes);
	CUdeviceptr da, db, dc;
	void *args[] = { &da, &db, &dc, &m };
	double err;

	fill_inputs(a, b, (size_t)m);
	CHECK(cuCtxSetCurrent(g[0].ctx));
	CHECK(cuMemAlloc(&da, bytes));
	CHECK(cuMemcpyHtoD(da, a, bytes));
	CHECK(cuCtxSetCurrent(g[1].ctx));
	CHECK(cuMemAlloc(&db, bytes));
	CHECK(cuMemAlloc(&dc, bytes));
	CHECK(cuMemcpyHtoD(db, b, bytes));
	CHECK(cuLaunchKernel(g[1].add, (m + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	CHECK(cuCtxSynchronize());
	CHECK(cuMemcpyDtoH(c, dc, bytes));
	err = vecadd_max_err(a, b, c, m);
	printf("GPU 1 reading GPU 0: max_err=%g\n", err);
	if (err != 0)
		fail("the peer kernel's sums are wrong");
	CHECK(cuMemFree(db));
	CHECK(cuMemFree(dc));
	CHECK(cuCtxSetCurrent(g[0].ctx));
	CHECK(cuMemFree(da));
	free(a);
	free(b);
	free(c);
}

/* Each GPU sums its half; GPU 0 takes GPU 1's part over a peer copy. */
static void reduction(void)
{
	unsigned long long s1 = checksum(1), s0 = checksum(0), p1 = 0;
	CUdeviceptr part;

	CHECK(cuMemAlloc(&part, 8));
	CHECK(cuMemcpyPeer(part, g[0].ctx, g[1].out, g[1].ctx, 8));
	CHECK(cuMemcpyDtoH(&p1, part, 8));
	CHECK(cuMemFree(part));
	printf("two-GPU reduction: %llu (%s)\n", s0 + p1, p1 == s1 ? "parts agree" : "PARTS DIFFER");
}

static void steps(int count, int ms)
{
	struct timespec pause = { ms / 1000, (long)(ms % 1000) * 1000000 };
	size_t slice = n / 8 * 4;

	for (int s = 1; s <= count; s++) {
		unsigned step = (unsigned)s;

		for (int d = 0; d < nd; d++) {
			void *args[] = { &g[d].buf, &n, &step };

			CHECK(cuCtxSetCurrent(g[d].ctx));
			CHECK(cuLaunchKernel(g[d].step, 64, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
			CHECK(cuCtxSynchronize());
		}
		if (nd == NDEV) {
			CHECK(cuMemcpyPeer(g[1].buf, g[1].ctx, g[0].buf + slice, g[0].ctx, slice));
			CHECK(cuMemcpyPeer(g[0].buf, g[0].ctx, g[1].buf + 2 * slice, g[1].ctx, slice));
			printf("step %d %016llx %016llx", s, checksum(0), checksum(1));
			printf(" own %016llx %016llx\n", step_own(0, step), step_own(1, step));
		} else {
			printf("step %d %016llx own %016llx\n", s, checksum(0), step_own(0, step));
		}
		if (ms)
			nanosleep(&pause, NULL);
	}
}

/* The driver grows GPU 1's stack at deep_stack's launch, taking local
 * memory from the area where it places contexts and module variables,
 * every GPU's: the context then made on GPU 0, and its module, land after
 * it, so a restore must grow GPU 1's stack before making them, though
 * GPU 1 was not current there. The streams made and destroyed before the
 * module leave their mark there too (the most alive at once), and so
 * does a library's kernel, loaded into each context at its first use
 * there: an occupancy query, as the runtime makes, passing the CUkernel
 * as a CUfunction. */
static void late_module(void)
{
	void *b_image = load_kernel("kernels_b.cubin", NULL), *a_image = load_kernel("kernels_a.cubin", NULL);
	CUdeviceptr out, table;
	CUcontext late;
	CUstream many[12];
	CUmodule b;
	CUlibrary lib;
	CUkernel add;
	CUdevice dev;
	CUfunction deep;
	unsigned long long sum = 0;
	size_t size, stack = 0;
	int seed = 5, v[4], blocks[2] = { 0, 0 };
	void *args[] = { &out, &seed };

	CHECK(cuCtxSetCurrent(g[0].ctx));
	CHECK(cuLibraryLoadData(&lib, a_image, NULL, NULL, 0, NULL, NULL, 0));
	CHECK(cuLibraryGetKernel(&add, lib, "vec_add"));
	CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks[0], (CUfunction)add, 256, 0));
	CHECK(cuCtxSetCurrent(g[1].ctx));
	CHECK(cuModuleGetFunction(&deep, g[1].cr, "deep_stack"));
	CHECK(cuMemAlloc(&out, 8));
	CHECK(cuLaunchKernel(deep, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
	CHECK(cuMemcpyDtoH(&sum, out, 8));
	CHECK(cuCtxGetLimit(&stack, CU_LIMIT_STACK_SIZE));
	printf("deep_stack on GPU 1: %llu; its stack grew to 2 KiB or more: %s\n", sum, stack >= 2048 ? "yes" : "no");
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuCtxCreate(&late, NULL, 0, dev));
	for (int i = 0; i < 12; i++)
		CHECK(cuStreamCreate(&many[i], CU_STREAM_NON_BLOCKING));
	for (int i = 0; i < 12; i++)
		CHECK(cuStreamDestroy(many[i]));
	CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks[1], (CUfunction)add, 128, 0));
	printf("a library's vec_add: %d blocks of 256 a multiprocessor in GPU 0's context, %d of 128 in the "
	       "late one\n", blocks[0], blocks[1]);
	CHECK(cuModuleLoadData(&b, b_image));
	CHECK(cuModuleGetGlobal(&table, &size, b, "g_table"));
	CHECK(cuMemcpyDtoH(v, table, sizeof(v)));
	printf("a context made on GPU 0 after it, 12 streams made and destroyed, a module: g_table %d %d %d %d "
	       "(%zu bytes)\n", v[0], v[1], v[2], v[3], size);
	CHECK(cuCtxSetCurrent(g[0].ctx));
}

int main(int argc, char **argv)
{
	int count = 0, nsteps = argc > 2 ? atoi(argv[2]) : 4, ms = argc > 3 ? atoi(argv[3]) : 0;
	void *cr_image, *a_image;
	char name[256];

	n = (unsigned long long)(argc > 1 ? atoi(argv[1]) : 16) << 18;
	start("multi_gpu");
	CHECK(cuInit(0));
	CHECK(cuDeviceGetCount(&count));
	printf("devices %d\n", count);
	for (int d = 0; d < count; d++) {
		CUuuid u;

		CHECK(cuDeviceGetName(name, sizeof(name), d));
		CHECK(cuDeviceGetUuid(&u, d));
		printf("device %d: %s, uuid %02x%02x%02x%02x%02x%02x%02x%02x\n", d, name, (unsigned char)u.bytes[8],
		       (unsigned char)u.bytes[9], (unsigned char)u.bytes[10], (unsigned char)u.bytes[11],
		       (unsigned char)u.bytes[12], (unsigned char)u.bytes[13], (unsigned char)u.bytes[14],
		       (unsigned char)u.bytes[15]);
	}
	cr_image = load_kernel("kernels_cr.cubin", NULL);
	a_image = load_kernel("kernels_a.cubin", NULL);
	nd = count < NDEV ? 1 : NDEV;
	for (int d = 0; d < nd; d++)
		setup(d, cr_image, a_image);
	for (int d = 0; d < nd; d++)
		setup_own(d);
	if (nd == NDEV) {
		peer_access();
		copies();
		peer_kernel();
		reduction();
		late_module();
	} else {
		printf("one GPU: the two-GPU checks need two\n");
	}
	steps(nsteps, ms);
	printf("done\n");
	return 0;
}

/*
 * misc_calls: the smaller driver calls real programs make, each checked
 * and printed so that a run through Cicada must print what a native run
 * prints: stream attributes (an L2 access-policy window, copied to another
 * stream), the stream's device, 2D memsets (sync and async) on rows of
 * memory, the per-thread default stream forms (cuMemsetD32Async_ptsz with
 * a NULL stream), device properties, the peer attribute of a device with
 * itself, the 1D texture limit, the persisting-L2 reset and the profiler
 * switches.
 */
#include <cudaProfiler.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"

#define W 100                                 /* elements per row */
#define H 6

static void stream_attributes(CUdeviceptr window)
{
	CUstream s, t;
	CUstreamAttrValue v, back;
	CUdevice dev;

	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
	memset(&v, 0, sizeof(v));
	v.accessPolicyWindow.base_ptr = (void *)(uintptr_t)window;
	v.accessPolicyWindow.num_bytes = 1 << 20;
	v.accessPolicyWindow.hitRatio = 0.625f;
	v.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
	v.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
	CHECK(cuStreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
	CHECK(cuStreamGetAttribute(s, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &back));
	printf("window: base matches %d, bytes %zu, hit ratio %.3f, hit %d, miss %d\n",
	       back.accessPolicyWindow.base_ptr == v.accessPolicyWindow.base_ptr,
	       back.accessPolicyWindow.num_bytes, back.accessPolicyWindow.hitRatio,
	       (int)back.accessPolicyWindow.hitProp, (int)back.accessPolicyWindow.missProp);
	CHECK(cuStreamCopyAttributes(t, s));
	memset(&back, 0, sizeof(back));
	CHECK(cuStreamGetAttribute(t, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &back));
	printf("copied window: bytes %zu, hit ratio %.3f\n", back.accessPolicyWindow.num_bytes,
	       back.accessPolicyWindow.hitRatio);
	CHECK(cuStreamGetDevice(s, &dev));
	printf("stream device %d\n", (int)dev);
	CHECK(cuStreamDestroy(s));
	CHECK(cuStreamDestroy(t));
}

static unsigned checksum(const unsigned char *p, size_t n)
{
	unsigned h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static void memsets_2d(void)
{
	CUresult (*memset_ptsz)(CUdeviceptr, unsigned, size_t, CUstream);
	CUdeviceptr d;
	size_t pitch;
	unsigned char *host;
	CUstream s;

	pitch = 512;                              /* rows apart, as cuMemAllocPitch would */
	CHECK(cuMemAlloc(&d, pitch * H));
	host = xmalloc(pitch * H);
	CHECK(cuStreamCreate(&s, 0));
	CHECK(cuMemsetD8(d, 0, pitch * H));
	CHECK(cuMemsetD2D8(d, pitch, 0x11, W, 1));
	CHECK(cuMemsetD2D16(d + pitch, pitch, 0x2233, W, 1));
	CHECK(cuMemsetD2D32(d + 2 * pitch, pitch, 0x44556677u, W, 1));
	CHECK(cuMemsetD2D8Async(d + 3 * pitch, pitch, 0x88, W / 2, 1, s));
	CHECK(cuMemsetD2D16Async(d + 4 * pitch, pitch, 0x99aa, W / 2, 1, s));
	CHECK(cuMemsetD2D32Async(d + 5 * pitch, pitch, 0xbbccddeeu, W / 4, 1, s));
	CHECK(cuStreamSynchronize(s));
	memset_ptsz = (CUresult (*)(CUdeviceptr, unsigned, size_t, CUstream))dlsym(RTLD_DEFAULT,
										     "cuMemsetD32Async_ptsz");
	if (!memset_ptsz)
		fail("cuMemsetD32Async_ptsz is not exported");
	CHECK(memset_ptsz(d + 5 * pitch + W, 0x12345678u, W / 4, NULL));
	CHECK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
	CHECK(cuMemcpyDtoH(host, d, pitch * H));
	for (int r = 0; r < H; r++)
		printf("row %d: %02x %02x %02x %02x ... %02x, checksum %08x\n", r, host[r * pitch], host[r * pitch + 1],
		       host[r * pitch + 2], host[r * pitch + 3], host[r * pitch + W * 4 - 1],
		       checksum(host + r * pitch, W * 4));
	CHECK(cuStreamDestroy(s));
	CHECK(cuMemFree(d));
	free(host);
}

static void device_queries(CUdevice dev)
{
	CUdevprop p;
	size_t width = 0;
	int value = -1;
	CUresult r;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	CHECK(cuDeviceGetProperties(&p, dev));
#pragma GCC diagnostic pop
	printf("properties: threads %d, block %d %d %d, grid %d %d %d, shared %d, const %d, warp %d, regs %d, "
	       "align %d\n", p.maxThreadsPerBlock, p.maxThreadsDim[0], p.maxThreadsDim[1], p.maxThreadsDim[2],
	       p.maxGridSize[0], p.maxGridSize[1], p.maxGridSize[2], p.sharedMemPerBlock, p.totalConstantMemory,
	       p.SIMDWidth, p.regsPerBlock, p.textureAlign);
	r = cuDeviceGetP2PAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, dev, dev);
	printf("peer attribute of a device with itself: %s\n", errname(r));
	CHECK(cuDeviceGetTexture1DLinearMaxWidth(&width, CU_AD_FORMAT_FLOAT, 1, dev));
	printf("1D linear texture width limit: %s\n", width > 0 ? "positive" : "zero");
	printf("persisting L2 reset: %s\n", errname(cuCtxResetPersistingL2Cache()));
	printf("profiler start: %s, stop: %s\n", errname(cuProfilerStart()), errname(cuProfilerStop()));
}

/* Zero-byte stream-ordered allocations and frees of 0: the driver
 * succeeds and leaves the pointer alone (cuSPARSE's cg sample relies on
 * it; a refusal in the worker surfaced at the next synchronising call). */
static void empty_async(void)
{
	CUdeviceptr d = 1;
	CUstream s;

	CHECK(cuStreamCreate(&s, 0));
	printf("alloc of 0 bytes: %d, pointer %s\n", (int)cuMemAllocAsync(&d, 0, s), d == 1 ? "untouched" : "changed");
	printf("free of 0: %d\n", (int)cuMemFreeAsync(0, s));
	printf("the stream then: %d\n", (int)cuStreamSynchronize(s));
	CHECK(cuStreamDestroy(s));
}

int main(void)
{
	CUdevice dev;
	CUcontext ctx;
	CUdeviceptr window;

	start("misc_calls");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuMemAlloc(&window, 1 << 20));
	stream_attributes(window);
	memsets_2d();
	device_queries(dev);
	empty_async();
	CHECK(cuMemFree(window));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	printf("done\n");
	return 0;
}

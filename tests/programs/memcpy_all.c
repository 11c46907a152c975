/*
 * memcpy_all: every memcpy and memset flavour the interposer forwards.
 * Sync and async copies (H2D, D2H, D2D) from 1 byte to 64 MiB (over
 * TCP, those of 8 MiB and more take the bulk lanes) with
 * pageable, pinned (cuMemAllocHost) and registered (cuMemHostRegister)
 * host memory; cuMemcpy/cuMemcpyAsync on unified addresses; D8/D16/D32
 * memsets and their async forms at odd offsets and counts; and the memory
 * queries cuMemGetInfo, cuMemGetAddressRange and cuPointerGetAttribute.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define MAX_SIZE ((size_t)64 << 20)

static const size_t sizes[] = {
	1, 3, 4, 255, 4096, 65537, (1 << 20) + 7, ((size_t)12 << 20) + 5, (size_t)16 << 20, MAX_SIZE,
};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static CUstream stream;
static CUdeviceptr d0, d1;
static unsigned char *page_src, *page_dst;	/* malloc'd */
static unsigned char *pin_src, *pin_dst;	/* cuMemAllocHost */

static void pattern(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 131 + (i >> 9) + seed * 29 + 1);
}

static void compare(const char *what, size_t size, const void *got,
		    const void *want)
{
	if (memcmp(got, want, size)) {
		const unsigned char *g = got, *w = want;
		size_t i = 0;

		while (g[i] == w[i])
			i++;
		fail("%s size=%zu: byte %zu is 0x%02x, want 0x%02x",
		     what, size, i, g[i], w[i]);
	}
	printf("memcpy_all: %s size=%zu OK\n", what, size);
}

static void test_sync(void)
{
	for (size_t k = 0; k < NSIZES; k++) {
		size_t n = sizes[k];

		pattern(page_src, n, k);
		memset(page_dst, 0, n);
		CHECK(cuMemcpyHtoD(d0, page_src, n));
		CHECK(cuMemcpyDtoD(d1, d0, n));
		CHECK(cuMemcpyDtoH(page_dst, d1, n));
		compare("sync pageable h2d/d2d/d2h", n, page_dst, page_src);
	}
	/* Unaligned device and host offsets. */
	pattern(page_src, 70001, 99);
	CHECK(cuMemcpyHtoD(d0 + 3, page_src + 1, 70000));
	CHECK(cuMemcpyDtoD(d1 + 5, d0 + 3, 70000));
	CHECK(cuMemcpyDtoH(page_dst + 7, d1 + 5, 70000));
	compare("sync offsets", 70000, page_dst + 7, page_src + 1);
}

static void test_async_pinned(void)
{
	for (size_t k = 0; k < NSIZES; k++) {
		size_t n = sizes[k];

		pattern(pin_src, n, k + 50);
		memset(pin_dst, 0, n);
		CHECK(cuMemcpyHtoDAsync(d0, pin_src, n, stream));
		CHECK(cuMemcpyDtoDAsync(d1, d0, n, stream));
		CHECK(cuMemcpyDtoHAsync(pin_dst, d1, n, stream));
		CHECK(cuStreamSynchronize(stream));
		compare("async pinned h2d/d2d/d2h", n, pin_dst, pin_src);
	}
}

static void test_async_pageable(void)
{
	static const size_t psizes[] = { 1, 4097, (1 << 20) + 7 };

	for (size_t k = 0; k < 3; k++) {
		size_t n = psizes[k];

		pattern(page_src, n, k + 70);
		memset(page_dst, 0, n);
		CHECK(cuMemcpyHtoDAsync(d0, page_src, n, stream));
		CHECK(cuMemcpyDtoDAsync(d1, d0, n, stream));
		CHECK(cuMemcpyDtoHAsync(page_dst, d1, n, stream));
		CHECK(cuStreamSynchronize(stream));
		compare("async pageable h2d/d2d/d2h", n, page_dst, page_src);
	}
}

/* A malloc'd page-aligned buffer registered without DEVICEMAP. */
static void test_registered(void)
{
	size_t half = (size_t)4 << 20;
	unsigned char *buf = aligned_alloc(4096, 2 * half);

	if (!buf)
		fail("aligned_alloc failed");
	pattern(buf, half, 81);
	memset(buf + half, 0, half);
	CHECK(cuMemHostRegister(buf, 2 * half, 0));
	CHECK(cuMemcpyHtoDAsync(d0, buf, half, stream));
	CHECK(cuMemcpyDtoDAsync(d1, d0, half, stream));
	CHECK(cuMemcpyDtoHAsync(buf + half, d1, half, stream));
	CHECK(cuStreamSynchronize(stream));
	compare("async registered h2d/d2d/d2h", half, buf + half, buf);
	CHECK(cuMemHostUnregister(buf));
	free(buf);
}

/* cuMemcpy/cuMemcpyAsync infer directions from unified addresses. */
static void test_unified(void)
{
	static const size_t usizes[] = { 1, 65537, (size_t)16 << 20 };
	CUdeviceptr hsrc = (CUdeviceptr)(uintptr_t)pin_src;
	CUdeviceptr hdst = (CUdeviceptr)(uintptr_t)pin_dst;

	for (size_t k = 0; k < 3; k++) {
		size_t n = usizes[k];

		pattern(pin_src, n, k + 90);
		memset(pin_dst, 0, n);
		CHECK(cuMemcpy(d0, hsrc, n));
		CHECK(cuMemcpy(d1, d0, n));
		CHECK(cuMemcpy(hdst, d1, n));
		compare("cuMemcpy pinned->dev->dev->pinned", n, pin_dst, pin_src);

		pattern(pin_src, n, k + 95);
		memset(pin_dst, 0, n);
		CHECK(cuMemcpyAsync(d0, hsrc, n, stream));
		CHECK(cuMemcpyAsync(d1, d0, n, stream));
		CHECK(cuMemcpyAsync(hdst, d1, n, stream));
		CHECK(cuStreamSynchronize(stream));
		compare("cuMemcpyAsync pinned->dev->dev->pinned", n, pin_dst, pin_src);
	}
}

static void model_d16(unsigned char *m, size_t off, uint16_t v, size_t count)
{
	for (size_t i = 0; i < count; i++)
		memcpy(m + off + 2 * i, &v, 2);
}

static void model_d32(unsigned char *m, size_t off, uint32_t v, size_t count)
{
	for (size_t i = 0; i < count; i++)
		memcpy(m + off + 4 * i, &v, 4);
}

static void test_memset(void)
{
	size_t r = 100003;
	unsigned char *model = pin_src, *got = pin_dst;

	memset(model, 0x5a, r);
	CHECK(cuMemsetD8(d0, 0x5a, r));
	memset(model + 7, 0xab, 1001);
	CHECK(cuMemsetD8(d0 + 7, 0xab, 1001));
	model[1500] = 0x11;
	CHECK(cuMemsetD8(d0 + 1500, 0x11, 1));
	model_d16(model, 2002, 0xbeef, 333);
	CHECK(cuMemsetD16(d0 + 2002, 0xbeef, 333));
	model_d32(model, 4444, 0xdeadbeef, 77);
	CHECK(cuMemsetD32(d0 + 4444, 0xdeadbeef, 77));
	CHECK(cuMemcpyDtoH(got, d0, r));
	compare("memset d8/d16/d32", r, got, model);

	memset(model + 13, 0xcd, 999);
	CHECK(cuMemsetD8Async(d0 + 13, 0xcd, 999, stream));
	model_d16(model, 10006, 0x1234, 517);
	CHECK(cuMemsetD16Async(d0 + 10006, 0x1234, 517, stream));
	model_d32(model, 20004, 0xa5a5f00d, 4097);
	CHECK(cuMemsetD32Async(d0 + 20004, 0xa5a5f00d, 4097, stream));
	memset(got, 0, r);
	CHECK(cuMemcpyDtoHAsync(got, d0, r, stream));
	CHECK(cuStreamSynchronize(stream));
	compare("memset async d8/d16/d32", r, got, model);

	model_d32(model, 0, 0x01020304, MAX_SIZE / 4);
	CHECK(cuMemsetD32(d1, 0x01020304, MAX_SIZE / 4));
	CHECK(cuMemcpyDtoH(got, d1, MAX_SIZE));
	compare("memset d32 whole buffer", MAX_SIZE, got, model);
}

/* More pinned allocations over time than a client may hold at once. */
static void test_pinned_churn(void)
{
	for (int i = 0; i < 5000; i++) {
		unsigned char *p;
		CHECK(cuMemAllocHost((void **)&p, 4096));
		p[0] = (unsigned char)i;
		CHECK(cuMemcpyHtoD(d0, p, 1));
		CHECK(cuMemFreeHost(p));
	}
	printf("memcpy_all: 5000 pinned alloc/copy/free cycles OK\n");
}

static void test_queries(void)
{
	size_t free_b = 0, total_b = 0, size = 0;
	unsigned int type = 0;
	CUdeviceptr base = 0;

	CHECK(cuMemGetInfo(&free_b, &total_b));
	if (total_b == 0 || free_b > total_b)
		fail("cuMemGetInfo free=%zu total=%zu", free_b, total_b);
	printf("memcpy_all: meminfo free<=total OK\n");

	CHECK(cuMemGetAddressRange(&base, &size, d0 + 12345));
	if (base != d0 || size < MAX_SIZE)
		fail("cuMemGetAddressRange gave wrong base or size %zu", size);
	printf("memcpy_all: address range of interior pointer OK\n");

	CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d0));
	if (type != CU_MEMORYTYPE_DEVICE)
		fail("memory type of device pointer is %u", type);
	printf("memcpy_all: pointer memory type DEVICE OK\n");
}

int main(void)
{
	CUcontext ctx;
	CUdevice dev;

	start("memcpy_all");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

	CHECK(cuMemAlloc(&d0, MAX_SIZE));
	CHECK(cuMemAlloc(&d1, MAX_SIZE));
	page_src = xmalloc(MAX_SIZE);
	page_dst = xmalloc(MAX_SIZE);
	CHECK(cuMemAllocHost((void **)&pin_src, MAX_SIZE));
	CHECK(cuMemAllocHost((void **)&pin_dst, MAX_SIZE));

	test_sync();
	test_async_pinned();
	test_async_pageable();
	test_registered();
	test_unified();
	test_memset();
	test_pinned_churn();
	test_queries();

	CHECK(cuMemFreeHost(pin_src));
	CHECK(cuMemFreeHost(pin_dst));
	CHECK(cuMemFree(d0));
	CHECK(cuMemFree(d1));
	CHECK(cuStreamDestroy(stream));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	free(page_src);
	free(page_dst);
	printf("memcpy_all: PASS\n");
	return 0;
}

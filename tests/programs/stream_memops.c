/*
 * stream_memops: stream memory operations, as NCCL's and NVSHMEM's
 * proxies and PyTorch's symmetric memory use them to signal between
 * streams: 32- and 64-bit writes of flags on one stream, waits on them
 * (each condition) on another, ordered with a kernel-free copy after
 * them; then the flags and the copy read back. Output identical to a
 * native run.
 */
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "common.h"

int main(void)
{
	uint64_t host[4] = { 0 }, want = 0x1122334455667788ull;
	int v64 = 0, nor = 0;
	CUstream a, b;
	CUcontext ctx;
	CUdeviceptr flags, src, dst;
	CUdevice dev;

	start("stream_memops");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuDeviceGetAttribute(&v64, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev));
	CHECK(cuDeviceGetAttribute(&nor, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, dev));
	printf("64-bit operations %d, wait NOR %d\n", v64, nor);
	CHECK(cuMemAlloc(&flags, 64));
	CHECK(cuMemAlloc(&src, 8));
	CHECK(cuMemAlloc(&dst, 8));
	CHECK(cuMemsetD8(flags, 0, 64));
	CHECK(cuMemcpyHtoD(src, &want, 8));
	CHECK(cuMemsetD8(dst, 0, 8));
	CHECK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
	CHECK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));

	/* a signals, b waits for each signal before it copies */
	CHECK(cuStreamWriteValue32(a, flags, 7, CU_STREAM_WRITE_VALUE_DEFAULT));
	CHECK(cuStreamWriteValue32(a, flags + 4, 0x0f0, CU_STREAM_WRITE_VALUE_DEFAULT));
	CHECK(cuStreamSynchronize(a));
	CHECK(cuStreamWaitValue32(b, flags, 7, CU_STREAM_WAIT_VALUE_EQ));
	CHECK(cuStreamWaitValue32(b, flags, 5, CU_STREAM_WAIT_VALUE_GEQ));
	CHECK(cuStreamWaitValue32(b, flags + 4, 0x010, CU_STREAM_WAIT_VALUE_AND));
	if (nor)
		CHECK(cuStreamWaitValue32(b, flags + 4, 0x00f, CU_STREAM_WAIT_VALUE_NOR));
	if (v64) {
		CHECK(cuStreamWriteValue64(a, flags + 8, 0x100000000ull, CU_STREAM_WRITE_VALUE_DEFAULT));
		CHECK(cuStreamSynchronize(a));
		CHECK(cuStreamWaitValue64(b, flags + 8, 0xffffffffull, CU_STREAM_WAIT_VALUE_GEQ));
	}
	CHECK(cuMemcpyDtoDAsync(dst, src, 8, b));
	CHECK(cuStreamWriteValue32(b, flags + 16, 1, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER));
	CHECK(cuStreamSynchronize(b));

	CHECK(cuMemcpyDtoH(host, flags, sizeof(host)));
	printf("flags %08x %08x %016llx %08x\n", (unsigned)host[0], (unsigned)(host[0] >> 32),
	       (unsigned long long)host[1], (unsigned)host[2]);
	CHECK(cuMemcpyDtoH(host, dst, 8));
	printf("copied after the waits: %s\n", host[0] == want ? "yes" : "NO");
	CHECK(cuStreamDestroy(a));
	CHECK(cuStreamDestroy(b));
	CHECK(cuMemFree(flags));
	CHECK(cuMemFree(src));
	CHECK(cuMemFree(dst));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	printf("done\n");
	return 0;
}

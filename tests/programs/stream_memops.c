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

/* A batch on one stream, as NCCLX's signals are: two writes, a wait on
 * the first, a barrier, a 64-bit write; at flag32 and flag32 + 8. */
static void batch(CUstream s, CUdeviceptr at)
{
	CUstreamBatchMemOpParams ops[5];
	uint32_t got32 = 0;
	uint64_t got64 = 0;

	memset(ops, 0, sizeof(ops));
	ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
	ops[0].writeValue.address = at;
	ops[0].writeValue.value = 41;
	ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
	ops[1].writeValue.address = at;
	ops[1].writeValue.value = 42;
	ops[2].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
	ops[2].waitValue.address = at;
	ops[2].waitValue.value = 42;
	ops[2].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
	ops[3].memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
	ops[3].memoryBarrier.flags = CU_STREAM_MEMORY_BARRIER_TYPE_GPU;
	ops[4].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
	ops[4].writeValue.address = at + 8;
	ops[4].writeValue.value64 = 0xfedcba9876543210ull;
	CHECK(cuStreamBatchMemOp(s, 5, ops, 0));
	CHECK(cuStreamSynchronize(s));
	CHECK(cuMemcpyDtoH(&got32, at, 4));
	CHECK(cuMemcpyDtoH(&got64, at + 8, 8));
	printf("a batch of five: %u %016llx\n", got32, (unsigned long long)got64);
}

/* As the runtime and PyTorch find it: cuGetProcAddress at CUDA 13 gives
 * the _v2 ABI. */
static void by_proc_address(CUstream s, CUdeviceptr at)
{
	CUresult (*write32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
	CUdriverProcAddressQueryResult q;
	uint32_t got = 0;
	void *fn = NULL;

	CHECK(cuGetProcAddress("cuStreamWriteValue32", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
	write32 = (CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int))fn;
	CHECK(write32(s, at, 1234, CU_STREAM_WRITE_VALUE_DEFAULT));
	CHECK(cuStreamSynchronize(s));
	CHECK(cuMemcpyDtoH(&got, at, 4));
	printf("found by cuGetProcAddress: wrote %u\n", got);
}

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
	CHECK(cuStreamWriteValue32(b, flags + 16, 1, CU_STREAM_WRITE_VALUE_DEFAULT));
	CHECK(cuStreamSynchronize(b));

	batch(b, flags + 24);
	by_proc_address(a, flags + 20);
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

/*
 * unsupported.c: driver functions Cicada does not offer, exported anyway.
 * cuBLAS and cuBLASLt dlsym about ninety driver functions by name from
 * libcuda.so.1 and fail to initialise (CUBLAS_STATUS_INTERNAL_ERROR) if
 * any one is missing (EXPORT-TABLES.md 4.8), though a plain GEMM calls few
 * of them. These fail cleanly instead:
 * batched stream memory operations. Some names are
 * the old ABI that cuda.h now maps to a _v2; their prototypes are here.
 */
#include "interposer.h"

#undef cuStreamBatchMemOp
#undef cuStreamWaitValue32

static CUresult unsupported(const char *name)
{
	log_missing_once("driver function", name, 1);
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* --- stream memory operations (the old ABI; the driver may refuse it too) --- */
CUresult CUDAAPI cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags);
CUresult CUDAAPI cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
	return unsupported("cuStreamWaitValue32");
}

CUresult CUDAAPI cuStreamBatchMemOp(CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray,
				    unsigned int flags);
CUresult CUDAAPI cuStreamBatchMemOp(CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray,
				    unsigned int flags)
{
	return unsupported("cuStreamBatchMemOp");
}


/*
 * unsupported.c: driver functions Cicada does not offer, exported anyway.
 * cuBLAS and cuBLASLt dlsym about ninety driver functions by name from
 * libcuda.so.1 and fail to initialise (CUBLAS_STATUS_INTERNAL_ERROR) if
 * any one is missing (EXPORT-TABLES.md 4.8), though a plain GEMM calls few
 * of them. These fail cleanly instead:
 * batched stream memory operations. Some names are
 * the old ABI that cuda.h now maps to a _v2; their prototypes are here.
 * Whatever is missing, a function, a table, a slot, is logged once by
 * log_missing_once, which the files above call; this one calls none.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "interposer.h"

/* Once per name: at warn level when the application calls what is
 * missing (it will likely fail), at info when a library only looks it up. */
void log_missing_once(const char *what, const char *name, int called)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static char seen[256][80];
	static int nseen;
	int i;

	pthread_mutex_lock(&lock);
	for (i = 0; i < nseen && strncmp(seen[i], name, 79); i++)
		;
	if (i == nseen && nseen < 256) {
		snprintf(seen[nseen++], 80, "%s", name);
		if (called)
			log_warn("%s %s is not implemented", what, name);
		else
			log_info("%s %s is not implemented", what, name);
	}
	pthread_mutex_unlock(&lock);
}

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


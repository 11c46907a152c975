/*
 * rt_common.h: what the CUDA runtime test programs share: a failure count
 * with a check of runtime calls and of library calls, and an FNV-1a hash for printing exact
 * result bytes (equal bits natively and through Cicada).
 */
#ifndef RT_COMMON_H
#define RT_COMMON_H

#include <cstdio>
#include <cuda_runtime.h>

static int failures;

#define CHECK_RT(call)                                                                \
	do {                                                                          \
		cudaError_t e_ = (call);                                              \
		if (e_ != cudaSuccess) {                                              \
			printf("FAIL %s: %s\n", #call, cudaGetErrorName(e_));         \
			failures++;                                                   \
		}                                                                     \
	} while (0)

/* A CUDA library call (cuBLAS, cuFFT, cuSPARSE...): 0 is success. */
#define CHECK_LIB(call)                                                               \
	do {                                                                          \
		int s_ = (int)(call);                                                 \
		if (s_ != 0) {                                                        \
			printf("FAIL %s: status %d\n", #call, s_);                    \
			failures++;                                                   \
		}                                                                     \
	} while (0)

static inline unsigned long long fnv(const void *p, size_t n)
{
	unsigned long long h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
	return h;
}

#endif

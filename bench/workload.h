/*
 * workload.h: what the CUDA runtime workloads (matmul.cu, nbody.cu)
 * share: a check that ends the program on a failed runtime call, the host
 * clock, a small random generator for their inputs, and an FNV-1a hash of
 * result bytes (the same natively and through Cicada).
 */
#ifndef WORKLOAD_H
#define WORKLOAD_H

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda_runtime.h>

#define FNV_BASIS 1469598103934665603ull

#define CHECK(call)							\
	do {								\
		cudaError_t e_ = (call);				\
		if (e_ != cudaSuccess)					\
			cuda_fail(__FILE__, __LINE__, #call, e_);	\
	} while (0)

static inline void die(const char *msg)
{
	fprintf(stderr, "%s\n", msg);
	exit(1);
}

static inline void cuda_fail(const char *file, int line, const char *call, cudaError_t e)
{
	fprintf(stderr, "%s:%d %s failed: %s\n", file, line, call, cudaGetErrorName(e));
	exit(1);
}

static inline void *xmalloc(size_t n)
{
	void *p = malloc(n);

	if (!p)
		die("out of memory");
	return p;
}

static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A uniform float in [-1, 1) from the LCG state *s. */
static inline float rnd(unsigned *s)
{
	*s = *s * 1664525u + 1013904223u;
	return (float)(*s >> 8) / 8388608.0f - 1.0f;
}

static inline unsigned long long fnv(const void *p, size_t n, unsigned long long h)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
	return h;
}

#endif

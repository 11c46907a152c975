/*
 * rt_cublas.cu: an unmodified cuBLAS program (static CUDA runtime, shared
 * libcublas.so.13 and libcublasLt.so.13), the check that the CUDA
 * libraries, not only the runtime, work through Cicada. It runs a 256x256
 * cublasSgemm and a cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32 (which
 * cuBLAS hands to cuBLASLt), checks both against a host reference within
 * a tolerance, and prints an FNV-1a hash of the exact result bytes: a run
 * through Cicada must print exactly what a native run on the same GPU
 * prints. Build: nvcc -o rt_cublas rt_cublas.cu -lcublas
 */
#include <cmath>
#include <cstdio>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include "rt_common.h"

static const int N = 256;

#define CHECK_BLAS(call)                                                              \
	do {                                                                          \
		cublasStatus_t s_ = (call);                                           \
		if (s_ != CUBLAS_STATUS_SUCCESS) {                                    \
			printf("FAIL %s: status %d\n", #call, (int)s_);               \
			failures++;                                                   \
		}                                                                     \
	} while (0)

/* Deterministic inputs in [-1, 1), column-major like cuBLAS. */
static void fill(float *m, unsigned seed)
{
	unsigned x = seed;
	for (int i = 0; i < N * N; i++) {
		x = x * 1664525u + 1013904223u;
		m[i] = (float)(x >> 8) / (float)(1u << 23) - 1.0f;
	}
}

static void reference(const float *a, const float *b, double *c)
{
	for (int j = 0; j < N; j++)
		for (int i = 0; i < N; i++) {
			double s = 0;
			for (int k = 0; k < N; k++)
				s += (double)a[i + k * N] * b[k + j * N];
			c[i + j * N] = s;
		}
}

static void report(const char *what, const float *c, const double *ref, double tol)
{
	double worst = 0;
	for (int i = 0; i < N * N; i++)
		worst = fmax(worst, fabs(c[i] - ref[i]));
	printf("%s: c[0] %.6f c[last] %.6f hash %016llx\n", what, c[0], c[N * N - 1], fnv(c, N * N * sizeof(float)));
	printf("%s %s (max error %s %g)\n", worst <= tol ? "ok  " : "FAIL", what, worst <= tol ? "<=" : ">", tol);
	failures += !(worst <= tol);
}

int main(void)
{
	static float a[N * N], b[N * N], c[N * N];
	static double ref[N * N];
	const float one = 1.0f, zero = 0.0f;
	float *da, *db, *dc;
	cublasHandle_t h;
	int version = 0;

	fill(a, 1);
	fill(b, 2);
	reference(a, b, ref);
	CHECK_BLAS(cublasCreate(&h));
	if (failures) {
		printf("FAILED\n");
		return 1;
	}
	CHECK_BLAS(cublasGetVersion(h, &version));
	printf("cublas version %d\n", version);
	CHECK_RT(cudaMalloc(&da, sizeof(a)));
	CHECK_RT(cudaMalloc(&db, sizeof(b)));
	CHECK_RT(cudaMalloc(&dc, sizeof(c)));
	CHECK_BLAS(cublasSetMatrix(N, N, sizeof(float), a, N, da, N));
	CHECK_BLAS(cublasSetMatrix(N, N, sizeof(float), b, N, db, N));

	CHECK_BLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, da, N, db, N, &zero, dc, N));
	CHECK_BLAS(cublasGetMatrix(N, N, sizeof(float), dc, N, c, N));
	report("sgemm", c, ref, 1e-3);

	CHECK_RT(cudaMemset(dc, 0, sizeof(c)));
	CHECK_BLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, da, CUDA_R_32F, N, db, CUDA_R_32F, N,
				&zero, dc, CUDA_R_32F, N, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
	CHECK_RT(cudaDeviceSynchronize());
	CHECK_BLAS(cublasGetMatrix(N, N, sizeof(float), dc, N, c, N));
	report("gemmEx tf32", c, ref, 0.25);

	CHECK_RT(cudaFree(da));
	CHECK_RT(cudaFree(db));
	CHECK_RT(cudaFree(dc));
	CHECK_BLAS(cublasDestroy(h));
	printf("%s\n", failures ? "FAILED" : "done");
	return failures != 0;
}

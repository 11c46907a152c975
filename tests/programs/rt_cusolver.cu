/*
 * rt_cusolver.cu: an unmodified cuSOLVER program (static CUDA runtime,
 * shared libcusolver.so.12, which brings libcublas.so.13, libcublasLt.so.13,
 * libcusparse.so.12 and libnvJitLink.so.13). In double precision it
 * solves a diagonally dominant system by LU (getrf with pivoting, getrs)
 * and finds the eigenvalues and eigenvectors of a symmetric matrix with
 * known eigenvalues (syevd), checks the solution, the eigenvalues and the
 * eigenvector residuals against the host within tolerances, and prints an
 * FNV-1a hash of the exact result bytes: a run through Cicada must print
 * exactly what a native run on the same GPU prints.
 * Build: nvcc -o rt_cusolver rt_cusolver.cu -lcusolver
 */
#include <cmath>
#include <cstdio>
#include <cusolverDn.h>
#include <cuda_runtime.h>
#include "rt_common.h"

static const int N = 128;	/* LU: N x N system */
static const int M = 64;	/* eigenproblem: M x M */

#define CHECK_SOLVER(call)                                                            \
	do {                                                                          \
		cusolverStatus_t s_ = (call);                                         \
		if (s_ != CUSOLVER_STATUS_SUCCESS) {                                  \
			printf("FAIL %s: status %d\n", #call, (int)s_);               \
			failures++;                                                   \
		}                                                                     \
	} while (0)

/* Deterministic values in [-1, 1). */
static void fill(double *v, int n, unsigned seed)
{
	unsigned x = seed;
	for (int i = 0; i < n; i++) {
		x = x * 1664525u + 1013904223u;
		v[i] = (double)(x >> 8) / (double)(1u << 23) - 1.0;
	}
}

/* The routine's devInfo must be 0 (a bad argument or singular matrix otherwise). */
static void check_info(const char *what, const int *dinfo)
{
	int info = -1;

	CHECK_RT(cudaMemcpy(&info, dinfo, sizeof(info), cudaMemcpyDeviceToHost));
	if (info != 0) {
		printf("FAIL %s: info %d\n", what, info);
		failures++;
	}
}

static void report(const char *what, const double *v, int n, double err, double tol)
{
	printf("%s: first %.12f last %.12f hash %016llx\n", what, v[0], v[n - 1], fnv(v, n * sizeof(double)));
	printf("%s %s (max error %s %g)\n", err <= tol ? "ok  " : "FAIL", what, err <= tol ? "<=" : ">", tol);
	failures += !(err <= tol);
}

/* A x = b for a known x, A column-major with N added to its diagonal. */
static void test_lu(cusolverDnHandle_t h)
{
	static double a[N * N], x[N], b[N], got[N];
	double *da, *db, *work;
	int *ipiv, *dinfo, lwork = 0;
	double err = 0;

	fill(a, N * N, 1);
	fill(x, N, 2);
	for (int i = 0; i < N; i++)
		a[i + i * N] += N;
	for (int i = 0; i < N; i++) {
		b[i] = 0;
		for (int k = 0; k < N; k++)
			b[i] += a[i + k * N] * x[k];
	}
	CHECK_RT(cudaMalloc(&da, sizeof(a)));
	CHECK_RT(cudaMalloc(&db, sizeof(b)));
	CHECK_RT(cudaMalloc(&ipiv, N * sizeof(int)));
	CHECK_RT(cudaMalloc(&dinfo, sizeof(int)));
	CHECK_RT(cudaMemcpy(da, a, sizeof(a), cudaMemcpyHostToDevice));
	CHECK_RT(cudaMemcpy(db, b, sizeof(b), cudaMemcpyHostToDevice));
	CHECK_SOLVER(cusolverDnDgetrf_bufferSize(h, N, N, da, N, &lwork));
	CHECK_RT(cudaMalloc(&work, (lwork > 0 ? lwork : 1) * sizeof(double)));

	CHECK_SOLVER(cusolverDnDgetrf(h, N, N, da, N, work, ipiv, dinfo));
	check_info("getrf", dinfo);
	CHECK_SOLVER(cusolverDnDgetrs(h, CUBLAS_OP_N, N, 1, da, N, ipiv, db, N, dinfo));
	check_info("getrs", dinfo);
	CHECK_RT(cudaMemcpy(got, db, sizeof(got), cudaMemcpyDeviceToHost));
	for (int i = 0; i < N; i++)
		err = fmax(err, fabs(got[i] - x[i]));
	report("getrf/getrs solve", got, N, err, 1e-10);
	CHECK_RT(cudaFree(da));
	CHECK_RT(cudaFree(db));
	CHECK_RT(cudaFree(ipiv));
	CHECK_RT(cudaFree(dinfo));
	CHECK_RT(cudaFree(work));
}

/* A = Q diag(lambda) Q for a Householder reflection Q (symmetric, orthogonal). */
static void make_symmetric(double *a, double *lambda)
{
	static double v[M], q[M * M];
	double vv = 0;

	fill(v, M, 3);
	for (int i = 0; i < M; i++)
		vv += v[i] * v[i];
	for (int j = 0; j < M; j++)
		for (int i = 0; i < M; i++)
			q[i + j * M] = (i == j) - 2 * v[i] * v[j] / vv;
	for (int k = 0; k < M; k++)
		lambda[k] = k - (M - 1) / 2.0;	/* ascending, as syevd returns them */
	for (int j = 0; j < M; j++)
		for (int i = 0; i < M; i++) {
			double s = 0;
			for (int k = 0; k < M; k++)
				s += q[i + k * M] * lambda[k] * q[k + j * M];
			a[i + j * M] = s;
		}
}

/* Eigenvalues against the known ones, eigenvectors by max |A v - w v|. */
static void test_syevd(cusolverDnHandle_t h)
{
	static double a[M * M], vec[M * M], lambda[M], w[M];
	double *da, *dw, *work;
	int *dinfo, lwork = 0;
	double werr = 0, verr = 0;

	make_symmetric(a, lambda);
	CHECK_RT(cudaMalloc(&da, sizeof(a)));
	CHECK_RT(cudaMalloc(&dw, sizeof(w)));
	CHECK_RT(cudaMalloc(&dinfo, sizeof(int)));
	CHECK_RT(cudaMemcpy(da, a, sizeof(a), cudaMemcpyHostToDevice));
	CHECK_SOLVER(cusolverDnDsyevd_bufferSize(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, M, da, M, dw,
						 &lwork));
	CHECK_RT(cudaMalloc(&work, (lwork > 0 ? lwork : 1) * sizeof(double)));

	CHECK_SOLVER(cusolverDnDsyevd(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, M, da, M, dw, work, lwork,
				      dinfo));
	check_info("syevd", dinfo);
	CHECK_RT(cudaMemcpy(w, dw, sizeof(w), cudaMemcpyDeviceToHost));
	CHECK_RT(cudaMemcpy(vec, da, sizeof(vec), cudaMemcpyDeviceToHost));
	for (int k = 0; k < M; k++) {
		werr = fmax(werr, fabs(w[k] - lambda[k]));
		for (int i = 0; i < M; i++) {
			double s = 0;
			for (int j = 0; j < M; j++)
				s += a[i + j * M] * vec[j + k * M];
			verr = fmax(verr, fabs(s - w[k] * vec[i + k * M]));
		}
	}
	report("syevd eigenvalues", w, M, werr, 1e-10);
	report("syevd eigenvectors", vec, M * M, verr, 1e-10);
	CHECK_RT(cudaFree(da));
	CHECK_RT(cudaFree(dw));
	CHECK_RT(cudaFree(dinfo));
	CHECK_RT(cudaFree(work));
}

int main(void)
{
	cusolverDnHandle_t h;
	int version = 0;

	CHECK_SOLVER(cusolverGetVersion(&version));
	printf("cusolver version %d\n", version);
	CHECK_SOLVER(cusolverDnCreate(&h));
	if (failures) {
		printf("FAILED\n");
		return 1;
	}
	CHECK_SOLVER(cusolverDnSetDeterministicMode(h, CUSOLVER_DETERMINISTIC_RESULTS));
	test_lu(h);
	test_syevd(h);
	CHECK_SOLVER(cusolverDnDestroy(h));
	printf("%s\n", failures ? "FAILED" : "done");
	return failures != 0;
}

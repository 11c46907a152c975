/*
 * rt_cusparse.cu: an unmodified cuSPARSE program (static CUDA runtime,
 * shared libcusparse.so.12, which brings libnvJitLink.so.13). Through the
 * generic API it multiplies a CSR matrix by a vector (SpMV, alpha and
 * beta, CUSPARSE_SPMV_CSR_ALG2) and by a column-major dense matrix (SpMM,
 * CUSPARSE_SPMM_CSR_ALG1), both on A untransposed, where cuSPARSE documents
 * bit-wise deterministic results, checks both against a host reference
 * within a tolerance, and prints an FNV-1a hash of the exact result bytes:
 * a run through Cicada must print exactly what a native run on the same
 * GPU prints. Build: nvcc -o rt_cusparse rt_cusparse.cu -lcusparse
 */
#include <cmath>
#include <cstdio>
#include <cusparse.h>
#include <cuda_runtime.h>
#include "rt_common.h"

static const int ROWS = 512, COLS = 384, K = 16;	/* A: ROWS x COLS, SpMM's B: COLS x K */
static const int MAXNZ = ROWS * 7;			/* each row holds 1 to 7 entries */

#define CHECK_SPARSE(call)                                                            \
	do {                                                                          \
		cusparseStatus_t s_ = (call);                                         \
		if (s_ != CUSPARSE_STATUS_SUCCESS) {                                  \
			printf("FAIL %s: status %d\n", #call, (int)s_);               \
			failures++;                                                   \
		}                                                                     \
	} while (0)

static int rowptr[ROWS + 1], colind[MAXNZ];
static float val[MAXNZ];

/* Deterministic values in [-1, 1). */
static void fill(float *v, int n, unsigned seed)
{
	unsigned x = seed;
	for (int i = 0; i < n; i++) {
		x = x * 1664525u + 1013904223u;
		v[i] = (float)(x >> 8) / (float)(1u << 23) - 1.0f;
	}
}

/*
 * Row i holds 1 + i % 7 entries at columns (13 i + 48 k) % COLS, distinct
 * since 48 k < COLS, sorted within the row as CSR wants; returns nnz.
 */
static int make_csr(void)
{
	int nnz = 0;

	for (int i = 0; i < ROWS; i++) {
		rowptr[i] = nnz;
		for (int k = 0; k < 1 + i % 7; k++) {
			int c = (13 * i + 48 * k) % COLS, j = nnz++;
			for (; j > rowptr[i] && colind[j - 1] > c; j--)
				colind[j] = colind[j - 1];
			colind[j] = c;
		}
	}
	rowptr[ROWS] = nnz;
	fill(val, nnz, 1);
	return nnz;
}

/* ref = alpha A b + beta ref for the ncols columns of b (column-major, ld COLS and ROWS). */
static void reference(const float *b, int ncols, double alpha, double beta, double *ref)
{
	for (int c = 0; c < ncols; c++)
		for (int i = 0; i < ROWS; i++) {
			double s = 0;
			for (int p = rowptr[i]; p < rowptr[i + 1]; p++)
				s += (double)val[p] * b[colind[p] + c * COLS];
			ref[i + c * ROWS] = alpha * s + beta * ref[i + c * ROWS];
		}
}

static void report(const char *what, const float *got, const double *ref, int n, double tol)
{
	double worst = 0;
	for (int i = 0; i < n; i++)
		worst = fmax(worst, fabs(got[i] - ref[i]));
	printf("%s: first %.6f last %.6f hash %016llx\n", what, got[0], got[n - 1], fnv(got, n * sizeof(float)));
	printf("%s %s (max error %s %g)\n", worst <= tol ? "ok  " : "FAIL", what, worst <= tol ? "<=" : ">", tol);
	failures += !(worst <= tol);
}

/* y = 2 A x + 0.5 y. */
static void test_spmv(cusparseHandle_t h, cusparseSpMatDescr_t a)
{
	static float x[COLS], y[ROWS];
	static double ref[ROWS];
	const float alpha = 2.0f, beta = 0.5f;
	cusparseDnVecDescr_t vx, vy;
	float *dx, *dy;
	size_t size = 0;
	void *buf = NULL;

	fill(x, COLS, 2);
	fill(y, ROWS, 3);
	for (int i = 0; i < ROWS; i++)
		ref[i] = y[i];
	reference(x, 1, alpha, beta, ref);
	CHECK_RT(cudaMalloc(&dx, sizeof(x)));
	CHECK_RT(cudaMalloc(&dy, sizeof(y)));
	CHECK_RT(cudaMemcpy(dx, x, sizeof(x), cudaMemcpyHostToDevice));
	CHECK_RT(cudaMemcpy(dy, y, sizeof(y), cudaMemcpyHostToDevice));
	CHECK_SPARSE(cusparseCreateDnVec(&vx, COLS, dx, CUDA_R_32F));
	CHECK_SPARSE(cusparseCreateDnVec(&vy, ROWS, dy, CUDA_R_32F));
	CHECK_SPARSE(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a, vx, &beta, vy, CUDA_R_32F,
					     CUSPARSE_SPMV_CSR_ALG2, &size));
	CHECK_RT(cudaMalloc(&buf, size > 0 ? size : 1));	/* the workspace asked for */
	CHECK_SPARSE(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a, vx, &beta, vy, CUDA_R_32F,
				  CUSPARSE_SPMV_CSR_ALG2, buf));
	CHECK_RT(cudaMemcpy(y, dy, sizeof(y), cudaMemcpyDeviceToHost));
	report("spmv csr", y, ref, ROWS, 1e-4);
	CHECK_SPARSE(cusparseDestroyDnVec(vx));
	CHECK_SPARSE(cusparseDestroyDnVec(vy));
	CHECK_RT(cudaFree(dx));
	CHECK_RT(cudaFree(dy));
	CHECK_RT(cudaFree(buf));
}

/* C = A B, B and C column-major. */
static void test_spmm(cusparseHandle_t h, cusparseSpMatDescr_t a)
{
	static float b[COLS * K], c[ROWS * K];
	static double ref[ROWS * K];
	const float alpha = 1.0f, beta = 0.0f;
	cusparseDnMatDescr_t mb, mc;
	float *db, *dc;
	size_t size = 0;
	void *buf = NULL;

	fill(b, COLS * K, 4);
	reference(b, K, alpha, beta, ref);
	CHECK_RT(cudaMalloc(&db, sizeof(b)));
	CHECK_RT(cudaMalloc(&dc, sizeof(c)));
	CHECK_RT(cudaMemcpy(db, b, sizeof(b), cudaMemcpyHostToDevice));
	CHECK_RT(cudaMemset(dc, 0, sizeof(c)));
	CHECK_SPARSE(cusparseCreateDnMat(&mb, COLS, K, COLS, db, CUDA_R_32F, CUSPARSE_ORDER_COL));
	CHECK_SPARSE(cusparseCreateDnMat(&mc, ROWS, K, ROWS, dc, CUDA_R_32F, CUSPARSE_ORDER_COL));
	CHECK_SPARSE(cusparseSpMM_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
					     &alpha, a, mb, &beta, mc, CUDA_R_32F, CUSPARSE_SPMM_CSR_ALG1, &size));
	CHECK_RT(cudaMalloc(&buf, size > 0 ? size : 1));	/* the workspace asked for */
	CHECK_SPARSE(cusparseSpMM(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a, mb,
				  &beta, mc, CUDA_R_32F, CUSPARSE_SPMM_CSR_ALG1, buf));
	CHECK_RT(cudaMemcpy(c, dc, sizeof(c), cudaMemcpyDeviceToHost));
	report("spmm csr", c, ref, ROWS * K, 1e-4);
	CHECK_SPARSE(cusparseDestroyDnMat(mb));
	CHECK_SPARSE(cusparseDestroyDnMat(mc));
	CHECK_RT(cudaFree(db));
	CHECK_RT(cudaFree(dc));
	CHECK_RT(cudaFree(buf));
}

int main(void)
{
	cusparseHandle_t h;
	cusparseSpMatDescr_t a;
	int *drowptr, *dcolind, version = 0, nnz = make_csr();
	float *dval;

	CHECK_SPARSE(cusparseCreate(&h));
	if (failures) {
		printf("FAILED\n");
		return 1;
	}
	CHECK_SPARSE(cusparseGetVersion(h, &version));
	printf("cusparse version %d, %d x %d matrix with %d entries\n", version, ROWS, COLS, nnz);
	CHECK_RT(cudaMalloc(&drowptr, sizeof(rowptr)));
	CHECK_RT(cudaMalloc(&dcolind, nnz * sizeof(int)));
	CHECK_RT(cudaMalloc(&dval, nnz * sizeof(float)));
	CHECK_RT(cudaMemcpy(drowptr, rowptr, sizeof(rowptr), cudaMemcpyHostToDevice));
	CHECK_RT(cudaMemcpy(dcolind, colind, nnz * sizeof(int), cudaMemcpyHostToDevice));
	CHECK_RT(cudaMemcpy(dval, val, nnz * sizeof(float), cudaMemcpyHostToDevice));
	CHECK_SPARSE(cusparseCreateCsr(&a, ROWS, COLS, nnz, drowptr, dcolind, dval, CUSPARSE_INDEX_32I,
				       CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
	test_spmv(h, a);
	test_spmm(h, a);
	CHECK_SPARSE(cusparseDestroySpMat(a));
	CHECK_RT(cudaFree(drowptr));
	CHECK_RT(cudaFree(dcolind));
	CHECK_RT(cudaFree(dval));
	CHECK_SPARSE(cusparseDestroy(h));
	printf("%s\n", failures ? "FAILED" : "done");
	return failures != 0;
}

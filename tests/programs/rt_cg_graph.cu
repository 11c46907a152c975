/*
 * rt_cg_graph.cu: a conjugate gradient whose iteration is captured into a
 * CUDA graph, as NVIDIA's conjugateGradientCudaGraphs sample does: cuSPARSE
 * SpMV and cuBLAS dot, axpy and scal (device pointer mode) and small
 * kernels of its own, captured on one stream, then the graph launched
 * once per iteration. Solves a 1M-row SPD tridiagonal system, checks the
 * residual on the host and hashes the solution.
 */
#include <cmath>
#include <cublas_v2.h>
#include <cusparse.h>
#include <vector>
#include "rt_common.h"

/* alpha = r1 / dot(p, Ap); nalpha = -alpha */
__global__ void step_alpha(const float *r1, const float *dot, float *alpha, float *nalpha)
{
	*alpha = *r1 / *dot;
	*nalpha = -*alpha;
}

/* beta = r1 / r0; r0 = r1 */
__global__ void step_beta(const float *r1, float *r0, float *beta)
{
	*beta = *r1 / *r0;
	*r0 = *r1;
}

int main(void)
{
	const int n = 1 << 20, nnz = 3 * n - 2, iters = 60;
	std::vector<int> rows(n + 1), cols(nnz);
	std::vector<float> vals(nnz), rhs(n), x(n);
	int k = 0;
	for (int i = 0; i < n; i++) {
		rows[i] = k;
		if (i > 0) cols[k] = i - 1, vals[k++] = -1.0f;
		cols[k] = i, vals[k++] = 2.5f;
		if (i < n - 1) cols[k] = i + 1, vals[k++] = -1.0f;
	}
	rows[n] = k;
	for (int i = 0; i < n; i++)
		rhs[i] = (float)((i * 37) % 101) / 101.0f;

	int *drows, *dcols;
	float *dvals, *dx, *dr, *dp, *dAp, *scal, *buf;
	size_t bufsize = 0;
	cublasHandle_t blas;
	cusparseHandle_t sparse;
	cusparseSpMatDescr_t A;
	cusparseDnVecDescr_t vp, vAp;
	cudaStream_t s;
	const float one = 1, zero = 0;

	CHECK_RT(cudaStreamCreate(&s));
	CHECK_LIB(cublasCreate(&blas));
	CHECK_LIB(cusparseCreate(&sparse));
	if (failures) {
		printf("FAILED\n");
		return 1;
	}
	CHECK_LIB(cublasSetStream(blas, s));
	CHECK_LIB(cusparseSetStream(sparse, s));
	CHECK_RT(cudaMalloc(&drows, (n + 1) * 4));
	CHECK_RT(cudaMalloc(&dcols, nnz * 4));
	CHECK_RT(cudaMalloc(&dvals, nnz * 4));
	CHECK_RT(cudaMalloc(&dx, n * 4));
	CHECK_RT(cudaMalloc(&dr, n * 4));
	CHECK_RT(cudaMalloc(&dp, n * 4));
	CHECK_RT(cudaMalloc(&dAp, n * 4));
	/* r1, r0, dot, alpha, nalpha, beta, one */
	CHECK_RT(cudaMalloc(&scal, 8 * 4));
	float *r1 = scal, *r0 = scal + 1, *dot = scal + 2, *alpha = scal + 3, *nalpha = scal + 4, *beta = scal + 5;
	CHECK_RT(cudaMemcpy(drows, rows.data(), (n + 1) * 4, cudaMemcpyHostToDevice));
	CHECK_RT(cudaMemcpy(dcols, cols.data(), nnz * 4, cudaMemcpyHostToDevice));
	CHECK_RT(cudaMemcpy(dvals, vals.data(), nnz * 4, cudaMemcpyHostToDevice));
	CHECK_RT(cudaMemset(dx, 0, n * 4));
	CHECK_RT(cudaMemcpy(dr, rhs.data(), n * 4, cudaMemcpyHostToDevice));
	CHECK_RT(cudaMemcpy(dp, rhs.data(), n * 4, cudaMemcpyHostToDevice));
	CHECK_LIB(cusparseCreateCsr(&A, n, n, nnz, drows, dcols, dvals, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
				    CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
	CHECK_LIB(cusparseCreateDnVec(&vp, n, dp, CUDA_R_32F));
	CHECK_LIB(cusparseCreateDnVec(&vAp, n, dAp, CUDA_R_32F));
	CHECK_LIB(cusparseSpMV_bufferSize(sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vp, &zero, vAp,
					  CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, &bufsize));
	CHECK_RT(cudaMalloc(&buf, bufsize + 16));

	/* r0 = r1 = dot(r, r), before the loop */
	CHECK_LIB(cublasSetPointerMode(blas, CUBLAS_POINTER_MODE_DEVICE));
	CHECK_LIB(cublasSdot(blas, n, dr, 1, dr, 1, r1));
	CHECK_RT(cudaMemcpyAsync(r0, r1, 4, cudaMemcpyDeviceToDevice, s));

	/* One iteration, captured:
	 *   Ap = A p; alpha = r1 / (p.Ap); x += alpha p; r -= alpha Ap;
	 *   r1 = r.r; beta = r1 / r0; r0 = r1; p = r + beta p */
	cudaGraph_t g;
	cudaGraphExec_t ge;
	CHECK_RT(cudaStreamSynchronize(s));
	CHECK_RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	CHECK_LIB(cusparseSpMV(sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vp, &zero, vAp, CUDA_R_32F,
			       CUSPARSE_SPMV_ALG_DEFAULT, buf));
	CHECK_LIB(cublasSdot(blas, n, dp, 1, dAp, 1, dot));
	step_alpha<<<1, 1, 0, s>>>(r1, dot, alpha, nalpha);
	CHECK_LIB(cublasSaxpy(blas, n, alpha, dp, 1, dx, 1));
	CHECK_LIB(cublasSaxpy(blas, n, nalpha, dAp, 1, dr, 1));
	CHECK_LIB(cublasSdot(blas, n, dr, 1, dr, 1, r1));
	step_beta<<<1, 1, 0, s>>>(r1, r0, beta);
	CHECK_LIB(cublasSscal(blas, n, beta, dp, 1));
	CHECK_LIB(cublasSetPointerMode(blas, CUBLAS_POINTER_MODE_HOST));
	CHECK_LIB(cublasSaxpy(blas, n, &one, dr, 1, dp, 1));
	CHECK_LIB(cublasSetPointerMode(blas, CUBLAS_POINTER_MODE_DEVICE));
	CHECK_RT(cudaStreamEndCapture(s, &g));
	size_t nodes = 0;
	CHECK_RT(cudaGraphGetNodes(g, NULL, &nodes));
	printf("captured %s nodes\n", nodes > 8 ? "more than 8" : "too few");
	CHECK_RT(cudaGraphInstantiate(&ge, g, 0));
	for (int i = 0; i < iters; i++)
		CHECK_RT(cudaGraphLaunch(ge, s));
	CHECK_RT(cudaStreamSynchronize(s));
	float res = 0;
	CHECK_RT(cudaMemcpy(&res, r1, 4, cudaMemcpyDeviceToHost));
	CHECK_RT(cudaMemcpy(x.data(), dx, n * 4, cudaMemcpyDeviceToHost));

	/* The residual, on the host, in double. */
	double worst = 0;
	for (int i = 0; i < n; i++) {
		double ax = 2.5 * x[i] - (i > 0 ? x[i - 1] : 0) - (i < n - 1 ? x[i + 1] : 0);
		worst = fmax(worst, fabs(ax - rhs[i]));
	}
	printf("%s cg %d iterations: max residual %s 1e-4, hash %016llx\n", worst < 1e-4 ? "ok  " : "FAIL", iters,
	       worst < 1e-4 ? "<" : ">=", fnv(x.data(), n * 4));
	failures += !(worst < 1e-4);
	CHECK_RT(cudaGraphExecDestroy(ge));
	CHECK_RT(cudaGraphDestroy(g));
	CHECK_LIB(cusparseDestroySpMat(A));
	CHECK_LIB(cusparseDestroyDnVec(vp));
	CHECK_LIB(cusparseDestroyDnVec(vAp));
	CHECK_LIB(cusparseDestroy(sparse));
	CHECK_LIB(cublasDestroy(blas));
	printf("%s\n", failures ? "FAILED" : "done");
	return failures != 0;
}

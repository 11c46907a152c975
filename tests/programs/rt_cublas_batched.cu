/*
 * rt_cublas_batched.cu: batched GEMMs as real programs make them: an
 * array of device pointers (cublasSgemmBatched), strided batches
 * (cublasSgemmStridedBatched, cublasGemmStridedBatchedEx in half
 * precision with FP32 accumulation), from small matrices in large batches
 * (past the 65535 limit of a grid dimension) to larger ones. Every batch
 * is checked against a host reference and its bytes hashed.
 */
#include <cmath>
#include <cuda_fp16.h>
#include <cublas_v2.h>
#include <vector>
#include "rt_common.h"

static void fill(std::vector<float> &v, unsigned seed)
{
	for (auto &f : v) {
		seed = seed * 1664525u + 1013904223u;
		f = (float)(seed >> 8) / (float)(1u << 23) - 1.0f;
	}
}

/* One batch of n x n column-major GEMMs, C = A * B; checks a sample of
 * batches on the host (every batch when there are few). */
static void check(const char *what, int n, int batch, const std::vector<float> &a, const std::vector<float> &b,
		  const std::vector<float> &c, double tol)
{
	double worst = 0;
	int step = batch > 64 ? batch / 61 : 1;
	for (int k = 0; k < batch; k += step)
		for (int j = 0; j < n; j++)
			for (int i = 0; i < n; i++) {
				double s = 0;
				size_t o = (size_t)k * n * n;
				for (int l = 0; l < n; l++)
					s += (double)a[o + i + l * n] * b[o + l + j * n];
				worst = fmax(worst, fabs(s - c[o + i + j * n]));
			}
	printf("%s %s n=%d batch=%d: hash %016llx\n", worst <= tol ? "ok  " : "FAIL", what, n, batch,
	       fnv(c.data(), c.size() * 4));
	failures += !(worst <= tol);
}

static void run(cublasHandle_t h, int n, int batch)
{
	size_t per = (size_t)n * n, total = per * batch;
	std::vector<float> a(total), b(total), c(total);
	std::vector<float *> pa(batch), pb(batch), pc(batch);
	float *da, *db, *dc, **dpa, **dpb, **dpc;
	const float one = 1, zero = 0;

	fill(a, n * 7 + batch);
	fill(b, n * 13 + batch);
	CHECK_RT(cudaMalloc(&da, total * 4));
	CHECK_RT(cudaMalloc(&db, total * 4));
	CHECK_RT(cudaMalloc(&dc, total * 4));
	CHECK_RT(cudaMemcpy(da, a.data(), total * 4, cudaMemcpyHostToDevice));
	CHECK_RT(cudaMemcpy(db, b.data(), total * 4, cudaMemcpyHostToDevice));
	for (int k = 0; k < batch; k++) {
		pa[k] = da + k * per;
		pb[k] = db + k * per;
		pc[k] = dc + k * per;
	}
	CHECK_RT(cudaMalloc(&dpa, batch * sizeof(float *)));
	CHECK_RT(cudaMalloc(&dpb, batch * sizeof(float *)));
	CHECK_RT(cudaMalloc(&dpc, batch * sizeof(float *)));
	CHECK_RT(cudaMemcpy(dpa, pa.data(), batch * sizeof(float *), cudaMemcpyHostToDevice));
	CHECK_RT(cudaMemcpy(dpb, pb.data(), batch * sizeof(float *), cudaMemcpyHostToDevice));
	CHECK_RT(cudaMemcpy(dpc, pc.data(), batch * sizeof(float *), cudaMemcpyHostToDevice));

	CHECK_LIB(cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, dpa, n, dpb, n, &zero, dpc, n, batch));
	CHECK_RT(cudaMemcpy(c.data(), dc, total * 4, cudaMemcpyDeviceToHost));
	check("sgemmBatched", n, batch, a, b, c, 1e-3 * n);

	CHECK_RT(cudaMemset(dc, 0, total * 4));
	CHECK_LIB(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, da, n, per, db, n, per, &zero,
					     dc, n, per, batch));
	CHECK_RT(cudaMemcpy(c.data(), dc, total * 4, cudaMemcpyDeviceToHost));
	check("sgemmStridedBatched", n, batch, a, b, c, 1e-3 * n);

	CHECK_RT(cudaFree(da));
	CHECK_RT(cudaFree(db));
	CHECK_RT(cudaFree(dc));
	CHECK_RT(cudaFree(dpa));
	CHECK_RT(cudaFree(dpb));
	CHECK_RT(cudaFree(dpc));
}

/* Half-precision inputs, FP32 accumulation and output. */
static void run_half(cublasHandle_t h, int n, int batch)
{
	size_t per = (size_t)n * n, total = per * batch;
	std::vector<float> a(total), b(total), c(total);
	std::vector<__half> ha(total), hb(total);
	__half *da, *db;
	float *dc;
	const float one = 1, zero = 0;

	fill(a, 3);
	fill(b, 5);
	for (size_t i = 0; i < total; i++) {
		ha[i] = __float2half(a[i]);
		hb[i] = __float2half(b[i]);
		a[i] = __half2float(ha[i]);
		b[i] = __half2float(hb[i]);
	}
	CHECK_RT(cudaMalloc(&da, total * 2));
	CHECK_RT(cudaMalloc(&db, total * 2));
	CHECK_RT(cudaMalloc(&dc, total * 4));
	CHECK_RT(cudaMemcpy(da, ha.data(), total * 2, cudaMemcpyHostToDevice));
	CHECK_RT(cudaMemcpy(db, hb.data(), total * 2, cudaMemcpyHostToDevice));
	CHECK_LIB(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, da, CUDA_R_16F, n, per, db,
					      CUDA_R_16F, n, per, &zero, dc, CUDA_R_32F, n, per, batch,
					      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
	CHECK_RT(cudaMemcpy(c.data(), dc, total * 4, cudaMemcpyDeviceToHost));
	check("gemmStridedBatchedEx fp16", n, batch, a, b, c, 1e-2 * n);
	CHECK_RT(cudaFree(da));
	CHECK_RT(cudaFree(db));
	CHECK_RT(cudaFree(dc));
}

int main(void)
{
	cublasHandle_t h;

	CHECK_LIB(cublasCreate(&h));
	if (failures) {
		printf("FAILED\n");
		return 1;
	}
	run(h, 4, 100000);
	run(h, 16, 5000);
	run(h, 64, 512);
	run(h, 256, 16);
	run_half(h, 128, 256);
	CHECK_LIB(cublasDestroy(h));
	printf("%s\n", failures ? "FAILED" : "done");
	return failures != 0;
}

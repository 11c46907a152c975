/*
 * rt_fft_conv.cu: FFT-based convolution at sizes real programs use: a 1D
 * convolution of a 2^24-sample signal (R2C, pointwise product, C2R), a 2D
 * 4096x4096 one, a 3D 256^3 C2C round trip, a batch of 7^7 (odd radix)
 * transforms and a prime length (Bluestein). Results are checked against
 * direct sums on a sample of points and their bytes hashed.
 */
#include <cmath>
#include <cufft.h>
#include <vector>
#include "rt_common.h"

__global__ void multiply(cufftComplex *a, const cufftComplex *b, size_t n, float scale)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		cufftComplex x = a[i], y = b[i];
		a[i].x = (x.x * y.x - x.y * y.y) * scale;
		a[i].y = (x.x * y.y + x.y * y.x) * scale;
	}
}

static void fill(std::vector<float> &v, unsigned seed)
{
	for (auto &f : v) {
		seed = seed * 1664525u + 1013904223u;
		f = (float)(seed >> 8) / (float)(1u << 23) - 1.0f;
	}
}

/* Circular convolution of signal s with a short kernel k (taps), over
 * dims (1D: nx; 2D: ny x nx), checked at sampled points. */
static void convolve(int rank, int ny, int nx, int taps)
{
	size_t n = (size_t)ny * nx, nc = (size_t)ny * (nx / 2 + 1);
	std::vector<float> s(n), k(n, 0.0f), out(n);
	float *ds, *dk;
	cufftComplex *cs, *ck;
	cufftHandle fwd, inv;

	fill(s, 11);
	std::vector<float> kt(taps * (rank == 2 ? taps : 1));
	fill(kt, 17);
	for (int y = 0; y < (rank == 2 ? taps : 1); y++)
		for (int x = 0; x < taps; x++)
			k[(size_t)y * nx + x] = kt[y * taps + x];
	CHECK_RT(cudaMalloc(&ds, n * 4));
	CHECK_RT(cudaMalloc(&dk, n * 4));
	CHECK_RT(cudaMalloc(&cs, nc * 8));
	CHECK_RT(cudaMalloc(&ck, nc * 8));
	CHECK_RT(cudaMemcpy(ds, s.data(), n * 4, cudaMemcpyHostToDevice));
	CHECK_RT(cudaMemcpy(dk, k.data(), n * 4, cudaMemcpyHostToDevice));
	if (rank == 1) {
		CHECK_LIB(cufftPlan1d(&fwd, nx, CUFFT_R2C, 1));
		CHECK_LIB(cufftPlan1d(&inv, nx, CUFFT_C2R, 1));
	} else {
		CHECK_LIB(cufftPlan2d(&fwd, ny, nx, CUFFT_R2C));
		CHECK_LIB(cufftPlan2d(&inv, ny, nx, CUFFT_C2R));
	}
	CHECK_LIB(cufftExecR2C(fwd, ds, cs));
	CHECK_LIB(cufftExecR2C(fwd, dk, ck));
	multiply<<<1024, 256>>>(cs, ck, nc, 1.0f / n);
	CHECK_RT(cudaGetLastError());
	CHECK_LIB(cufftExecC2R(inv, cs, ds));
	CHECK_RT(cudaMemcpy(out.data(), ds, n * 4, cudaMemcpyDeviceToHost));
	double worst = 0;
	for (size_t p = 0; p < n; p += n / 97 + 1) {
		size_t py = p / nx, px = p % nx;
		double sum = 0;
		for (int y = 0; y < (rank == 2 ? taps : 1); y++)
			for (int x = 0; x < taps; x++)
				sum += (double)kt[y * taps + x] * s[((py + ny - y) % ny) * nx + (px + nx - x) % nx];
		worst = fmax(worst, fabs(sum - out[p]));
	}
	printf("%s %dD convolution %dx%d, %d taps: hash %016llx\n", worst < 1e-2 ? "ok  " : "FAIL", rank, ny, nx,
	       taps, fnv(out.data(), n * 4));
	failures += !(worst < 1e-2);
	CHECK_LIB(cufftDestroy(fwd));
	CHECK_LIB(cufftDestroy(inv));
	CHECK_RT(cudaFree(ds));
	CHECK_RT(cudaFree(dk));
	CHECK_RT(cudaFree(cs));
	CHECK_RT(cudaFree(ck));
}

/* A C2C forward and inverse round trip over the given dimensions. */
static void round_trip(const char *what, int rank, int *dims, int batch)
{
	size_t n = batch;
	for (int i = 0; i < rank; i++)
		n *= dims[i];
	std::vector<float> in(2 * n), out(2 * n);
	cufftComplex *d;
	cufftHandle plan;

	fill(in, 23);
	CHECK_RT(cudaMalloc(&d, n * 8));
	CHECK_RT(cudaMemcpy(d, in.data(), n * 8, cudaMemcpyHostToDevice));
	CHECK_LIB(cufftPlanMany(&plan, rank, dims, NULL, 1, 0, NULL, 1, 0, CUFFT_C2C, batch));
	CHECK_LIB(cufftExecC2C(plan, d, d, CUFFT_FORWARD));
	CHECK_LIB(cufftExecC2C(plan, d, d, CUFFT_INVERSE));
	CHECK_RT(cudaMemcpy(out.data(), d, n * 8, cudaMemcpyDeviceToHost));
	double worst = 0, scale = (double)n / batch;
	for (size_t i = 0; i < 2 * n; i++)
		worst = fmax(worst, fabs(out[i] / scale - in[i]));
	printf("%s %s: hash %016llx\n", worst < 1e-3 ? "ok  " : "FAIL", what, fnv(out.data(), n * 8));
	failures += !(worst < 1e-3);
	CHECK_LIB(cufftDestroy(plan));
	CHECK_RT(cudaFree(d));
}

int main(void)
{
	int d3[3] = {256, 256, 256}, d7[1] = {823543}, dp[1] = {1000003}, d1[1] = {1 << 26};

	convolve(1, 1, 1 << 24, 33);
	convolve(2, 4096, 4096, 9);
	round_trip("3D 256^3 C2C", 3, d3, 1);
	round_trip("7^7 C2C, batch 4", 1, d7, 4);
	round_trip("prime 1000003 C2C", 1, dp, 1);
	round_trip("2^26 C2C", 1, d1, 1);
	printf("%s\n", failures ? "FAILED" : "done");
	return failures != 0;
}

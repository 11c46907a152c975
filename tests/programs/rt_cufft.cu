/*
 * rt_cufft.cu: an unmodified cuFFT program (static CUDA runtime, shared
 * libcufft.so.12). It runs a batched 1D complex-to-complex FFT forward
 * and back and a 2D real-to-complex FFT, checks the forward transforms
 * against a host DFT (in double) and the round trip against the input
 * within tolerances, and prints an FNV-1a hash of the exact result bytes:
 * a run through Cicada must print exactly what a native run on the same
 * GPU prints. Build: nvcc -o rt_cufft rt_cufft.cu -lcufft
 */
#include <cmath>
#include <cstdio>
#include <cufft.h>
#include <cuda_runtime.h>
#include "rt_common.h"

static const int N = 256, BATCH = 8;		/* 1D: BATCH signals of N points */
static const int NX = 32, NY = 48, NYC = NY / 2 + 1;	/* 2D: NX rows of NY reals, NYC complex out */

#define CHECK_FFT(call)                                                               \
	do {                                                                          \
		cufftResult r_ = (call);                                              \
		if (r_ != CUFFT_SUCCESS) {                                            \
			printf("FAIL %s: result %d\n", #call, (int)r_);               \
			failures++;                                                   \
		}                                                                     \
	} while (0)

/* Deterministic inputs in [-1, 1). */
static void fill(float *v, int n, unsigned seed)
{
	unsigned x = seed;
	for (int i = 0; i < n; i++) {
		x = x * 1664525u + 1013904223u;
		v[i] = (float)(x >> 8) / (float)(1u << 23) - 1.0f;
	}
}

/* Host DFT of each signal, exponent -2 pi i jk / N as cuFFT's forward. */
static void dft_1d(const cufftComplex *in, double *ref)
{
	for (int b = 0; b < BATCH; b++)
		for (int k = 0; k < N; k++) {
			double re = 0, im = 0;
			for (int j = 0; j < N; j++) {
				double t = -2 * M_PI * ((j * k) % N) / N;
				cufftComplex x = in[b * N + j];
				re += x.x * cos(t) - x.y * sin(t);
				im += x.x * sin(t) + x.y * cos(t);
			}
			ref[2 * (b * N + k)] = re;
			ref[2 * (b * N + k) + 1] = im;
		}
}

/* Host DFT of the NX x NY real input, the NYC non-redundant columns. */
static void dft_2d(const float *in, double *ref)
{
	for (int u = 0; u < NX; u++)
		for (int v = 0; v < NYC; v++) {
			double re = 0, im = 0;
			for (int a = 0; a < NX; a++)
				for (int b = 0; b < NY; b++) {
					double t = -2 * M_PI * ((double)((a * u) % NX) / NX + (double)((b * v) % NY) / NY);
					re += in[a * NY + b] * cos(t);
					im += in[a * NY + b] * sin(t);
				}
			ref[2 * (u * NYC + v)] = re;
			ref[2 * (u * NYC + v) + 1] = im;
		}
}

/* Prints the hash of n floats and whether each is within tol of ref[i] * scale. */
static void report(const char *what, const float *got, const double *ref, int n, double scale, double tol)
{
	double worst = 0;
	for (int i = 0; i < n; i++)
		worst = fmax(worst, fabs(got[i] * scale - ref[i]));
	printf("%s: first %.6f last %.6f hash %016llx\n", what, got[0], got[n - 1], fnv(got, n * sizeof(float)));
	printf("%s %s (max error %s %g)\n", worst <= tol ? "ok  " : "FAIL", what, worst <= tol ? "<=" : ">", tol);
	failures += !(worst <= tol);
}

/* Batched C2C forward against the host DFT, then inverse back to the input. */
static void test_c2c(void)
{
	static cufftComplex in[BATCH * N], out[BATCH * N], back[BATCH * N];
	static double ref[2 * BATCH * N], orig[2 * BATCH * N];
	cufftComplex *din, *dout;
	cufftHandle plan;

	fill((float *)in, 2 * BATCH * N, 1);
	for (int i = 0; i < 2 * BATCH * N; i++)
		orig[i] = ((float *)in)[i];
	dft_1d(in, ref);
	CHECK_RT(cudaMalloc(&din, sizeof(in)));
	CHECK_RT(cudaMalloc(&dout, sizeof(out)));
	CHECK_RT(cudaMemcpy(din, in, sizeof(in), cudaMemcpyHostToDevice));
	CHECK_FFT(cufftPlan1d(&plan, N, CUFFT_C2C, BATCH));
	CHECK_FFT(cufftExecC2C(plan, din, dout, CUFFT_FORWARD));
	CHECK_RT(cudaMemcpy(out, dout, sizeof(out), cudaMemcpyDeviceToHost));
	report("c2c forward", (float *)out, ref, 2 * BATCH * N, 1.0, 1e-3);

	/* Inverse is unnormalised: back / N is the input again. */
	CHECK_FFT(cufftExecC2C(plan, dout, din, CUFFT_INVERSE));
	CHECK_RT(cudaMemcpy(back, din, sizeof(back), cudaMemcpyDeviceToHost));
	report("c2c round trip", (float *)back, orig, 2 * BATCH * N, 1.0 / N, 1e-4);
	CHECK_FFT(cufftDestroy(plan));
	CHECK_RT(cudaFree(din));
	CHECK_RT(cudaFree(dout));
}

/* 2D R2C forward against the host DFT. */
static void test_r2c(void)
{
	static float in[NX * NY];
	static cufftComplex out[NX * NYC];
	static double ref[2 * NX * NYC];
	cufftReal *din;
	cufftComplex *dout;
	cufftHandle plan;

	fill(in, NX * NY, 3);
	dft_2d(in, ref);
	CHECK_RT(cudaMalloc(&din, sizeof(in)));
	CHECK_RT(cudaMalloc(&dout, sizeof(out)));
	CHECK_RT(cudaMemcpy(din, in, sizeof(in), cudaMemcpyHostToDevice));
	CHECK_FFT(cufftPlan2d(&plan, NX, NY, CUFFT_R2C));
	CHECK_FFT(cufftExecR2C(plan, din, dout));
	CHECK_RT(cudaMemcpy(out, dout, sizeof(out), cudaMemcpyDeviceToHost));
	report("r2c 2d", (float *)out, ref, 2 * NX * NYC, 1.0, 2e-3);
	CHECK_FFT(cufftDestroy(plan));
	CHECK_RT(cudaFree(din));
	CHECK_RT(cudaFree(dout));
}

int main(void)
{
	int version = 0;

	CHECK_FFT(cufftGetVersion(&version));
	printf("cufft version %d\n", version);
	test_c2c();
	test_r2c();
	printf("%s\n", failures ? "FAILED" : "done");
	return failures != 0;
}

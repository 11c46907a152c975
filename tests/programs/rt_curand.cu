/*
 * rt_curand.cu: an unmodified cuRAND program (static CUDA runtime, shared
 * libcurand.so.10), and a kernel of its own using the header-only device
 * API. With fixed seeds it draws uniform and normal numbers from the
 * XORWOW and Philox host generators and normal numbers from Philox states
 * in a kernel (curand_init, curand_normal), checks each sample's mean and
 * variance (and the uniform range) within tolerances, and prints an
 * FNV-1a hash of the exact sample bytes: a run through Cicada must print
 * exactly what a native run on the same GPU prints.
 * Build: nvcc -o rt_curand rt_curand.cu -lcurand
 */
#include <cmath>
#include <cstdio>
#include <curand.h>
#include <curand_kernel.h>
#include <cuda_runtime.h>
#include "rt_common.h"

static const int N = 1 << 20;			/* samples per draw (even, for Box-Muller) */
static const int THREADS = 256, PER_THREAD = 16;	/* device API: N / PER_THREAD threads */

#define CHECK_RAND(call)                                                              \
	do {                                                                          \
		curandStatus_t s_ = (call);                                           \
		if (s_ != CURAND_STATUS_SUCCESS) {                                    \
			printf("FAIL %s: status %d\n", #call, (int)s_);               \
			failures++;                                                   \
		}                                                                     \
	} while (0)

/* Device API: thread id draws PER_THREAD normals from its own Philox subsequence. */
__global__ void draw_normal(unsigned long long seed, float *out)
{
	int id = blockIdx.x * blockDim.x + threadIdx.x;
	int threads = gridDim.x * blockDim.x;
	curandStatePhilox4_32_10_t state;

	curand_init(seed, id, 0, &state);
	for (int i = 0; i < PER_THREAD; i++)
		out[i * threads + id] = curand_normal(&state);
}

/*
 * Copies the sample back, prints its hash, and checks its mean and
 * variance (and, for uniform samples, the range (0, 1]).
 */
static void report(const char *what, const float *dv, double mean, double var, double tol, int uniform)
{
	static float v[N];
	double sum = 0, sq = 0;
	int outside = 0;

	CHECK_RT(cudaMemcpy(v, dv, sizeof(v), cudaMemcpyDeviceToHost));
	for (int i = 0; i < N; i++) {
		sum += v[i];
		outside += uniform && !(v[i] > 0.0f && v[i] <= 1.0f);
	}
	double m = sum / N;
	for (int i = 0; i < N; i++)
		sq += (v[i] - m) * (v[i] - m);
	double s2 = sq / (N - 1);
	int good = fabs(m - mean) <= tol * sqrt(var) && fabs(s2 - var) <= tol * var && !outside;
	printf("%s: first %.6f mean %.6f variance %.6f hash %016llx\n", what, v[0], m, s2, fnv(v, sizeof(v)));
	printf("%s %s (mean %g, variance %g, within %g relative%s)\n", good ? "ok  " : "FAIL", what, mean, var, tol,
	       uniform ? ", all in (0, 1]" : "");
	failures += !good;
}

/* A host-API generator of the given type: a uniform draw, then a normal one. */
static void test_generator(const char *name, curandRngType_t type, unsigned long long seed, float *dv)
{
	curandGenerator_t g;
	char what[64];

	CHECK_RAND(curandCreateGenerator(&g, type));
	CHECK_RAND(curandSetPseudoRandomGeneratorSeed(g, seed));
	CHECK_RAND(curandGenerateUniform(g, dv, N));
	snprintf(what, sizeof(what), "%s uniform", name);
	report(what, dv, 0.5, 1.0 / 12, 0.01, 1);
	CHECK_RAND(curandGenerateNormal(g, dv, N, 1.5f, 2.0f));
	snprintf(what, sizeof(what), "%s normal(1.5, 2)", name);
	report(what, dv, 1.5, 4.0, 0.01, 0);
	CHECK_RAND(curandDestroyGenerator(g));
}

int main(void)
{
	int version = 0;
	float *dv;

	CHECK_RAND(curandGetVersion(&version));
	printf("curand version %d\n", version);
	CHECK_RT(cudaMalloc(&dv, N * sizeof(float)));
	if (failures) {
		printf("FAILED\n");
		return 1;
	}
	test_generator("xorwow", CURAND_RNG_PSEUDO_XORWOW, 1234, dv);
	test_generator("philox", CURAND_RNG_PSEUDO_PHILOX4_32_10, 5678, dv);

	draw_normal<<<N / PER_THREAD / THREADS, THREADS>>>(42, dv);
	CHECK_RT(cudaGetLastError());
	report("device philox normal", dv, 0.0, 1.0, 0.01, 0);

	CHECK_RT(cudaFree(dv));
	printf("%s\n", failures ? "FAILED" : "done");
	return failures != 0;
}

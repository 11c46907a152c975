/*
 * hog: the two sides of bench-tenancy's noisy-neighbour row.
 *
 *   hog bw SECONDS     a memory-bandwidth hog: copies 1 GiB between two
 *                      device buffers with a grid-stride kernel, over and
 *                      over, for SECONDS; prints "hog gbs=G"
 *   hog steps SECONDS  a compute-bound loop of short steps (a grid of 8
 *                      blocks an SM of the whole GPU, each thread a run of
 *                      dependent multiply-adds) for SECONDS; prints each
 *                      step's end (CLOCK_REALTIME) and time:
 *                      "step N end=S ms=M", for a resize's timing
 *   hog lat ROUNDS     a latency-sensitive tenant: each round launches a
 *                      kernel that reads 16 MiB and sums it, then waits
 *                      for it (one request); prints the median and 99th
 *                      percentile of a round and a checksum:
 *                      "lat rounds=N median_us=M p99_us=P checksum=X"
 *
 * The checksum is the same natively and through Cicada.
 */
#include <algorithm>
#include <cstring>
#include <vector>
#include "workload.h"

#define HOG_BYTES (1ull << 30)
#define LAT_FLOATS (4u << 20)                  /* 16 MiB */

__global__ void copy(const float4 *in, float4 *out, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		out[i] = in[i];
}

__global__ void sum(const float *in, unsigned n, float *out)
{
	__shared__ float part[256];
	float s = 0.0f;

	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		s += in[i];
	part[threadIdx.x] = s;
	__syncthreads();
	for (unsigned k = blockDim.x / 2; k; k /= 2) {
		if (threadIdx.x < k)
			part[threadIdx.x] += part[threadIdx.x + k];
		__syncthreads();
	}
	if (!threadIdx.x)
		out[blockIdx.x] = part[0];
}

__global__ void spin(float *out, int n)
{
	float x = threadIdx.x * 1e-3f, y = blockIdx.x * 1e-3f;

	for (int i = 0; i < n; i++)
		x = x * 0.999f + y;
	if (x == 12345.0f)                   /* (never: keeps the loop) */
		out[0] = x;
}

static double wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int steps(double seconds)
{
	float *out;
	double t0 = now_s();

	CHECK(cudaMalloc(&out, sizeof(float)));
	for (int n = 0; now_s() - t0 < seconds; n++) {
		double a = now_s();
		spin<<<132 * 8, 256>>>(out, 1 << 19);   /* (the whole H100's or H200's SMs, whatever the share says) */
		CHECK(cudaDeviceSynchronize());
		printf("step %d end=%.6f ms=%.3f\n", n, wall_s(), (now_s() - a) * 1e3);
	}
	fflush(stdout);
	return 0;
}

static int hog(double seconds)
{
	size_t n = HOG_BYTES / sizeof(float4);
	float4 *a, *b;
	double t0, t;
	long copies = 0;

	CHECK(cudaMalloc(&a, HOG_BYTES));
	CHECK(cudaMalloc(&b, HOG_BYTES));
	CHECK(cudaMemset(a, 1, HOG_BYTES));
	t0 = now_s();
	do {
		for (int i = 0; i < 8; i++, copies++)
			copy<<<1024, 256>>>(copies & 1 ? b : a, copies & 1 ? a : b, n);
		CHECK(cudaDeviceSynchronize());
		t = now_s() - t0;
	} while (t < seconds);
	printf("hog gbs=%.1f\n", 2.0 * HOG_BYTES * copies / t / 1e9);
	return 0;
}

static int lat(int rounds)
{
	std::vector<float> host(LAT_FLOATS);
	std::vector<double> took(rounds);
	float *in, *out, res[64];
	unsigned seed = 7;
	unsigned long long h = FNV_BASIS;

	for (auto &v : host)
		v = rnd(&seed);
	CHECK(cudaMalloc(&in, LAT_FLOATS * sizeof(float)));
	CHECK(cudaMalloc(&out, sizeof(res)));
	CHECK(cudaMemcpy(in, host.data(), LAT_FLOATS * sizeof(float), cudaMemcpyHostToDevice));
	for (int r = -10; r < rounds; r++) {       /* ten rounds of warm-up */
		double t0 = now_s();
		sum<<<64, 256>>>(in, LAT_FLOATS, out);
		CHECK(cudaMemcpy(res, out, sizeof(res), cudaMemcpyDeviceToHost));
		if (r >= 0)
			took[r] = now_s() - t0;
	}
	h = fnv(res, sizeof(res), h);
	std::sort(took.begin(), took.end());
	printf("lat rounds=%d median_us=%.1f p99_us=%.1f checksum=%016llx\n", rounds, took[rounds / 2] * 1e6,
	       took[(size_t)(rounds * 0.99)] * 1e6, h);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "bw"))
		return hog(atof(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "steps"))
		return steps(atof(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "lat") && atoi(argv[2]) > 0)
		return lat(atoi(argv[2]));
	die("usage: hog bw SECONDS | hog steps SECONDS | hog lat ROUNDS");
}

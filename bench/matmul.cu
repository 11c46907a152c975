/*
 * matmul: a CUDA runtime workload for `make bench`. C = A * B for
 * 2048 x 2048 floats with a shared-memory tiled kernel, cut into many
 * short launches: one per 128-row block-row of C and 256-deep k-slab
 * (128 launches a multiply, tens of µs each), each adding its slab's
 * products into C. CUDA init and one multiply are warm-up; the timed loop
 * repeats the multiply (32 times by default: 4096 launches) on the
 * default stream and ends with a synchronize. C is then copied back,
 * spot-checked against the host and hashed. Prints one line
 * "matmul launches=N seconds=S gflops=G checksum=X"; the checksum is the
 * same natively and through Cicada. Usage: matmul [multiplies]
 */
#include <cmath>
#include "workload.h"

#define N 2048
#define TILE 16
#define ROWS 128	/* rows of C a launch computes */
#define SLAB 256	/* depth of k a launch adds up */
#define LAUNCHES ((N / ROWS) * (N / SLAB))	/* a multiply */

/* C[row0 .. row0 + ROWS) (+)= A[.., k0 .. k0 + SLAB) * B[k0 .. k0 + SLAB, ..) */
__global__ void mm_slab(const float *a, const float *b, float *c, int row0, int k0, int add)
{
	__shared__ float as[TILE][TILE], bs[TILE][TILE];
	int tx = threadIdx.x, ty = threadIdx.y;
	int row = row0 + blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
	float sum = 0.0f;

	for (int k = k0; k < k0 + SLAB; k += TILE) {
		as[ty][tx] = a[row * N + k + tx];
		bs[ty][tx] = b[(k + ty) * N + col];
		__syncthreads();
		for (int i = 0; i < TILE; i++)
			sum += as[ty][i] * bs[i][tx];
		__syncthreads();
	}
	if (add)
		sum += c[row * N + col];
	c[row * N + col] = sum;
}

static void multiply(const float *a, const float *b, float *c)
{
	dim3 grid(N / TILE, ROWS / TILE), block(TILE, TILE);

	for (int r = 0; r < N; r += ROWS)
		for (int k = 0; k < N; k += SLAB)
			mm_slab<<<grid, block>>>(a, b, c, r, k, k > 0);
}

static void fill(float *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = rnd(&seed);
}

/* A few entries of C against double-precision dot products on the host. */
static void spot_check(const float *a, const float *b, const float *c)
{
	for (int s = 0; s < 16; s++) {
		int i = (s * 397 + 5) % N, j = (s * 1231 + 7) % N;
		double ref = 0.0, mag = 0.0;

		for (int k = 0; k < N; k++) {
			ref += (double)a[i * N + k] * b[k * N + j];
			mag += fabs((double)a[i * N + k] * b[k * N + j]);
		}
		if (fabs(c[i * N + j] - ref) > 1e-4 * mag + 1e-6) {
			fprintf(stderr, "matmul: C[%d][%d] = %g, expected %g\n", i, j, c[i * N + j], ref);
			exit(1);
		}
	}
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 32;
	size_t bytes = (size_t)N * N * sizeof(float);
	float *ha, *hb, *hc, *a, *b, *c;
	double t;

	if (reps <= 0)
		die("usage: matmul [multiplies]");
	ha = (float *)xmalloc(bytes);
	hb = (float *)xmalloc(bytes);
	hc = (float *)xmalloc(bytes);
	fill(ha, (size_t)N * N, 1);
	fill(hb, (size_t)N * N, 2);
	CHECK(cudaFree(0));
	CHECK(cudaMalloc(&a, bytes));
	CHECK(cudaMalloc(&b, bytes));
	CHECK(cudaMalloc(&c, bytes));
	CHECK(cudaMemcpy(a, ha, bytes, cudaMemcpyHostToDevice));
	CHECK(cudaMemcpy(b, hb, bytes, cudaMemcpyHostToDevice));
	multiply(a, b, c);
	CHECK(cudaGetLastError());
	CHECK(cudaDeviceSynchronize());

	t = now_s();
	for (int i = 0; i < reps; i++)
		multiply(a, b, c);
	CHECK(cudaDeviceSynchronize());
	t = now_s() - t;
	CHECK(cudaGetLastError());

	CHECK(cudaMemcpy(hc, c, bytes, cudaMemcpyDeviceToHost));
	spot_check(ha, hb, hc);
	printf("matmul launches=%d seconds=%.6f gflops=%.1f checksum=%016llx\n",
	       reps * LAUNCHES, t, 2.0 * N * N * N * reps / t / 1e9, fnv(hc, bytes, FNV_BASIS));
	CHECK(cudaFree(a));
	CHECK(cudaFree(b));
	CHECK(cudaFree(c));
	free(ha);
	free(hb);
	free(hc);
	return 0;
}

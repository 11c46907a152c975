/*
 * nbody: a CUDA runtime workload for `make bench`. All-pairs gravity on
 * 32768 bodies by default (float4 positions with the mass in w, float4
 * velocities), one launch a step: each block walks all bodies in
 * shared-memory tiles, then updates velocities and writes the positions
 * to the other of two buffers. Every 10 steps a second kernel reduces the
 * centroid and kinetic energy to one partial sum per block, which the
 * host reads back (a 1 KiB synchronous copy) and adds up, as a real
 * simulation does for its log. CUDA init and one step are warm-up, after
 * which the initial state is loaded again; the timed loop (200 steps by
 * default) ends with a synchronize. Prints one line "nbody bodies=N
 * steps=S launches=L seconds=S gflops=G kinetic=E checksum=X" (20 flops a
 * pair); the checksum hashes every readback and the final state, the same
 * natively and through Cicada. Usage: nbody [bodies [steps]]
 */
#include <cmath>
#include "workload.h"

#define BLOCK 128	/* threads a block, bodies a tile */
#define SUMS 64		/* blocks of the reduction: partial sums read back */
#define EVERY 10	/* steps between readbacks */
#define DT 0.001f
#define EPS2 0.01f	/* softening, squared */

struct sim {
	int n, cur;
	float4 *pos[2], *vel, *part;	/* device */
	float4 *hpos, *hvel, *hpart;	/* host */
};

/* a plus the pull of body q on body p (G = 1). */
__device__ float3 pull(float4 p, float4 q, float3 a)
{
	float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
	float inv = rsqrtf(dx * dx + dy * dy + dz * dz + EPS2);
	float s = q.w * inv * inv * inv;

	a.x += dx * s;
	a.y += dy * s;
	a.z += dz * s;
	return a;
}

__global__ void nb_step(const float4 *pos, float4 *next, float4 *vel, int n)
{
	__shared__ float4 tile[BLOCK];
	int i = blockIdx.x * BLOCK + threadIdx.x;
	float4 p = pos[i], v = vel[i];
	float3 a = make_float3(0.0f, 0.0f, 0.0f);

	for (int t = 0; t < n; t += BLOCK) {
		tile[threadIdx.x] = pos[t + threadIdx.x];
		__syncthreads();
#pragma unroll 8
		for (int j = 0; j < BLOCK; j++)
			a = pull(p, tile[j], a);
		__syncthreads();
	}
	v.x += a.x * DT;
	v.y += a.y * DT;
	v.z += a.z * DT;
	vel[i] = v;
	next[i] = make_float4(p.x + v.x * DT, p.y + v.y * DT, p.z + v.z * DT, p.w);
}

/* part[block] = (sum m x, sum m y, sum m z, sum m v^2 / 2) over a share of the bodies. */
__global__ void nb_sums(const float4 *pos, const float4 *vel, float4 *part, int n)
{
	__shared__ float4 s[BLOCK];
	float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
	int t = threadIdx.x;

	for (int i = blockIdx.x * BLOCK + t; i < n; i += SUMS * BLOCK) {
		float4 p = pos[i], v = vel[i];

		acc.x += p.w * p.x;
		acc.y += p.w * p.y;
		acc.z += p.w * p.z;
		acc.w += 0.5f * p.w * (v.x * v.x + v.y * v.y + v.z * v.z);
	}
	s[t] = acc;
	__syncthreads();
	for (int k = BLOCK / 2; k > 0; k /= 2) {
		if (t < k)
			s[t] = make_float4(s[t].x + s[t + k].x, s[t].y + s[t + k].y,
					   s[t].z + s[t + k].z, s[t].w + s[t + k].w);
		__syncthreads();
	}
	if (t == 0)
		part[blockIdx.x] = s[0];
}

/* Bodies in the cube [-1, 1)^3, total mass 1, small random velocities. */
static void init_bodies(struct sim *s)
{
	unsigned seed = 12345;

	for (int i = 0; i < s->n; i++) {
		float x = rnd(&seed), y = rnd(&seed), z = rnd(&seed);

		s->hpos[i] = make_float4(x, y, z, 1.0f / s->n);
		x = rnd(&seed);
		y = rnd(&seed);
		z = rnd(&seed);
		s->hvel[i] = make_float4(0.1f * x, 0.1f * y, 0.1f * z, 0.0f);
	}
}

static void open_sim(struct sim *s, int n)
{
	size_t bytes = (size_t)n * sizeof(float4);

	s->n = n;
	s->hpos = (float4 *)xmalloc(bytes);
	s->hvel = (float4 *)xmalloc(bytes);
	s->hpart = (float4 *)xmalloc(SUMS * sizeof(float4));
	init_bodies(s);
	CHECK(cudaFree(0));
	CHECK(cudaMalloc(&s->pos[0], bytes));
	CHECK(cudaMalloc(&s->pos[1], bytes));
	CHECK(cudaMalloc(&s->vel, bytes));
	CHECK(cudaMalloc(&s->part, SUMS * sizeof(float4)));
}

/* The initial state onto the device. */
static void load(struct sim *s)
{
	size_t bytes = (size_t)s->n * sizeof(float4);

	s->cur = 0;
	CHECK(cudaMemcpy(s->pos[0], s->hpos, bytes, cudaMemcpyHostToDevice));
	CHECK(cudaMemcpy(s->vel, s->hvel, bytes, cudaMemcpyHostToDevice));
}

static void step(struct sim *s)
{
	nb_step<<<s->n / BLOCK, BLOCK>>>(s->pos[s->cur], s->pos[!s->cur], s->vel, s->n);
	s->cur = !s->cur;
}

/* Reduces on the device, reads the partial sums back, folds them into
 * *hash; returns the kinetic energy. */
static double readback(struct sim *s, unsigned long long *hash)
{
	double e = 0.0;

	nb_sums<<<SUMS, BLOCK>>>(s->pos[s->cur], s->vel, s->part, s->n);
	CHECK(cudaMemcpy(s->hpart, s->part, SUMS * sizeof(float4), cudaMemcpyDeviceToHost));
	*hash = fnv(s->hpart, SUMS * sizeof(float4), *hash);
	for (int b = 0; b < SUMS; b++)
		e += s->hpart[b].w;
	return e;
}

/* The final state back to the host, folded into hash. */
static unsigned long long final_hash(struct sim *s, unsigned long long hash)
{
	size_t bytes = (size_t)s->n * sizeof(float4);

	CHECK(cudaMemcpy(s->hpos, s->pos[s->cur], bytes, cudaMemcpyDeviceToHost));
	CHECK(cudaMemcpy(s->hvel, s->vel, bytes, cudaMemcpyDeviceToHost));
	hash = fnv(s->hpos, bytes, hash);
	return fnv(s->hvel, bytes, hash);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 32768, steps = argc > 2 ? atoi(argv[2]) : 200;
	unsigned long long hash = FNV_BASIS;
	double t, energy = 0.0;
	struct sim s;

	if (n <= 0 || n % BLOCK || steps <= 0)
		die("usage: nbody [bodies (a multiple of 128) [steps]]");
	open_sim(&s, n);
	load(&s);
	step(&s);
	readback(&s, &hash);
	CHECK(cudaGetLastError());
	load(&s);
	CHECK(cudaDeviceSynchronize());
	hash = FNV_BASIS;

	t = now_s();
	for (int i = 1; i <= steps; i++) {
		step(&s);
		if (i % EVERY == 0)
			energy = readback(&s, &hash);
	}
	CHECK(cudaDeviceSynchronize());
	t = now_s() - t;
	CHECK(cudaGetLastError());

	hash = final_hash(&s, hash);
	if (!std::isfinite(energy))
		die("nbody: the energy is not finite");
	printf("nbody bodies=%d steps=%d launches=%d seconds=%.6f gflops=%.1f kinetic=%.6e "
	       "checksum=%016llx\n", n, steps, steps + steps / EVERY, t,
	       20.0 * n * n * steps / t / 1e9, energy, hash);
	return 0;
}

/*
 * Test kernels, module CR: the device work of the checkpoint/restore
 * programs (tests/programs/cr_pattern.c, cr_hold.c). They fill large
 * allocations with known patterns, update them deterministically, keep a
 * linked list of device pointers in device memory and a __device__
 * counter, and checksum it all, so that a process restored by CRIU can
 * prove its GPU state came back bit for bit and at the same addresses.
 * The CPU stand-in libcuda has a C twin of each (tests/fakecuda/kernels.c);
 * both must compute exactly the same values.
 *
 * Element-wise kernels use grid-stride loops: any grid covers any n.
 *
 *   fill_pattern(p, n, seed, mode)  p[i] = mix(i ^ seed)        mode 0
 *                                   p[i] = (i & 0xffff) * seed   mode 1
 *   step_pattern(p, n, step)        p[i] = p[i] * 2654435761 + step
 *   build_list(nodes, n)            nodes[i].next = &nodes[(i * 21 + 7) % n],
 *                                   nodes[i].value = i * 3 + 1
 *   walk_list(head, hops, out)      one thread: hops times p = p->next and
 *                                   sum += p->value; *out = sum
 *   count_step()                    g_steps += 1 (one thread)
 *   checksum(p, n, out)             *out += sum of p[i] * (i | 1), 64-bit,
 *                                   wrapping; *out must start at 0
 *   deep_stack(out, seed)           a[i] = i * 2654435761 + seed (u32) in a
 *                                   2 KiB local array, more stack than a
 *                                   context starts with (the driver grows
 *                                   it at the launch); one thread:
 *                                   *out = sum of a[(i * 7 + seed) & 511]
 *
 * build_list's successor map is a full-period LCG when every prime factor
 * of n divides 20 (i.e. n = 2^a * 5^b) and 4 | n: then it is one cycle
 * through all n nodes (Hull-Dobell). The programs use n = 100000.
 */

struct node {
	struct node *next;
	unsigned value;
	unsigned pad;
};

__device__ unsigned long long g_steps;

/* A cheap 32-bit integer mix (lowbias32). */
__device__ static unsigned mix(unsigned x)
{
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

__device__ static unsigned long long first_index(void)
{
	return (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ static unsigned long long grid_stride(void)
{
	return (unsigned long long)gridDim.x * blockDim.x;
}

extern "C" __global__ void fill_pattern(unsigned *p, unsigned long long n,
					unsigned seed, unsigned mode)
{
	for (unsigned long long i = first_index(); i < n; i += grid_stride())
		p[i] = mode ? (unsigned)(i & 0xffff) * seed
			    : mix((unsigned)(i ^ (i >> 32)) ^ seed);
}

extern "C" __global__ void step_pattern(unsigned *p, unsigned long long n,
					unsigned step)
{
	for (unsigned long long i = first_index(); i < n; i += grid_stride())
		p[i] = p[i] * 2654435761u + step;
}

extern "C" __global__ void build_list(struct node *nodes, unsigned n)
{
	for (unsigned long long i = first_index(); i < n; i += grid_stride()) {
		nodes[i].next = &nodes[(i * 21 + 7) % n];
		nodes[i].value = (unsigned)i * 3 + 1;
		nodes[i].pad = 0;
	}
}

extern "C" __global__ void walk_list(struct node *head, unsigned hops,
				     unsigned long long *out)
{
	unsigned long long sum = 0;
	struct node *p = head;

	if (first_index() != 0)
		return;
	for (unsigned h = 0; h < hops; h++) {
		p = p->next;
		sum += p->value;
	}
	*out = sum;
}

extern "C" __global__ void count_step(void)
{
	if (first_index() == 0)
		g_steps += 1;
}

extern "C" __global__ void checksum(const unsigned *p, unsigned long long n,
				    unsigned long long *out)
{
	unsigned long long sum = 0;

	for (unsigned long long i = first_index(); i < n; i += grid_stride())
		sum += (unsigned long long)p[i] * (i | 1);
	for (int d = 16; d > 0; d /= 2)
		sum += __shfl_down_sync(0xffffffffu, sum, d);
	if ((threadIdx.x & 31) == 0 && sum)
		atomicAdd(out, sum);
}

extern "C" __global__ void deep_stack(unsigned long long *out, int seed)
{
	volatile unsigned a[512];
	unsigned long long sum = 0;

	if (first_index() != 0)
		return;
	for (int i = 0; i < 512; i++)
		a[i] = (unsigned)i * 2654435761u + (unsigned)seed;
	for (int i = 0; i < 512; i++)
		sum += a[(i * 7 + seed) & 511];
	*out = sum;
}

/*
 * Test kernels, module B: unsigned fills and a __device__ global table
 * that the tests read and write both from kernels and through
 * cuModuleGetGlobal. The CPU stand-in libcuda implements exactly these.
 */

__device__ int g_table[4] = {1, 2, 3, 4};

extern "C" __global__ void fill_u32(unsigned *p, unsigned v, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		p[i] = v;
}

extern "C" __global__ void inc_u32(unsigned *p, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		p[i] += 1;
}

extern "C" __global__ void read_global(int *out)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < 4)
		out[i] = g_table[i];
}

extern "C" __global__ void add_global(int v)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < 4)
		g_table[i] += v;
}

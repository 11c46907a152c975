/*
 * Test kernels, module A: float vector arithmetic and an empty kernel.
 * The CPU stand-in libcuda implements exactly these names and
 * signatures, so keep the two in step.
 */

extern "C" __global__ void vec_add(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		c[i] = a[i] + b[i];
}

extern "C" __global__ void scale(float *x, float f, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] *= f;
}

extern "C" __global__ void saxpy(float a, const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		y[i] = a * x[i] + y[i];
}

extern "C" __global__ void empty(void)
{
}

/* Which SM ran each block (out[block]): a session held to a share of the
 * GPU's SMs (gpu-server --sm-share) sees only those. Each block stays a
 * few microseconds, so that the blocks spread over every SM there is. */
extern "C" __global__ void sm_ids(unsigned *out, int n)
{
	long long t0 = clock64();
	unsigned id;

	asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
	while (clock64() - t0 < 20000)
		;
	if (threadIdx.x == 0 && blockIdx.x < n)
		out[blockIdx.x] = id;
}

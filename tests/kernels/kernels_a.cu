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

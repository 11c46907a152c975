/*
 * Test kernels, the device assert: check_positive asserts that every
 * element is positive. The driver prints each failing thread's assertion
 * on the program's stderr, and the context fails (CUDA_ERROR_ASSERT). The
 * CPU stand-in's twin prints the same kind of line and does not fail.
 */
#include <cassert>

extern "C" __global__ void check_positive(const int *v, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		assert(v[i] > 0);
}

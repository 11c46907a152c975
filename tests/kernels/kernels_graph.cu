/*
 * Test kernels for conditional graph nodes: device code sets a
 * conditional handle's value (cudaGraphSetConditional, CUDA 12.3 and
 * later). The CPU stand-in libcuda implements exactly these.
 */
#include <cuda_runtime.h>

extern "C" __global__ void cond_set(cudaGraphConditionalHandle h, unsigned v)
{
	if (blockIdx.x == 0 && threadIdx.x == 0)
		cudaGraphSetConditional(h, v);
}

/* One step of a counted loop: the counter down by one (not below 0), the
 * condition whether it is still above 0. */
extern "C" __global__ void cond_countdown(unsigned *counter, cudaGraphConditionalHandle h)
{
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		unsigned c = *counter;
		if (c)
			*counter = --c;
		cudaGraphSetConditional(h, c != 0);
	}
}

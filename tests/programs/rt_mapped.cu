/*
 * rt_mapped.cu: zero-copy through the CUDA runtime: pinned memory
 * allocated mapped (cudaHostAlloc) and malloc'd memory registered mapped
 * (cudaHostRegister), written by kernels through their device pointers
 * and read by the host with no copy, plus what unified addressing says of
 * those pointers. Through Cicada the memory is shared with a local
 * worker; over a remote link the device sees managed memory or a mirror.
 */
#include <cstdlib>
#include "rt_common.h"

static const int N = 1 << 16;

extern "C" __global__ void rt_mapped_fill(int *p, int n, int base)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] = p[i] * 2 + base;
}

static int all(const int *h, int n, int base, int start)
{
	for (int i = 0; i < n; i++)
		if (h[i] != (start + i) * 2 + base)
			return 0;
	return 1;
}

/* Fills through the device pointer, checks on the host. */
static void through(const char *what, int *h, int base)
{
	cudaPointerAttributes a;
	int *d = NULL;

	for (int i = 0; i < N; i++)
		h[i] = i;
	CHECK_RT(cudaHostGetDevicePointer((void **)&d, h, 0));
	CHECK_RT(cudaPointerGetAttributes(&a, h));
	if (d)
		rt_mapped_fill<<<N / 256, 256>>>(d, N, base);
	CHECK_RT(cudaDeviceSynchronize());
	printf("%s: memory type %s, device pointer %s, kernel writes seen by the host: %s\n", what,
	       a.type == cudaMemoryTypeHost ? "host" : "other", a.devicePointer == d ? "consistent" : "different",
	       all(h, N, base, 0) ? "yes" : "no");
	failures += !all(h, N, base, 0) || a.type != cudaMemoryTypeHost || a.devicePointer != d;
}

int main(void)
{
	int *pinned, *plain = (int *)malloc(N * sizeof(int)), flags = 0;

	CHECK_RT(cudaSetDeviceFlags(cudaDeviceMapHost));
	CHECK_RT(cudaHostAlloc((void **)&pinned, N * sizeof(int), cudaHostAllocMapped));
	CHECK_RT(cudaHostGetFlags((unsigned *)&flags, pinned));
	printf("cudaHostAlloc flags include mapped: %s\n", flags & cudaHostAllocMapped ? "yes" : "no");
	through("cudaHostAlloc mapped", pinned, 7);
	CHECK_RT(cudaHostRegister(plain, N * sizeof(int), cudaHostRegisterMapped));
	through("cudaHostRegister mapped", plain, 11);
	CHECK_RT(cudaHostUnregister(plain));
	CHECK_RT(cudaFreeHost(pinned));
	free(plain);
	if (failures) {
		printf("FAILED (%d)\n", failures);
		return 1;
	}
	printf("done\n");
	return 0;
}

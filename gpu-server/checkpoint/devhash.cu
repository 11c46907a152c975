/*
 * devhash.cu: the kernel that hashes pieces of device memory, so that an
 * incremental snapshot or a pre-copy round reads to the host only the
 * pieces that changed (snapshot-format/devhash.h has the hash). One block
 * a piece; each thread adds a strided share of its words, the warps' sums
 * meet in shared memory, and the piece's hash goes to host memory that the
 * worker mapped for the device. The build embeds it in the gpu-server.
 */
#include "devhash.h"

struct devhash_piece {
	unsigned long long va, size;
};

__device__ static uint64_t load_word(const unsigned char *b, uint64_t i, int aligned)
{
	uint64_t x = 0;

	if (aligned)
		return ((const uint64_t *)b)[i];
	for (int k = 7; k >= 0; k--)
		x = x << 8 | b[8 * i + k];
	return x;
}

__device__ static uint64_t block_sum(uint64_t sum)
{
	__shared__ uint64_t part[32];

	for (int o = 16; o > 0; o >>= 1)
		sum += __shfl_down_sync(0xffffffffu, sum, o);
	if ((threadIdx.x & 31) == 0)
		part[threadIdx.x >> 5] = sum;
	__syncthreads();
	sum = threadIdx.x < (blockDim.x + 31) / 32 ? part[threadIdx.x] : 0;
	if (threadIdx.x < 32)
		for (int o = 16; o > 0; o >>= 1)
			sum += __shfl_down_sync(0xffffffffu, sum, o);
	return sum;
}

extern "C" __global__ void cicada_devhash(const devhash_piece *pieces, unsigned long long *out, unsigned n)
{
	const unsigned char *b;
	uint64_t size, words, sum = 0;
	int aligned;

	if (blockIdx.x >= n)
		return;
	b = (const unsigned char *)pieces[blockIdx.x].va;
	size = pieces[blockIdx.x].size;
	words = size / 8;
	aligned = ((uintptr_t)b & 7) == 0;
	for (uint64_t i = threadIdx.x; i < words; i += blockDim.x)
		sum += devhash_word(load_word(b, i, aligned), i);
	if (threadIdx.x == 0 && size % 8) {
		uint64_t x = 0;
		for (int k = (int)(size % 8) - 1; k >= 0; k--)
			x = x << 8 | b[8 * words + k];
		sum += devhash_word(x, words);
	}
	sum = block_sum(sum);
	if (threadIdx.x == 0)
		out[blockIdx.x] = devhash_final(sum, size);
}

/*
 * devhash.h: the hash that tells whether a piece of device memory changed
 * since a parent snapshot, computed where the bytes are: by a kernel over
 * device memory (gpu-server/checkpoint/devhash.cu), or on the host over bytes just
 * read (snapshot-format/memory.c), with the same result. It is no
 * checksum of stored data (XXH3 is): it only spares reading an unchanged
 * piece to the host. A sum of mixed, position-keyed 64-bit words, so that
 * any number of threads may add their parts in any order; never 0 (0
 * says "no hash"). Plain C, also compiled as CUDA.
 */
#ifndef CICADA_DEVHASH_H
#define CICADA_DEVHASH_H

#include <stdint.h>

#ifdef __CUDACC__
#define DEVHASH_FN __host__ __device__ static inline
#else
#define DEVHASH_FN static inline
#endif

#define DEVHASH_KEY 0x9e3779b97f4a7c15ull

DEVHASH_FN uint64_t devhash_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* Word i of a piece (its bytes i*8 .. i*8+7, little-endian, the last one
 * zero-padded). */
DEVHASH_FN uint64_t devhash_word(uint64_t word, uint64_t i)
{
	return devhash_mix(word ^ ((i + 1) * DEVHASH_KEY));
}

DEVHASH_FN uint64_t devhash_final(uint64_t sum, uint64_t size)
{
	uint64_t h = devhash_mix(sum ^ devhash_mix(size + DEVHASH_KEY));

	return h ? h : 1;
}

#ifndef __CUDACC__
#include <stddef.h>
#include <string.h>

/* The hash of size bytes at p, on the host. */
static inline uint64_t devhash_bytes(const void *p, uint64_t size)
{
	const unsigned char *b = (const unsigned char *)p;
	uint64_t sum = 0, n = size / 8, w, i;

	for (i = 0; i < n; i++) {
		memcpy(&w, b + 8 * i, 8);
		sum += devhash_word(w, i);
	}
	if (size % 8) {
		w = 0;
		memcpy(&w, b + 8 * n, size % 8);
		sum += devhash_word(w, n);
	}
	return devhash_final(sum, size);
}
#endif

#endif

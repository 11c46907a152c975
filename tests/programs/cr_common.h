/*
 * Helpers shared by the checkpoint/restore test programs (cr_pattern,
 * cr_hold): loading kernels_cr.cubin, launch wrappers for its kernels,
 * the plan that splits a size into device allocations, the host twin of
 * the fill pattern, argument parsing and an EINTR-proof sleep.
 */
#ifndef CICADA_TESTS_CR_COMMON_H
#define CICADA_TESTS_CR_COMMON_H

#include <stddef.h>
#include <cuda.h>

/* Most blocks a grid-stride launch uses. */
#define CR_MAX_GRID 4096

/* The kernels of kernels_cr.cu in their module. */
struct cr_kernels {
	CUmodule mod, jit;                   /* jit: CR_JIT_FIRST's module, or NULL */
	CUfunction fill, step, build, walk, count, checksum;
};

/* One device allocation of 32-bit words. */
struct cr_piece {
	CUdeviceptr ptr;
	size_t bytes;
	unsigned seed;
};

unsigned long parse_count(const char *arg, const char *what, unsigned long min);
void sleep_ms(unsigned long ms);
void wait_for_file(const char *path);

void cr_open(struct cr_kernels *k, const char *kernels_dir);
void cr_close(struct cr_kernels *k);

int cr_plan(struct cr_piece *pieces, int max, size_t total, size_t max_piece,
	    int min_count);
void cr_alloc(struct cr_piece *pieces, int count);
void cr_free(struct cr_piece *pieces, int count);

void cr_fill(const struct cr_kernels *k, CUdeviceptr p, unsigned long long n,
	     unsigned seed, unsigned mode);
void cr_step(const struct cr_kernels *k, CUdeviceptr p, unsigned long long n,
	     unsigned step);
void cr_checksum(const struct cr_kernels *k, CUdeviceptr p, unsigned long long n,
		 CUdeviceptr out);
unsigned cr_pattern_value(unsigned long long i, unsigned seed, unsigned mode);

#endif

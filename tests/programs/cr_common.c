/*
 * Shared code of the checkpoint/restore test programs (see cr_common.h).
 * Every failure ends the program through CHECK or fail() with one line.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "cr_common.h"

/* A decimal argument >= min, or one line and exit 1. */
unsigned long parse_count(const char *arg, const char *what, unsigned long min)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-' || v < min)
		fail("%s must be a number >= %lu, not '%s'", what, min, arg);
	return v;
}

/* Sleeps the whole time even across signals (CRIU's freeze sends some). */
void sleep_ms(unsigned long ms)
{
	struct timespec left = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };

	while (nanosleep(&left, &left) && errno == EINTR)
		;
}

/* Polls every 10 ms until path exists. */
void wait_for_file(const char *path)
{
	while (access(path, F_OK))
		sleep_ms(10);
}

static CUfunction function(CUmodule mod, const char *name)
{
	CUfunction f;

	CHECK(cuModuleGetFunction(&f, mod, name));
	return f;
}

/* Driver, primary context and kernels_cr.cubin from kernels_dir; first,
 * if CR_JIT_FIRST names a PTX image there, that one, compiled by the
 * driver's JIT (a cold compute cache maps the compiler then). */
void cr_open(struct cr_kernels *k, const char *kernels_dir)
{
	const char *jit = getenv("CR_JIT_FIRST");
	CUcontext ctx;
	CUdevice dev;
	void *image;

	if (setenv("CICADA_KERNELS", kernels_dir, 1))
		fail("cannot set CICADA_KERNELS");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	k->jit = NULL;
	if (jit && *jit) {
		image = load_kernel(jit, NULL);
		CHECK(cuModuleLoadData(&k->jit, image));
		free(image);
	}
	image = load_kernel("kernels_cr.cubin", NULL);
	CHECK(cuModuleLoadData(&k->mod, image));
	free(image);
	k->fill = function(k->mod, "fill_pattern");
	k->step = function(k->mod, "step_pattern");
	k->build = function(k->mod, "build_list");
	k->walk = function(k->mod, "walk_list");
	k->count = function(k->mod, "count_step");
	k->checksum = function(k->mod, "checksum");
}

void cr_close(struct cr_kernels *k)
{
	CUdevice dev;

	CHECK(cuModuleUnload(k->mod));
	if (k->jit)
		CHECK(cuModuleUnload(k->jit));
	CHECK(cuCtxGetDevice(&dev));
	CHECK(cuDevicePrimaryCtxRelease(dev));
}

/*
 * Splits total bytes into the fewest pieces of at most max_piece bytes,
 * but at least min_count, each a multiple of 4 KiB but the last, which
 * takes the remainder. Seeds differ per piece. Returns the count.
 */
int cr_plan(struct cr_piece *pieces, int max, size_t total, size_t max_piece,
	    int min_count)
{
	size_t count = (total + max_piece - 1) / max_piece, each;
	size_t i;

	if (count < (size_t)min_count)
		count = min_count;
	if (total < count * 8192)
		fail("%zu bytes are too few for %zu pieces", total, count);
	if (count > (size_t)max)
		fail("%zu bytes need %zu pieces, more than %d", total, count, max);
	each = ((total + count - 1) / count + 4095) & ~(size_t)4095;
	for (i = 0; i < count; i++) {
		pieces[i].bytes = i + 1 < count ? each : total - each * (count - 1);
		pieces[i].seed = 0x9e3779b9u * (unsigned)(i + 1);
		pieces[i].ptr = 0;
	}
	return (int)count;
}

void cr_alloc(struct cr_piece *pieces, int count)
{
	for (int i = 0; i < count; i++)
		CHECK(cuMemAlloc(&pieces[i].ptr, pieces[i].bytes));
}

void cr_free(struct cr_piece *pieces, int count)
{
	for (int i = 0; i < count; i++)
		CHECK(cuMemFree(pieces[i].ptr));
}

static unsigned grid_for(unsigned long long n)
{
	unsigned long long blocks = (n + BLOCK - 1) / BLOCK;

	if (blocks > CR_MAX_GRID)
		return CR_MAX_GRID;
	return blocks ? (unsigned)blocks : 1;
}

static void launch(CUfunction f, unsigned long long n, void **args)
{
	CHECK(cuLaunchKernel(f, grid_for(n), 1, 1, BLOCK, 1, 1, 0, NULL, args, NULL));
}

void cr_fill(const struct cr_kernels *k, CUdeviceptr p, unsigned long long n,
	     unsigned seed, unsigned mode)
{
	void *args[] = { &p, &n, &seed, &mode };

	launch(k->fill, n, args);
}

void cr_step(const struct cr_kernels *k, CUdeviceptr p, unsigned long long n,
	     unsigned step)
{
	void *args[] = { &p, &n, &step };

	if (n)
		launch(k->step, n, args);
}

/* Adds the checksum of p[0..n) to the 64-bit word at out. */
void cr_checksum(const struct cr_kernels *k, CUdeviceptr p, unsigned long long n,
		 CUdeviceptr out)
{
	void *args[] = { &p, &n, &out };

	launch(k->checksum, n, args);
}

/* What fill_pattern stores at index i (host twin of the kernel). */
unsigned cr_pattern_value(unsigned long long i, unsigned seed, unsigned mode)
{
	unsigned x = (unsigned)(i ^ (i >> 32)) ^ seed;

	if (mode)
		return (unsigned)(i & 0xffff) * seed;
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

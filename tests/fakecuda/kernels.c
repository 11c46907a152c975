/*
 * The kernels and __device__ globals the stand-in knows, by name.  Each
 * kernel is the C twin of an extern "C" CUDA kernel of the test programs:
 * it receives the launch dimensions and the kernelParams-style argument
 * pointers and visits every (block, thread) pair the way the GPU would.
 * To add a kernel, write its function and add a line to the kernels[]
 * table with its parameter sizes in order; globals go in globals[].
 */
#include <stdio.h>
#include <string.h>
#include "devhash.h"
#include "fakecuda.h"

#define ARG(l, i, type) (*(type *)(l)->args[i])

/* Every thread of the launch; blockIdx/threadIdx are named by the caller. */
#define FOR_EACH_THREAD(l, blk, thr)						\
	for (struct fc_dim blk = { 0, 0, 0 }; blk.z < (l)->grid.z; blk.z++)	\
	for (blk.y = 0; blk.y < (l)->grid.y; blk.y++)				\
	for (blk.x = 0; blk.x < (l)->grid.x; blk.x++)				\
	for (struct fc_dim thr = { 0, 0, 0 }; thr.z < (l)->block.z; thr.z++)	\
	for (thr.y = 0; thr.y < (l)->block.y; thr.y++)				\
	for (thr.x = 0; thr.x < (l)->block.x; thr.x++)

#define INDEX(l, blk, thr) ((long)(blk).x * (l)->block.x + (thr).x)

#define PTR sizeof(void *)

static void vec_add(const struct fc_launch *l)
{
	const float *a = ARG(l, 0, const float *), *b = ARG(l, 1, const float *);
	float *c = ARG(l, 2, float *);
	int n = ARG(l, 3, int);

	FOR_EACH_THREAD(l, blockIdx, threadIdx) {
		long i = INDEX(l, blockIdx, threadIdx);

		if (i < n)
			c[i] = a[i] + b[i];
	}
}

static void scale(const struct fc_launch *l)
{
	float *x = ARG(l, 0, float *), f = ARG(l, 1, float);
	int n = ARG(l, 2, int);

	FOR_EACH_THREAD(l, blockIdx, threadIdx) {
		long i = INDEX(l, blockIdx, threadIdx);

		if (i < n)
			x[i] *= f;
	}
}

static void saxpy(const struct fc_launch *l)
{
	float a = ARG(l, 0, float);
	const float *x = ARG(l, 1, const float *);
	float *y = ARG(l, 2, float *);
	int n = ARG(l, 3, int);

	FOR_EACH_THREAD(l, blockIdx, threadIdx) {
		long i = INDEX(l, blockIdx, threadIdx);

		if (i < n)
			y[i] = a * x[i] + y[i];
	}
}

static void empty(const struct fc_launch *l)
{
}

/* C = A * B, n x n row-major (clients/rust/kernels: matmul_f32). */
static void matmul_f32(const struct fc_launch *l)
{
	const float *a = ARG(l, 0, const float *), *b = ARG(l, 1, const float *);
	float *c = ARG(l, 2, float *);
	int n = ARG(l, 3, int);

	FOR_EACH_THREAD(l, blockIdx, threadIdx) {
		long row = (long)blockIdx.y * l->block.y + threadIdx.y, col = INDEX(l, blockIdx, threadIdx);
		float sum = 0;

		if (row >= n || col >= n)
			continue;
		for (long k = 0; k < n; k++)
			sum += a[row * n + k] * b[k * n + col];
		c[row * n + col] = sum;
	}
}

static void fill_u32(const struct fc_launch *l)
{
	unsigned *p = ARG(l, 0, unsigned *), v = ARG(l, 1, unsigned);
	int n = ARG(l, 2, int);

	FOR_EACH_THREAD(l, blockIdx, threadIdx) {
		long i = INDEX(l, blockIdx, threadIdx);

		if (i < n)
			p[i] = v;
	}
}

static void inc_u32(const struct fc_launch *l)
{
	unsigned *p = ARG(l, 0, unsigned *);
	int n = ARG(l, 1, int);

	FOR_EACH_THREAD(l, blockIdx, threadIdx) {
		long i = INDEX(l, blockIdx, threadIdx);

		if (i < n)
			p[i] += 1;
	}
}

static void read_global(const struct fc_launch *l)
{
	int *out = ARG(l, 0, int *), *g_table = fc_global(l, "g_table");

	FOR_EACH_THREAD(l, blockIdx, threadIdx) {
		long i = INDEX(l, blockIdx, threadIdx);

		if (i < 4 && g_table)
			out[i] = g_table[i];
	}
}

static void add_global(const struct fc_launch *l)
{
	int v = ARG(l, 0, int), *g_table = fc_global(l, "g_table");

	FOR_EACH_THREAD(l, blockIdx, threadIdx) {
		long i = INDEX(l, blockIdx, threadIdx);

		if (i < 4 && g_table)
			g_table[i] += v;
	}
}

/*
 * Module CR (kernels_cr.cu): the checkpoint/restore test kernels.  The
 * element-wise ones are grid-stride loops on the GPU, which visit every
 * index below n exactly once whatever the grid; their twins visit them
 * in order, which gives the same memory (and, for checksum, the same sum:
 * the additions wrap mod 2^64 and commute).
 */
struct cr_node {
	struct cr_node *next;
	unsigned value;
	unsigned pad;
};

static unsigned cr_mix(unsigned x)
{
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

static void fill_pattern(const struct fc_launch *l)
{
	unsigned *p = ARG(l, 0, unsigned *);
	unsigned long long n = ARG(l, 1, unsigned long long), i;
	unsigned seed = ARG(l, 2, unsigned), mode = ARG(l, 3, unsigned);

	for (i = 0; i < n; i++)
		p[i] = mode ? (unsigned)(i & 0xffff) * seed
			    : cr_mix((unsigned)(i ^ (i >> 32)) ^ seed);
}

static void step_pattern(const struct fc_launch *l)
{
	unsigned *p = ARG(l, 0, unsigned *);
	unsigned long long n = ARG(l, 1, unsigned long long), i;
	unsigned step = ARG(l, 2, unsigned);

	for (i = 0; i < n; i++)
		p[i] = p[i] * 2654435761u + step;
}

static void build_list(const struct fc_launch *l)
{
	struct cr_node *nodes = ARG(l, 0, struct cr_node *);
	unsigned n = ARG(l, 1, unsigned);
	unsigned long long i;

	for (i = 0; i < n; i++) {
		nodes[i].next = &nodes[(i * 21 + 7) % n];
		nodes[i].value = (unsigned)i * 3 + 1;
		nodes[i].pad = 0;
	}
}

static void walk_list(const struct fc_launch *l)
{
	struct cr_node *p = ARG(l, 0, struct cr_node *);
	unsigned hops = ARG(l, 1, unsigned), h;
	unsigned long long *out = ARG(l, 2, unsigned long long *), sum = 0;

	for (h = 0; h < hops; h++) {
		p = p->next;
		sum += p->value;
	}
	*out = sum;
}

static void count_step(const struct fc_launch *l)
{
	unsigned long long *g_steps = fc_global(l, "g_steps");

	if (g_steps)
		*g_steps += 1;
}

static void deep_stack(const struct fc_launch *l)
{
	unsigned long long *out = ARG(l, 0, unsigned long long *), sum = 0;
	int seed = ARG(l, 1, int);
	unsigned a[512];

	for (int i = 0; i < 512; i++)
		a[i] = (unsigned)i * 2654435761u + (unsigned)seed;
	for (int i = 0; i < 512; i++)
		sum += a[(i * 7 + seed) & 511];
	*out = sum;
}

static void checksum(const struct fc_launch *l)
{
	const unsigned *p = ARG(l, 0, const unsigned *);
	unsigned long long n = ARG(l, 1, unsigned long long), i;
	unsigned long long *out = ARG(l, 2, unsigned long long *), sum = 0;

	for (i = 0; i < n; i++)
		sum += (unsigned long long)p[i] * (i | 1);
	*out += sum;
}

/* rt_basic.cu's kernels (extern "C", so unmangled) */
static void rt_coeff_apply(const struct fc_launch *l)
{
	float *y = ARG(l, 0, float *), *coeff = fc_global(l, "rt_coeff");
	int n = ARG(l, 1, int), *counter = fc_global(l, "rt_counter");

	FOR_EACH_THREAD(l, blockIdx, threadIdx) {
		long i = INDEX(l, blockIdx, threadIdx);

		if (i < n && coeff)
			y[i] *= coeff[i & 3];
		if (i == 0 && counter)
			*counter += 1;
	}
}

static void rt_iota(const struct fc_launch *l)
{
	int *p = ARG(l, 0, int *), n = ARG(l, 1, int), base = ARG(l, 2, int);

	FOR_EACH_THREAD(l, blockIdx, threadIdx) {
		long i = INDEX(l, blockIdx, threadIdx);

		if (i < n)
			p[i] = base + (int)i;
	}
}

static void rt_step(const struct fc_launch *l)
{
	unsigned *p = ARG(l, 0, unsigned *), step = ARG(l, 2, unsigned);
	int n = ARG(l, 1, int);
	unsigned long long *count = fc_global(l, "rt_step_count");

	FOR_EACH_THREAD(l, blockIdx, threadIdx) {
		long i = INDEX(l, blockIdx, threadIdx);

		if (i < n)
			p[i] = p[i] * 1664525u + 1013904223u + step;
		if (i == 0 && count)
			*count += 1;
	}
}

static void rt_managed(const struct fc_launch *l)
{
	unsigned *m = ARG(l, 0, unsigned *), step = ARG(l, 2, unsigned);
	int n = ARG(l, 1, int);

	FOR_EACH_THREAD(l, blockIdx, threadIdx) {
		long i = INDEX(l, blockIdx, threadIdx);

		if (i < n)
			m[i] += step * 3u + (unsigned)i;
	}
}

/* rt_features.cu's kernels */
static void rt_add(const struct fc_launch *l)
{
	int *p = ARG(l, 0, int *), n = ARG(l, 1, int), v = ARG(l, 2, int);

	FOR_EACH_THREAD(l, blockIdx, threadIdx) {
		long i = INDEX(l, blockIdx, threadIdx);

		if (i < n)
			p[i] += v;
	}
}

/* Device printf: the driver prints on the stdout of the process. */
static void rt_hello(const struct fc_launch *l)
{
	int v = ARG(l, 0, int);

	printf("device printf: value %d\n", v);
	printf("device printf: twice %d\n", 2 * v);
	fflush(stdout);
}

/* The grid-wide barrier in the middle: first every thread's write. */
static void rt_coop(const struct fc_launch *l)
{
	int *a = ARG(l, 0, int *), *b = ARG(l, 1, int *), n = ARG(l, 2, int);
	long threads = (long)l->grid.x * l->block.x;

	for (long i = 0; i < threads && i < n; i++)
		a[i] = (int)i * 3;
	for (long i = 0; i < threads && i < n; i++)
		b[i] = a[(i + l->block.x) % n];
}

/* rt_texture.cu's kernels: texture and surface objects */
static void rt_tex_linear(const struct fc_launch *l)
{
	unsigned long long t = ARG(l, 0, unsigned long long);
	float *out = ARG(l, 1, float *);
	int n = ARG(l, 2, int);

	FOR_EACH_THREAD(l, blockIdx, threadIdx) {
		long i = INDEX(l, blockIdx, threadIdx);
		float *v = i < n ? fc_object_at(t, (size_t)i, 0) : NULL;

		if (i < n)
			out[i] = v ? 2.0f * *v : 0.0f;
	}
}

/* Point sampling at texel centres: element (x, y). */
static void rt_tex_2d(const struct fc_launch *l)
{
	unsigned long long t = ARG(l, 0, unsigned long long);
	float *out = ARG(l, 1, float *);
	int w = ARG(l, 2, int), h = ARG(l, 3, int);

	for (unsigned by = 0; by < l->grid.y; by++)
		for (unsigned x = 0; x < l->grid.x * l->block.x; x++) {
			float *v = fc_object_at(t, x, by);
			if ((int)x < w && (int)by < h)
				out[by * w + x] = (v ? *v : 0.0f) + 1.0f;
		}
}

static void rt_surf_write(const struct fc_launch *l)
{
	unsigned long long s = ARG(l, 0, unsigned long long);
	int w = ARG(l, 1, int), h = ARG(l, 2, int);

	for (unsigned y = 0; y < l->grid.y; y++)
		for (unsigned x = 0; x < l->grid.x * l->block.x; x++) {
			int *v = fc_object_at(s, x, y);
			if ((int)x < w && (int)y < h && v)
				*v = (int)x * 1000 + (int)y;
		}
}

/* rt_mapped.cu's kernel, on mapped host memory */
static void rt_mapped_fill(const struct fc_launch *l)
{
	int *p = ARG(l, 0, int *), n = ARG(l, 1, int), base = ARG(l, 2, int);

	FOR_EACH_THREAD(l, blockIdx, threadIdx) {
		long i = INDEX(l, blockIdx, threadIdx);

		if (i < n)
			p[i] = p[i] * 2 + base;
	}
}

/* The gpu-server's device hashing kernel (gpu-server/checkpoint/devhash.cu): a
 * block a piece, here the whole piece at once. */
static void cicada_devhash(const struct fc_launch *l)
{
	const struct { uint64_t va, size; } *pieces = ARG(l, 0, const void *);
	uint64_t *out = ARG(l, 1, uint64_t *);
	unsigned n = ARG(l, 2, unsigned);

	for (unsigned p = 0; p < n && p < l->grid.x; p++)
		out[p] = devhash_bytes((const void *)(uintptr_t)pieces[p].va, pieces[p].size);
}

/* A device assert: the driver prints it on the process's stderr. */
static void check_positive(const struct fc_launch *l)
{
	const int *v = ARG(l, 0, const int *);
	int n = ARG(l, 1, int);

	FOR_EACH_THREAD(l, blockIdx, threadIdx) {
		long i = INDEX(l, blockIdx, threadIdx);

		if (i < n && v[i] <= 0)
			fprintf(stderr, "kernels_assert.cu:14: check_positive: block: [%u,0,0], thread: [%u,0,0] "
				"Assertion `v[i] > 0` failed.\n", blockIdx.x, threadIdx.x);
	}
	fflush(stderr);
}

/* Conditional nodes' kernels (kernels_graph.cu): device code sets the
 * handle's value with cudaGraphSetConditional; here the stand-in's. */
static void cond_set(const struct fc_launch *l)
{
	fc_cond_set(ARG(l, 0, CUgraphConditionalHandle), ARG(l, 1, unsigned));
}

/* One step of a counted loop: the counter down by one (not below 0), the
 * condition whether it is still above 0. */
static void cond_countdown(const struct fc_launch *l)
{
	unsigned *counter = ARG(l, 0, unsigned *);

	if (*counter)
		--*counter;
	fc_cond_set(ARG(l, 1, CUgraphConditionalHandle), *counter != 0);
}

/* Which SM ran each block, as %smid tells (green.c gives the launch's SMs). */
static void sm_ids(const struct fc_launch *l)
{
	unsigned *out = ARG(l, 0, unsigned *);
	int n = ARG(l, 1, int), sms = 132;

	cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0);
	for (unsigned b = 0; b < l->grid.x && (int)b < n; b++)
		out[b] = fc_sm_of(l->sms, b, (unsigned)sms);
}

static const struct fc_kernel kernels[] = {
	{ "sm_ids", 2, { PTR, sizeof(int) }, sm_ids },
	{ "cond_set", 2, { 8, sizeof(unsigned) }, cond_set },
	{ "cond_countdown", 2, { PTR, 8 }, cond_countdown },
	{ "check_positive", 2, { PTR, sizeof(int) }, check_positive },
	{ "cicada_devhash", 3, { PTR, PTR, sizeof(unsigned) }, cicada_devhash },
	{ "rt_mapped_fill", 3, { PTR, sizeof(int), sizeof(int) }, rt_mapped_fill },
	{ "rt_tex_linear", 3, { 8, PTR, sizeof(int) }, rt_tex_linear },
	{ "rt_tex_2d", 4, { 8, PTR, sizeof(int), sizeof(int) }, rt_tex_2d },
	{ "rt_surf_write", 3, { 8, sizeof(int), sizeof(int) }, rt_surf_write },
	{ "rt_add", 3, { PTR, sizeof(int), sizeof(int) }, rt_add },
	{ "rt_hello", 1, { sizeof(int) }, rt_hello },
	{ "rt_coop", 3, { PTR, PTR, sizeof(int) }, rt_coop },
	{ "rt_step", 3, { PTR, sizeof(int), sizeof(unsigned) }, rt_step },
	{ "rt_managed", 3, { PTR, sizeof(int), sizeof(unsigned) }, rt_managed },
	{ "rt_axpy", 4, { sizeof(float), PTR, PTR, sizeof(int) }, saxpy },
	{ "rt_coeff_apply", 2, { PTR, sizeof(int) }, rt_coeff_apply },
	{ "rt_iota", 3, { PTR, sizeof(int), sizeof(int) }, rt_iota },
	{ "vec_add", 4, { PTR, PTR, PTR, sizeof(int) }, vec_add },
	{ "scale", 3, { PTR, sizeof(float), sizeof(int) }, scale },
	{ "saxpy", 4, { sizeof(float), PTR, PTR, sizeof(int) }, saxpy },
	{ "empty", 0, { 0 }, empty },
	{ "matmul_f32", 4, { PTR, PTR, PTR, sizeof(int) }, matmul_f32 },
	{ "fill_u32", 3, { PTR, sizeof(unsigned), sizeof(int) }, fill_u32 },
	{ "inc_u32", 2, { PTR, sizeof(int) }, inc_u32 },
	{ "read_global", 1, { PTR }, read_global },
	{ "add_global", 1, { sizeof(int) }, add_global },
	{ "fill_pattern", 4, { PTR, sizeof(unsigned long long), sizeof(unsigned), sizeof(unsigned) },
	  fill_pattern },
	{ "step_pattern", 3, { PTR, sizeof(unsigned long long), sizeof(unsigned) }, step_pattern },
	{ "build_list", 2, { PTR, sizeof(unsigned) }, build_list },
	{ "walk_list", 3, { PTR, sizeof(unsigned), PTR }, walk_list },
	{ "count_step", 0, { 0 }, count_step },
	{ "checksum", 3, { PTR, sizeof(unsigned long long), PTR }, checksum },
	{ "deep_stack", 2, { PTR, sizeof(int) }, deep_stack },
};

/* The per-thread stack a kernel needs, where it is more than a context
 * starts with (1 KiB). */
static const struct {
	const char *name;
	size_t bytes;
} stacks[] = {
	{ "deep_stack", 2048 },
};

size_t fc_kernel_stack(const struct fc_kernel *k)
{
	for (size_t i = 0; i < sizeof(stacks) / sizeof(stacks[0]); i++)
		if (!strcmp(stacks[i].name, k->name))
			return stacks[i].bytes;
	return 0;
}

static const int g_table_init[4] = { 1, 2, 3, 4 };

static const unsigned long long g_steps_init;

static const float rt_coeff_init[4];
static const unsigned long long rt_step_count_init;
static const int rt_counter_init;

static const struct fc_global globals[] = {
	{ "rt_coeff", sizeof(rt_coeff_init), rt_coeff_init },
	{ "rt_step_count", sizeof(rt_step_count_init), &rt_step_count_init },
	{ "rt_counter", sizeof(rt_counter_init), &rt_counter_init },
	{ "g_table", sizeof(g_table_init), g_table_init },
	{ "g_steps", sizeof(g_steps_init), &g_steps_init },
};

const struct fc_kernel *fc_kernel_at(int i)
{
	return i >= 0 && i < (int)(sizeof(kernels) / sizeof(kernels[0])) ? &kernels[i] : NULL;
}

const struct fc_global *fc_global_at(int i)
{
	return i >= 0 && i < (int)(sizeof(globals) / sizeof(globals[0])) ? &globals[i] : NULL;
}

/* Parameters are packed in order, each aligned to its size (at most 8). */
size_t fc_param_offset(const struct fc_kernel *k, int idx)
{
	size_t off = 0, align;
	int j;

	for (j = 0; j <= idx; j++) {
		align = k->sizes[j] & -k->sizes[j];
		if (align > 8 || !align)
			align = 8;
		off = (off + align - 1) & ~(align - 1);
		if (j < idx)
			off += k->sizes[j];
	}
	return off;
}

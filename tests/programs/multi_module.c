/*
 * multi_module: two modules loaded at once (kernels_a.cubin and
 * kernels_b.cubin). Runs saxpy from A and fill_u32/inc_u32 from B, then
 * works on B's __device__ g_table: cuModuleGetGlobal, reads and writes
 * through cuMemcpy, updates from a kernel, reads back from a kernel.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

static void check_table(const char *what, const int *got, const int *want)
{
	printf("multi_module: %s = %d %d %d %d\n", what,
	       got[0], got[1], got[2], got[3]);
	for (int i = 0; i < 4; i++)
		if (got[i] != want[i])
			fail("%s[%d] = %d, want %d", what, i, got[i], want[i]);
}

static void test_saxpy(CUmodule mod, int n)
{
	size_t bytes = (size_t)n * sizeof(float);
	float *x = xmalloc(bytes), *y = xmalloc(bytes), *out = xmalloc(bytes);
	float alpha = 2.0f;
	CUdeviceptr dx, dy;
	CUfunction fn;
	int bad = 0;

	for (int i = 0; i < n; i++) {
		x[i] = (float)(i % 501) * 0.25f;
		y[i] = (float)(i % 313) - 100.0f;
	}
	CHECK(cuModuleGetFunction(&fn, mod, "saxpy"));
	CHECK(cuMemAlloc(&dx, bytes));
	CHECK(cuMemAlloc(&dy, bytes));
	CHECK(cuMemcpyHtoD(dx, x, bytes));
	CHECK(cuMemcpyHtoD(dy, y, bytes));
	void *args[] = { &alpha, &dx, &dy, &n };
	CHECK(cuLaunchKernel(fn, GRID(n), 1, 1, BLOCK, 1, 1, 0, NULL, args, NULL));
	CHECK(cuMemcpyDtoH(out, dy, bytes));
	for (int i = 0; i < n; i++)
		if (out[i] != alpha * x[i] + y[i])
			bad++;
	printf("multi_module: saxpy n=%d mismatches=%d\n", n, bad);
	if (bad)
		fail("saxpy differs from CPU");
	CHECK(cuMemFree(dx));
	CHECK(cuMemFree(dy));
	free(x);
	free(y);
	free(out);
}

static void test_fill_inc(CUmodule mod, int n)
{
	size_t bytes = (size_t)n * sizeof(unsigned);
	unsigned *h = xmalloc(bytes);
	unsigned v = 0xc0ffee00u;
	CUfunction fill, inc;
	CUdeviceptr d;
	int bad = 0;

	CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
	CHECK(cuModuleGetFunction(&inc, mod, "inc_u32"));
	CHECK(cuMemAlloc(&d, bytes));
	void *fargs[] = { &d, &v, &n };
	void *iargs[] = { &d, &n };
	CHECK(cuLaunchKernel(fill, GRID(n), 1, 1, BLOCK, 1, 1, 0, NULL, fargs, NULL));
	CHECK(cuLaunchKernel(inc, GRID(n), 1, 1, BLOCK, 1, 1, 0, NULL, iargs, NULL));
	CHECK(cuMemcpyDtoH(h, d, bytes));
	for (int i = 0; i < n; i++)
		if (h[i] != v + 1)
			bad++;
	printf("multi_module: fill_u32+inc_u32 n=%d mismatches=%d\n", n, bad);
	if (bad)
		fail("fill_u32/inc_u32 differ from CPU");
	CHECK(cuMemFree(d));
	free(h);
}

static void test_global(CUmodule mod)
{
	static const int init[4] = { 1, 2, 3, 4 };
	static const int added[4] = { 11, 12, 13, 14 };
	static const int written[4] = { 100, 200, 300, 400 };
	CUfunction readg, addg;
	CUdeviceptr table, out;
	int h[4], v = 10;
	size_t size = 0;

	CHECK(cuModuleGetGlobal(&table, &size, mod, "g_table"));
	printf("multi_module: g_table size=%zu\n", size);
	if (size != sizeof(h))
		fail("g_table size %zu, want %zu", size, sizeof(h));
	CHECK(cuMemcpyDtoH(h, table, sizeof(h)));
	check_table("g_table initial", h, init);

	CHECK(cuModuleGetFunction(&readg, mod, "read_global"));
	CHECK(cuModuleGetFunction(&addg, mod, "add_global"));
	CHECK(cuMemAlloc(&out, sizeof(h)));
	void *aargs[] = { &v };
	void *rargs[] = { &out };
	CHECK(cuLaunchKernel(addg, 1, 1, 1, 32, 1, 1, 0, NULL, aargs, NULL));
	CHECK(cuLaunchKernel(readg, 1, 1, 1, 32, 1, 1, 0, NULL, rargs, NULL));
	CHECK(cuMemcpyDtoH(h, out, sizeof(h)));
	check_table("read_global after add_global(10)", h, added);

	CHECK(cuMemcpyHtoD(table, written, sizeof(written)));
	CHECK(cuMemcpyDtoH(h, table, sizeof(h)));
	check_table("g_table after HtoD", h, written);
	CHECK(cuLaunchKernel(readg, 1, 1, 1, 32, 1, 1, 0, NULL, rargs, NULL));
	CHECK(cuMemcpyDtoH(h, out, sizeof(h)));
	check_table("read_global after HtoD", h, written);
	CHECK(cuMemFree(out));
}

int main(void)
{
	void *image_a, *image_b;
	CUmodule mod_a, mod_b;
	CUcontext ctx;
	CUdevice dev;

	start("multi_module");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));

	image_a = load_kernel("kernels_a.cubin", NULL);
	image_b = load_kernel("kernels_b.cubin", NULL);
	CHECK(cuModuleLoadData(&mod_a, image_a));
	CHECK(cuModuleLoadData(&mod_b, image_b));

	test_saxpy(mod_a, 100003);
	test_fill_inc(mod_b, 65537);
	test_global(mod_b);

	CHECK(cuModuleUnload(mod_a));
	CHECK(cuModuleUnload(mod_b));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	free(image_a);
	free(image_b);
	printf("multi_module: PASS\n");
	return 0;
}

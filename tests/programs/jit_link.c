/*
 * jit_link: the JIT and the linker as a program that builds its kernels
 * at run time uses them. kernels_a.ptx is loaded with log buffers, the
 * wall-time option and verbose logs; a broken PTX module must fail with
 * its reason in the error log (and its size); kernels_a.ptx and kernels_b.ptx are linked
 * (one added from memory, one from its file) and the linked image is
 * loaded and run. Prints the error logs and results, so that a run
 * through Cicada must print what a native run prints (info logs depend on
 * the driver's JIT cache, warm or cold, and are left out).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"

#define N 4096

static const char broken_ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n"
	".visible .entry broken()\n{\n\tnot_an_instruction;\n\tret;\n}\n";

static char info[8192], error[8192];

/* Options with both logs, verbose logs, and the wall time (its value is
 * not printed: it differs from run to run). */
static unsigned jit_options(CUjit_option *o, void **v, float *wall)
{
	CUjit_option opts[] = { CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
				CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_LOG_VERBOSE, CU_JIT_WALL_TIME };
	void *vals[] = { info, (void *)(uintptr_t)sizeof(info), error, (void *)(uintptr_t)sizeof(error),
			 (void *)(uintptr_t)1, NULL };

	memset(info, 0, sizeof(info));
	memset(error, 0, sizeof(error));
	memcpy(o, opts, sizeof(opts));
	memcpy(v, vals, sizeof(vals));
	*wall = -1;
	return 6;
}

static void print_log(const char *what, const char *log, void *size)
{
	printf("%s (%zu bytes): %s\n", what, (size_t)(uintptr_t)size, log[0] ? log : "(empty)");
}

static void run_vec_add(CUmodule mod)
{
	float a[N], b[N], c[N];
	CUdeviceptr da, db, dc;
	CUfunction fn;
	int n = N;
	void *args[] = { &da, &db, &dc, &n };

	CHECK(cuModuleGetFunction(&fn, mod, "vec_add"));
	fill_inputs(a, b, N);
	CHECK(cuMemAlloc(&da, sizeof(a)));
	CHECK(cuMemAlloc(&db, sizeof(b)));
	CHECK(cuMemAlloc(&dc, sizeof(c)));
	CHECK(cuMemcpyHtoD(da, a, sizeof(a)));
	CHECK(cuMemcpyHtoD(db, b, sizeof(b)));
	CHECK(cuLaunchKernel(fn, GRID(N), 1, 1, BLOCK, 1, 1, 0, NULL, args, NULL));
	CHECK(cuMemcpyDtoH(c, dc, sizeof(c)));
	printf("vec_add max error %.3g\n", vecadd_max_err(a, b, c, N));
	CHECK(cuMemFree(da));
	CHECK(cuMemFree(db));
	CHECK(cuMemFree(dc));
}

static void load_with_logs(void)
{
	CUjit_option o[8];
	void *v[8];
	float wall;
	unsigned n = jit_options(o, v, &wall);
	char *ptx = load_kernel("kernels_a.ptx", NULL);
	CUmodule mod;
	CUresult r;

	CHECK(cuModuleLoadDataEx(&mod, ptx, n, o, v));
	/* Its info log is not printed: the driver's JIT cache decides whether
	 * ptxas runs (and logs) at all. */
	printf("load kernels_a.ptx: %s\n", errname(CUDA_SUCCESS));
	run_vec_add(mod);
	CHECK(cuModuleUnload(mod));
	n = jit_options(o, v, &wall);
	r = cuModuleLoadDataEx(&mod, broken_ptx, n, o, v);
	printf("load broken PTX: %s\n", errname(r));
	print_log("error log", error, v[3]);
	free(ptx);
}

static void link_two(void)
{
	CUjit_option o[8];
	void *v[8];
	float wall;
	unsigned n = jit_options(o, v, &wall);
	char *ptx = load_kernel("kernels_a.ptx", NULL), path[4096];
	const char *dir = getenv("CICADA_KERNELS");
	CUlinkState link;
	CUmodule mod;
	CUfunction fill;
	void *cubin;
	size_t size;
	CUresult r;

	snprintf(path, sizeof(path), "%s/kernels_b.ptx", dir ? dir : ".");
	CHECK(cuLinkCreate(n, o, v, &link));
	CHECK(cuLinkAddData(link, CU_JIT_INPUT_PTX, ptx, strlen(ptx) + 1, "kernels_a.ptx", 0, NULL, NULL));
	CHECK(cuLinkAddFile(link, CU_JIT_INPUT_PTX, path, 0, NULL, NULL));
	r = cuLinkAddData(link, CU_JIT_INPUT_PTX, (void *)broken_ptx, sizeof(broken_ptx), "broken.ptx", 0, NULL,
			  NULL);
	printf("link broken PTX: %s\n", errname(r));
	CHECK(cuLinkComplete(link, &cubin, &size));
	/* The info log is not printed: ptxas logs only what the driver's JIT
	 * cache did not already hold. */
	printf("linked image: %s\n", size > 0 ? "not empty" : "empty");
	print_log("link error log", error, v[3]);
	CHECK(cuModuleLoadData(&mod, cubin));
	CHECK(cuLinkDestroy(link));
	CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
	printf("fill_u32 found in the linked image\n");
	run_vec_add(mod);
	CHECK(cuModuleUnload(mod));
	free(ptx);
}

int main(void)
{
	CUdevice dev;
	CUcontext ctx;

	start("jit_link");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	load_with_logs();
	link_two();
	CHECK(cuDevicePrimaryCtxRelease(dev));
	printf("done\n");
	return 0;
}

/*
 * dlopen_app: a program that never links libcuda. It dlopens
 * libcuda.so.1, finds cuGetProcAddress_v2 with dlsym, resolves most
 * entry points through it (CUDA 13 names, no _v2 suffixes) and a few
 * through plain dlsym, then runs vec_add and checks it. This is how
 * the CUDA runtime and frameworks reach the driver.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

static __typeof__(&cuGetProcAddress) p_cuGetProcAddress;
static __typeof__(&cuGetErrorName) p_cuGetErrorName;
static __typeof__(&cuInit) p_cuInit;
static __typeof__(&cuDeviceGet) p_cuDeviceGet;
static __typeof__(&cuDevicePrimaryCtxRetain) p_cuDevicePrimaryCtxRetain;
static __typeof__(&cuDevicePrimaryCtxRelease) p_cuDevicePrimaryCtxRelease;
static __typeof__(&cuCtxSetCurrent) p_cuCtxSetCurrent;
static __typeof__(&cuCtxSynchronize) p_cuCtxSynchronize;
static __typeof__(&cuModuleLoadData) p_cuModuleLoadData;
static __typeof__(&cuModuleGetFunction) p_cuModuleGetFunction;
static __typeof__(&cuModuleUnload) p_cuModuleUnload;
static __typeof__(&cuMemAlloc) p_cuMemAlloc;
static __typeof__(&cuMemFree) p_cuMemFree;
static __typeof__(&cuMemcpyHtoD) p_cuMemcpyHtoD;
static __typeof__(&cuMemcpyDtoH) p_cuMemcpyDtoH;
static __typeof__(&cuLaunchKernel) p_cuLaunchKernel;

#define DL_CHECK(call)							\
	do {								\
		CUresult r_ = (call);					\
		const char *s_ = NULL;					\
		if (r_ != CUDA_SUCCESS) {				\
			if (p_cuGetErrorName)				\
				p_cuGetErrorName(r_, &s_);		\
			cu_fail(__FILE__, __LINE__, #call, r_, s_);	\
		}							\
	} while (0)

static void *by_proc_address(const char *name)
{
	CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	void *fn = NULL;

	DL_CHECK(p_cuGetProcAddress(name, &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT,
				    &status));
	if (status != CU_GET_PROC_ADDRESS_SUCCESS || !fn)
		fail("cuGetProcAddress(%s) found nothing (status %d)", name,
		     (int)status);
	return fn;
}

static void *by_dlsym(void *lib, const char *name)
{
	void *fn = dlsym(lib, name);

	if (!fn)
		fail("dlsym(%s) failed", name);
	return fn;
}

static void resolve(void *lib)
{
	p_cuGetProcAddress = by_dlsym(lib, "cuGetProcAddress_v2");
	p_cuGetErrorName = by_dlsym(lib, "cuGetErrorName");
	p_cuCtxSynchronize = by_dlsym(lib, "cuCtxSynchronize");
	p_cuMemFree = by_dlsym(lib, "cuMemFree_v2");
	p_cuModuleUnload = by_dlsym(lib, "cuModuleUnload");
	p_cuDevicePrimaryCtxRelease = by_dlsym(lib, "cuDevicePrimaryCtxRelease_v2");

	p_cuInit = by_proc_address("cuInit");
	p_cuDeviceGet = by_proc_address("cuDeviceGet");
	p_cuDevicePrimaryCtxRetain = by_proc_address("cuDevicePrimaryCtxRetain");
	p_cuCtxSetCurrent = by_proc_address("cuCtxSetCurrent");
	p_cuModuleLoadData = by_proc_address("cuModuleLoadData");
	p_cuModuleGetFunction = by_proc_address("cuModuleGetFunction");
	p_cuMemAlloc = by_proc_address("cuMemAlloc");
	p_cuMemcpyHtoD = by_proc_address("cuMemcpyHtoD");
	p_cuLaunchKernel = by_proc_address("cuLaunchKernel");
	p_cuMemcpyDtoH = by_proc_address("cuMemcpyDtoH");
	printf("dlopen_app: resolved 6 symbols with dlsym, 10 with cuGetProcAddress\n");
}

int main(void)
{
	int n = 1 << 20;
	size_t bytes = (size_t)n * sizeof(float);
	CUdeviceptr da, db, dc;
	CUfunction fn;
	CUcontext ctx;
	CUmodule mod;
	CUdevice dev;
	float *a, *b, *c;
	void *lib, *image;
	double err;

	start("dlopen_app");
	lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		fail("dlopen(libcuda.so.1) failed: %s", dlerror());
	resolve(lib);

	DL_CHECK(p_cuInit(0));
	DL_CHECK(p_cuDeviceGet(&dev, 0));
	DL_CHECK(p_cuDevicePrimaryCtxRetain(&ctx, dev));
	DL_CHECK(p_cuCtxSetCurrent(ctx));
	image = load_kernel("kernels_a.cubin", NULL);
	DL_CHECK(p_cuModuleLoadData(&mod, image));
	DL_CHECK(p_cuModuleGetFunction(&fn, mod, "vec_add"));

	a = xmalloc(bytes);
	b = xmalloc(bytes);
	c = xmalloc(bytes);
	fill_inputs(a, b, n);
	DL_CHECK(p_cuMemAlloc(&da, bytes));
	DL_CHECK(p_cuMemAlloc(&db, bytes));
	DL_CHECK(p_cuMemAlloc(&dc, bytes));
	DL_CHECK(p_cuMemcpyHtoD(da, a, bytes));
	DL_CHECK(p_cuMemcpyHtoD(db, b, bytes));
	void *args[] = { &da, &db, &dc, &n };
	DL_CHECK(p_cuLaunchKernel(fn, GRID(n), 1, 1, BLOCK, 1, 1, 0, NULL, args, NULL));
	DL_CHECK(p_cuCtxSynchronize());
	DL_CHECK(p_cuMemcpyDtoH(c, dc, bytes));

	err = vecadd_max_err(a, b, c, n);
	printf("dlopen_app: n=%d max_err=%g %s\n", n, err, err == 0 ? "OK" : "BAD");
	if (err != 0)
		fail("vec_add result differs from CPU");

	DL_CHECK(p_cuMemFree(da));
	DL_CHECK(p_cuMemFree(db));
	DL_CHECK(p_cuMemFree(dc));
	DL_CHECK(p_cuModuleUnload(mod));
	DL_CHECK(p_cuDevicePrimaryCtxRelease(dev));
	free(a);
	free(b);
	free(c);
	free(image);
	printf("dlopen_app: PASS\n");
	return 0;
}

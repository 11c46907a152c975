/*
 * share_view: what a program is told of a GPU's compute, through every
 * path that counts SMs (gpu-server --sm-share gives a session a share of
 * them): the driver's SM count, the grid cuOccupancyMaxPotentialBlockSize
 * says fills them, and NVML's cores and attributes. It prints each as a
 * "share_view: WHAT = N" line (or "not supported") for run-tests.sh to
 * compare with the share; NVML is dlopened ("libnvidia-ml.so.1":
 * Cicada's replacement through Cicada), so it needs none to build.
 */
#include <dlfcn.h>
#include <stdio.h>

#include "common.h"
#include "nvml-wire.h"

static void *nvml;

/* NVML function NAME, typed by its prototype (exits if it is missing). */
#define F(name) ((__typeof__(name) *)need(#name))

static void *need(const char *name)
{
	void *p = dlsym(nvml, name);

	if (!p)
		fail("%s: missing from libnvidia-ml.so.1", name);
	return p;
}

static void driver_view(CUdevice dev)
{
	int sms, grid = 0, block = 0;
	CUfunction ids;
	CUcontext ctx;
	CUmodule mod;

	CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
	printf("share_view: driver SMs = %d\n", sms);
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuModuleLoadData(&mod, load_kernel("kernels_a.cubin", NULL)));
	CHECK(cuModuleGetFunction(&ids, mod, "sm_ids"));
	CHECK(cuOccupancyMaxPotentialBlockSize(&grid, &block, ids, NULL, 0, 0));
	printf("share_view: occupancy grid = %d (block %d)\n", grid, block);
	CHECK(cuModuleUnload(mod));
	CHECK(cuDevicePrimaryCtxRelease(dev));
}

static void nvml_value(const char *what, nvmlReturn_t ret, unsigned long long v)
{
	if (ret == NVML_SUCCESS)
		printf("share_view: nvml %s = %llu\n", what, v);
	else if (ret == NVML_ERROR_NOT_SUPPORTED)
		printf("share_view: nvml %s not supported\n", what);
	else
		fail("nvml %s: error %d", what, (int)ret);
}

static void nvml_view(void)
{
	nvmlDeviceAttributes_t at = { 0 };
	nvmlDevice_t dev;
	unsigned cores = 0;
	nvmlReturn_t ret;

	if (!(nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW)))
		fail("no libnvidia-ml.so.1: %s", dlerror());
	if ((ret = F(nvmlInit_v2)()) || (ret = F(nvmlDeviceGetHandleByIndex_v2)(0, &dev)))
		fail("NVML: error %d", (int)ret);
	ret = F(nvmlDeviceGetNumGpuCores)(dev, &cores);
	nvml_value("cores", ret, cores);
	ret = F(nvmlDeviceGetAttributes_v2)(dev, &at);
	nvml_value("SMs", ret, at.multiprocessorCount);
	nvml_value("memory MiB", ret, at.memorySizeMB);
	at.multiprocessorCount = 0;
	ret = F(nvmlDeviceGetAttributes)(dev, &at);
	nvml_value("SMs (v1)", ret, at.multiprocessorCount);
	F(nvmlShutdown)();
}

int main(void)
{
	CUdevice dev;

	start("share_view");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	driver_view(dev);
	nvml_view();
	printf("share_view: done\n");
	return 0;
}

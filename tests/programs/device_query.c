/*
 * device_query: driver version, device count, and device 0's name,
 * memory, UUID and a set of attributes; occupancy and function
 * attributes of vec_add; its parameter layout; error names and strings.
 * Device properties are printed on purpose: a remote run on the same
 * GPU model must print the same values as a native one.
 * "device_query features": the features Cicada does not serve, which
 * through Cicada must all read 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define ATTR(x) { CU_DEVICE_ATTRIBUTE_##x, #x }

static const struct {
	CUdevice_attribute attr;
	const char *name;
} attrs[] = {
	ATTR(COMPUTE_CAPABILITY_MAJOR),
	ATTR(COMPUTE_CAPABILITY_MINOR),
	ATTR(MULTIPROCESSOR_COUNT),
	ATTR(MAX_THREADS_PER_BLOCK),
	ATTR(MAX_BLOCK_DIM_X),
	ATTR(MAX_BLOCK_DIM_Y),
	ATTR(MAX_BLOCK_DIM_Z),
	ATTR(MAX_GRID_DIM_X),
	ATTR(MAX_GRID_DIM_Y),
	ATTR(MAX_GRID_DIM_Z),
	ATTR(MAX_SHARED_MEMORY_PER_BLOCK),
	ATTR(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
	ATTR(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
	ATTR(TOTAL_CONSTANT_MEMORY),
	ATTR(WARP_SIZE),
	ATTR(MAX_REGISTERS_PER_BLOCK),
	ATTR(MAX_THREADS_PER_MULTIPROCESSOR),
	ATTR(CLOCK_RATE),
	ATTR(MEMORY_CLOCK_RATE),
	ATTR(GLOBAL_MEMORY_BUS_WIDTH),
	ATTR(L2_CACHE_SIZE),
	ATTR(UNIFIED_ADDRESSING),
	ATTR(CAN_MAP_HOST_MEMORY),
	ATTR(CONCURRENT_KERNELS),
	ATTR(ASYNC_ENGINE_COUNT),
	ATTR(ECC_ENABLED),
	ATTR(INTEGRATED),
	ATTR(MANAGED_MEMORY),
	ATTR(COMPUTE_MODE),
	ATTR(STREAM_PRIORITIES_SUPPORTED),
	ATTR(COOPERATIVE_LAUNCH),
	ATTR(PCI_BUS_ID),
	ATTR(PCI_DEVICE_ID),
};

/* Features Cicada does not serve (interposer/device.c), which it must say
 * the device lacks: "device_query features" prints them alone. */
static const struct {
	CUdevice_attribute attr;
	const char *name;
} features[] = {
	ATTR(MULTICAST_SUPPORTED),
	ATTR(CAN_USE_STREAM_MEM_OPS_V1),
	ATTR(DMA_BUF_SUPPORTED),
	ATTR(MEMPOOL_SUPPORTED_HANDLE_TYPES),
	ATTR(HANDLE_TYPE_FABRIC_SUPPORTED),
	ATTR(GPU_DIRECT_RDMA_SUPPORTED),
	ATTR(GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED),
	ATTR(TIMELINE_SEMAPHORE_INTEROP_SUPPORTED),
	ATTR(SPARSE_CUDA_ARRAY_SUPPORTED),
};

static int print_features(void)
{
	CUdevice dev;
	int v;

	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	for (size_t i = 0; i < sizeof(features) / sizeof(features[0]); i++) {
		CHECK(cuDeviceGetAttribute(&v, features[i].attr, dev));
		printf("feature %s = %d\n", features[i].name, v);
	}
	return 0;
}

/* Each device found again by its PCI bus id, in the long and the short
 * form and in lower case; and an id no device has. */
static void by_bus_id(int count)
{
	char id[64], low[64];
	CUdevice d;

	for (int i = 0; i < count; i++) {
		CHECK(cuDeviceGetPCIBusId(id, sizeof(id), i));
		for (size_t k = 0; k < sizeof(low); k++)
			low[k] = (char)(id[k] >= 'A' && id[k] <= 'F' ? id[k] - 'A' + 'a' : id[k]);
		CHECK(cuDeviceGetByPCIBusId(&d, id));
		printf("device %d bus id %s -> %d", i, id, (int)d);
		CHECK(cuDeviceGetByPCIBusId(&d, low));
		printf(", lower case -> %d", (int)d);
		if (strchr(id, ':') != strrchr(id, ':')) {
			CHECK(cuDeviceGetByPCIBusId(&d, strchr(id, ':') + 1));
			printf(", without the domain -> %d", (int)d);
		}
		if (strrchr(id, '.')) {
			*strrchr(id, '.') = 0;
			CHECK(cuDeviceGetByPCIBusId(&d, id));
			printf(", without the function -> %d", (int)d);
		}
		printf("\n");
	}
	printf("bus id 0000:ff:1f.7 -> %s\n", errname(cuDeviceGetByPCIBusId(&d, "0000:ff:1f.7")));
	printf("bus id nonsense -> %s\n", errname(cuDeviceGetByPCIBusId(&d, "nonsense")));
}

/* A function's and a library kernel's names, as the driver gives them. */
static void names(CUfunction fn, const void *image)
{
	const char *name = NULL, *again = NULL;
	CUlibrary lib;
	CUkernel k;

	CHECK(cuFuncGetName(&name, fn));
	CHECK(cuFuncGetName(&again, fn));
	printf("function name = %s (%s the second time)\n", name, name == again ? "the same string" : "ANOTHER STRING");
	CHECK(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
	CHECK(cuLibraryGetKernel(&k, lib, "vec_add"));
	CHECK(cuKernelGetName(&name, k));
	printf("kernel name = %s\n", name);
	printf("name of nothing: %s\n", errname(cuFuncGetName(NULL, fn)));
	CHECK(cuLibraryUnload(lib));
}

static void print_error(CUresult r)
{
	const char *name = NULL, *str = NULL;

	CHECK(cuGetErrorName(r, &name));
	CHECK(cuGetErrorString(r, &str));
	printf("error %d name = %s\n", (int)r, name);
	printf("error %d string = %s\n", (int)r, str);
}

static void query_function(CUfunction fn)
{
	static const size_t want_off[4] = { 0, 8, 16, 24 };
	static const size_t want_size[4] = { 8, 8, 8, 4 };
	int blocks = 0, min_grid = 0, block = 0, v;

	CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, 256, 0));
	printf("occupancy vec_add block=256 active_blocks_per_sm = %d\n", blocks);
	CHECK(cuOccupancyMaxPotentialBlockSize(&min_grid, &block, fn, NULL, 0, 0));
	printf("occupancy vec_add potential min_grid = %d block = %d\n",
	       min_grid, block);

	CHECK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn));
	printf("func vec_add MAX_THREADS_PER_BLOCK = %d\n", v);
	CHECK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, fn));
	printf("func vec_add NUM_REGS = %d\n", v);

	for (size_t i = 0; i < 4; i++) {
		size_t off = 0, size = 0;

		CHECK(cuFuncGetParamInfo(fn, i, &off, &size));
		printf("param vec_add %zu offset = %zu size = %zu\n", i, off, size);
		if (off != want_off[i] || size != want_size[i])
			fail("vec_add param %zu at %zu size %zu, want %zu size %zu",
			     i, off, size, want_off[i], want_size[i]);
	}
}

int main(int argc, char **argv)
{
	int version = 0, count = 0, v;
	size_t total = 0;
	char name[256];
	CUfunction fn;
	CUcontext ctx;
	CUmodule mod;
	CUdevice dev;
	CUuuid uuid;
	void *image;

	if (argc > 1 && !strcmp(argv[1], "features"))
		return print_features();
	start("device_query");
	CHECK(cuInit(0));
	CHECK(cuDriverGetVersion(&version));
	printf("driver_version = %d\n", version);
	CHECK(cuDeviceGetCount(&count));
	printf("device_count = %d\n", count);
	if (count < 1)
		fail("no devices");

	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDeviceGetName(name, sizeof(name), dev));
	printf("device 0 name = %s\n", name);
	CHECK(cuDeviceTotalMem(&total, dev));
	printf("device 0 total_mem = %zu\n", total);
	CHECK(cuDeviceGetUuid(&uuid, dev));
	printf("device 0 uuid = ");
	for (int i = 0; i < 16; i++)
		printf("%02x%s", (unsigned char)uuid.bytes[i],
		       i == 3 || i == 5 || i == 7 || i == 9 ? "-" : "");
	printf("\n");
	for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
		CHECK(cuDeviceGetAttribute(&v, attrs[i].attr, dev));
		printf("attr %s = %d\n", attrs[i].name, v);
	}

	by_bus_id(count);

	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	image = load_kernel("kernels_a.cubin", NULL);
	CHECK(cuModuleLoadData(&mod, image));
	CHECK(cuModuleGetFunction(&fn, mod, "vec_add"));
	query_function(fn);
	names(fn, image);

	print_error(CUDA_ERROR_INVALID_VALUE);
	print_error(CUDA_ERROR_OUT_OF_MEMORY);

	CHECK(cuModuleUnload(mod));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	free(image);
	printf("device_query: PASS\n");
	return 0;
}

/*
 * The fake devices and the entry points around them: cuInit, the driver
 * version, device enumeration and attributes (H100-like sm_90 parts
 * called "Cicada CPU stand-in" with 16 GiB; FAKECUDA_DEVICES=N presents
 * N of them, 1 by default, each its own UUID and PCI address, every pair
 * able to reach each other's memory), cuGetProcAddress, which
 * resolves names against the symbols this library exports, and
 * cuGetExportTable, which the stand-in does not support.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fakecuda.h"

static int initialized;

#define A(name) [CU_DEVICE_ATTRIBUTE_##name]

static const int attrs[CU_DEVICE_ATTRIBUTE_MAX] = {
	A(MAX_THREADS_PER_BLOCK) = 1024, A(MAX_BLOCK_DIM_X) = 1024, A(MAX_BLOCK_DIM_Y) = 1024,
	A(MAX_BLOCK_DIM_Z) = 64, A(MAX_GRID_DIM_X) = 2147483647,
	A(MAX_GRID_DIM_Y) = 65535, A(MAX_GRID_DIM_Z) = 65535, A(MAX_SHARED_MEMORY_PER_BLOCK) = 49152,
	A(TOTAL_CONSTANT_MEMORY) = 65536, A(WARP_SIZE) = 32, A(MAX_PITCH) = 2147483647,
	A(MAX_REGISTERS_PER_BLOCK) = 65536, A(CLOCK_RATE) = 1755000, A(TEXTURE_ALIGNMENT) = 512,
	A(GPU_OVERLAP) = 1, A(MULTIPROCESSOR_COUNT) = 132, A(CAN_MAP_HOST_MEMORY) = 1,
	A(MAXIMUM_TEXTURE1D_WIDTH) = 131072, A(MAXIMUM_TEXTURE2D_WIDTH) = 131072,
	A(MAXIMUM_TEXTURE2D_HEIGHT) = 65536, A(MAXIMUM_TEXTURE3D_WIDTH) = 16384,
	A(MAXIMUM_TEXTURE3D_HEIGHT) = 16384, A(MAXIMUM_TEXTURE3D_DEPTH) = 16384,
	A(SURFACE_ALIGNMENT) = 512, A(CONCURRENT_KERNELS) = 1, A(ECC_ENABLED) = 1, A(PCI_BUS_ID) = 1,
	A(MEMORY_CLOCK_RATE) = 2619000, A(GLOBAL_MEMORY_BUS_WIDTH) = 5120, A(L2_CACHE_SIZE) = 52428800,
	A(MAX_THREADS_PER_MULTIPROCESSOR) = 2048, A(ASYNC_ENGINE_COUNT) = 2, A(UNIFIED_ADDRESSING) = 1,
	A(TEXTURE_PITCH_ALIGNMENT) = 32, A(COMPUTE_CAPABILITY_MAJOR) = 9,
	A(COMPUTE_CAPABILITY_MINOR) = 0, A(STREAM_PRIORITIES_SUPPORTED) = 1,
	A(GLOBAL_L1_CACHE_SUPPORTED) = 1, A(LOCAL_L1_CACHE_SUPPORTED) = 1,
	A(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR) = 233472, A(MAX_REGISTERS_PER_MULTIPROCESSOR) = 65536,
	A(MANAGED_MEMORY) = 1, A(SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO) = 2,
	A(CONCURRENT_MANAGED_ACCESS) = 1, A(COMPUTE_PREEMPTION_SUPPORTED) = 1,
	A(COOPERATIVE_LAUNCH) = 1, A(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN) = 232448,
	A(HOST_REGISTER_SUPPORTED) = 1, A(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) = 1,
	A(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) = 1, A(MAX_BLOCKS_PER_MULTIPROCESSOR) = 32,
	A(MAX_PERSISTING_L2_CACHE_SIZE) = 32505856, A(MAX_ACCESS_POLICY_WINDOW_SIZE) = 134213632,
	A(RESERVED_SHARED_MEMORY_PER_BLOCK) = 1024, A(READ_ONLY_HOST_REGISTER_SUPPORTED) = 1,
	A(MEMORY_POOLS_SUPPORTED) = 1, A(MEMPOOL_SUPPORTED_HANDLE_TYPES) = 1, A(CLUSTER_LAUNCH) = 1,
	A(CAN_USE_64_BIT_STREAM_MEM_OPS) = 1, A(CAN_USE_STREAM_WAIT_VALUE_NOR) = 1,
	A(MEM_SYNC_DOMAIN_COUNT) = 4, A(TENSOR_MAP_ACCESS_SUPPORTED) = 1, A(NUMA_ID) = -1,
	A(HOST_NUMA_ID) = -1, A(GPU_PCI_DEVICE_ID) = 0x233010de, A(GPU_PCI_SUBSYSTEM_ID) = 0x16c110de,
	/* what an H100 of an NVSwitch node says (Cicada answers 0: device.c) */
	A(MULTICAST_SUPPORTED) = 1, A(DMA_BUF_SUPPORTED) = 1, A(GPU_DIRECT_RDMA_SUPPORTED) = 1, A(CAN_USE_STREAM_MEM_OPS_V1) = 1,
	A(GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED) = 1, A(HANDLE_TYPE_FABRIC_SUPPORTED) = 1,
};

CUresult fc_need_init(void)
{
	return __atomic_load_n(&initialized, __ATOMIC_ACQUIRE) ?
	       CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

/* How many devices the stand-in presents (FAKECUDA_DEVICES, 1 to FC_MAX_DEVICES). */
int fc_ndev(void)
{
	const char *e = getenv("FAKECUDA_DEVICES");
	int n = e ? atoi(e) : 1;

	return n < 1 ? 1 : n > FC_MAX_DEVICES ? FC_MAX_DEVICES : n;
}

CUresult fc_check_dev(CUdevice dev)
{
	TRY(fc_need_init());
	return dev >= 0 && dev < fc_ndev() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuInit(unsigned int flags)
{
	CHECK_ARG(!flags);
	__atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
	return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *version)
{
	CHECK_ARG(version);
	*version = FC_VERSION;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
	TRY(fc_need_init());
	CHECK_ARG(count);
	*count = fc_ndev();
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	TRY(fc_need_init());
	CHECK_ARG(dev);
	CHECK(ordinal >= 0 && ordinal < fc_ndev(), CUDA_ERROR_INVALID_DEVICE);
	*dev = ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	TRY(fc_check_dev(dev));
	CHECK_ARG(name && len > 0);
	snprintf(name, len, "%s", "Cicada CPU stand-in");
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	TRY(fc_check_dev(dev));
	CHECK_ARG(uuid);
	memcpy(uuid->bytes, "CicadaFakeGPU-00", sizeof(uuid->bytes));
	uuid->bytes[15] = (char)('0' + dev);
	return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
	TRY(fc_check_dev(dev));
	CHECK_ARG(bytes);
	*bytes = FC_TOTAL_MEM;
	return CUDA_SUCCESS;
}

/* FAKECUDA_CC=MAJOR.MINOR: another GPU model (9.0 by default), whose
 * cubins for sm_90 do not load (tests of restores on other GPUs). */
int fc_cc(void)
{
	const char *e = getenv("FAKECUDA_CC");
	int major = 9, minor = 0;

	if (e && sscanf(e, "%d.%d", &major, &minor) < 1)
		major = 9;
	return major * 10 + minor;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attr, CUdevice dev)
{
	TRY(fc_check_dev(dev));
	CHECK_ARG(pi && (int)attr >= 1 && attr < CU_DEVICE_ATTRIBUTE_MAX);
	*pi = attrs[attr];
	if (attr == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
		*pi = fc_cc() / 10;
	if (attr == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
		*pi = fc_cc() % 10;
	if (attr == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)
		*pi += dev;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *bus, int len, CUdevice dev)
{
	TRY(fc_check_dev(dev));
	CHECK_ARG(bus && len > 0);
	snprintf(bus, len, "%04x:%02x:%02x.0", attrs[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID],
		 attrs[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID] + dev, attrs[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID]);
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *id)
{
	unsigned d, b, s, f;
	char end;

	CHECK_ARG(dev && id);
	if (sscanf(id, "%x:%x:%x.%x%c", &d, &b, &s, &f, &end) != 4) {
		f = 0;
		if (sscanf(id, "%x:%x:%x%c", &d, &b, &s, &end) != 3) {
			d = 0;
			CHECK_ARG(sscanf(id, "%x:%x.%x%c", &b, &s, &f, &end) == 3);
		}
	}
	for (int i = 0; i < fc_ndev(); i++)
		if (d == (unsigned)attrs[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID] &&
		    b == (unsigned)attrs[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID] + (unsigned)i &&
		    s == (unsigned)attrs[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID] && f == 0) {
			*dev = i;
			return CUDA_SUCCESS;
		}
	return CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer)
{
	TRY(fc_check_dev(dev));
	TRY(fc_check_dev(peer));
	CHECK_ARG(can);
	*can = dev != peer;
	return CUDA_SUCCESS;
}

static void *handle;

static void open_self(void)
{
	Dl_info info;

	if (dladdr((void *)open_self, &info) && info.dli_fname)
		handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
}

/* Our own handle, so lookups only see what this library exports. */
static void *self(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, open_self);
	return handle;
}

/* fn is defined here, not in a library we depend on (libc has cuserid). */
static int ours(void *fn)
{
	Dl_info mine, theirs;

	return dladdr((void *)self, &mine) && dladdr(fn, &theirs) &&
	       mine.dli_fbase == theirs.dli_fbase;
}

/*
 * Newest versioned name first: cuMemAlloc -> cuMemAlloc_v2 -> cuMemAlloc.
 * The only _v4 (cuCtxCreate) appeared in 12.5; older callers get _v2.
 */
static void *lookup(const char *symbol, int version)
{
	static const char *const suffix[] = { "_v4", "_v3", "_v2", "" };
	char name[256];
	size_t i;
	void *fn;

	if (!self() || strncmp(symbol, "cu", 2))
		return NULL;
	for (i = version < 12050; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		if (snprintf(name, sizeof(name), "%s%s", symbol, suffix[i]) >= (int)sizeof(name))
			continue;
		fn = dlsym(self(), name);
		if (fn && ours(fn))
			return fn;
	}
	return NULL;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags,
			  CUdriverProcAddressQueryResult *status)
{
	CHECK_ARG(symbol && pfn);
	*pfn = lookup(symbol, version);
	if (status)
		*status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetExportTable(const void **table, const CUuuid *id)
{
	CHECK_ARG(table && id);
	*table = NULL;
	return CUDA_ERROR_NOT_SUPPORTED;
}

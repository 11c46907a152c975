/*
 * device.c: initialisation, device and pointer queries whose answers are
 * not plain scalars, occupancy with a block-size callback, and error
 * names and strings.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "interposer.h"


/* As the driver's: no device visible (CUDA_VISIBLE_DEVICES, or a server
 * that gave this client none) is CUDA_ERROR_NO_DEVICE. */
CUresult CUDAAPI cuInit(unsigned int flags)
{
	CUresult err;
	int count = 0;

	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = client_connect()) || (err = rpc_cuDeviceGetCount(&count)))
		return err;
	return count ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

static CUresult get_name(unsigned proc, CUdevice dev, char *out, int len)
{
	uint64_t in = (uint64_t)dev;
	scalars a = { { 1, &in } };
	name_res r = { 0 };
	CUresult err;

	if (!out || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	err = client_call(proc, (xdrproc_t)xdr_scalars, &a, (xdrproc_t)xdr_name_res, &r);
	if (!err)
		snprintf(out, (size_t)len, "%s", r.name ? r.name : "");
	xdr_free((xdrproc_t)xdr_name_res, (char *)&r);
	return err;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
	return get_name(P_device_get_name, dev, name, len);
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	return get_name(P_device_get_pci_bus_id, dev, pciBusId, len);
}

/* A PCI bus id as numbers, in the forms the driver reads (hex):
 * "domain:bus:device.function", "domain:bus:device" or
 * "bus:device.function". */
static int bus_id_parse(const char *s, unsigned v[4])
{
	char end;

	if (sscanf(s, "%x:%x:%x.%x%c", &v[0], &v[1], &v[2], &v[3], &end) == 4)
		return 0;
	v[3] = 0;
	if (sscanf(s, "%x:%x:%x%c", &v[0], &v[1], &v[2], &end) == 3)
		return 0;
	v[0] = 0;
	return sscanf(s, "%x:%x.%x%c", &v[1], &v[2], &v[3], &end) == 3 ? 0 : -1;
}

/* Among the client's GPUs, by what cuDeviceGetPCIBusId says of each. */
CUresult CUDAAPI cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
	unsigned want[4], have[4];
	char id[64];
	CUresult err;
	int n = 0;

	if (!dev || !pciBusId || bus_id_parse(pciBusId, want))
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = cuDeviceGetCount(&n)))
		return err;
	for (int i = 0; i < n; i++) {
		if ((err = cuDeviceGetPCIBusId(id, sizeof(id), i)))
			return err;
		if (!bus_id_parse(id, have) && !memcmp(want, have, sizeof(want))) {
			*dev = i;
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_INVALID_DEVICE;
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	uint64_t in = (uint64_t)dev;
	scalars a = { { 1, &in } };
	bytes_res r = { 0 };
	CUresult err;

	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	err = rpc_device_get_uuid(&a, &r);
	if (!err && r.data.data_len != sizeof(uuid->bytes))
		err = client_lost("malformed uuid");
	if (!err)
		memcpy(uuid->bytes, r.data.data_val, sizeof(uuid->bytes));
	xdr_free((xdrproc_t)xdr_bytes_res, (char *)&r);
	return err;
}

#undef cuDeviceGetUuid
CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	return cuDeviceGetUuid_v2(uuid, dev);
}

CUresult CUDAAPI cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
	CUresult err;

	if (!major || !minor)
		return CUDA_ERROR_INVALID_VALUE;
	err = rpc_cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
	return err ? err : rpc_cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
}

static CUresult pointer_attribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr, int map)
{
	pointer_attr_args a = { ptr, (unsigned)attribute };
	bytes_res r = { 0 };
	CUresult err;

	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	if (hostmem_attribute(ptr, attribute, data, &err, map))
		return err;
	err = rpc_pointer_get_attribute(&a, &r);
	if (!err && (r.data.data_len == 0 || r.data.data_len > 8))
		err = client_lost("malformed pointer attribute");
	if (!err)
		memcpy(data, r.data.data_val, r.data.data_len);
	xdr_free((xdrproc_t)xdr_bytes_res, (char *)&r);
	return err;
}

CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	return pointer_attribute(data, attribute, ptr, 1);
}

CUresult CUDAAPI cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data, CUdeviceptr ptr)
{
	if (!attrs || !data)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < n; i++) {
		CUresult err = data[i] ? pointer_attribute(data[i], attrs[i], ptr, 0) : CUDA_SUCCESS;
		if (err == CUDA_ERROR_INVALID_VALUE)          /* not a CUDA pointer: zero */
			memset(data[i], 0, wire_pointer_attr_size(attrs[i]));
		else if (err)
			return err;
	}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize, CUfunction func,
							    CUoccupancyB2DSize blockSizeToDynamicSMemSize,
							    size_t dynamicSMemSize, int blockSizeLimit,
							    unsigned int flags)
{
	uint64_t in[4] = { handle_id(func), dynamicSMemSize, (uint64_t)blockSizeLimit, flags }, out[2];
	CUresult err;

	if (!minGridSize || !blockSize)
		return CUDA_ERROR_INVALID_VALUE;
	if (blockSizeToDynamicSMemSize) {
		log_error("cuOccupancyMaxPotentialBlockSize with a block-size callback is not supported");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	err = client_scalar_call(P_occupancy_max_potential_block_size, 0, in, 4, out, 2);
	if (!err) {
		*minGridSize = (int)out[0];
		*blockSize = (int)out[1];
	}
	return err;
}

CUresult CUDAAPI cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
						   CUoccupancyB2DSize blockSizeToDynamicSMemSize,
						   size_t dynamicSMemSize, int blockSizeLimit)
{
	return cuOccupancyMaxPotentialBlockSizeWithFlags(minGridSize, blockSize, func, blockSizeToDynamicSMemSize,
							 dynamicSMemSize, blockSizeLimit, 0);
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
	const char *name = error_name(error);

	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = name;
	return name ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The driver's own wording, asked of the server once per code. */
CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static char *strings[1024];
	uint64_t in = (uint64_t)error;
	scalars a = { { 1, &in } };
	name_res r = { 0 };
	unsigned slot = (unsigned)error % 1024;

	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	if (!error_name(error)) {
		*pStr = NULL;
		return CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_lock(&lock);
	if (!strings[slot] && client_connect() == CUDA_SUCCESS &&
	    rpc_get_error_string(&a, &r) == CUDA_SUCCESS)
		strings[slot] = r.name, r.name = NULL;
	xdr_free((xdrproc_t)xdr_name_res, (char *)&r);
	*pStr = strings[slot] ? strings[slot] : error_name(error);
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

/* Features whose entry points Cicada does not serve (they answer
 * CUDA_ERROR_NOT_SUPPORTED), or that cannot reach the worker's memory
 * from the application's process: the device says it lacks them, so that
 * a program (NCCL, say) takes its other path instead of failing. 1 if
 * attr is one of them (*value is then 0). */
static int unserved_attribute(CUdevice_attribute attr, int *value)
{
	switch (attr) {
	case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED:                   /* cuMulticast* */
	case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1:             /* the old ABI of cuStreamWaitValue*, ... */
	case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1:
	case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR_V1:
	case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED:                     /* cuMemGetHandleForAddressRange */
	case CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:        /* cuMemPoolCreate, pool exports */
	case CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED:          /* exports: file descriptors only */
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:             /* the memory is the worker's */
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS:
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING:
	case CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED:  /* external semaphores */
	case CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED:           /* cuMemMapArrayAsync */
	case CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED: /* cuArrayGetMemoryRequirements */
		*value = 0;
		return 1;
	default:
		return 0;
	}
}

/* The server's answer, except where Cicada serves a feature its own way
 * (managed memory: managed.c) or not at all. */
CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	CUresult err = rpc_cuDeviceGetAttribute(pi, attrib, dev);

	if (!err && !managed_attribute(attrib, pi))
		unserved_attribute(attrib, pi);
	return err;
}

/*
 * attr.c: the size of each pointer attribute's value, which is how many
 * bytes of it travel (pointer_get_attribute) and how many a query of an
 * unknown pointer sets to zero. 0: an attribute Cicada does not carry.
 */
#include <cuda.h>
#include "wire.h"

size_t wire_pointer_attr_size(unsigned attr)
{
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT: return sizeof(CUcontext);
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: return sizeof(unsigned int);
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: return sizeof(CUdeviceptr);
	case CU_POINTER_ATTRIBUTE_HOST_POINTER: return sizeof(void *);
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: return sizeof(int);
	case CU_POINTER_ATTRIBUTE_BUFFER_ID: return sizeof(unsigned long long);
	case CU_POINTER_ATTRIBUTE_IS_MANAGED: return sizeof(int);
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: return sizeof(int);
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: return sizeof(CUdeviceptr);
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE: return sizeof(size_t);
	case CU_POINTER_ATTRIBUTE_MAPPED: return sizeof(int);
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: return sizeof(unsigned long long);
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: return sizeof(int);
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: return sizeof(unsigned int);
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: return sizeof(void *);
	default: return 0;
	}
}

/*
 * attr.c: what the wire knows of the driver's option and attribute
 * values: the size of each pointer attribute's value, which is how many
 * bytes of it travel (pointer_get_attribute) and how many a query of an
 * unknown pointer sets to zero (0: an attribute Cicada does not carry);
 * and which JIT options hold plain values that may cross the wire.
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

/* Whether JIT option o holds a plain value: not a pointer into the
 * caller (log buffers, symbol tables, name lists, and the counts that go
 * with those lists). */
int wire_jit_option_plain(unsigned o)
{
	switch (o) {
	case CU_JIT_INFO_LOG_BUFFER:
	case CU_JIT_ERROR_LOG_BUFFER:
	case CU_JIT_GLOBAL_SYMBOL_NAMES:
	case CU_JIT_GLOBAL_SYMBOL_ADDRESSES:
	case CU_JIT_GLOBAL_SYMBOL_COUNT:
	case CU_JIT_REFERENCED_KERNEL_NAMES:
	case CU_JIT_REFERENCED_KERNEL_COUNT:
	case CU_JIT_REFERENCED_VARIABLE_NAMES:
	case CU_JIT_REFERENCED_VARIABLE_COUNT:
		return 0;
	}
	return o < CU_JIT_NUM_OPTIONS;
}

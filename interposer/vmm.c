/*
 * vmm.c: the application's own virtual memory calls that need more than
 * their generated stubs: mapped ranges are device memory to the copy
 * paths (devmem.c keeps the list), access descriptors travel one at a
 * time, and the address given to cuMemRetainAllocationHandle is a device
 * address, not a pointer to follow. The worker keeps the layout for
 * checkpoints (gpu-server/calls/vmm.c).
 */
#include "interposer.h"

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
			  unsigned long long flags)
{
	CUresult err = rpc_cuMemMap(ptr, size, offset, handle, flags);

	if (!err)
		devmem_note_alloc(ptr, size);
	return err;
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	CUresult err = rpc_cuMemUnmap(ptr, size);

	if (!err)
		devmem_note_unmap(ptr, size);
	return err;
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	CUresult err = CUDA_SUCCESS;

	if (!desc || !count)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count && !err; i++)
		err = rpc_vmm_set_access(ptr, size, desc[i].location.type, desc[i].location.id, desc[i].flags);
	return err;
}

CUresult CUDAAPI cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
	if (!flags || !location)
		return CUDA_ERROR_INVALID_VALUE;
	return rpc_vmm_get_access(flags, location->type, location->id, ptr);
}

CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	return rpc_vmm_retain_handle(handle, (CUdeviceptr)(uintptr_t)addr);
}

/*
 * ipc.c: CUDA IPC handles. The workers make and open them
 * (gpu-server/calls/ipc.c), so two processes served by one gpu-server share
 * device memory and events as they would natively; a handle is 64 bytes
 * that travel as 8 scalars. VMM allocations are shared the same way, by
 * POSIX file descriptor.
 */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "interposer.h"

#define HANDLE_WORDS (CU_IPC_HANDLE_SIZE / 8)

CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr)
{
	uint64_t in[1] = { dptr }, out[HANDLE_WORDS];
	CUresult err;

	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = client_scalar_call(P_ipc_get_mem_handle, 0, in, 1, out, HANDLE_WORDS)))
		return err;
	memcpy(handle->reserved, out, sizeof(handle->reserved));
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
	uint64_t in[HANDLE_WORDS + 1], out[1];
	CUresult err;

	if (!pdptr)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(in, handle.reserved, sizeof(handle.reserved));
	in[HANDLE_WORDS] = flags;
	if ((err = client_scalar_call(P_ipc_open_mem_handle, 0, in, HANDLE_WORDS + 1, out, 1)))
		return err;
	*pdptr = (CUdeviceptr)out[0];
	return CUDA_SUCCESS;
}

#undef cuIpcOpenMemHandle
CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
	return cuIpcOpenMemHandle_v2(pdptr, handle, flags);
}

CUresult CUDAAPI cuIpcGetEventHandle(CUipcEventHandle *handle, CUevent event)
{
	uint64_t in[1] = { (uint64_t)(uintptr_t)event }, out[HANDLE_WORDS];
	CUresult err;

	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = client_scalar_call(P_ipc_get_event_handle, 0, in, 1, out, HANDLE_WORDS)))
		return err;
	memcpy(handle->reserved, out, sizeof(handle->reserved));
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuIpcOpenEventHandle(CUevent *event, CUipcEventHandle handle)
{
	uint64_t in[HANDLE_WORDS], out[1];
	CUresult err;

	if (!event)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(in, handle.reserved, sizeof(handle.reserved));
	if ((err = client_scalar_call(P_ipc_open_event_handle, 0, in, HANDLE_WORDS, out, 1)))
		return err;
	*event = (CUevent)(uintptr_t)out[0];
	return CUDA_SUCCESS;
}

/* The application's VMM memory for another process: POSIX file
 * descriptors only. The descriptor is a small file holding the worker's
 * token; the receiving process's import hands it back to its worker. */
CUresult CUDAAPI cuMemExportToShareableHandle(void *shareable, CUmemGenericAllocationHandle handle,
					      CUmemAllocationHandleType type, unsigned long long flags)
{
	uint64_t in[1] = { (uint64_t)handle }, out[HANDLE_WORDS];
	CUresult err;
	int fd;

	if (!shareable || flags)
		return CUDA_ERROR_INVALID_VALUE;
	if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
		log_info("cuMemExportToShareableHandle: only POSIX file descriptors cross processes through Cicada "
			 "(handle type %d asked)", (int)type);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if ((err = client_scalar_call(P_vmm_export, 0, in, 1, out, HANDLE_WORDS)))
		return err;
	if ((fd = memfd_create("cicada-vmm-export", 0)) < 0 || pwrite(fd, out, sizeof(out), 0) != sizeof(out)) {
		if (fd >= 0)
			close(fd);
		return CUDA_ERROR_OPERATING_SYSTEM;
	}
	*(int *)shareable = fd;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *os_handle,
						CUmemAllocationHandleType type)
{
	uint64_t in[HANDLE_WORDS], out[1];
	CUresult err;

	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
	    pread((int)(intptr_t)os_handle, in, sizeof(in), 0) != sizeof(in) || memcmp(in, "CICADAVM", 8)) {
		log_info("cuMemImportFromShareableHandle: not a descriptor that cuMemExportToShareableHandle made "
			 "through Cicada (type %d)", (int)type);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if ((err = client_scalar_call(P_vmm_import, 0, in, HANDLE_WORDS, out, 1)))
		return err;
	*handle = (CUmemGenericAllocationHandle)out[0];
	return CUDA_SUCCESS;
}

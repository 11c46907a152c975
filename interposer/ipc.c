/*
 * ipc.c: CUDA IPC handles. The workers make and open them
 * (gpu-server/ipc.c), so two processes served by one gpu-server share
 * device memory and events as they would natively; a handle is 64 bytes
 * that travel as 8 scalars.
 */
#include <string.h>
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

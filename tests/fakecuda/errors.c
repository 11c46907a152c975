/*
 * cuGetErrorName and cuGetErrorString for every CUresult of cuda.h.  The
 * name is the enum identifier; the description is the driver's wording
 * for the common codes and the name in lowercase words for the others.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include "fakecuda.h"

#define E(code) { CUDA_##code, "CUDA_" #code }
#define N (sizeof(names) / sizeof(names[0]))

static const struct {
	CUresult code;
	const char *name;
} names[] = {
	E(SUCCESS), E(ERROR_INVALID_VALUE), E(ERROR_OUT_OF_MEMORY), E(ERROR_NOT_INITIALIZED),
	E(ERROR_DEINITIALIZED), E(ERROR_PROFILER_DISABLED), E(ERROR_PROFILER_NOT_INITIALIZED),
	E(ERROR_PROFILER_ALREADY_STARTED), E(ERROR_PROFILER_ALREADY_STOPPED), E(ERROR_STUB_LIBRARY),
	E(ERROR_CALL_REQUIRES_NEWER_DRIVER), E(ERROR_DEVICE_UNAVAILABLE), E(ERROR_NO_DEVICE),
	E(ERROR_INVALID_DEVICE), E(ERROR_DEVICE_NOT_LICENSED), E(ERROR_INVALID_IMAGE),
	E(ERROR_INVALID_CONTEXT), E(ERROR_CONTEXT_ALREADY_CURRENT), E(ERROR_MAP_FAILED),
	E(ERROR_UNMAP_FAILED), E(ERROR_ARRAY_IS_MAPPED), E(ERROR_ALREADY_MAPPED),
	E(ERROR_NO_BINARY_FOR_GPU), E(ERROR_ALREADY_ACQUIRED), E(ERROR_NOT_MAPPED),
	E(ERROR_NOT_MAPPED_AS_ARRAY), E(ERROR_NOT_MAPPED_AS_POINTER), E(ERROR_ECC_UNCORRECTABLE),
	E(ERROR_UNSUPPORTED_LIMIT), E(ERROR_CONTEXT_ALREADY_IN_USE), E(ERROR_PEER_ACCESS_UNSUPPORTED),
	E(ERROR_INVALID_PTX), E(ERROR_INVALID_GRAPHICS_CONTEXT), E(ERROR_NVLINK_UNCORRECTABLE),
	E(ERROR_JIT_COMPILER_NOT_FOUND), E(ERROR_UNSUPPORTED_PTX_VERSION),
	E(ERROR_JIT_COMPILATION_DISABLED), E(ERROR_UNSUPPORTED_EXEC_AFFINITY),
	E(ERROR_UNSUPPORTED_DEVSIDE_SYNC), E(ERROR_CONTAINED), E(ERROR_INVALID_SOURCE),
	E(ERROR_FILE_NOT_FOUND), E(ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND),
	E(ERROR_SHARED_OBJECT_INIT_FAILED), E(ERROR_OPERATING_SYSTEM), E(ERROR_INVALID_HANDLE),
	E(ERROR_ILLEGAL_STATE), E(ERROR_LOSSY_QUERY), E(ERROR_NOT_FOUND), E(ERROR_NOT_READY),
	E(ERROR_ILLEGAL_ADDRESS), E(ERROR_LAUNCH_OUT_OF_RESOURCES), E(ERROR_LAUNCH_TIMEOUT),
	E(ERROR_LAUNCH_INCOMPATIBLE_TEXTURING), E(ERROR_PEER_ACCESS_ALREADY_ENABLED),
	E(ERROR_PEER_ACCESS_NOT_ENABLED), E(ERROR_PRIMARY_CONTEXT_ACTIVE),
	E(ERROR_CONTEXT_IS_DESTROYED), E(ERROR_ASSERT), E(ERROR_TOO_MANY_PEERS),
	E(ERROR_HOST_MEMORY_ALREADY_REGISTERED), E(ERROR_HOST_MEMORY_NOT_REGISTERED),
	E(ERROR_HARDWARE_STACK_ERROR), E(ERROR_ILLEGAL_INSTRUCTION), E(ERROR_MISALIGNED_ADDRESS),
	E(ERROR_INVALID_ADDRESS_SPACE), E(ERROR_INVALID_PC), E(ERROR_LAUNCH_FAILED),
	E(ERROR_COOPERATIVE_LAUNCH_TOO_LARGE), E(ERROR_TENSOR_MEMORY_LEAK), E(ERROR_NOT_PERMITTED),
	E(ERROR_NOT_SUPPORTED), E(ERROR_SYSTEM_NOT_READY), E(ERROR_SYSTEM_DRIVER_MISMATCH),
	E(ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE), E(ERROR_MPS_CONNECTION_FAILED),
	E(ERROR_MPS_RPC_FAILURE), E(ERROR_MPS_SERVER_NOT_READY), E(ERROR_MPS_MAX_CLIENTS_REACHED),
	E(ERROR_MPS_MAX_CONNECTIONS_REACHED), E(ERROR_MPS_CLIENT_TERMINATED),
	E(ERROR_CDP_NOT_SUPPORTED), E(ERROR_CDP_VERSION_MISMATCH), E(ERROR_STREAM_CAPTURE_UNSUPPORTED),
	E(ERROR_STREAM_CAPTURE_INVALIDATED), E(ERROR_STREAM_CAPTURE_MERGE),
	E(ERROR_STREAM_CAPTURE_UNMATCHED), E(ERROR_STREAM_CAPTURE_UNJOINED),
	E(ERROR_STREAM_CAPTURE_ISOLATION), E(ERROR_STREAM_CAPTURE_IMPLICIT), E(ERROR_CAPTURED_EVENT),
	E(ERROR_STREAM_CAPTURE_WRONG_THREAD), E(ERROR_TIMEOUT), E(ERROR_GRAPH_EXEC_UPDATE_FAILURE),
	E(ERROR_EXTERNAL_DEVICE), E(ERROR_INVALID_CLUSTER_SIZE), E(ERROR_FUNCTION_NOT_LOADED),
	E(ERROR_INVALID_RESOURCE_TYPE), E(ERROR_INVALID_RESOURCE_CONFIGURATION), E(ERROR_KEY_ROTATION),
	E(ERROR_UNKNOWN),
};

static const struct {
	CUresult code;
	const char *text;
} wording[] = {
	{ CUDA_SUCCESS, "no error" },
	{ CUDA_ERROR_INVALID_VALUE, "invalid argument" },
	{ CUDA_ERROR_NOT_INITIALIZED, "initialization error" },
	{ CUDA_ERROR_DEINITIALIZED, "driver shutting down" },
	{ CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected" },
	{ CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal" },
	{ CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid" },
	{ CUDA_ERROR_INVALID_CONTEXT, "invalid device context" },
	{ CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device" },
	{ CUDA_ERROR_INVALID_HANDLE, "invalid resource handle" },
	{ CUDA_ERROR_NOT_FOUND, "named symbol not found" },
	{ CUDA_ERROR_NOT_READY, "device not ready" },
	{ CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered" },
	{ CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch" },
	{ CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "part or all of the requested memory range is already mapped" },
	{ CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory region" },
	{ CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure" },
	{ CUDA_ERROR_NOT_SUPPORTED, "operation not supported" },
	{ CUDA_ERROR_UNKNOWN, "unknown error" },
};

static char texts[N][64];

/* "CUDA_ERROR_INVALID_PC" -> "invalid pc" */
static void derive(void)
{
	size_t i, j;
	const char *s;

	for (i = 0; i < N; i++) {
		s = names[i].name + sizeof("CUDA_ERROR_") - 1;
		for (j = 0; s[j] && j < sizeof(texts[i]) - 1; j++)
			texts[i][j] = s[j] == '_' ? ' ' : tolower((unsigned char)s[j]);
		for (j = 0; j < sizeof(wording) / sizeof(wording[0]); j++)
			if (wording[j].code == names[i].code)
				snprintf(texts[i], sizeof(texts[i]), "%s", wording[j].text);
	}
}

static CUresult find(CUresult code, const char **str, int text)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	size_t i;

	CHECK_ARG(str);
	pthread_once(&once, derive);
	*str = NULL;
	for (i = 0; i < N && names[i].code != code; i++)
		;
	CHECK_ARG(i < N);
	*str = text ? texts[i] : names[i].name;
	return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char **str)
{
	return find(error, str, 0);
}

CUresult cuGetErrorString(CUresult error, const char **str)
{
	return find(error, str, 1);
}

/*
 * stream.c: stream and event calls beyond the generated ones. Cicada
 * offers no stream capture (cuStreamBeginCapture fails), so no stream is
 * ever capturing; cuBLAS asks before each GEMM (EXPORT-TABLES.md 4.8), and
 * the answer needs no round trip. Old-ABI names that libraries dlsym
 * (cuEventElapsedTime, cuDevicePrimaryCtxRelease) behave as their _v2.
 */
#include "interposer.h"

#undef cuEventElapsedTime
#undef cuDevicePrimaryCtxRelease

static __thread CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* The mode only matters while a capture runs, but it is kept per thread. */
CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	CUstreamCaptureMode old = capture_mode;

	if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	capture_mode = *mode;
	*mode = old;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	if (!captureStatus)
		return CUDA_ERROR_INVALID_VALUE;
	*captureStatus = CU_STREAM_CAPTURE_STATUS_NONE;
	return CUDA_SUCCESS;
}

/* Outside a capture only the status is defined; the rest is left alone. */
CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
					   cuuint64_t *id_out, CUgraph *graph_out,
					   const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
	return cuStreamIsCapturing(hStream, captureStatus_out);
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
					   cuuint64_t *id_out, CUgraph *graph_out,
					   const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out,
					   size_t *numDependencies_out)
{
	if (edgeData_out && !dependencies_out)
		return CUDA_ERROR_INVALID_VALUE;
	return cuStreamIsCapturing(hStream, captureStatus_out);
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
	CUresult err = rpc_cuStreamDestroy_v2(hStream);

	if (err == CUDA_SUCCESS)
		ids_forget_stream(hStream);
	return err;
}

CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd);
CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
	return cuDevicePrimaryCtxRelease_v2(dev);
}

/*
 * stream.c: stream and event calls beyond the generated ones: the
 * thread's capture mode (graph.c runs captures), and old-ABI names that
 * libraries dlsym (cuEventElapsedTime, cuDevicePrimaryCtxRelease), which
 * behave as their _v2.
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

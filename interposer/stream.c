/*
 * stream.c: stream and event calls beyond the generated ones: the
 * thread's capture mode and the count of captures under way (graph.c
 * runs captures, above), whether a stream captures, and old-ABI names that
 * libraries dlsym (cuEventElapsedTime, cuDevicePrimaryCtxRelease), which
 * behave as their _v2.
 */
#include "interposer.h"

#undef cuEventElapsedTime
#undef cuDevicePrimaryCtxRelease

static __thread CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* Captures begun and not yet ended (graph.c, graph_node.c count them):
 * while there are none, no stream is capturing, and cuStreamIsCapturing
 * answers so without a round trip. */
static int captures;

void capture_begun(void)
{
	__atomic_add_fetch(&captures, 1, __ATOMIC_ACQ_REL);
}

void capture_ended(void)
{
	__atomic_sub_fetch(&captures, 1, __ATOMIC_ACQ_REL);
}

int capture_running(void)
{
	return __atomic_load_n(&captures, __ATOMIC_ACQUIRE) > 0;
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	if (!captureStatus)
		return CUDA_ERROR_INVALID_VALUE;
	if (capture_running())
		return rpc_cuStreamIsCapturing(hStream, captureStatus);
	*captureStatus = CU_STREAM_CAPTURE_STATUS_NONE;
	return CUDA_SUCCESS;
}

/* Whether stream is capturing now (copy.c stages pageable memory for
 * the graph then). */
int stream_capturing(CUstream stream)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;

	return capture_running() && cuStreamIsCapturing(stream, &st) == CUDA_SUCCESS &&
	       st == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

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

/* Batched stream memory operations: the operations travel as the program
 * laid them out (their addresses are the same in the worker), pipelined
 * like the single ones. */
CUresult CUDAAPI cuStreamBatchMemOp_v2(CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray,
				       unsigned int flags)
{
	batch_mem_op_args a = { handle_id(stream), flags, { 0, NULL } };

	_Static_assert(sizeof(*paramArray) == BATCH_MEM_OP_SIZE, "a batched operation is 48 bytes");
	if (!count || count >= BATCH_MEM_OPS_MAX || !paramArray)     /* (fewer than 256, says cuda.h) */
		return CUDA_ERROR_INVALID_VALUE;
	a.ops.ops_len = count * (u_int)sizeof(*paramArray);
	a.ops.ops_val = (char *)paramArray;
	return rpc_stream_batch_mem_op(&a);
}

/* The CUDA 12.5 form: no stream here belongs to a green context (they are
 * not offered), so pGreenCtx is always NULL. */
CUresult CUDAAPI cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
	CUresult err;

	if (!pCtx || !pGreenCtx)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = cuStreamGetCtx(hStream, pCtx)))
		return err;
	*pGreenCtx = NULL;
	return CUDA_SUCCESS;
}

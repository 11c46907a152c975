/*
 * graph.c: CUDA graphs made by stream capture. The capture runs in the
 * worker: calls issued on a capturing stream reach the server in order and
 * the driver records them there; instantiate and launch are forwarded
 * (generated stubs). Libraries ask whether a stream is capturing before
 * every call (cuBLAS does, per GEMM), so the interposer counts the captures
 * it began (stream.c keeps the count) and answers "not capturing" itself
 * while there are none.
 * Graphs built node by node, and the nodes of a capture, are
 * graph_node.c's.
 */
#include "interposer.h"

#undef cuStreamBeginCapture
#undef cuGraphInstantiate

CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
	CUresult err = rpc_cuStreamBeginCapture_v2(hStream, mode);

	if (err == CUDA_SUCCESS)
		capture_begun();
	return err;
}

CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream);
CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream)
{
	return cuStreamBeginCapture_v2(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

/* An invalidated or unjoined capture ends too; only a stream that was not
 * capturing (or a bad argument) leaves the count alone. */
CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	CUresult err = rpc_cuStreamEndCapture(hStream, phGraph);

	if (err == CUDA_SUCCESS || err == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ||
	    err == CUDA_ERROR_STREAM_CAPTURE_UNJOINED || err == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
		capture_ended();
	return err;
}

/* Status, id and graph come from the worker, and the dependencies (node
 * ids, graph_node.c) when asked for. */
static CUresult capture_info(CUstream hStream, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
			     const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	cuuint64_t cid = 0, g = 0;
	size_t n = 0;
	CUresult err;

	if (!status)
		return CUDA_ERROR_INVALID_VALUE;
	if (capture_running() && (err = rpc_stream_capture_info(hStream, &st, &cid, &g, &n)))
		return err;
	*status = st;
	if (st == CU_STREAM_CAPTURE_STATUS_NONE)
		return CUDA_SUCCESS;
	if (deps && (err = graph_capture_deps(hStream, deps, edges, &n)))
		return err;
	if (id)
		*id = cid;
	if (graph)
		*graph = (CUgraph)(uintptr_t)g;
	if (ndeps)
		*ndeps = n;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
					   cuuint64_t *id_out, CUgraph *graph_out,
					   const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
	return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL, numDependencies_out);
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
					   cuuint64_t *id_out, CUgraph *graph_out,
					   const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out,
					   size_t *numDependencies_out)
{
	if (edgeData_out && !dependencies_out)
		return CUDA_ERROR_INVALID_VALUE;
	return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
			    numDependencies_out);
}

/* Graphs and executable graphs: what user objects they hold (userobj.c)
 * follows them. */
CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
	CUresult err = rpc_cuGraphInstantiateWithFlags(phGraphExec, hGraph, flags);

	if (!err)
		userobj_copy(handle_id(hGraph), handle_id(*phGraphExec));
	return err;
}

CUresult CUDAAPI cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
	CUresult err = rpc_cuGraphClone(phGraphClone, originalGraph);

	if (!err)
		userobj_copy(handle_id(originalGraph), handle_id(*phGraphClone));
	return err;
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	CUresult err = rpc_cuGraphExecDestroy(hGraphExec);

	if (!err)
		userobj_gone(handle_id(hGraphExec));
	return err;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
	CUresult err = rpc_cuGraphDestroy(hGraph);

	if (!err)
		userobj_gone(handle_id(hGraph));
	return err;
}

/* The old form: the error node and log are never filled (no node handles). */
CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
				    char *logBuffer, size_t bufferSize);
CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
				    char *logBuffer, size_t bufferSize)
{
	if (phErrorNode)
		*phErrorNode = NULL;
	if (logBuffer && bufferSize)
		logBuffer[0] = 0;
	return cuGraphInstantiateWithFlags(phGraphExec, hGraph, 0);
}

CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
					      CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	CUresult err;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	p->hErrNode_out = NULL;
	err = cuGraphInstantiateWithFlags(phGraphExec, hGraph, p->flags & ~CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
	if (err == CUDA_SUCCESS && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD))
		err = cuGraphUpload(*phGraphExec, p->hUploadStream);
	p->result_out = err == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
	return err;
}

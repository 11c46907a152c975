/*
 * graph.c: the worker's side of stream capture queries. The graph of a
 * capture gets an id like any handle (the same id each time it is asked
 * for, and at cuStreamEndCapture); nodes are not handed out, only counted.
 */
#include "gpu-server.h"

CUresult wrap_stream_capture_info(struct worker *w, CUstream stream, CUstreamCaptureStatus *status, cuuint64_t *id,
				  cuuint64_t *graph, size_t *ndeps)
{
	CUgraph g = NULL;
	CUresult err = cuStreamGetCaptureInfo(stream, status, id, &g, NULL, NULL, ndeps);

	*graph = 0;
	if (err == CUDA_SUCCESS && *status != CU_STREAM_CAPTURE_STATUS_NONE && g &&
	    !(*graph = handle_put(w, H_GRAPH, g)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	return err;
}

CUresult wrap_graph_node_count(struct worker *w, CUgraph graph, size_t *count)
{
	return cuGraphGetNodes(graph, NULL, count);
}

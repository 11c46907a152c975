/*
 * graph.c: the worker's side of stream capture. Captures in progress are
 * counted (a pause must not break one). The graph of a capture gets an id
 * like any handle (the same id each time it is asked for, and at
 * cuStreamEndCapture; dropped if the capture fails); nodes are not handed
 * out, only counted. Executable graphs tell objects.c what a checkpoint
 * needs to make them again.
 */
#include "calls.h"

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

/* A staged copy of the client's pageable memory is a copy node to it
 * (graph_stage.c), whatever the driver holds. */
CUresult wrap_cuGraphNodeGetType(struct worker *w, CUgraphNode node, CUgraphNodeType *type)
{
	unsigned n;
	CUresult err = cuGraphNodeGetType(node, type);

	if (!err && *type == CU_GRAPH_NODE_TYPE_GRAPH && graph_stage_params(node, &n))
		*type = CU_GRAPH_NODE_TYPE_MEMCPY;
	return err;
}

CUresult wrap_graph_node_count(struct worker *w, CUgraph graph, size_t *count)
{
	return cuGraphGetNodes(graph, NULL, count);
}

CUresult wrap_cuStreamBeginCapture_v2(struct worker *w, CUstream stream, CUstreamCaptureMode mode)
{
	CUresult err = cuStreamBeginCapture(stream, mode);

	if (!err)
		w->calls->captures++;
	return err;
}

/* The capture ends whatever the result, if there was one. */
CUresult wrap_cuStreamEndCapture(struct worker *w, CUstream stream, CUgraph *graph)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	CUgraph cur = NULL;
	CUresult err;

	cuStreamGetCaptureInfo(stream, &st, NULL, &cur, NULL, NULL, NULL);
	err = cuStreamEndCapture(stream, graph);
	if (st != CU_STREAM_CAPTURE_STATUS_NONE && w->calls->captures)
		w->calls->captures--;
	for (unsigned i = 0; err && cur && i < w->nhandles; i++)
		if (w->handles[i].kind == H_GRAPH && w->handles[i].real == cur)
			handle_forget(w, HANDLE_BASE + i);
	return err;
}

/* An executable graph keeps a clone of its graph for checkpoints
 * (objects.c), which follows the exec's own updates. */
CUresult wrap_cuGraphInstantiateWithFlags(struct worker *w, CUgraphExec *exec, CUgraph graph, unsigned long long flags)
{
	CUresult err = cuGraphInstantiateWithFlags(exec, graph, flags);

	if (!err)
		objects_exec_created(w, *exec, graph, flags);
	return err;
}

CUresult wrap_cuGraphDestroy(struct worker *w, CUgraph graph)
{
	objects_graph_destroying(w, graph, 0);
	return cuGraphDestroy(graph);
}

CUresult wrap_cuGraphExecDestroy(struct worker *w, CUgraphExec exec)
{
	CUresult err = cuGraphExecDestroy(exec);

	if (!err)
		objects_exec_destroyed(w, exec);
	return err;
}

CUresult wrap_cuGraphNodeSetEnabled(struct worker *w, CUgraphExec exec, CUgraphNode node, unsigned int on)
{
	CUresult err;

	node = objects_exec_node(w, exec, node);
	err = cuGraphNodeSetEnabled(exec, node, on);

	if (!err)
		objects_exec_stale(w, exec, "a node was enabled or disabled");
	return err;
}

CUresult wrap_cuGraphNodeGetEnabled(struct worker *w, CUgraphExec exec, CUgraphNode node, unsigned int *on)
{
	return cuGraphNodeGetEnabled(exec, objects_exec_node(w, exec, node), on);
}

CUresult wrap_cuGraphExecChildGraphNodeSetParams(struct worker *w, CUgraphExec exec, CUgraphNode node, CUgraph child)
{
	CUresult err;

	node = objects_exec_node(w, exec, node);
	err = cuGraphExecChildGraphNodeSetParams(exec, node, child);

	if (!err)
		objects_exec_stale(w, exec, "a child graph node was updated");
	return err;
}

CUresult wrap_cuGraphExecEventRecordNodeSetEvent(struct worker *w, CUgraphExec exec, CUgraphNode node, CUevent event)
{
	CUresult err;

	node = objects_exec_node(w, exec, node);
	err = cuGraphExecEventRecordNodeSetEvent(exec, node, event);

	if (!err)
		objects_exec_event_set(w, exec, node, event, 0);
	return err;
}

CUresult wrap_cuGraphExecEventWaitNodeSetEvent(struct worker *w, CUgraphExec exec, CUgraphNode node, CUevent event)
{
	CUresult err;

	node = objects_exec_node(w, exec, node);
	err = cuGraphExecEventWaitNodeSetEvent(exec, node, event);

	if (!err)
		objects_exec_event_set(w, exec, node, event, 1);
	return err;
}

/*
 * graph_node.c: the worker's side of graphs built node by node. Nodes are
 * handles like any other (the same id each time the driver hands out the
 * same node). A node's parameters arrive as graph_params (wire.h names
 * the scalars of each type) and become the driver's CUgraphNodeParams:
 * ids become handles, a kernel's packed values become kernelParams (by
 * the function's own layout), a host node runs the application's
 * function through the host function channel (hostfn.c), and a copy names
 * device memory, arrays, or host memory the client shares with the worker
 * (graph_copy.c); one of the client's pageable memory is a child graph of
 * a host node and a copy (graph_stage.c). A conditional node's body graphs become handles.
 * The getters turn the driver's parameters back into graph_params.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "calls.h"

/* The kernel's parameter pointers into buf (its packed values). */
static CUresult kernel_ptrs(CUfunction f, char *buf, size_t len, void **ptrs, unsigned *n)
{
	size_t off, size;

	for (*n = 0; *n < CICADA_PARAMS_MAX / 4 && !cuFuncGetParamInfo(f, *n, &off, &size); (*n)++) {
		if (off + size > len)
			return CUDA_ERROR_INVALID_VALUE;
		ptrs[*n] = buf + off;
	}
	return CUDA_SUCCESS;
}

static CUresult function_of(struct worker *w, uint64_t id, CUfunction *f, CUkernel *k)
{
	void *real;
	CUresult err = handle_get(w, H_FUNCTION, id, &real);

	*f = NULL;
	*k = NULL;
	if (err)
		return err;
	if (handle_kind_of(w, id) == H_KERNEL) {
		*k = real;
		return cuKernelGetFunction(f, *k);
	}
	*f = real;
	return CUDA_SUCCESS;
}

/* A staged copy: a child graph node, its graph made here (the caller
 * destroys it once the driver has copied it). */
static CUresult staged_in(struct worker *w, graph_params *g, CUgraphNodeParams *p)
{
	CUgraph child;
	CUresult err = cuGraphCreate(&child, 0);

	if (err)
		return err;
	if ((err = graph_stage_build(w, g, child))) {
		cuGraphDestroy(child);
		return err;
	}
	p->type = CU_GRAPH_NODE_TYPE_GRAPH;
	p->graph.graph = child;
	return CUDA_SUCCESS;
}

/* The conditional handles this worker's driver gave its client (a worker
 * serves one client): a node may name no other value, since the driver
 * takes the handle as it is. */
#define COND_HANDLES_MAX 4096
static uint64_t cond_handles[COND_HANDLES_MAX];
static unsigned ncond;

static int cond_known(uint64_t h)
{
	for (unsigned i = 0; i < ncond; i++)
		if (cond_handles[i] == h)
			return 1;
	return 0;
}

CUresult wrap_cuGraphConditionalHandleCreate(struct worker *w, CUgraphConditionalHandle *out, CUgraph graph,
					     CUcontext ctx, unsigned int value, unsigned int flags)
{
	CUresult err;

	if (ncond == COND_HANDLES_MAX) {
		log_warn("client %s: more than %d conditional handles; refused", w->peer, COND_HANDLES_MAX);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if ((err = cuGraphConditionalHandleCreate(out, graph, ctx, value, flags)))
		return err;
	cond_handles[ncond++] = (uint64_t)*out;
	return CUDA_SUCCESS;
}

/* graph_params -> the driver's parameters; buf holds what they point at. */
CUresult graph_params_in(struct worker *w, graph_params *g, CUgraphNodeParams *p, void **ptrs)
{
	uint64_t *v = g->v.v_val;
	unsigned n = g->v.v_len, np;
	CUresult err;

	memset(p, 0, sizeof(*p));
	p->type = (CUgraphNodeType)g->type;
	switch (p->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL: {
		CUDA_KERNEL_NODE_PARAMS_v3 *k = &p->kernel;
		CUfunction f;
		if (n != GK_N || (err = function_of(w, v[GK_FUNC], &f, &k->kern)) ||
		    (err = kernel_ptrs(f, g->data.data_val, g->data.data_len, ptrs, &np)) ||
		    (err = graph_ctx_in(w, v[GK_CTX], &k->ctx)))
			return n != GK_N ? CUDA_ERROR_INVALID_VALUE : err;
		k->func = k->kern ? NULL : f;
		k->gridDimX = v[GK_GRID_X], k->gridDimY = v[GK_GRID_Y], k->gridDimZ = v[GK_GRID_Z];
		k->blockDimX = v[GK_BLOCK_X], k->blockDimY = v[GK_BLOCK_Y], k->blockDimZ = v[GK_BLOCK_Z];
		k->sharedMemBytes = v[GK_SHMEM];
		k->kernelParams = ptrs;
		return CUDA_SUCCESS;
	}
	case CU_GRAPH_NODE_TYPE_MEMSET:
		if (n != GS_N)
			return CUDA_ERROR_INVALID_VALUE;
		p->memset.dst = v[GS_DST], p->memset.pitch = v[GS_PITCH], p->memset.value = (unsigned)v[GS_VALUE];
		p->memset.elementSize = (unsigned)v[GS_ELEMENT], p->memset.width = v[GS_WIDTH];
		p->memset.height = v[GS_HEIGHT];
		return graph_ctx_in(w, v[GS_CTX], &p->memset.ctx);
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		if (graph_staged(g))
			return staged_in(w, g, p);
		return n != GM_N ? CUDA_ERROR_INVALID_VALUE : graph_copy_in(w, v, p);
	case CU_GRAPH_NODE_TYPE_HOST:
		if (n != GH_N)
			return CUDA_ERROR_INVALID_VALUE;
		return hostfn_node(w, v[GH_ID], &p->host.fn, &p->host.userData);
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
		if (n != GE_N)
			return CUDA_ERROR_INVALID_VALUE;
		return handle_get(w, H_EVENT, v[GE_EVENT], (void **)(p->type == CU_GRAPH_NODE_TYPE_WAIT_EVENT ?
									 &p->eventWait.event : &p->eventRecord.event));
	case CU_GRAPH_NODE_TYPE_GRAPH:
		if (n != GC_N)
			return CUDA_ERROR_INVALID_VALUE;
		return handle_get(w, H_GRAPH, v[GC_GRAPH], (void **)&p->graph.graph);
	case CU_GRAPH_NODE_TYPE_EMPTY:
		return n ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
		if (n != GA_N)
			return CUDA_ERROR_INVALID_VALUE;
		p->alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
		p->alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		p->alloc.poolProps.location.id = (int)v[GA_DEVICE];
		p->alloc.bytesize = v[GA_BYTES];
		return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_MEM_FREE:
		if (n != GF_N)
			return CUDA_ERROR_INVALID_VALUE;
		p->free.dptr = v[GF_DPTR];
		return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_CONDITIONAL:
		if (n != GD_N || !cond_known(v[GD_HANDLE]))
			return CUDA_ERROR_INVALID_VALUE;
		p->conditional.handle = v[GD_HANDLE];
		p->conditional.type = (CUgraphConditionalNodeType)v[GD_TYPE];
		p->conditional.size = (unsigned)v[GD_SIZE];
		return graph_ctx_in(w, v[GD_CTX], &p->conditional.ctx);
	default:
		log_warn("client %s: graph nodes of type %u are not supported", w->peer, g->type);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
}

static CUresult params_alloc(graph_params *g, unsigned type, unsigned n)
{
	g->type = type;
	g->v.v_len = n;
	g->v.v_val = calloc(n + 1, sizeof(uint64_t));
	return g->v.v_val ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static uint64_t id_of(struct worker *w, enum handle_kind kind, void *real)
{
	return real ? handle_put(w, kind, real) : 0;
}

/* The packed parameter buffer of a launch's extra list, into buf. */
static void extra_copy(void **extra, char *buf, size_t len)
{
	const void *from = NULL;
	size_t size = 0;

	for (unsigned i = 0; i < 16 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
			from = extra[i + 1];
		else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
			size = *(size_t *)extra[i + 1];
		else if (extra[i] != CU_LAUNCH_PARAM_BUFFER_POINTER && extra[i] != CU_LAUNCH_PARAM_BUFFER_SIZE)
			break;
	}
	if (from)
		memcpy(buf, from, size < len ? size : len);
}

/* The id of a kernel node's function as the client knows it: the
 * kernel, the function, or the kernel whose function it is (a launch of
 * a CUkernel); only a function unknown so far gets a new id. */
static uint64_t function_id(struct worker *w, CUfunction f, CUkernel kern)
{
	uint64_t id = kern ? handle_find(w, H_KERNEL, kern) : 0;
	const char *name = NULL, *kname;
	CUfunction g;

	if (!id)
		id = handle_find(w, H_FUNCTION, f);
	if (!id)
		id = handle_find(w, H_KERNEL, f);
	if (!id && cuFuncGetName(&name, f))
		name = NULL;
	/* only kernels of f's name are asked for their function here: that
	 * would load any other's library into this context, unrecorded */
	for (unsigned i = 0; !id && name && i < w->nhandles; i++)
		if (w->handles[i].kind == H_KERNEL && !cuKernelGetName(&kname, w->handles[i].real) &&
		    !strcmp(kname, name) && !cuKernelGetFunction(&g, w->handles[i].real) && g == f)
			id = HANDLE_BASE + i;
	return id ? id : handle_put(w, H_FUNCTION, f);
}

static CUresult kernel_out(struct worker *w, CUgraphNode node, graph_params *g)
{
	CUDA_KERNEL_NODE_PARAMS_v2 k;
	size_t off, size, len = 0;
	CUfunction f;
	CUresult err;
	uint64_t *v;

	if ((err = cuGraphKernelNodeGetParams(node, &k)) || (err = params_alloc(g, CU_GRAPH_NODE_TYPE_KERNEL, GK_N)))
		return err;
	v = g->v.v_val;
	f = k.func;
	if (k.kern && (err = cuKernelGetFunction(&f, k.kern)))
		return err;
	if (!(v[GK_FUNC] = function_id(w, f, k.kern)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	v[GK_GRID_X] = k.gridDimX, v[GK_GRID_Y] = k.gridDimY, v[GK_GRID_Z] = k.gridDimZ;
	v[GK_BLOCK_X] = k.blockDimX, v[GK_BLOCK_Y] = k.blockDimY, v[GK_BLOCK_Z] = k.blockDimZ;
	v[GK_SHMEM] = k.sharedMemBytes;
	v[GK_CTX] = handle_find(w, H_CTX, k.ctx);    /* 0: the current context */
	for (unsigned i = 0; !cuFuncGetParamInfo(f, i, &off, &size); i++)
		len = off + size > len ? off + size : len;
	if (len > CICADA_PARAMS_MAX || !(g->data.data_val = calloc(1, len + 1)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	g->data.data_len = (u_int)len;
	for (unsigned i = 0; k.kernelParams && !cuFuncGetParamInfo(f, i, &off, &size); i++)
		memcpy(g->data.data_val + off, k.kernelParams[i], size);
	if (!k.kernelParams && k.extra)              /* a launch's packed buffer: the worker's own launches */
		extra_copy(k.extra, g->data.data_val, len);
	return CUDA_SUCCESS;
}

CUresult graph_params_out(struct worker *w, CUgraphNode node, graph_params *g)
{
	CUgraphNodeType type;
	CUresult err = cuGraphNodeGetType(node, &type);
	uint64_t *v;

	if (err)
		return err;
	switch (type) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		return kernel_out(w, node, g);
	case CU_GRAPH_NODE_TYPE_MEMSET: {
		CUDA_MEMSET_NODE_PARAMS m;
		if ((err = cuGraphMemsetNodeGetParams(node, &m)) || (err = params_alloc(g, type, GS_N)))
			return err;
		v = g->v.v_val;
		v[GS_DST] = m.dst, v[GS_PITCH] = m.pitch, v[GS_VALUE] = m.value, v[GS_ELEMENT] = m.elementSize;
		v[GS_WIDTH] = m.width, v[GS_HEIGHT] = m.height;
		return CUDA_SUCCESS;
	}
	case CU_GRAPH_NODE_TYPE_MEMCPY: {
		CUDA_MEMCPY3D c;
		if ((err = cuGraphMemcpyNodeGetParams(node, &c)) || (err = params_alloc(g, type, GM_N)))
			return err;
		graph_copy_out(w, &c, g->v.v_val);
		return CUDA_SUCCESS;
	}
	case CU_GRAPH_NODE_TYPE_HOST: {
		CUDA_HOST_NODE_PARAMS h;
		if ((err = cuGraphHostNodeGetParams(node, &h)) || (err = params_alloc(g, type, GH_N)))
			return err;
		g->v.v_val[GH_ID] = hostfn_node_id(h.fn, h.userData);
		return CUDA_SUCCESS;
	}
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT: {
		CUevent e;
		err = type == CU_GRAPH_NODE_TYPE_WAIT_EVENT ? cuGraphEventWaitNodeGetEvent(node, &e) :
							      cuGraphEventRecordNodeGetEvent(node, &e);
		if (err || (err = params_alloc(g, type, GE_N)))
			return err;
		g->v.v_val[GE_EVENT] = id_of(w, H_EVENT, e);
		return CUDA_SUCCESS;
	}
	case CU_GRAPH_NODE_TYPE_GRAPH: {
		CUgraph child;
		const uint64_t *staged;
		unsigned n;
		if ((staged = graph_stage_params(node, &n))) {
			if ((err = params_alloc(g, CU_GRAPH_NODE_TYPE_MEMCPY, n)))
				return err;
			memcpy(g->v.v_val, staged, n * sizeof(*staged));
			return CUDA_SUCCESS;
		}
		if ((err = cuGraphChildGraphNodeGetGraph(node, &child)) || (err = params_alloc(g, type, GC_N)))
			return err;
		g->v.v_val[GC_GRAPH] = id_of(w, H_GRAPH, child);
		return CUDA_SUCCESS;
	}
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
		CUDA_MEM_ALLOC_NODE_PARAMS a;
		if ((err = cuGraphMemAllocNodeGetParams(node, &a)) || (err = params_alloc(g, type, GA_N)))
			return err;
		g->v.v_val[GA_BYTES] = a.bytesize;
		g->v.v_val[GA_DEVICE] = (uint64_t)a.poolProps.location.id;
		g->v.v_val[GA_DPTR] = a.dptr;
		return CUDA_SUCCESS;
	}
	case CU_GRAPH_NODE_TYPE_MEM_FREE: {
		CUdeviceptr p;
		if ((err = cuGraphMemFreeNodeGetParams(node, &p)) || (err = params_alloc(g, type, GF_N)))
			return err;
		g->v.v_val[GF_DPTR] = p;
		return CUDA_SUCCESS;
	}
	case CU_GRAPH_NODE_TYPE_EMPTY:
		return params_alloc(g, type, 0);
	default:
		return params_alloc(g, type, 0);     /* the type alone */
	}
}

/* ids -> nodes; the caller frees *out. */
static CUresult nodes_in(struct worker *w, const uint64_t *ids, unsigned n, CUgraphNode **out)
{
	CUresult err = CUDA_SUCCESS;

	*out = malloc((n + 1) * sizeof(**out));
	if (!*out)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (unsigned i = 0; i < n && !err; i++)
		err = handle_get(w, H_GRAPH_NODE, ids[i], (void **)&(*out)[i]);
	if (err) {
		free(*out);
		*out = NULL;
	}
	return err;
}

static CUresult edges_in(const char *data, unsigned len, unsigned n, const CUgraphEdgeData **out)
{
	*out = NULL;
	if (!len)
		return CUDA_SUCCESS;
	if (len != n * sizeof(CUgraphEdgeData))
		return CUDA_ERROR_INVALID_VALUE;
	*out = (const CUgraphEdgeData *)data;
	return CUDA_SUCCESS;
}

/* A conditional node's body graphs, which the driver made: handles, their
 * ids in data. */
static CUresult bodies_out(struct worker *w, const CUDA_CONDITIONAL_NODE_PARAMS *c, graph_params *g)
{
	uint64_t *ids;
	CUresult err;

	if (!c->phGraph_out || c->size > CICADA_PARAMS_MAX / sizeof(*ids))
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = params_alloc(g, CU_GRAPH_NODE_TYPE_CONDITIONAL, GD_N)))
		return err;
	if (!(ids = calloc(c->size + 1, sizeof(*ids))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	g->data.data_val = (char *)ids;
	g->data.data_len = c->size * sizeof(*ids);
	g->v.v_val[GD_HANDLE] = c->handle, g->v.v_val[GD_TYPE] = c->type, g->v.v_val[GD_SIZE] = c->size;
	for (unsigned i = 0; i < c->size; i++)
		if (!(ids[i] = handle_put(w, H_GRAPH, c->phGraph_out[i])))
			return CUDA_ERROR_OUT_OF_MEMORY;
	return CUDA_SUCCESS;
}

CUresult hand_graph_add_node(struct worker *w, void *args, void *res)
{
	graph_node_args *a = args;
	graph_node_res *r = res;
	static void *ptrs[CICADA_PARAMS_MAX / 4];
	const CUgraphEdgeData *edges;
	CUgraphNodeParams p;
	CUgraphNode *deps = NULL, node;
	CUgraph graph;
	CUresult err;

	if ((err = handle_get(w, H_GRAPH, a->graph, (void **)&graph)) ||
	    (err = edges_in(a->edges.edges_val, a->edges.edges_len, a->deps.deps_len, &edges)) ||
	    (err = nodes_in(w, a->deps.deps_val, a->deps.deps_len, &deps)))
		return err;
	if ((err = graph_params_in(w, &a->params, &p, ptrs))) {
		free(deps);
		return err;
	}
	err = cuGraphAddNode_v2(&node, graph, deps, edges, a->deps.deps_len, &p);
	free(deps);
	if (graph_staged(&a->params))
		cuGraphDestroy(p.graph.graph);       /* the node holds its own copy */
	if (err)
		return err;
	if (!(r->node = handle_put(w, H_GRAPH_NODE, node)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (p.type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
		return bodies_out(w, &p.conditional, &r->params);
	if (p.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
		if ((err = params_alloc(&r->params, p.type, GA_N)))
			return err;
		r->params.v.v_val[GA_DPTR] = p.alloc.dptr;
		return ordered_note_graph_mem(w, p.alloc.dptr);
	}
	return CUDA_SUCCESS;
}

CUresult hand_graph_node_get(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	graph_node_res *r = res;
	CUgraphNode node;
	CUresult err;

	if (a->v.v_len != 1)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = handle_get(w, H_GRAPH_NODE, a->v.v_val[0], (void **)&node)))
		return err;
	r->node = a->v.v_val[0];
	return graph_params_out(w, node, &r->params);
}

/* graph = 0: the node's own parameters; else those of the node in the
 * executable graph. */
CUresult hand_graph_node_set(struct worker *w, void *args, void *res)
{
	graph_node_args *a = args;
	static void *ptrs[CICADA_PARAMS_MAX / 4];
	CUgraphNodeParams p;
	CUgraphExec exec = NULL;
	CUgraphNode node;
	CUresult err;
	unsigned n;

	if ((a->graph && (err = handle_get(w, H_GRAPH_EXEC, a->graph, (void **)&exec))) ||
	    (err = handle_get(w, H_GRAPH_NODE, a->node, (void **)&node)))
		return err;
	if (a->params.type == CU_GRAPH_NODE_TYPE_MEMCPY && (graph_staged(&a->params) || graph_stage_params(node, &n)))
		return graph_stage_set(w, exec, node, &a->params);
	if ((err = graph_params_in(w, &a->params, &p, ptrs)))
		return err;
	if (!exec)
		return cuGraphNodeSetParams(node, &p);
	node = objects_exec_node(w, exec, node);
	if ((err = cuGraphExecNodeSetParams(exec, node, &p)) == CUDA_SUCCESS)
		objects_exec_node_set(w, exec, node, &p);
	return err;
}

static CUresult ids_out(struct worker *w, const CUgraphNode *nodes, size_t n, graph_ids_res *r, int to)
{
	uint64_t **ids = to ? &r->to.to_val : &r->from.from_val;
	u_int *len = to ? &r->to.to_len : &r->from.from_len;

	if (!(*ids = malloc((n + 1) * sizeof(uint64_t))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	*len = (u_int)n;
	for (size_t i = 0; i < n; i++)
		if (!((*ids)[i] = id_of(w, H_GRAPH_NODE, nodes[i])))
			return CUDA_ERROR_OUT_OF_MEMORY;
	return CUDA_SUCCESS;
}

static CUresult edges_out(const CUgraphEdgeData *e, size_t n, graph_ids_res *r)
{
	if (!(r->edges.edges_val = malloc(n * sizeof(*e) + 1)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	memcpy(r->edges.edges_val, e, n * sizeof(*e));
	r->edges.edges_len = (u_int)(n * sizeof(*e));
	return CUDA_SUCCESS;
}

/* Two rounds, as the driver's lists go: the count, then the nodes. */
static CUresult query(struct worker *w, unsigned op, void *h, graph_ids_res *r)
{
	CUgraphNode *from = NULL, *to = NULL;
	const CUgraphNode *cap = NULL;
	const CUgraphEdgeData *cap_edges = NULL;
	CUgraphEdgeData *edges = NULL;
	CUstreamCaptureStatus st;
	size_t n = 0;
	CUresult err;

	switch (op) {
	case GQ_NODES: err = cuGraphGetNodes(h, NULL, &n); break;
	case GQ_ROOTS: err = cuGraphGetRootNodes(h, NULL, &n); break;
	case GQ_DEPS: err = cuGraphNodeGetDependencies_v2(h, NULL, NULL, &n); break;
	case GQ_DEPENDENTS: err = cuGraphNodeGetDependentNodes_v2(h, NULL, NULL, &n); break;
	case GQ_EDGES: err = cuGraphGetEdges_v2(h, NULL, NULL, NULL, &n); break;
	case GQ_CAPTURE_DEPS:
		err = cuStreamGetCaptureInfo(h, &st, NULL, NULL, &cap, &cap_edges, &n);
		if (!err && (err = ids_out(w, cap, n, r, 0)) == CUDA_SUCCESS && cap_edges)
			err = edges_out(cap_edges, n, r);
		return err;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	if (err)
		return err;
	if (n > CICADA_GRAPH_NODES_MAX)
		return CUDA_ERROR_OUT_OF_MEMORY;
	from = calloc(n + 1, sizeof(*from));
	to = calloc(n + 1, sizeof(*to));
	edges = calloc(n + 1, sizeof(*edges));
	if (!from || !to || !edges) {
		err = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	switch (n ? op : GQ_CAPTURE_DEPS) {      /* (the driver refuses a list of no entries) */
	case GQ_CAPTURE_DEPS: break;
	case GQ_NODES: err = cuGraphGetNodes(h, from, &n); break;
	case GQ_ROOTS: err = cuGraphGetRootNodes(h, from, &n); break;
	case GQ_DEPS: err = cuGraphNodeGetDependencies_v2(h, from, edges, &n); break;
	case GQ_DEPENDENTS: err = cuGraphNodeGetDependentNodes_v2(h, from, edges, &n); break;
	default: err = cuGraphGetEdges_v2(h, from, to, edges, &n); break;
	}
	if (!err)
		err = ids_out(w, from, n, r, 0);
	if (!err && op == GQ_EDGES)
		err = ids_out(w, to, n, r, 1);
	if (!err && (op == GQ_EDGES || op == GQ_DEPS || op == GQ_DEPENDENTS))
		err = edges_out(edges, n, r);
out:
	free(from);
	free(to);
	free(edges);
	return err;
}

CUresult hand_graph_query(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	static const enum handle_kind kinds[] = { H_GRAPH, H_GRAPH, H_GRAPH_NODE, H_GRAPH_NODE, H_GRAPH, H_STREAM };
	void *h;
	CUresult err;

	if (a->v.v_len != 2 || a->v.v_val[0] > GQ_CAPTURE_DEPS)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = handle_get(w, kinds[a->v.v_val[0]], a->v.v_val[1], &h)))
		return err;
	return query(w, (unsigned)a->v.v_val[0], h, res);
}

CUresult hand_graph_edges(struct worker *w, void *args, void *res)
{
	graph_edges_args *a = args;
	CUgraphNode *from = NULL, *to = NULL;
	const CUgraphEdgeData *edges;
	void *h;
	CUresult err;

	if (a->op > 3 || (a->op < 2 && a->from.from_len != a->to.to_len))
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = handle_get(w, a->op == 3 ? H_STREAM : a->op == 2 ? H_STREAM : H_GRAPH, a->handle, &h)) ||
	    (err = edges_in(a->edges.edges_val, a->edges.edges_len, a->from.from_len, &edges)) ||
	    (err = nodes_in(w, a->from.from_val, a->from.from_len, &from)) ||
	    (err = nodes_in(w, a->to.to_val, a->to.to_len, &to)))
		goto out;
	switch (a->op) {
	case 0: err = cuGraphRemoveDependencies_v2(h, from, to, edges, a->from.from_len); break;
	case 1: err = cuGraphAddDependencies_v2(h, from, to, edges, a->from.from_len); break;
	case 2: {
		CUgraph g;
		/* the graph travels as the only "to" id */
		if (a->to.to_len != 1 || (err = handle_get(w, H_GRAPH, a->to.to_val[0], (void **)&g)))
			err = err ? err : CUDA_ERROR_INVALID_VALUE;
		else if (!(err = cuStreamBeginCaptureToGraph(h, g, from, edges, a->from.from_len,
							     (CUstreamCaptureMode)a->mode)))
			w->calls->captures++;
		break;
	}
	default: err = cuStreamUpdateCaptureDependencies_v2(h, from, edges, a->from.from_len, a->mode); break;
	}
out:
	free(from);
	free(to);
	return err;
}

/* v: exec, graph -> result, error node, error-from node. */
CUresult hand_graph_exec_update(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	scalar_res *r = res;
	CUgraphExecUpdateResultInfo info = { 0 };
	CUgraphExec exec;
	CUgraph graph;
	CUresult err, ret;

	if (a->v.v_len != 2)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = handle_get(w, H_GRAPH_EXEC, a->v.v_val[0], (void **)&exec)) ||
	    (err = handle_get(w, H_GRAPH, a->v.v_val[1], (void **)&graph)))
		return err;
	ret = cuGraphExecUpdate(exec, graph, &info);
	if (ret == CUDA_SUCCESS)
		objects_exec_updated(w, exec, graph);
	if (!(r->v.v_val = malloc(3 * sizeof(uint64_t))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	r->v.v_len = 3;
	r->v.v_val[0] = (uint64_t)info.result;
	r->v.v_val[1] = id_of(w, H_GRAPH_NODE, info.errorNode);
	r->v.v_val[2] = id_of(w, H_GRAPH_NODE, info.errorFromNode);
	return ret;
}

static CUresult read_file(const char *path, bytes_res *r)
{
	FILE *f = fopen(path, "rb");
	CUresult err = CUDA_ERROR_OPERATING_SYSTEM;
	long n;

	if (!f)
		return err;
	if (!fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && n <= CICADA_CHUNK_MAX && !fseek(f, 0, SEEK_SET) &&
	    (r->data.data_val = malloc(n + 1)) && fread(r->data.data_val, 1, n, f) == (size_t)n) {
		r->data.data_len = (u_int)n;
		err = CUDA_SUCCESS;
	}
	fclose(f);
	return err;
}

/* v: graph, flags. The driver writes the dot file here; its text goes to
 * the client, which writes the path it was given. */
CUresult hand_graph_dot(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	char path[] = "/tmp/cicada-graph-XXXXXX";
	CUgraph graph;
	CUresult err;
	int fd;

	if (a->v.v_len != 2)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = handle_get(w, H_GRAPH, a->v.v_val[0], (void **)&graph)))
		return err;
	if ((fd = mkstemp(path)) < 0)
		return CUDA_ERROR_OPERATING_SYSTEM;
	close(fd);
	err = cuGraphDebugDotPrint(graph, path, (unsigned)a->v.v_val[1]);
	if (!err)
		err = read_file(path, res);
	unlink(path);
	return err;
}

/*
 * graph_node.c: graphs built node by node. Every kind of node the worker
 * can hold (kernel, copy, memset, host, child graph, event record and
 * wait, empty, memory alloc and free) is added, read and set through one
 * form, CUgraphNodeParams, packed as graph_params (wire.h names its
 * slots); the typed calls of the driver API are thin forms of it. Node
 * handles are ids, like the worker's other handles. A host node's function
 * stays here, under a persistent id (hostfn.c); a copy names device memory,
 * an array, or host memory shared with the worker; a side in the program's
 * pageable memory is staged (graph_stage.c). A conditional node's body
 * graphs, made by the worker's driver, come back as graph ids. Lists of
 * nodes (the nodes, roots, edges and dependencies) come back in one reply
 * and are kept per thread until the next list, as the driver's own arrays
 * are.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "interposer.h"

#undef cuGraphAddKernelNode
#undef cuGraphKernelNodeGetParams
#undef cuGraphKernelNodeSetParams
#undef cuGraphExecKernelNodeSetParams
#undef cuGraphGetEdges
#undef cuGraphNodeGetDependencies
#undef cuGraphNodeGetDependentNodes
#undef cuGraphAddDependencies
#undef cuGraphRemoveDependencies
#undef cuStreamUpdateCaptureDependencies
#undef cuGraphExecUpdate
#undef cuGraphAddNode
#undef cuGraphGetNodes

static CUgraphNode node_of(uint64_t id)
{
	return (CUgraphNode)(uintptr_t)id;
}

/* A call whose reply is scalars: nout of them into out (0: none), given
 * back even with an error (cuGraphExecUpdate says why it failed). */
static CUresult call(unsigned proc, xdrproc_t xargs, void *args, uint64_t *out, unsigned nout)
{
	uint64_t buf[CICADA_SCALARS_MAX];
	scalar_res r = { 0, { 0, buf } };
	CUresult err = client_call(proc, xargs, args, (xdrproc_t)xdr_scalar_res, &r);

	if (nout && r.v.v_len == nout)
		memcpy(out, r.v.v_val, nout * sizeof(*out));
	return err;
}

static CUresult params_alloc(graph_params *g, unsigned type, unsigned n, uint64_t *v)
{
	g->type = type;
	g->v.v_len = n;
	g->v.v_val = (u_quad_t *)v;
	return CUDA_SUCCESS;
}

/* --- CUgraphNodeParams -> graph_params (v has CICADA_GRAPH_SCALARS) --- */

/* Whether a side of a copy is the program's pageable memory, which the
 * worker cannot reach (a unified address: neither shared, nor the
 * device's, nor managed; as copy.c tells them). */
static int side_pageable(CUmemorytype type, const void *host, CUdeviceptr dev, size_t span)
{
	struct host_range r;

	if (type == CU_MEMORYTYPE_UNIFIED)
		return dev && !hostmem_find((const void *)(uintptr_t)dev, 1, &r) && !devmem_contains(dev) &&
		       !managed_contains((const void *)(uintptr_t)dev, 1);
	return type == CU_MEMORYTYPE_HOST && host && !hostmem_find(host, span ? span : 1, &r);
}

/* One side of a copy; host memory must lie in a region shared with the
 * worker (span: the bytes the copy may reach, from the side's start). */
static CUresult copy_side_pack(uint64_t *v, CUmemorytype type, const void *host, CUdeviceptr dev, CUarray array,
			       size_t x, size_t y, size_t z, size_t pitch, size_t height, size_t span)
{
	struct host_range r;

	if (type == CU_MEMORYTYPE_UNIFIED)
		type = hostmem_find((const void *)(uintptr_t)dev, 1, &r) ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE,
		host = (const void *)(uintptr_t)dev;
	v[GM_TYPE] = type;
	v[GM_X] = x, v[GM_Y] = y, v[GM_Z] = z, v[GM_PITCH] = pitch, v[GM_HEIGHT] = height;
	if (type == CU_MEMORYTYPE_DEVICE) {
		v[GM_DEVICE] = dev;
	} else if (type == CU_MEMORYTYPE_ARRAY) {
		v[GM_ARRAY] = handle_id(array);
	} else if (type == CU_MEMORYTYPE_HOST) {
		if (!host || !hostmem_find(host, span ? span : 1, &r))
			return CUDA_ERROR_INVALID_VALUE;
		v[GM_REGION] = r.region;
		v[GM_DEVICE] = r.offset;
	} else {
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

/* The side of c in pageable memory (the source's if src), staged. */
static CUresult pack_staged(const CUDA_MEMCPY3D *c, int src, uint64_t *v)
{
	struct stage_shape s = { .width = c->WidthInBytes, .rows = c->Height, .depth = c->Depth };
	CUmemorytype type = src ? c->srcMemoryType : c->dstMemoryType;
	unsigned side = src ? 0 : GM_SIDE;

	if (src)
		s.base = (char *)(type == CU_MEMORYTYPE_UNIFIED ? (const void *)(uintptr_t)c->srcDevice : c->srcHost),
		s.x = c->srcXInBytes, s.y = c->srcY, s.z = c->srcZ, s.pitch = c->srcPitch, s.height = c->srcHeight;
	else
		s.base = type == CU_MEMORYTYPE_UNIFIED ? (char *)(uintptr_t)c->dstDevice : (char *)c->dstHost,
		s.x = c->dstXInBytes, s.y = c->dstY, s.z = c->dstZ, s.pitch = c->dstPitch, s.height = c->dstHeight;
	v[side + GM_TYPE] = type;
	return graph_stage_pack(v, side, &s, src);
}

static CUresult pack_copy(const CUDA_MEMCPY3D *c, CUcontext ctx, graph_params *g, uint64_t *v)
{
	size_t rows, depth, sspan, dspan;
	int src_pg, dst_pg;
	CUresult err;

	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	rows = c->Height ? c->Height : 1, depth = c->Depth ? c->Depth : 1;
	sspan = (c->srcPitch ? c->srcPitch : c->WidthInBytes) * rows * depth;
	dspan = (c->dstPitch ? c->dstPitch : c->WidthInBytes) * rows * depth;
	src_pg = side_pageable(c->srcMemoryType, c->srcHost, c->srcDevice, sspan);
	dst_pg = side_pageable(c->dstMemoryType, c->dstHost, c->dstDevice, dspan);
	if (src_pg && dst_pg) {
		log_missing_once("graph copies from pageable host memory to pageable host memory",
				 "cuGraphAddMemcpyNode", 1);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if ((!src_pg && (err = copy_side_pack(v, c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray,
					      c->srcXInBytes, c->srcY, c->srcZ, c->srcPitch, c->srcHeight, sspan))) ||
	    (!dst_pg && (err = copy_side_pack(v + GM_SIDE, c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray,
					      c->dstXInBytes, c->dstY, c->dstZ, c->dstPitch, c->dstHeight, dspan))))
		return err;
	v[GM_WIDTH] = c->WidthInBytes, v[GM_ROWS] = c->Height, v[GM_DEPTH] = c->Depth;
	v[GM_CTX] = handle_id(ctx);
	if ((src_pg || dst_pg) && (err = pack_staged(c, src_pg, v)))
		return err;
	return params_alloc(g, CU_GRAPH_NODE_TYPE_MEMCPY, src_pg || dst_pg ? GM_STAGED_N : GM_N, v);
}

static CUresult pack(const CUgraphNodeParams *p, graph_params *g, uint64_t *v, char *buf)
{
	CUresult err;

	memset(v, 0, CICADA_GRAPH_SCALARS * sizeof(*v));
	memset(g, 0, sizeof(*g));
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	switch (p->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL: {
		const CUDA_KERNEL_NODE_PARAMS_v3 *k = &p->kernel;
		CUfunction f = k->func ? k->func : (CUfunction)k->kern;
		if ((err = launch_pack(f, k->kernelParams, k->extra, buf, &g->data.data_len)))
			return err;
		g->data.data_val = buf;
		v[GK_FUNC] = handle_id(f);
		v[GK_GRID_X] = k->gridDimX, v[GK_GRID_Y] = k->gridDimY, v[GK_GRID_Z] = k->gridDimZ;
		v[GK_BLOCK_X] = k->blockDimX, v[GK_BLOCK_Y] = k->blockDimY, v[GK_BLOCK_Z] = k->blockDimZ;
		v[GK_SHMEM] = k->sharedMemBytes;
		v[GK_CTX] = k->func ? 0 : handle_id(k->ctx);
		return params_alloc(g, p->type, GK_N, v);
	}
	case CU_GRAPH_NODE_TYPE_MEMSET:
		v[GS_DST] = p->memset.dst, v[GS_PITCH] = p->memset.pitch, v[GS_VALUE] = p->memset.value;
		v[GS_ELEMENT] = p->memset.elementSize, v[GS_WIDTH] = p->memset.width, v[GS_HEIGHT] = p->memset.height;
		v[GS_CTX] = handle_id(p->memset.ctx);
		return params_alloc(g, p->type, GS_N, v);
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		if (p->memcpy.flags || p->memcpy.reserved)
			return CUDA_ERROR_INVALID_VALUE;
		return pack_copy(&p->memcpy.copyParams, p->memcpy.copyCtx, g, v);
	case CU_GRAPH_NODE_TYPE_HOST:
		if (!p->host.fn)
			return CUDA_ERROR_INVALID_VALUE;
		if (!(v[GH_ID] = hostfn_register(p->host.fn, p->host.userData, &err)))
			return err;
		return params_alloc(g, p->type, GH_N, v);
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
		v[GE_EVENT] = handle_id(p->type == CU_GRAPH_NODE_TYPE_WAIT_EVENT ? p->eventWait.event :
									     p->eventRecord.event);
		return params_alloc(g, p->type, GE_N, v);
	case CU_GRAPH_NODE_TYPE_GRAPH:
		v[GC_GRAPH] = handle_id(p->graph.graph);
		return params_alloc(g, p->type, GC_N, v);
	case CU_GRAPH_NODE_TYPE_EMPTY:
		return params_alloc(g, p->type, 0, v);
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
		if (p->alloc.poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
		    p->alloc.poolProps.handleTypes != CU_MEM_HANDLE_TYPE_NONE || p->alloc.accessDescCount > 1) {
			log_info("graph memory allocation nodes: only device memory without export handles and with "
				 "at most one access descriptor is supported");
			return CUDA_ERROR_NOT_SUPPORTED;
		}
		v[GA_BYTES] = p->alloc.bytesize;
		v[GA_DEVICE] = (uint64_t)p->alloc.poolProps.location.id;
		return params_alloc(g, p->type, GA_N, v);
	case CU_GRAPH_NODE_TYPE_MEM_FREE:
		v[GF_DPTR] = p->free.dptr;
		return params_alloc(g, p->type, GF_N, v);
	case CU_GRAPH_NODE_TYPE_CONDITIONAL:
		v[GD_HANDLE] = p->conditional.handle, v[GD_TYPE] = p->conditional.type;
		v[GD_SIZE] = p->conditional.size, v[GD_CTX] = handle_id(p->conditional.ctx);
		return params_alloc(g, p->type, GD_N, v);
	default:
		log_missing_once("graph node type", "cuGraphAddNode", 1);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
}

/* --- adding --- */

/* A conditional node's body graphs, as ids, in an array that lives as
 * long as the process (the driver's lives as long as the node). */
static CUresult bodies_in(CUDA_CONDITIONAL_NODE_PARAMS *c, const graph_params *g)
{
	const uint64_t *ids = (const uint64_t *)g->data.data_val;
	CUgraph *out;

	if (g->data.data_len != c->size * sizeof(*ids))
		return client_lost("malformed conditional node");
	if (!(out = calloc(c->size + 1, sizeof(*out))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (unsigned i = 0; i < c->size; i++)
		out[i] = (CUgraph)(uintptr_t)ids[i];
	c->phGraph_out = out;
	return CUDA_SUCCESS;
}

static CUresult add(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps, const CUgraphEdgeData *edges,
		    size_t n, CUgraphNodeParams *p)
{
	static __thread char buf[CICADA_PARAMS_MAX];
	uint64_t v[CICADA_GRAPH_SCALARS];
	graph_node_args a = { .graph = handle_id(graph) };
	graph_node_res r;
	uint64_t *ids;
	CUresult err;

	if (!out || (n && !deps) || n > CICADA_GRAPH_NODES_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = pack(p, &a.params, v, buf)))
		return err;
	if (!(ids = malloc((n + 1) * sizeof(*ids))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < n; i++)
		ids[i] = handle_id(deps[i]);
	a.deps.deps_len = (u_int)n;
	a.deps.deps_val = (u_quad_t *)ids;
	if (edges) {
		a.edges.edges_len = (u_int)(n * sizeof(*edges));
		a.edges.edges_val = (char *)edges;
	}
	memset(&r, 0, sizeof(r));
	err = rpc_graph_add_node(&a, &r);
	free(ids);
	if (!err) {
		*out = node_of(r.node);
		if (p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && r.params.v.v_len == GA_N) {
			p->alloc.dptr = r.params.v.v_val[GA_DPTR];
			devmem_note_alloc(p->alloc.dptr, p->alloc.bytesize);
		}
		if (p->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
			err = bodies_in(&p->conditional, &r.params);
	}
	xdr_free((xdrproc_t)xdr_graph_node_res, (char *)&r);
	return err;
}

CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				   const CUgraphEdgeData *dependencyData, size_t numDependencies,
				   CUgraphNodeParams *nodeParams)
{
	return add(phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams);
}

CUresult CUDAAPI cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				size_t numDependencies, CUgraphNodeParams *nodeParams);
CUresult CUDAAPI cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				size_t numDependencies, CUgraphNodeParams *nodeParams)
{
	return add(phGraphNode, hGraph, dependencies, NULL, numDependencies, nodeParams);
}

static void kernel_in(CUgraphNodeParams *p, const CUDA_KERNEL_NODE_PARAMS *k, int v2)
{
	memset(p, 0, sizeof(*p));
	p->type = CU_GRAPH_NODE_TYPE_KERNEL;
	p->kernel.func = k->func;
	p->kernel.gridDimX = k->gridDimX, p->kernel.gridDimY = k->gridDimY, p->kernel.gridDimZ = k->gridDimZ;
	p->kernel.blockDimX = k->blockDimX, p->kernel.blockDimY = k->blockDimY, p->kernel.blockDimZ = k->blockDimZ;
	p->kernel.sharedMemBytes = k->sharedMemBytes;
	p->kernel.kernelParams = k->kernelParams;
	p->kernel.extra = k->extra;
	if (v2) {
		p->kernel.kern = k->kern;
		p->kernel.ctx = k->ctx;
	}
}

CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
					 size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	CUgraphNodeParams p;

	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	kernel_in(&p, nodeParams, 1);
	return add(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				      size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				      size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	CUDA_KERNEL_NODE_PARAMS k = { 0 };

	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&k, nodeParams, sizeof(*nodeParams));
	return cuGraphAddKernelNode_v2(phGraphNode, hGraph, dependencies, numDependencies, &k);
}

CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				      size_t numDependencies, const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_MEMCPY };

	if (!copyParams)
		return CUDA_ERROR_INVALID_VALUE;
	p.memcpy.copyParams = *copyParams;
	p.memcpy.copyCtx = ctx;
	return add(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

static void memset_in(CUgraphNodeParams *p, const CUDA_MEMSET_NODE_PARAMS *m, CUcontext ctx)
{
	memset(p, 0, sizeof(*p));
	p->type = CU_GRAPH_NODE_TYPE_MEMSET;
	p->memset.dst = m->dst, p->memset.pitch = m->pitch, p->memset.value = m->value;
	p->memset.elementSize = m->elementSize, p->memset.width = m->width, p->memset.height = m->height;
	p->memset.ctx = ctx;
}

CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				      size_t numDependencies, const CUDA_MEMSET_NODE_PARAMS *memsetParams,
				      CUcontext ctx)
{
	CUgraphNodeParams p;

	if (!memsetParams)
		return CUDA_ERROR_INVALID_VALUE;
	memset_in(&p, memsetParams, ctx);
	return add(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				    size_t numDependencies, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_HOST };

	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	p.host.fn = nodeParams->fn;
	p.host.userData = nodeParams->userData;
	return add(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

CUresult CUDAAPI cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
					  size_t numDependencies, CUgraph childGraph)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_GRAPH, .graph.graph = childGraph };

	return add(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				     size_t numDependencies)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_EMPTY };

	return add(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

CUresult CUDAAPI cuGraphAddEventRecordNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
					   size_t numDependencies, CUevent event)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_EVENT_RECORD, .eventRecord.event = event };

	return add(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

CUresult CUDAAPI cuGraphAddEventWaitNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
					 size_t numDependencies, CUevent event)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_WAIT_EVENT, .eventWait.event = event };

	return add(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

CUresult CUDAAPI cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
					size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_MEM_ALLOC };
	CUresult err;

	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	p.alloc.poolProps = nodeParams->poolProps;
	p.alloc.accessDescs = nodeParams->accessDescs;
	p.alloc.accessDescCount = nodeParams->accessDescCount;
	p.alloc.bytesize = nodeParams->bytesize;
	err = add(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
	if (!err)
		nodeParams->dptr = p.alloc.dptr;
	return err;
}

CUresult CUDAAPI cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				       size_t numDependencies, CUdeviceptr dptr)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_MEM_FREE, .free.dptr = dptr };

	return add(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

/* --- reading a node's parameters --- */

/* The node's parameters as the worker holds them; the caller frees r. */
static CUresult get(CUgraphNode node, unsigned type, unsigned n, graph_node_res *r)
{
	uint64_t id = handle_id(node);
	scalars a = { { 1, &id } };
	CUresult err;

	memset(r, 0, sizeof(*r));
	err = rpc_graph_node_get(&a, r);
	if (!err && type == CU_GRAPH_NODE_TYPE_MEMCPY && r->params.v.v_len == GM_STAGED_N)
		n = GM_STAGED_N;                     /* a copy of pageable memory */
	if (!err && (r->params.type != type || r->params.v.v_len != n))
		err = r->params.type != type ? CUDA_ERROR_INVALID_VALUE : client_lost("malformed graph node");
	return err;
}

static void done(graph_node_res *r)
{
	xdr_free((xdrproc_t)xdr_graph_node_res, (char *)r);
}

/* A kernel node's parameter values live here, one copy per node: a read
 * that finds them unchanged gives the same pointers, a read after a change
 * replaces them (the driver's own copy lives as long as the node and
 * changes when it is set). */
struct kernel_values {
	uint64_t node;
	unsigned len;
	void **ptrs;
	char *values;
};
static struct kernel_values *kept;
static unsigned nkept, cap_kept;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;

static struct kernel_values *kept_slot(uint64_t node)
{
	for (unsigned i = 0; i < nkept; i++)
		if (kept[i].node == node)
			return &kept[i];
	if (nkept == cap_kept) {
		unsigned cap = cap_kept ? 2 * cap_kept : 64;
		struct kernel_values *k = realloc(kept, cap * sizeof(*k));
		if (!k)
			return NULL;
		kept = k;
		cap_kept = cap;
	}
	kept[nkept] = (struct kernel_values){ .node = node };
	return &kept[nkept++];
}

static CUresult keep_values(uint64_t node, CUfunction f, const char *data, unsigned len, void ***out)
{
	struct kernel_values *k;
	size_t off, size;
	unsigned n = 0;
	void **ptrs;
	char *values;

	while (cuFuncGetParamInfo(f, n, &off, &size) == CUDA_SUCCESS)
		n++;
	pthread_mutex_lock(&kept_lock);
	if (!(k = kept_slot(node))) {
		pthread_mutex_unlock(&kept_lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (k->values && k->len == len && !memcmp(k->values, data, len)) {
		*out = k->ptrs;
		pthread_mutex_unlock(&kept_lock);
		return CUDA_SUCCESS;
	}
	ptrs = calloc(n + 1, sizeof(void *));
	values = malloc(len + 1);
	if (!ptrs || !values) {
		pthread_mutex_unlock(&kept_lock);
		free(ptrs);
		free(values);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	memcpy(values, data, len);
	for (unsigned i = 0; i < n && cuFuncGetParamInfo(f, i, &off, &size) == CUDA_SUCCESS; i++)
		ptrs[i] = off + size <= len ? values + off : NULL;
	free(k->ptrs);
	free(k->values);
	*k = (struct kernel_values){ node, len, ptrs, values };
	*out = ptrs;
	pthread_mutex_unlock(&kept_lock);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	graph_node_res r;
	CUresult err;
	uint64_t *v;

	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = get(hNode, CU_GRAPH_NODE_TYPE_KERNEL, GK_N, &r))) {
		done(&r);
		return err;
	}
	v = r.params.v.v_val;
	memset(nodeParams, 0, sizeof(*nodeParams));
	nodeParams->func = (CUfunction)(uintptr_t)v[GK_FUNC];
	nodeParams->gridDimX = v[GK_GRID_X], nodeParams->gridDimY = v[GK_GRID_Y], nodeParams->gridDimZ = v[GK_GRID_Z];
	nodeParams->blockDimX = v[GK_BLOCK_X], nodeParams->blockDimY = v[GK_BLOCK_Y];
	nodeParams->blockDimZ = v[GK_BLOCK_Z], nodeParams->sharedMemBytes = v[GK_SHMEM];
	nodeParams->ctx = (CUcontext)(uintptr_t)v[GK_CTX];
	err = keep_values(handle_id(hNode), nodeParams->func, r.params.data.data_val, r.params.data.data_len,
			  &nodeParams->kernelParams);
	done(&r);
	return err;
}

CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	CUDA_KERNEL_NODE_PARAMS k;
	CUresult err;

	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(err = cuGraphKernelNodeGetParams_v2(hNode, &k)))
		memcpy(nodeParams, &k, sizeof(*nodeParams));
	return err;
}

static void side_out(const uint64_t *v, CUmemorytype *type, const void **host, CUdeviceptr *dev, CUarray *array,
		     size_t *x, size_t *y, size_t *z, size_t *pitch, size_t *height)
{
	*type = (CUmemorytype)v[GM_TYPE];
	*x = v[GM_X], *y = v[GM_Y], *z = v[GM_Z], *pitch = v[GM_PITCH], *height = v[GM_HEIGHT];
	*dev = v[GM_DEVICE];
	*array = (CUarray)(uintptr_t)v[GM_ARRAY];
	*host = *type != CU_MEMORYTYPE_HOST ? NULL :
		v[GM_REGION] ? hostmem_region_ptr((unsigned)v[GM_REGION], v[GM_DEVICE]) :
			       (const void *)(uintptr_t)v[GM_DEVICE];     /* pageable memory, staged */
	if (*type == CU_MEMORYTYPE_HOST)
		*dev = 0;
}

CUresult CUDAAPI cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)
{
	graph_node_res r;
	CUresult err;
	uint64_t *v;

	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(err = get(hNode, CU_GRAPH_NODE_TYPE_MEMCPY, GM_N, &r))) {
		CUDA_MEMCPY3D *c = nodeParams;
		v = r.params.v.v_val;
		memset(c, 0, sizeof(*c));
		side_out(v, &c->srcMemoryType, &c->srcHost, &c->srcDevice, &c->srcArray, &c->srcXInBytes, &c->srcY,
			 &c->srcZ, &c->srcPitch, &c->srcHeight);
		side_out(v + GM_SIDE, &c->dstMemoryType, (const void **)&c->dstHost, &c->dstDevice, &c->dstArray,
			 &c->dstXInBytes, &c->dstY, &c->dstZ, &c->dstPitch, &c->dstHeight);
		c->WidthInBytes = v[GM_WIDTH], c->Height = v[GM_ROWS], c->Depth = v[GM_DEPTH];
	}
	done(&r);
	return err;
}

CUresult CUDAAPI cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
	graph_node_res r;
	CUresult err;
	uint64_t *v;

	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(err = get(hNode, CU_GRAPH_NODE_TYPE_MEMSET, GS_N, &r))) {
		v = r.params.v.v_val;
		nodeParams->dst = v[GS_DST], nodeParams->pitch = v[GS_PITCH], nodeParams->value = (unsigned)v[GS_VALUE];
		nodeParams->elementSize = (unsigned)v[GS_ELEMENT], nodeParams->width = v[GS_WIDTH];
		nodeParams->height = v[GS_HEIGHT];
	}
	done(&r);
	return err;
}

CUresult CUDAAPI cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *nodeParams)
{
	graph_node_res r;
	CUresult err;

	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(err = get(hNode, CU_GRAPH_NODE_TYPE_HOST, GH_N, &r)) &&
	    hostfn_lookup(r.params.v.v_val[GH_ID], &nodeParams->fn, &nodeParams->userData))
		err = CUDA_ERROR_INVALID_VALUE;
	done(&r);
	return err;
}

static CUresult get_one(CUgraphNode node, unsigned type, unsigned n, unsigned slot, uint64_t *out)
{
	graph_node_res r;
	CUresult err = get(node, type, n, &r);

	if (!err)
		*out = r.params.v.v_val[slot];
	done(&r);
	return err;
}

CUresult CUDAAPI cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph)
{
	uint64_t id;
	CUresult err;

	if (!phGraph)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(err = get_one(hNode, CU_GRAPH_NODE_TYPE_GRAPH, GC_N, GC_GRAPH, &id)))
		*phGraph = (CUgraph)(uintptr_t)id;
	return err;
}

CUresult CUDAAPI cuGraphEventRecordNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
	uint64_t id;
	CUresult err;

	if (!event_out)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(err = get_one(hNode, CU_GRAPH_NODE_TYPE_EVENT_RECORD, GE_N, GE_EVENT, &id)))
		*event_out = (CUevent)(uintptr_t)id;
	return err;
}

CUresult CUDAAPI cuGraphEventWaitNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
	uint64_t id;
	CUresult err;

	if (!event_out)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(err = get_one(hNode, CU_GRAPH_NODE_TYPE_WAIT_EVENT, GE_N, GE_EVENT, &id)))
		*event_out = (CUevent)(uintptr_t)id;
	return err;
}

CUresult CUDAAPI cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
	graph_node_res r;
	CUresult err;

	if (!params_out)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(err = get(hNode, CU_GRAPH_NODE_TYPE_MEM_ALLOC, GA_N, &r))) {
		memset(params_out, 0, sizeof(*params_out));
		params_out->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
		params_out->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		params_out->poolProps.location.id = (int)r.params.v.v_val[GA_DEVICE];
		params_out->bytesize = r.params.v.v_val[GA_BYTES];
		params_out->dptr = r.params.v.v_val[GA_DPTR];
	}
	done(&r);
	return err;
}

CUresult CUDAAPI cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out)
{
	uint64_t v;
	CUresult err;

	if (!dptr_out)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(err = get_one(hNode, CU_GRAPH_NODE_TYPE_MEM_FREE, GF_N, GF_DPTR, &v)))
		*dptr_out = v;
	return err;
}

/* --- setting a node's parameters, in its graph or in an executable --- */

static CUresult set(CUgraphExec exec, CUgraphNode node, CUgraphNodeParams *p)
{
	static __thread char buf[CICADA_PARAMS_MAX];
	uint64_t v[CICADA_GRAPH_SCALARS];
	graph_node_args a = { .graph = handle_id(exec), .node = handle_id(node) };
	static int told;
	CUresult err = pack(p, &a.params, v, buf);

	if (!err)
		err = call(P_graph_node_set, (xdrproc_t)xdr_graph_node_args, &a, NULL, 0);
	if (err == CUDA_ERROR_NOT_SUPPORTED && p->type == CU_GRAPH_NODE_TYPE_MEMCPY &&
	    !__atomic_exchange_n(&told, 1, __ATOMIC_ACQ_REL))
		log_warn("a graph copy node cannot change between pageable host memory and memory the gpu-server "
			 "reaches (CUDA_ERROR_NOT_SUPPORTED)");
	return err;
}

CUresult CUDAAPI cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
	return set(NULL, hNode, nodeParams);
}

CUresult CUDAAPI cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
	return hGraphExec ? set(hGraphExec, hNode, nodeParams) : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGraphKernelNodeSetParams_v2(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	CUgraphNodeParams p;

	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	kernel_in(&p, nodeParams, 1);
	return set(NULL, hNode, &p);
}

CUresult CUDAAPI cuGraphKernelNodeSetParams(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
CUresult CUDAAPI cuGraphKernelNodeSetParams(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	CUDA_KERNEL_NODE_PARAMS k = { 0 };

	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&k, nodeParams, sizeof(*nodeParams));
	return cuGraphKernelNodeSetParams_v2(hNode, &k);
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
						   const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	CUgraphNodeParams p;

	if (!nodeParams || !hGraphExec)
		return CUDA_ERROR_INVALID_VALUE;
	kernel_in(&p, nodeParams, 1);
	return set(hGraphExec, hNode, &p);
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
						const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
						const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	CUDA_KERNEL_NODE_PARAMS k = { 0 };

	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&k, nodeParams, sizeof(*nodeParams));
	return cuGraphExecKernelNodeSetParams_v2(hGraphExec, hNode, &k);
}

CUresult CUDAAPI cuGraphMemcpyNodeSetParams(CUgraphNode hNode, const CUDA_MEMCPY3D *nodeParams)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_MEMCPY };

	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	p.memcpy.copyParams = *nodeParams;
	return set(NULL, hNode, &p);
}

CUresult CUDAAPI cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
						const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_MEMCPY };

	if (!copyParams || !hGraphExec)
		return CUDA_ERROR_INVALID_VALUE;
	p.memcpy.copyParams = *copyParams;
	p.memcpy.copyCtx = ctx;
	return set(hGraphExec, hNode, &p);
}

CUresult CUDAAPI cuGraphMemsetNodeSetParams(CUgraphNode hNode, const CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
	CUgraphNodeParams p;

	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	memset_in(&p, nodeParams, NULL);
	return set(NULL, hNode, &p);
}

CUresult CUDAAPI cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
						const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
	CUgraphNodeParams p;

	if (!memsetParams || !hGraphExec)
		return CUDA_ERROR_INVALID_VALUE;
	memset_in(&p, memsetParams, ctx);
	return set(hGraphExec, hNode, &p);
}

CUresult CUDAAPI cuGraphHostNodeSetParams(CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_HOST };

	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	p.host.fn = nodeParams->fn;
	p.host.userData = nodeParams->userData;
	return set(NULL, hNode, &p);
}

CUresult CUDAAPI cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
					      const CUDA_HOST_NODE_PARAMS *nodeParams)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_HOST };

	if (!nodeParams || !hGraphExec)
		return CUDA_ERROR_INVALID_VALUE;
	p.host.fn = nodeParams->fn;
	p.host.userData = nodeParams->userData;
	return set(hGraphExec, hNode, &p);
}

/* --- lists of nodes --- */

struct node_list {
	CUgraphNode *from, *to;
	CUgraphEdgeData *edges;
};
static __thread struct node_list lists;

/* Fetches a list (op on h) into this thread's arrays; *n its length. */
static CUresult list(unsigned op, const void *h, size_t *n)
{
	uint64_t in[2] = { op, handle_id(h) };
	scalars a = { { 2, in } };
	graph_ids_res r;
	CUresult err;

	memset(&r, 0, sizeof(r));
	err = rpc_graph_query(&a, &r);
	if (!err && ((op == GQ_EDGES && r.to.to_len != r.from.from_len) ||
		     (r.edges.edges_len && r.edges.edges_len != r.from.from_len * sizeof(CUgraphEdgeData))))
		err = client_lost("malformed node list");
	if (!err) {
		*n = r.from.from_len;
		free(lists.from);
		free(lists.to);
		free(lists.edges);
		lists.from = calloc(*n + 1, sizeof(CUgraphNode));
		lists.to = calloc(*n + 1, sizeof(CUgraphNode));
		lists.edges = calloc(*n + 1, sizeof(CUgraphEdgeData));
		if (!lists.from || !lists.to || !lists.edges)
			err = CUDA_ERROR_OUT_OF_MEMORY;
		for (size_t i = 0; !err && i < *n; i++) {
			lists.from[i] = node_of(r.from.from_val[i]);
			if (op == GQ_EDGES)
				lists.to[i] = node_of(r.to.to_val[i]);
		}
		if (!err && r.edges.edges_len)
			memcpy(lists.edges, r.edges.edges_val, r.edges.edges_len);
	}
	xdr_free((xdrproc_t)xdr_graph_ids_res, (char *)&r);
	return err;
}

/* The driver's convention: no array, the count; an array, up to *n of
 * them and the count written (the true count if smaller). */
static CUresult fill(CUgraphNode *out, CUgraphNode *to, CUgraphEdgeData *edges, size_t *n, size_t have)
{
	size_t k = have < *n ? have : *n;

	if (!out && !to && !edges) {
		*n = have;
		return CUDA_SUCCESS;
	}
	for (size_t i = 0; i < k; i++) {
		if (out)
			out[i] = lists.from[i];
		if (to)
			to[i] = lists.to[i];
		if (edges)
			edges[i] = lists.edges[i];
	}
	for (size_t i = k; i < *n; i++) {
		if (out)
			out[i] = NULL;
		if (to)
			to[i] = NULL;
	}
	*n = k;
	return CUDA_SUCCESS;
}

static CUresult listed(unsigned op, const void *h, CUgraphNode *out, CUgraphNode *to, CUgraphEdgeData *edges,
		       size_t *n)
{
	size_t have = 0;
	CUresult err;

	if (!n)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = list(op, h, &have)))
		return err;
	return fill(out, to, edges, n, have);
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
	return listed(GQ_NODES, hGraph, nodes, NULL, NULL, numNodes);
}

CUresult CUDAAPI cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes)
{
	return listed(GQ_ROOTS, hGraph, rootNodes, NULL, NULL, numRootNodes);
}

CUresult CUDAAPI cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *edgeData,
				    size_t *numEdges)
{
	if ((from == NULL) != (to == NULL) || (edgeData && !from))
		return CUDA_ERROR_INVALID_VALUE;
	return listed(GQ_EDGES, hGraph, from, to, edgeData, numEdges);
}

CUresult CUDAAPI cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, size_t *numEdges);
CUresult CUDAAPI cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, size_t *numEdges)
{
	return cuGraphGetEdges_v2(hGraph, from, to, NULL, numEdges);
}

CUresult CUDAAPI cuGraphNodeGetDependencies_v2(CUgraphNode hNode, CUgraphNode *dependencies,
					       CUgraphEdgeData *edgeData, size_t *numDependencies)
{
	if (edgeData && !dependencies)
		return CUDA_ERROR_INVALID_VALUE;
	return listed(GQ_DEPS, hNode, dependencies, NULL, edgeData, numDependencies);
}

CUresult CUDAAPI cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode *dependencies, size_t *numDependencies);
CUresult CUDAAPI cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode *dependencies, size_t *numDependencies)
{
	return cuGraphNodeGetDependencies_v2(hNode, dependencies, NULL, numDependencies);
}

CUresult CUDAAPI cuGraphNodeGetDependentNodes_v2(CUgraphNode hNode, CUgraphNode *dependentNodes,
						 CUgraphEdgeData *edgeData, size_t *numDependentNodes)
{
	if (edgeData && !dependentNodes)
		return CUDA_ERROR_INVALID_VALUE;
	return listed(GQ_DEPENDENTS, hNode, dependentNodes, NULL, edgeData, numDependentNodes);
}

CUresult CUDAAPI cuGraphNodeGetDependentNodes(CUgraphNode hNode, CUgraphNode *dependentNodes,
					      size_t *numDependentNodes);
CUresult CUDAAPI cuGraphNodeGetDependentNodes(CUgraphNode hNode, CUgraphNode *dependentNodes,
					      size_t *numDependentNodes)
{
	return cuGraphNodeGetDependentNodes_v2(hNode, dependentNodes, NULL, numDependentNodes);
}

/* A capture's current dependencies (graph.c asks while one is under way). */
CUresult graph_capture_deps(CUstream stream, const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *n)
{
	CUresult err = list(GQ_CAPTURE_DEPS, stream, n);

	if (err)
		return err;
	*deps = lists.from;
	if (edges)
		*edges = lists.edges;
	return CUDA_SUCCESS;
}

/* --- edges, captures into a graph --- */

static CUresult edges_call(unsigned op, const void *h, const CUgraphNode *from, const CUgraphNode *to,
			   const CUgraphEdgeData *edges, size_t n, size_t nto, unsigned mode)
{
	graph_edges_args a = { .op = op, .handle = handle_id(h), .mode = mode };
	uint64_t *f, *t;
	CUresult err;

	if (n > CICADA_GRAPH_NODES_MAX || (n && !from) || (nto && !to))
		return CUDA_ERROR_INVALID_VALUE;
	f = malloc((n + 1) * sizeof(*f));
	t = malloc((nto + 1) * sizeof(*t));
	if (!f || !t) {
		free(f);
		free(t);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (size_t i = 0; i < n; i++)
		f[i] = handle_id(from[i]);
	for (size_t i = 0; i < nto; i++)
		t[i] = handle_id(to[i]);
	a.from.from_len = (u_int)n, a.from.from_val = (u_quad_t *)f;
	a.to.to_len = (u_int)nto, a.to.to_val = (u_quad_t *)t;
	if (edges)
		a.edges.edges_len = (u_int)(n * sizeof(*edges)), a.edges.edges_val = (char *)edges;
	err = call(P_graph_edges, (xdrproc_t)xdr_graph_edges_args, &a, NULL, 0);
	free(f);
	free(t);
	return err;
}

CUresult CUDAAPI cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
					   const CUgraphEdgeData *edgeData, size_t numDependencies)
{
	return edges_call(1, hGraph, from, to, edgeData, numDependencies, numDependencies, 0);
}

CUresult CUDAAPI cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
					size_t numDependencies);
CUresult CUDAAPI cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
					size_t numDependencies)
{
	return edges_call(1, hGraph, from, to, NULL, numDependencies, numDependencies, 0);
}

CUresult CUDAAPI cuGraphRemoveDependencies_v2(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
					      const CUgraphEdgeData *edgeData, size_t numDependencies)
{
	return edges_call(0, hGraph, from, to, edgeData, numDependencies, numDependencies, 0);
}

CUresult CUDAAPI cuGraphRemoveDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
					   size_t numDependencies);
CUresult CUDAAPI cuGraphRemoveDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
					   size_t numDependencies)
{
	return edges_call(0, hGraph, from, to, NULL, numDependencies, numDependencies, 0);
}

CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
					     const CUgraphEdgeData *dependencyData, size_t numDependencies,
					     CUstreamCaptureMode mode)
{
	CUgraph g[1] = { hGraph };
	CUresult err = edges_call(2, hStream, dependencies, (const CUgraphNode *)g, dependencyData, numDependencies,
				  1, (unsigned)mode);

	if (!err)
		capture_begun();
	return err;
}

CUresult CUDAAPI cuStreamUpdateCaptureDependencies_v2(CUstream hStream, CUgraphNode *dependencies,
						      const CUgraphEdgeData *dependencyData, size_t numDependencies,
						      unsigned int flags)
{
	return edges_call(3, hStream, dependencies, NULL, dependencyData, numDependencies, 0, flags);
}

CUresult CUDAAPI cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
						   size_t numDependencies, unsigned int flags);
CUresult CUDAAPI cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
						   size_t numDependencies, unsigned int flags)
{
	return edges_call(3, hStream, dependencies, NULL, NULL, numDependencies, 0, flags);
}

/* --- whole graphs: update an executable, the debug dump --- */

CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo *resultInfo)
{
	uint64_t in[2] = { handle_id(hGraphExec), handle_id(hGraph) }, out[3] = { 0 };
	scalars a = { { 2, in } };
	CUresult err;

	if (!resultInfo)
		return CUDA_ERROR_INVALID_VALUE;
	err = call(P_graph_exec_update, (xdrproc_t)xdr_scalars, &a, out, 3);
	resultInfo->result = (CUgraphExecUpdateResult)out[0];
	resultInfo->errorNode = node_of(out[1]);
	resultInfo->errorFromNode = node_of(out[2]);
	return err;
}

CUresult CUDAAPI cuGraphDebugDotPrint(CUgraph hGraph, const char *path, unsigned int flags)
{
	uint64_t in[2] = { handle_id(hGraph), flags };
	scalars a = { { 2, in } };
	bytes_res r = { 0 };
	CUresult err;
	FILE *f;

	if (!path)
		return CUDA_ERROR_INVALID_VALUE;
	err = rpc_graph_dot(&a, &r);
	if (!err && (!(f = fopen(path, "w")) ||
		     (fwrite(r.data.data_val, 1, r.data.data_len, f) != r.data.data_len) + fclose(f)))
		err = CUDA_ERROR_OPERATING_SYSTEM;
	xdr_free((xdrproc_t)xdr_bytes_res, (char *)&r);
	return err;
}

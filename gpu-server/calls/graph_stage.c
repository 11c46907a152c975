/*
 * graph_stage.c: graph copy nodes of a client's pageable memory, which the
 * worker cannot reach. The client names its side by address (region 0)
 * with the id of a host function of its own that moves the bytes
 * (interposer/graph_stage.c). Here the node becomes a child graph of two
 * nodes around a stage: to the device, [host node: the client's bytes
 * into the stage] -> [copy from the stage]; from it, [copy into the
 * stage] -> [host node: the stage's bytes to the client]. So the program's
 * memory is read or written when the node runs, at every launch, in the
 * graph's order. A local client's stage is shared memory it fills or
 * empties itself; a remote client's is pinned here and its bytes cross
 * the host function channel (hostfn.c). The node's readers see a copy
 * node with what the client set (graph_stage_params).
 */
#include <stdlib.h>
#include <string.h>
#include "calls.h"

int graph_staged(const graph_params *g)
{
	return g->type == CU_GRAPH_NODE_TYPE_MEMCPY && g->v.v_len == GM_STAGED_N;
}

/* A local client's stage: inside a region it shares. */
static CUresult shared_stage(struct worker *w, uint64_t region, uint64_t off, uint64_t size, void **out)
{
	if (region >= MAX_HOST_REGIONS || !w->calls->regions[region].base || off > w->calls->regions[region].size ||
	    size > w->calls->regions[region].size - off)
		return CUDA_ERROR_INVALID_VALUE;
	*out = (char *)w->calls->regions[region].base + off;
	w->calls->regions[region].staged++;  /* the node holds it: never unmapped under it */
	return CUDA_SUCCESS;
}

/* The bytes the program's side moves, packed row after row. */
static CUresult stage_size(const uint64_t *v, uint64_t *size)
{
	uint64_t rows = v[GM_ROWS] ? v[GM_ROWS] : 1, depth = v[GM_DEPTH] ? v[GM_DEPTH] : 1;

	if (!v[GM_WIDTH] || rows > UINT64_MAX / depth || v[GM_WIDTH] > UINT64_MAX / (rows * depth))
		return CUDA_ERROR_INVALID_VALUE;
	*size = v[GM_WIDTH] * rows * depth;
	return CUDA_SUCCESS;
}

/* The program's side: host memory (or a unified address) in no region. */
static int is_app(const uint64_t *side)
{
	return (side[GM_TYPE] == CU_MEMORYTYPE_HOST || side[GM_TYPE] == CU_MEMORYTYPE_UNIFIED) && !side[GM_REGION];
}

/* The copy between the stage and the other side, the program's side
 * first named as no memory (graph_copy_in checks the other). */
static CUresult stage_copy(struct worker *w, const uint64_t *v, int to_device, void *stage, CUgraphNodeParams *p)
{
	uint64_t plain[GM_N], *app = to_device ? plain : plain + GM_SIDE;
	CUDA_MEMCPY3D *c = &p->memcpy.copyParams;
	CUresult err;

	memcpy(plain, v, sizeof(plain));
	memset(app, 0, GM_SIDE * sizeof(*app));
	app[GM_TYPE] = CU_MEMORYTYPE_DEVICE;
	if ((err = graph_copy_in(w, plain, p)))
		return err;
	if (to_device) {
		c->srcMemoryType = CU_MEMORYTYPE_HOST, c->srcHost = stage, c->srcDevice = 0;
		c->srcPitch = v[GM_WIDTH], c->srcHeight = v[GM_ROWS] ? v[GM_ROWS] : 1;
	} else {
		c->dstMemoryType = CU_MEMORYTYPE_HOST, c->dstHost = stage, c->dstDevice = 0;
		c->dstPitch = v[GM_WIDTH], c->dstHeight = v[GM_ROWS] ? v[GM_ROWS] : 1;
	}
	return CUDA_SUCCESS;
}

/* The parameters of a staged copy's two nodes. */
static CUresult stage_nodes(struct worker *w, const graph_params *g, CUgraphNodeParams *host, CUgraphNodeParams *copy,
			    int *to_device)
{
	const uint64_t *v = g->v.v_val;
	void *shared = NULL, *stage;
	uint64_t size;
	CUresult err;

	*to_device = is_app(v);
	memset(host, 0, sizeof(*host));
	host->type = CU_GRAPH_NODE_TYPE_HOST;
	if (!graph_staged(g) || *to_device == is_app(v + GM_SIDE))
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = stage_size(v, &size)) ||
	    (v[GM_STAGE_REGION] && (err = shared_stage(w, v[GM_STAGE_REGION], v[GM_STAGE_OFF], size, &shared))) ||
	    (err = hostfn_copy_node(w, v, GM_STAGED_N, shared, size, *to_device, &host->host.fn,
				    &host->host.userData, &stage)))
		return err;
	return stage_copy(w, v, *to_device, stage, copy);
}

/* The two nodes of a staged copy, added to into. */
CUresult graph_stage_build(struct worker *w, const graph_params *g, CUgraph into)
{
	CUgraphNodeParams copy, host;
	CUgraphNode first, second;
	int to_device;
	CUresult err = stage_nodes(w, g, &host, &copy, &to_device);

	return err ?: cuGraphAddNode_v2(&first, into, NULL, NULL, 0, to_device ? &host : &copy) ?:
		      cuGraphAddNode_v2(&second, into, &first, NULL, 1, to_device ? &copy : &host);
}

/* A staged node's child graph given new parameters: its two nodes set in
 * place if the copy goes the same way (an executable update pairs them
 * still), else made again. */
static CUresult stage_reset(struct worker *w, CUgraph child, graph_params *g)
{
	CUgraphNodeParams copy, host;
	CUgraphNodeType type;
	CUgraphNode old[2];
	size_t count = 2, deps = 0;
	int to_device, h;
	CUresult err;

	if ((err = cuGraphGetNodes(child, old, &count)) || count != 2 || (err = cuGraphNodeGetType(old[0], &type)))
		return err ? err : CUDA_ERROR_INVALID_VALUE;
	h = type == CU_GRAPH_NODE_TYPE_HOST ? 0 : 1;
	if ((err = cuGraphNodeGetDependencies_v2(old[h], NULL, NULL, &deps)) ||
	    (err = stage_nodes(w, g, &host, &copy, &to_device)))
		return err;
	if (to_device == !deps)                      /* the host node comes first to the device */
		return cuGraphNodeSetParams(old[h], &host) ?: cuGraphNodeSetParams(old[!h], &copy);
	if ((err = graph_stage_build(w, g, child)))
		return err;
	return cuGraphDestroyNode(old[0]) ?: cuGraphDestroyNode(old[1]);
}

/* What the client set on a staged copy node, or NULL if node is none: a
 * child graph node whose graph holds a host node that moves a copy. */
const uint64_t *graph_stage_params(CUgraphNode node, unsigned *n)
{
	CUDA_HOST_NODE_PARAMS h;
	CUgraphNodeType type;
	CUgraphNode nodes[2];
	CUgraph child;
	size_t count = 0;
	const uint64_t *v = NULL;

	if (cuGraphNodeGetType(node, &type) || type != CU_GRAPH_NODE_TYPE_GRAPH ||
	    cuGraphChildGraphNodeGetGraph(node, &child) || cuGraphGetNodes(child, NULL, &count) || count != 2 ||
	    cuGraphGetNodes(child, nodes, &count))
		return NULL;
	for (unsigned i = 0; i < 2 && !v; i++)
		if (!cuGraphNodeGetType(nodes[i], &type) && type == CU_GRAPH_NODE_TYPE_HOST &&
		    !cuGraphHostNodeGetParams(nodes[i], &h))
			v = hostfn_copy_params(h.fn, h.userData, n);
	return v;
}

/* New parameters of a staged node, in its graph (its child graph set in
 * place) or in an executable (a new child graph of the same shape). A
 * node stays staged or plain: the driver's node kinds differ. */
CUresult graph_stage_set(struct worker *w, CUgraphExec exec, CUgraphNode node, graph_params *g)
{
	unsigned n;
	CUgraph child;
	CUresult err;

	if (!graph_stage_params(node, &n) != !graph_staged(g)) {
		log_warn("client %s: a graph copy node cannot change between pageable host memory and memory the "
			 "worker reaches", w->peer);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (exec) {
		if ((err = cuGraphCreate(&child, 0)))
			return err;
		if (!(err = graph_stage_build(w, g, child)) &&
		    !(err = cuGraphExecChildGraphNodeSetParams(exec, objects_exec_node(w, exec, node), child)))
			objects_exec_stale(w, exec, "a copy of pageable memory was updated");
		cuGraphDestroy(child);
		return err;
	}
	if ((err = cuGraphChildGraphNodeGetGraph(node, &child)))
		return err;
	return stage_reset(w, child, g);
}

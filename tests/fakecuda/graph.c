/*
 * Stream capture, graphs and host functions of the stand-in.  A capturing
 * stream records kernel launches (with copies of their parameter values)
 * instead of running them; the graph is that list, and launching its
 * executable runs the launches in order.  Only launches are captured:
 * other work on a capturing stream fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED.  A host function or stream
 * callback runs before its call returns, like all work of the stand-in.
 */
#include <stdlib.h>
#include <string.h>
#include "fakecuda.h"

struct node {
	CUfunction f;
	struct fc_dim grid, block;
	unsigned shmem;
	int nparams;
	char *values;
	size_t offs[FC_MAX_PARAMS];
};

struct fc_graph {
	struct node *nodes;
	unsigned n, cap;
	unsigned long long id;
};

static unsigned long long next_capture_id = 1;

static void graph_free(void *p)
{
	struct fc_graph *g = p;

	for (unsigned i = 0; g && i < g->n; i++)
		free(g->nodes[i].values);
	if (g)
		free(g->nodes);
	free(g);
}

static struct fc_graph *graph_new(void)
{
	struct fc_ctx *ctx;
	struct fc_graph *g = calloc(1, sizeof(*g));

	if (!g || fc_current(&ctx) || fc_obj_add(g, FC_GRAPH, ctx, graph_free)) {
		free(g);
		return NULL;
	}
	return g;
}

/* Appends a copy of n (its parameter values are copied too). */
static CUresult graph_add(struct fc_graph *g, const struct node *n, size_t bytes)
{
	struct node c = *n;

	if (g->n == g->cap) {
		unsigned cap = g->cap ? 2 * g->cap : 16;
		struct node *p = realloc(g->nodes, cap * sizeof(*p));
		CHECK(p, CUDA_ERROR_OUT_OF_MEMORY);
		g->nodes = p;
		g->cap = cap;
	}
	c.values = malloc(bytes ? bytes : 1);
	CHECK(c.values, CUDA_ERROR_OUT_OF_MEMORY);
	memcpy(c.values, n->values, bytes);
	g->nodes[g->n++] = c;
	return CUDA_SUCCESS;
}

CUresult fc_capture_launch(struct fc_graph *g, CUfunction f, const struct fc_kernel *k, struct fc_dim grid,
			   struct fc_dim block, unsigned shmem, void **args)
{
	char values[FC_MAX_PARAMS * 64];
	struct node n = { f, grid, block, shmem, k->nparams, values, { 0 } };
	size_t at = 0;

	for (int i = 0; i < k->nparams; i++) {
		CHECK_ARG(at + k->sizes[i] <= sizeof(values));
		memcpy(values + at, args[i], k->sizes[i]);
		n.offs[i] = at;
		at += k->sizes[i];
	}
	return graph_add(g, &n, at);
}

static size_t node_bytes(const struct node *n, const struct fc_kernel *k)
{
	return n->nparams ? n->offs[n->nparams - 1] + k->sizes[n->nparams - 1] : 0;
}

CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
	struct fc_graph **slot = fc_stream_capture(s);

	TRY(fc_need_init());
	CHECK(slot, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CHECK(!*slot, CUDA_ERROR_ILLEGAL_STATE);
	CHECK(*slot = graph_new(), CUDA_ERROR_OUT_OF_MEMORY);
	(*slot)->id = next_capture_id++;
	return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream s, CUgraph *pg)
{
	struct fc_graph **slot = fc_stream_capture(s);

	TRY(fc_need_init());
	CHECK_ARG(pg);
	CHECK(slot && *slot, CUDA_ERROR_ILLEGAL_STATE);
	*pg = (CUgraph)*slot;
	*slot = NULL;
	return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st)
{
	struct fc_graph **slot = fc_stream_capture(s);

	TRY(fc_need_init());
	CHECK_ARG(st);
	*st = slot && *slot ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
	return CUDA_SUCCESS;
}

CUresult cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *graph,
				   const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps)
{
	struct fc_graph **slot = fc_stream_capture(s);
	struct fc_graph *g = slot ? *slot : NULL;

	TRY(cuStreamIsCapturing(s, st));
	if (!g)
		return CUDA_SUCCESS;
	if (id)
		*id = g->id;
	if (graph)
		*graph = (CUgraph)g;
	if (deps)
		*deps = NULL;
	if (edges)
		*edges = NULL;
	if (ndeps)
		*ndeps = g->n ? 1 : 0;
	return CUDA_SUCCESS;
}

static CUresult check_graph(const void *g, int kind)
{
	TRY(fc_need_init());
	return fc_obj_has(g, kind) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuGraphCreate(CUgraph *pg, unsigned int flags)
{
	TRY(fc_need_init());
	CHECK_ARG(pg && !flags);
	CHECK(*pg = (CUgraph)graph_new(), CUDA_ERROR_OUT_OF_MEMORY);
	return CUDA_SUCCESS;
}

/* A copy of g as kind (a clone, or an executable). */
static CUresult graph_copy(struct fc_graph *g, struct fc_graph **out, int kind)
{
	struct fc_graph *c = graph_new();
	const struct fc_kernel *k;

	CHECK(c, CUDA_ERROR_OUT_OF_MEMORY);
	if (kind != FC_GRAPH) {
		fc_obj_del(c, FC_GRAPH);
		fc_obj_add(c, kind, NULL, graph_free);
	}
	for (unsigned i = 0; i < g->n; i++) {
		TRY(fc_func(g->nodes[i].f, &k, NULL, NULL));
		TRY(graph_add(c, &g->nodes[i], node_bytes(&g->nodes[i], k)));
	}
	*out = c;
	return CUDA_SUCCESS;
}

CUresult cuGraphClone(CUgraph *pc, CUgraph g)
{
	TRY(check_graph(g, FC_GRAPH));
	CHECK_ARG(pc);
	return graph_copy((struct fc_graph *)g, (struct fc_graph **)pc, FC_GRAPH);
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *pe, CUgraph g, unsigned long long flags)
{
	TRY(check_graph(g, FC_GRAPH));
	CHECK_ARG(pe);
	return graph_copy((struct fc_graph *)g, (struct fc_graph **)pe, FC_GRAPH_EXEC);
}

CUresult cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *count)
{
	TRY(check_graph(g, FC_GRAPH));
	CHECK_ARG(count && !nodes);
	*count = ((struct fc_graph *)g)->n;
	return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec e, CUstream s)
{
	struct fc_graph *g = (struct fc_graph *)e;

	TRY(check_graph(e, FC_GRAPH_EXEC));
	TRY(fc_check_stream(s));
	for (unsigned i = 0; i < g->n; i++) {
		struct node *n = &g->nodes[i];
		void *params[FC_MAX_PARAMS];

		for (int p = 0; p < n->nparams; p++)
			params[p] = n->values + n->offs[p];
		TRY(cuLaunchKernel(n->f, n->grid.x, n->grid.y, n->grid.z, n->block.x, n->block.y, n->block.z,
				   n->shmem, s, params, NULL));
	}
	return CUDA_SUCCESS;
}

CUresult cuGraphUpload(CUgraphExec e, CUstream s)
{
	TRY(check_graph(e, FC_GRAPH_EXEC));
	return fc_check_stream(s);
}

CUresult cuGraphExecDestroy(CUgraphExec e)
{
	TRY(check_graph(e, FC_GRAPH_EXEC));
	fc_obj_del(e, FC_GRAPH_EXEC);
	graph_free(e);
	return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph g)
{
	TRY(check_graph(g, FC_GRAPH));
	fc_obj_del(g, FC_GRAPH);
	graph_free(g);
	return CUDA_SUCCESS;
}

CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *data)
{
	TRY(fc_check_stream(s));
	CHECK_ARG(fn);
	fn(data);
	return CUDA_SUCCESS;
}

CUresult cuStreamAddCallback(CUstream s, CUstreamCallback cb, void *data, unsigned int flags)
{
	TRY(fc_check_stream(s));
	CHECK_ARG(cb && !flags);
	cb(s, CUDA_SUCCESS, data);
	return CUDA_SUCCESS;
}

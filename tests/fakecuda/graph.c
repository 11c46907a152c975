/*
 * Stream capture, graphs and host functions of the stand-in.  A graph is
 * a list of nodes, each with the nodes it depends on (read and edited
 * below); launching an executable runs every node after its
 * dependencies.  A capturing stream records kernel launches (with copies
 * of their parameter values) as a chain of kernel nodes; other work on a
 * capturing stream fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED.  A
 * host function or stream callback runs before its call returns, like all
 * work of the stand-in. A conditional node owns its body graphs and runs
 * them by its handle's value, which a kernel sets (fc_cond_set, as device
 * code calls cudaGraphSetConditional).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fakecuda.h"

/* A node: its type, its parameters (a kernel's values copied), the
 * nodes it depends on. Node handles are these structs. */
struct node {
	struct fc_graph *g;
	CUgraphNodeType type;
	int enabled;
	struct node **deps;
	unsigned ndeps;
	CUfunction f;
	struct fc_dim grid, block;
	unsigned shmem;
	int nparams;
	char *values;
	size_t offs[FC_MAX_PARAMS];
	CUDA_MEMSET_NODE_PARAMS ms;
	CUDA_MEMCPY3D mc;
	CUDA_HOST_NODE_PARAMS host;
	CUevent event;
	struct fc_graph *child;
	struct fc_graph **bodies;            /* a conditional's */
	CUDA_CONDITIONAL_NODE_PARAMS cond;
	CUdeviceptr dptr;
	size_t bytes;
	struct node *origin;                 /* a clone's: the node it copies */
};

struct fc_graph {
	struct node **nodes;
	unsigned n, cap;
	unsigned long long id;
	struct node *last;                   /* a capture's: its latest node */
	struct fc_graph *origin;             /* an executable's: its graph */
};

/* A conditional handle: its value, and what a launch of its graph resets
 * it to (CU_GRAPH_COND_ASSIGN_DEFAULT). */
struct fc_cond {
	struct fc_graph *g;
	unsigned value, dflt, flags;
	struct fc_cond *next;
};
static struct fc_cond *conds;

static unsigned long long next_capture_id = 1;

static void graph_free(void *p);

static void bodies_free(struct node *n)
{
	for (unsigned i = 0; n->bodies && i < n->cond.size; i++) {
		fc_obj_del(n->bodies[i], FC_GRAPH);
		graph_free(n->bodies[i]);
	}
	free(n->bodies);
	n->bodies = NULL;
}

static void node_free(struct node *n)
{
	if (!n)
		return;
	bodies_free(n);
	fc_obj_del(n, FC_NODE);
	free(n->values);
	free(n->deps);
	free(n);
}

static void graph_free(void *p)
{
	struct fc_graph *g = p;

	fc_userobj_gone(g);

	for (unsigned i = 0; g && i < g->n; i++) {
		if (g->nodes[i]->child) {
			fc_obj_del(g->nodes[i]->child, FC_GRAPH);
			graph_free(g->nodes[i]->child);
		}
		node_free(g->nodes[i]);
	}
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

static CUresult check_graph(const void *g, int kind)
{
	TRY(fc_need_init());
	return g && fc_obj_has(g, kind) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult check_node(const void *n)
{
	TRY(fc_need_init());
	return n && fc_obj_has(n, FC_NODE) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static size_t kernel_bytes(const struct node *n)
{
	const struct fc_kernel *k;

	if (!n->nparams || fc_func(n->f, &k, NULL, NULL))
		return 0;
	return n->offs[n->nparams - 1] + k->sizes[n->nparams - 1];
}

/* Appends a copy of n to g, depending on deps (each a node of g). */
static CUresult graph_add(struct fc_graph *g, const struct node *n, struct node *const *deps, unsigned ndeps,
			  struct node **out)
{
	struct node *c = malloc(sizeof(*c));
	size_t bytes = n->type == CU_GRAPH_NODE_TYPE_KERNEL ? kernel_bytes(n) : 0;

	CHECK(c, CUDA_ERROR_OUT_OF_MEMORY);
	*c = *n;
	c->g = g;
	c->enabled = 1;
	c->values = malloc(bytes + 1);
	c->deps = malloc((ndeps + 1) * sizeof(*deps));
	if (!c->values || !c->deps || g->n == g->cap) {
		unsigned cap = g->cap ? 2 * g->cap : 16;
		struct node **p = c->values && c->deps ? realloc(g->nodes, cap * sizeof(*p)) : NULL;
		if (!p) {
			free(c->values), free(c->deps), free(c);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		g->nodes = p;
		g->cap = cap;
	}
	if (bytes)
		memcpy(c->values, n->values, bytes);
	memcpy(c->deps, deps, ndeps * sizeof(*deps));
	c->ndeps = ndeps;
	if (fc_obj_add(c, FC_NODE, NULL, NULL)) {
		free(c->values), free(c->deps), free(c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	g->nodes[g->n++] = c;
	if (out)
		*out = c;
	return CUDA_SUCCESS;
}

CUresult fc_capture_launch(struct fc_graph *g, CUfunction f, const struct fc_kernel *k, struct fc_dim grid,
			   struct fc_dim block, unsigned shmem, void **args)
{
	char values[FC_MAX_PARAMS * 64];
	struct node n = { .type = CU_GRAPH_NODE_TYPE_KERNEL, .f = f, .grid = grid, .block = block, .shmem = shmem,
			  .nparams = k->nparams, .values = values };
	size_t at = 0;

	for (int i = 0; i < k->nparams; i++) {
		at = fc_param_offset(k, i);
		CHECK_ARG(at + k->sizes[i] <= sizeof(values));
		memcpy(values + at, args[i], k->sizes[i]);
		n.offs[i] = at;
	}
	return graph_add(g, &n, &g->last, g->last ? 1 : 0, &g->last);
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

CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph graph, const CUgraphNode *deps, const CUgraphEdgeData *edges,
				     size_t n, CUstreamCaptureMode mode)
{
	struct fc_graph **slot = fc_stream_capture(s);

	TRY(check_graph(graph, FC_GRAPH));
	CHECK(slot, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CHECK(!*slot, CUDA_ERROR_ILLEGAL_STATE);
	CHECK_ARG(n <= 1 && (!n || deps));
	*slot = (struct fc_graph *)graph;
	(*slot)->id = next_capture_id++;
	(*slot)->last = n ? (struct node *)deps[0] : NULL;
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

/* The thread's capture mode: kept, though no call here is forbidden by it. */
CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	static __thread CUstreamCaptureMode current = CU_STREAM_CAPTURE_MODE_GLOBAL;
	CUstreamCaptureMode old = current;

	CHECK_ARG(mode && (unsigned)*mode <= CU_STREAM_CAPTURE_MODE_RELAXED);
	current = *mode;
	*mode = old;
	return CUDA_SUCCESS;
}

/* A capture's dependency is its latest node (captures are linear here). */
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
		*deps = (const CUgraphNode *)&g->last;
	if (edges)
		*edges = NULL;
	if (ndeps)
		*ndeps = g->last ? 1 : 0;
	return CUDA_SUCCESS;
}

CUresult cuStreamUpdateCaptureDependencies_v2(CUstream s, CUgraphNode *deps, const CUgraphEdgeData *edges, size_t n,
					      unsigned int flags)
{
	struct fc_graph **slot = fc_stream_capture(s);

	TRY(fc_need_init());
	CHECK(slot && *slot, CUDA_ERROR_ILLEGAL_STATE);
	CHECK_ARG(n <= 1 && (!n || deps) && flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES);
	(*slot)->last = n ? (struct node *)deps[0] : NULL;
	return CUDA_SUCCESS;
}

CUresult cuGraphCreate(CUgraph *pg, unsigned int flags)
{
	TRY(fc_need_init());
	CHECK_ARG(pg && !flags);
	CHECK(*pg = (CUgraph)graph_new(), CUDA_ERROR_OUT_OF_MEMORY);
	return CUDA_SUCCESS;
}

static struct node *find_copy(struct fc_graph *g, const struct node *origin)
{
	for (unsigned i = 0; i < g->n; i++)
		if (g->nodes[i]->origin == origin)
			return g->nodes[i];
	return NULL;
}

static CUresult graph_copy(struct fc_graph *g, struct fc_graph **out, int kind);

static struct fc_graph *graph_new(void);

/* A conditional node: its handle must exist; its bodies are made here and
 * handed out through phGraph_out, as the driver does. */
static CUresult cond_in(CUgraphNodeParams *p, struct node *n)
{
	CUDA_CONDITIONAL_NODE_PARAMS *c = &p->conditional;
	struct fc_cond *h = conds;

	while (h && (CUgraphConditionalHandle)(uintptr_t)h != c->handle)
		h = h->next;
	CHECK_ARG(h && c->size && c->type <= CU_GRAPH_COND_TYPE_SWITCH);
	CHECK_ARG(c->type == CU_GRAPH_COND_TYPE_SWITCH || c->size <= (c->type == CU_GRAPH_COND_TYPE_IF ? 2u : 1u));
	CHECK(n->bodies = calloc(c->size, sizeof(*n->bodies)), CUDA_ERROR_OUT_OF_MEMORY);
	n->cond = *c;
	for (unsigned i = 0; i < c->size; i++)
		if (!(n->bodies[i] = graph_new())) {
			n->cond.size = i;
			bodies_free(n);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
	n->cond.phGraph_out = c->phGraph_out = (CUgraph *)n->bodies;
	return CUDA_SUCCESS;
}

/* Node params -> a node (children are copied, as the driver does). */
static CUresult node_in(CUgraphNodeParams *p, struct node *n, char *values)
{
	const struct fc_kernel *k;

	memset(n, 0, sizeof(*n));
	n->type = p->type;
	switch (p->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		n->f = p->kernel.func ? p->kernel.func : (CUfunction)p->kernel.kern;
		TRY(fc_func(n->f, &k, NULL, NULL));
		CHECK_ARG(p->kernel.kernelParams || !k->nparams);
		n->grid = (struct fc_dim){ p->kernel.gridDimX, p->kernel.gridDimY, p->kernel.gridDimZ };
		n->block = (struct fc_dim){ p->kernel.blockDimX, p->kernel.blockDimY, p->kernel.blockDimZ };
		n->shmem = p->kernel.sharedMemBytes;
		n->nparams = k->nparams;
		n->values = values;
		for (int i = 0; i < k->nparams; i++) {
			n->offs[i] = fc_param_offset(k, i);
			CHECK_ARG(n->offs[i] + k->sizes[i] <= FC_MAX_PARAMS * 64);
			memcpy(values + n->offs[i], p->kernel.kernelParams[i], k->sizes[i]);
		}
		return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_MEMSET:
		CHECK_ARG(p->memset.elementSize == 1 || p->memset.elementSize == 2 || p->memset.elementSize == 4);
		n->ms.dst = p->memset.dst, n->ms.pitch = p->memset.pitch, n->ms.value = p->memset.value;
		n->ms.elementSize = p->memset.elementSize, n->ms.width = p->memset.width;
		n->ms.height = p->memset.height;
		return fc_range_check(p->memset.dst, p->memset.width * p->memset.elementSize);
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		n->mc = p->memcpy.copyParams;
		return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_HOST:
		CHECK_ARG(p->host.fn);
		n->host.fn = p->host.fn, n->host.userData = p->host.userData;
		return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
		n->event = p->type == CU_GRAPH_NODE_TYPE_WAIT_EVENT ? p->eventWait.event : p->eventRecord.event;
		return n->event ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	case CU_GRAPH_NODE_TYPE_GRAPH:
		TRY(check_graph(p->graph.graph, FC_GRAPH));
		return graph_copy((struct fc_graph *)p->graph.graph, &n->child, FC_GRAPH);
	case CU_GRAPH_NODE_TYPE_EMPTY:
		return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
		n->bytes = p->alloc.bytesize;
		return cuMemAlloc_v2(&n->dptr, n->bytes ? n->bytes : 1);
	case CU_GRAPH_NODE_TYPE_MEM_FREE:
		n->dptr = p->free.dptr;
		return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_CONDITIONAL:
		return cond_in(p, n);
	default:
		return CUDA_ERROR_NOT_SUPPORTED;
	}
}

CUresult cuGraphAddNode_v2(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps, const CUgraphEdgeData *edges,
			   size_t ndeps, CUgraphNodeParams *p)
{
	char values[FC_MAX_PARAMS * 64];
	struct node n;

	TRY(check_graph(graph, FC_GRAPH));
	CHECK_ARG(out && p && (!ndeps || deps));
	for (size_t i = 0; i < ndeps; i++) {
		TRY(check_node(deps[i]));
		CHECK_ARG(((struct node *)deps[i])->g == (struct fc_graph *)graph);
	}
	TRY(node_in(p, &n, values));
	if (p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
		p->alloc.dptr = n.dptr;
	return graph_add((struct fc_graph *)graph, &n, (struct node *const *)deps, (unsigned)ndeps,
			 (struct node **)out);
}

static CUresult bodies_copy(const struct node *o, struct node *made)
{
	CHECK(made->bodies = calloc(o->cond.size, sizeof(*made->bodies)), CUDA_ERROR_OUT_OF_MEMORY);
	for (unsigned i = 0; i < o->cond.size; i++)
		TRY(graph_copy(o->bodies[i], &made->bodies[i], FC_GRAPH));
	made->cond.phGraph_out = (CUgraph *)made->bodies;
	return CUDA_SUCCESS;
}

/* A copy of g as kind (a clone, or an executable); nodes remember their
 * origin, for cuGraphNodeFindInClone and the executable's setters. */
static CUresult graph_copy(struct fc_graph *g, struct fc_graph **out, int kind)
{
	struct fc_graph *c = graph_new();

	CHECK(c, CUDA_ERROR_OUT_OF_MEMORY);
	if (kind != FC_GRAPH) {
		fc_obj_del(c, FC_GRAPH);
		fc_obj_add(c, kind, NULL, graph_free);
	}
	for (unsigned i = 0; i < g->n; i++) {
		struct node *o = g->nodes[i], *deps[64], *made;
		CHECK_ARG(o->ndeps <= 64);
		for (unsigned d = 0; d < o->ndeps; d++)
			deps[d] = find_copy(c, o->deps[d]);
		TRY(graph_add(c, o, deps, o->ndeps, &made));
		made->origin = o;
		made->enabled = o->enabled;
		if (o->child)
			TRY(graph_copy(o->child, &made->child, FC_GRAPH));
		if (o->bodies)
			TRY(bodies_copy(o, made));
	}
	c->origin = g;
	fc_userobj_copy(g, c);
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

CUresult cuGraphNodeFindInClone(CUgraphNode *out, CUgraphNode origin, CUgraph clone)
{
	TRY(check_graph(clone, FC_GRAPH));
	TRY(check_node(origin));
	CHECK_ARG(out);
	CHECK_ARG(*out = (CUgraphNode)find_copy((struct fc_graph *)clone, (struct node *)origin));
	return CUDA_SUCCESS;
}

/* --- running: every node after its dependencies --- */

static CUresult run_graph(struct fc_graph *g, CUstream s);

void fc_cond_set(CUgraphConditionalHandle h, unsigned value)
{
	for (struct fc_cond *c = conds; c; c = c->next)
		if ((CUgraphConditionalHandle)(uintptr_t)c == h)
			c->value = value;
}

static CUresult run_conditional(struct node *n, CUstream s)
{
	struct fc_cond *c = (struct fc_cond *)(uintptr_t)n->cond.handle;

	switch (n->cond.type) {
	case CU_GRAPH_COND_TYPE_IF:
		if (c->value || n->cond.size == 2)
			return run_graph(n->bodies[c->value ? 0 : 1], s);
		return CUDA_SUCCESS;
	case CU_GRAPH_COND_TYPE_WHILE:
		while (c->value)
			TRY(run_graph(n->bodies[0], s));
		return CUDA_SUCCESS;
	default:
		return c->value < n->cond.size ? run_graph(n->bodies[c->value], s) : CUDA_SUCCESS;
	}
}

/* A launch gives the handles of its graph that ask for it their default. */
static void conds_reset(struct fc_graph *g)
{
	for (struct fc_cond *c = conds; c; c = c->next)
		if (c->g == g && (c->flags & CU_GRAPH_COND_ASSIGN_DEFAULT))
			c->value = c->dflt;
}

CUresult cuGraphConditionalHandleCreate(CUgraphConditionalHandle *out, CUgraph graph, CUcontext ctx,
					unsigned int dflt, unsigned int flags)
{
	struct fc_cond *c;

	TRY(check_graph(graph, FC_GRAPH));
	CHECK_ARG(out && !(flags & ~CU_GRAPH_COND_ASSIGN_DEFAULT));
	CHECK(c = calloc(1, sizeof(*c)), CUDA_ERROR_OUT_OF_MEMORY);
	*c = (struct fc_cond){ (struct fc_graph *)graph, dflt, dflt, flags, conds };
	conds = c;
	*out = (CUgraphConditionalHandle)(uintptr_t)c;
	return CUDA_SUCCESS;
}

static CUresult run_node(struct node *n, CUstream s)
{
	void *params[FC_MAX_PARAMS];

	if (!n->enabled)
		return CUDA_SUCCESS;
	switch (n->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		for (int p = 0; p < n->nparams; p++)
			params[p] = n->values + n->offs[p];
		return cuLaunchKernel(n->f, n->grid.x, n->grid.y, n->grid.z, n->block.x, n->block.y, n->block.z,
				      n->shmem, s, params, NULL);
	case CU_GRAPH_NODE_TYPE_MEMSET:
		for (size_t r = 0; r < (n->ms.height ? n->ms.height : 1); r++) {
			CUdeviceptr row = n->ms.dst + r * n->ms.pitch;
			CUresult e = n->ms.elementSize == 1 ? cuMemsetD8_v2(row, (unsigned char)n->ms.value, n->ms.width) :
				     n->ms.elementSize == 2 ? cuMemsetD16_v2(row, (unsigned short)n->ms.value, n->ms.width) :
							      cuMemsetD32_v2(row, n->ms.value, n->ms.width);
			TRY(e);
		}
		return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		return cuMemcpy3D_v2(&n->mc);
	case CU_GRAPH_NODE_TYPE_HOST:
		n->host.fn(n->host.userData);
		return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
		return cuEventRecord(n->event, s);
	case CU_GRAPH_NODE_TYPE_GRAPH:
		return run_graph(n->child, s);
	case CU_GRAPH_NODE_TYPE_CONDITIONAL:
		return run_conditional(n, s);
	default:
		return CUDA_SUCCESS;
	}
}

static CUresult run_graph(struct fc_graph *g, CUstream s)
{
	char *done = calloc(g->n + 1, 1);
	unsigned left = g->n, progress = 1;
	CUresult err = CUDA_SUCCESS;

	CHECK(done, CUDA_ERROR_OUT_OF_MEMORY);
	while (left && progress && !err) {
		progress = 0;
		for (unsigned i = 0; i < g->n && !err; i++) {
			struct node *n = g->nodes[i];
			unsigned ready = !done[i];
			for (unsigned d = 0; d < n->ndeps && ready; d++)
				for (unsigned j = 0; j < g->n; j++)
					if (g->nodes[j] == n->deps[d] && !done[j])
						ready = 0;
			if (ready) {
				err = run_node(n, s);
				done[i] = 1;
				left--;
				progress = 1;
			}
		}
	}
	free(done);
	return err ? err : left ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec e, CUstream s)
{
	TRY(check_graph(e, FC_GRAPH_EXEC));
	TRY(fc_check_stream(s));
	conds_reset(((struct fc_graph *)e)->origin);
	return run_graph((struct fc_graph *)e, s);
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

/* --- reading and editing graphs --- */

static CUresult list_out(struct node **src, size_t have, CUgraphNode *out, size_t *n)
{
	CHECK_ARG(n);
	if (!out) {
		*n = have;
		return CUDA_SUCCESS;
	}
	for (size_t i = 0; i < *n; i++)
		out[i] = i < have ? (CUgraphNode)src[i] : NULL;
	if (have < *n)
		*n = have;
	return CUDA_SUCCESS;
}

CUresult cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *count)
{
	TRY(check_graph(g, FC_GRAPH));
	return list_out(((struct fc_graph *)g)->nodes, ((struct fc_graph *)g)->n, nodes, count);
}

CUresult cuGraphGetRootNodes(CUgraph graph, CUgraphNode *nodes, size_t *count)
{
	struct fc_graph *g = (struct fc_graph *)graph;
	struct node *roots[1024];
	size_t n = 0;

	TRY(check_graph(graph, FC_GRAPH));
	for (unsigned i = 0; i < g->n && n < 1024; i++)
		if (!g->nodes[i]->ndeps)
			roots[n++] = g->nodes[i];
	return list_out(roots, n, nodes, count);
}

/* Edges: every (dependency, node) pair, in node order. */
CUresult cuGraphGetEdges_v2(CUgraph graph, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *edges, size_t *count)
{
	struct fc_graph *g = (struct fc_graph *)graph;
	size_t n = 0;

	TRY(check_graph(graph, FC_GRAPH));
	CHECK_ARG(count && (!from) == (!to));
	for (unsigned i = 0; i < g->n; i++)
		for (unsigned d = 0; d < g->nodes[i]->ndeps; d++, n++)
			if (from && n < *count) {
				from[n] = (CUgraphNode)g->nodes[i]->deps[d];
				to[n] = (CUgraphNode)g->nodes[i];
				if (edges)
					memset(&edges[n], 0, sizeof(*edges));
			}
	if (!from || n < *count)
		*count = n;
	return CUDA_SUCCESS;
}

CUresult cuGraphNodeGetDependencies_v2(CUgraphNode node, CUgraphNode *deps, CUgraphEdgeData *edges, size_t *count)
{
	struct node *n = (struct node *)node;

	TRY(check_node(node));
	for (size_t i = 0; edges && count && i < *count && i < n->ndeps; i++)
		memset(&edges[i], 0, sizeof(*edges));
	return list_out(n->deps, n->ndeps, deps, count);
}

CUresult cuGraphNodeGetDependentNodes_v2(CUgraphNode node, CUgraphNode *out, CUgraphEdgeData *edges, size_t *count)
{
	struct node *n = (struct node *)node, *dependents[1024];
	size_t k = 0;

	TRY(check_node(node));
	for (unsigned i = 0; i < n->g->n; i++)
		for (unsigned d = 0; d < n->g->nodes[i]->ndeps && k < 1024; d++)
			if (n->g->nodes[i]->deps[d] == n)
				dependents[k++] = n->g->nodes[i];
	for (size_t i = 0; edges && count && i < *count && i < k; i++)
		memset(&edges[i], 0, sizeof(*edges));
	return list_out(dependents, k, out, count);
}

static CUresult edit_edge(struct node *from, struct node *to, int add)
{
	struct node **d;

	for (unsigned i = 0; i < to->ndeps; i++)
		if (to->deps[i] == from) {
			CHECK_ARG(!add);
			to->deps[i] = to->deps[--to->ndeps];
			return CUDA_SUCCESS;
		}
	CHECK_ARG(add);
	CHECK(d = realloc(to->deps, (to->ndeps + 1) * sizeof(*d)), CUDA_ERROR_OUT_OF_MEMORY);
	to->deps = d;
	d[to->ndeps++] = from;
	return CUDA_SUCCESS;
}

static CUresult edit_edges(CUgraph g, const CUgraphNode *from, const CUgraphNode *to, size_t n, int add)
{
	TRY(check_graph(g, FC_GRAPH));
	CHECK_ARG(!n || (from && to));
	for (size_t i = 0; i < n; i++) {
		TRY(check_node(from[i]));
		TRY(check_node(to[i]));
		CHECK_ARG(from[i] != to[i]);
		TRY(edit_edge((struct node *)from[i], (struct node *)to[i], add));
	}
	return CUDA_SUCCESS;
}

CUresult cuGraphAddDependencies_v2(CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
				   const CUgraphEdgeData *edges, size_t n)
{
	return edit_edges(g, from, to, n, 1);
}

CUresult cuGraphRemoveDependencies_v2(CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
				      const CUgraphEdgeData *edges, size_t n)
{
	return edit_edges(g, from, to, n, 0);
}

CUresult cuGraphDestroyNode(CUgraphNode node)
{
	struct node *n = (struct node *)node;
	struct fc_graph *g;

	TRY(check_node(node));
	g = n->g;
	for (unsigned i = 0; i < g->n; i++) {
		struct node *o = g->nodes[i];
		for (unsigned d = 0; d < o->ndeps;)
			o->deps[d] == n ? (void)(o->deps[d] = o->deps[--o->ndeps]) : (void)d++;
		if (o == n)
			g->nodes[i--] = g->nodes[--g->n];
	}
	if (n->child) {
		fc_obj_del(n->child, FC_GRAPH);
		graph_free(n->child);
	}
	node_free(n);
	return CUDA_SUCCESS;
}

CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType *type)
{
	TRY(check_node(node));
	CHECK_ARG(type);
	*type = ((struct node *)node)->type;
	return CUDA_SUCCESS;
}

static CUresult exec_node(CUgraphExec e, CUgraphNode node, struct node **out)
{
	TRY(check_graph(e, FC_GRAPH_EXEC));
	TRY(check_node(node));
	CHECK_ARG(*out = find_copy((struct fc_graph *)e, (struct node *)node));
	return CUDA_SUCCESS;
}

CUresult cuGraphNodeSetEnabled(CUgraphExec e, CUgraphNode node, unsigned int on)
{
	struct node *n;

	TRY(exec_node(e, node, &n));
	n->enabled = on != 0;
	return CUDA_SUCCESS;
}

CUresult cuGraphNodeGetEnabled(CUgraphExec e, CUgraphNode node, unsigned int *on)
{
	struct node *n;

	TRY(exec_node(e, node, &n));
	CHECK_ARG(on);
	*on = (unsigned)n->enabled;
	return CUDA_SUCCESS;
}

static CUresult typed(CUgraphNode node, CUgraphNodeType type, struct node **out)
{
	TRY(check_node(node));
	*out = (struct node *)node;
	return (*out)->type == type ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS *p)
{
	static void *ptrs[FC_MAX_PARAMS];
	struct node *n;

	TRY(typed(node, CU_GRAPH_NODE_TYPE_KERNEL, &n));
	CHECK_ARG(p);
	memset(p, 0, sizeof(*p));
	p->func = n->f;
	p->gridDimX = n->grid.x, p->gridDimY = n->grid.y, p->gridDimZ = n->grid.z;
	p->blockDimX = n->block.x, p->blockDimY = n->block.y, p->blockDimZ = n->block.z;
	p->sharedMemBytes = n->shmem;
	for (int i = 0; i < n->nparams; i++)
		ptrs[i] = n->values + n->offs[i];
	p->kernelParams = ptrs;
	return CUDA_SUCCESS;
}

CUresult cuGraphMemsetNodeGetParams(CUgraphNode node, CUDA_MEMSET_NODE_PARAMS *p)
{
	struct node *n;

	TRY(typed(node, CU_GRAPH_NODE_TYPE_MEMSET, &n));
	CHECK_ARG(p);
	*p = n->ms;
	return CUDA_SUCCESS;
}

CUresult cuGraphMemcpyNodeGetParams(CUgraphNode node, CUDA_MEMCPY3D *p)
{
	struct node *n;

	TRY(typed(node, CU_GRAPH_NODE_TYPE_MEMCPY, &n));
	CHECK_ARG(p);
	*p = n->mc;
	return CUDA_SUCCESS;
}

CUresult cuGraphHostNodeGetParams(CUgraphNode node, CUDA_HOST_NODE_PARAMS *p)
{
	struct node *n;

	TRY(typed(node, CU_GRAPH_NODE_TYPE_HOST, &n));
	CHECK_ARG(p);
	*p = n->host;
	return CUDA_SUCCESS;
}

CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph *g)
{
	struct node *n;

	TRY(typed(node, CU_GRAPH_NODE_TYPE_GRAPH, &n));
	CHECK_ARG(g);
	*g = (CUgraph)n->child;
	return CUDA_SUCCESS;
}

CUresult cuGraphEventRecordNodeGetEvent(CUgraphNode node, CUevent *e)
{
	struct node *n;

	TRY(typed(node, CU_GRAPH_NODE_TYPE_EVENT_RECORD, &n));
	CHECK_ARG(e);
	*e = n->event;
	return CUDA_SUCCESS;
}

CUresult cuGraphEventWaitNodeGetEvent(CUgraphNode node, CUevent *e)
{
	struct node *n;

	TRY(typed(node, CU_GRAPH_NODE_TYPE_WAIT_EVENT, &n));
	CHECK_ARG(e);
	*e = n->event;
	return CUDA_SUCCESS;
}

static CUresult set_event(CUgraphNode node, CUgraphNodeType type, CUevent e)
{
	struct node *n;

	TRY(typed(node, type, &n));
	CHECK_ARG(e);
	n->event = e;
	return CUDA_SUCCESS;
}

CUresult cuGraphEventRecordNodeSetEvent(CUgraphNode node, CUevent e)
{
	return set_event(node, CU_GRAPH_NODE_TYPE_EVENT_RECORD, e);
}

CUresult cuGraphEventWaitNodeSetEvent(CUgraphNode node, CUevent e)
{
	return set_event(node, CU_GRAPH_NODE_TYPE_WAIT_EVENT, e);
}

CUresult cuGraphExecEventRecordNodeSetEvent(CUgraphExec x, CUgraphNode node, CUevent e)
{
	struct node *n;

	TRY(exec_node(x, node, &n));
	return set_event((CUgraphNode)n, CU_GRAPH_NODE_TYPE_EVENT_RECORD, e);
}

CUresult cuGraphExecEventWaitNodeSetEvent(CUgraphExec x, CUgraphNode node, CUevent e)
{
	struct node *n;

	TRY(exec_node(x, node, &n));
	return set_event((CUgraphNode)n, CU_GRAPH_NODE_TYPE_WAIT_EVENT, e);
}

CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec x, CUgraphNode node, CUgraph child)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_GRAPH, .graph.graph = child };

	return cuGraphExecNodeSetParams(x, node, &p);
}

CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
	struct node *n;

	TRY(typed(node, CU_GRAPH_NODE_TYPE_MEM_ALLOC, &n));
	CHECK_ARG(p);
	memset(p, 0, sizeof(*p));
	p->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	p->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p->bytesize = n->bytes;
	p->dptr = n->dptr;
	return CUDA_SUCCESS;
}

CUresult cuGraphMemFreeNodeGetParams(CUgraphNode node, CUdeviceptr *d)
{
	struct node *n;

	TRY(typed(node, CU_GRAPH_NODE_TYPE_MEM_FREE, &n));
	CHECK_ARG(d);
	*d = n->dptr;
	return CUDA_SUCCESS;
}

/* Replaces n's parameters with p's (same type). */
static CUresult reset(struct node *n, CUgraphNodeParams *p)
{
	char values[FC_MAX_PARAMS * 64];
	struct node fresh;
	size_t bytes;

	CHECK_ARG(p && p->type == n->type);
	CHECK(p->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC && p->type != CU_GRAPH_NODE_TYPE_MEM_FREE &&
	      p->type != CU_GRAPH_NODE_TYPE_CONDITIONAL, CUDA_ERROR_NOT_SUPPORTED);
	TRY(node_in(p, &fresh, values));
	bytes = p->type == CU_GRAPH_NODE_TYPE_KERNEL ? kernel_bytes(&fresh) : 0;
	if (bytes) {
		char *v = realloc(n->values, bytes);
		CHECK(v, CUDA_ERROR_OUT_OF_MEMORY);
		memcpy(v, values, bytes);
		fresh.values = v;
	} else {
		fresh.values = n->values;
	}
	if (n->child) {
		fc_obj_del(n->child, FC_GRAPH);
		graph_free(n->child);
	}
	fresh.g = n->g, fresh.enabled = n->enabled, fresh.deps = n->deps, fresh.ndeps = n->ndeps;
	fresh.origin = n->origin;
	*n = fresh;
	return CUDA_SUCCESS;
}

CUresult cuGraphNodeSetParams(CUgraphNode node, CUgraphNodeParams *p)
{
	TRY(check_node(node));
	return reset((struct node *)node, p);
}

CUresult cuGraphExecNodeSetParams(CUgraphExec x, CUgraphNode node, CUgraphNodeParams *p)
{
	struct node *n;

	TRY(exec_node(x, node, &n));
	return reset(n, p);
}

/* Whether e (an executable's graph, or a child of one) has g's shape, its
 * children's included. */
static int update_fits(struct fc_graph *e, struct fc_graph *g, CUgraphExecUpdateResultInfo *info)
{
	if (e->n != g->n) {
		info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
		return 0;
	}
	for (unsigned i = 0; i < g->n; i++) {
		struct node *n = e->nodes[i], *o = g->nodes[i];
		if (n->type != o->type || n->ndeps != o->ndeps || (!n->child != !o->child) ||
		    (n->child && !update_fits(n->child, o->child, info))) {
			info->result = n->type != o->type ? CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED :
							    CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
			info->errorNode = (CUgraphNode)o;
			return 0;
		}
	}
	return 1;
}

static CUresult update_apply(struct fc_graph *e, struct fc_graph *g);

/* An update takes the graph's parameters when its shape matches (child
 * graphs' nodes too, as the driver's does). */
CUresult cuGraphExecUpdate_v2(CUgraphExec x, CUgraph graph, CUgraphExecUpdateResultInfo *info)
{
	struct fc_graph *e = (struct fc_graph *)x, *g = (struct fc_graph *)graph;

	TRY(check_graph(x, FC_GRAPH_EXEC));
	TRY(check_graph(graph, FC_GRAPH));
	CHECK_ARG(info);
	memset(info, 0, sizeof(*info));
	if (!update_fits(e, g, info))
		return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
	TRY(update_apply(e, g));
	info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
	return CUDA_SUCCESS;
}

static CUresult update_apply(struct fc_graph *e, struct fc_graph *g)
{
	for (unsigned i = 0; i < g->n; i++) {
		struct node *n = e->nodes[i], *o = g->nodes[i];
		size_t bytes = kernel_bytes(o);
		char *v = n->values;
		if (bytes && !(v = realloc(n->values, bytes)))
			return CUDA_ERROR_OUT_OF_MEMORY;
		if (bytes)
			memcpy(v, o->values, bytes);
		n->f = o->f, n->grid = o->grid, n->block = o->block, n->shmem = o->shmem, n->nparams = o->nparams;
		memcpy(n->offs, o->offs, sizeof(n->offs));
		n->values = v, n->ms = o->ms, n->mc = o->mc, n->host = o->host, n->event = o->event;
		n->origin = o;
		if (n->child)
			TRY(update_apply(n->child, o->child));
	}
	return CUDA_SUCCESS;
}

CUresult cuGraphExecGetFlags(CUgraphExec x, cuuint64_t *flags)
{
	TRY(check_graph(x, FC_GRAPH_EXEC));
	CHECK_ARG(flags);
	*flags = 0;
	return CUDA_SUCCESS;
}

CUresult cuGraphDebugDotPrint(CUgraph graph, const char *path, unsigned int flags)
{
	struct fc_graph *g = (struct fc_graph *)graph;
	FILE *f;

	TRY(check_graph(graph, FC_GRAPH));
	CHECK_ARG(path);
	CHECK(f = fopen(path, "w"), CUDA_ERROR_OPERATING_SYSTEM);
	fprintf(f, "digraph fakecuda {\n");
	for (unsigned i = 0; i < g->n; i++) {
		fprintf(f, "\tn%u [label=\"type %d\"];\n", i, (int)g->nodes[i]->type);
		for (unsigned d = 0; d < g->nodes[i]->ndeps; d++)
			for (unsigned j = 0; j < g->n; j++)
				if (g->nodes[j] == g->nodes[i]->deps[d])
					fprintf(f, "\tn%u -> n%u;\n", j, i);
	}
	fprintf(f, "}\n");
	fclose(f);
	return CUDA_SUCCESS;
}

/* Kernel node attributes: none is kept by the stand-in. */
CUresult cuGraphKernelNodeGetAttribute(CUgraphNode node, CUkernelNodeAttrID attr, CUkernelNodeAttrValue *value)
{
	struct node *n;

	TRY(typed(node, CU_GRAPH_NODE_TYPE_KERNEL, &n));
	CHECK_ARG(value);
	memset(value, 0, sizeof(*value));
	return CUDA_SUCCESS;
}

CUresult cuGraphKernelNodeSetAttribute(CUgraphNode node, CUkernelNodeAttrID attr, const CUkernelNodeAttrValue *value)
{
	struct node *n;

	TRY(typed(node, CU_GRAPH_NODE_TYPE_KERNEL, &n));
	CHECK_ARG(value);
	return CUDA_SUCCESS;
}

CUresult cuGraphKernelNodeCopyAttributes(CUgraphNode dst, CUgraphNode src)
{
	struct node *n;

	TRY(typed(dst, CU_GRAPH_NODE_TYPE_KERNEL, &n));
	return typed(src, CU_GRAPH_NODE_TYPE_KERNEL, &n);
}

/* A 1-D copy on a capturing stream: a copy node (0), or 1 if s is not
 * capturing (the caller copies at once). host_src/host_dst say which side
 * is host memory. */
int fc_capture_copy(CUstream s, uintptr_t dst, int host_dst, uintptr_t src, int host_src, size_t n, CUresult *err)
{
	struct fc_graph **slot = fc_stream_capture(s);
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_MEMCPY };
	CUDA_MEMCPY3D *c = &p.memcpy.copyParams;

	if (!slot || !*slot)
		return 1;
	c->srcMemoryType = host_src ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
	c->dstMemoryType = host_dst ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
	c->srcHost = (const void *)src, c->srcDevice = src;
	c->dstHost = (void *)dst, c->dstDevice = dst;
	c->WidthInBytes = n, c->Height = 1, c->Depth = 1;
	*err = cuGraphAddNode_v2((CUgraphNode *)&(*slot)->last, (CUgraph)*slot, (CUgraphNode *)&(*slot)->last, NULL,
				 (*slot)->last ? 1 : 0, &p);
	return 0;
}

/* The stream-ordered allocator: captured, a memory node; else at once. */
CUresult cuMemAllocAsync(CUdeviceptr *d, size_t size, CUstream s)
{
	struct fc_graph **slot = fc_stream_capture(s);
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_MEM_ALLOC, .alloc.bytesize = size };

	CHECK_ARG(d);
	if (!size)
		return CUDA_SUCCESS; /* the real driver: success, *d untouched */
	if (!slot || !*slot) {
		TRY(fc_check_stream(s));
		return cuMemAlloc_v2(d, size);
	}
	TRY(cuGraphAddNode_v2((CUgraphNode *)&(*slot)->last, (CUgraph)*slot, (CUgraphNode *)&(*slot)->last, NULL,
			      (*slot)->last ? 1 : 0, &p));
	*d = p.alloc.dptr;
	return CUDA_SUCCESS;
}

CUresult cuMemFreeAsync(CUdeviceptr d, CUstream s)
{
	struct fc_graph **slot = fc_stream_capture(s);
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_MEM_FREE, .free.dptr = d };

	if (!d)
		return CUDA_SUCCESS; /* the real driver: freeing 0 succeeds */
	if (!slot || !*slot) {
		TRY(fc_check_stream(s));
		return cuMemFree_v2(d);
	}
	return cuGraphAddNode_v2((CUgraphNode *)&(*slot)->last, (CUgraph)*slot, (CUgraphNode *)&(*slot)->last, NULL,
				 (*slot)->last ? 1 : 0, &p);
}

CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *data)
{
	struct fc_graph **slot = fc_stream_capture(s);
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_HOST, .host = { fn, data } };

	CHECK_ARG(fn);
	if (slot && *slot)
		return cuGraphAddNode_v2((CUgraphNode *)&(*slot)->last, (CUgraph)*slot, (CUgraphNode *)&(*slot)->last,
					 NULL, (*slot)->last ? 1 : 0, &p);
	TRY(fc_check_stream(s));
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

/* --- the typed forms of adding and setting nodes --- */

static CUresult add_typed(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n, CUgraphNodeParams *p)
{
	return cuGraphAddNode_v2(out, g, deps, NULL, n, p);
}

static void kernel_params(CUgraphNodeParams *p, const CUDA_KERNEL_NODE_PARAMS *k)
{
	memset(p, 0, sizeof(*p));
	p->type = CU_GRAPH_NODE_TYPE_KERNEL;
	p->kernel.func = k->func, p->kernel.kern = k->kern;
	p->kernel.gridDimX = k->gridDimX, p->kernel.gridDimY = k->gridDimY, p->kernel.gridDimZ = k->gridDimZ;
	p->kernel.blockDimX = k->blockDimX, p->kernel.blockDimY = k->blockDimY, p->kernel.blockDimZ = k->blockDimZ;
	p->kernel.sharedMemBytes = k->sharedMemBytes, p->kernel.kernelParams = k->kernelParams;
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
				 const CUDA_KERNEL_NODE_PARAMS *k)
{
	CUgraphNodeParams p;

	CHECK_ARG(k);
	kernel_params(&p, k);
	return add_typed(out, g, deps, n, &p);
}

CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *k)
{
	CUgraphNodeParams p;

	CHECK_ARG(k);
	kernel_params(&p, k);
	return cuGraphNodeSetParams(node, &p);
}

static void memset_params(CUgraphNodeParams *p, const CUDA_MEMSET_NODE_PARAMS *m)
{
	memset(p, 0, sizeof(*p));
	p->type = CU_GRAPH_NODE_TYPE_MEMSET;
	p->memset.dst = m->dst, p->memset.pitch = m->pitch, p->memset.value = m->value;
	p->memset.elementSize = m->elementSize, p->memset.width = m->width, p->memset.height = m->height;
}

CUresult cuGraphAddMemsetNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
			      const CUDA_MEMSET_NODE_PARAMS *m, CUcontext ctx)
{
	CUgraphNodeParams p;

	CHECK_ARG(m);
	memset_params(&p, m);
	return add_typed(out, g, deps, n, &p);
}

CUresult cuGraphMemsetNodeSetParams(CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS *m)
{
	CUgraphNodeParams p;

	CHECK_ARG(m);
	memset_params(&p, m);
	return cuGraphNodeSetParams(node, &p);
}

CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec x, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS *m,
					CUcontext ctx)
{
	CUgraphNodeParams p;

	CHECK_ARG(m);
	memset_params(&p, m);
	return cuGraphExecNodeSetParams(x, node, &p);
}

CUresult cuGraphAddHostNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
			    const CUDA_HOST_NODE_PARAMS *h)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_HOST };

	CHECK_ARG(h);
	p.host.fn = h->fn, p.host.userData = h->userData;
	return add_typed(out, g, deps, n, &p);
}

CUresult cuGraphAddMemcpyNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
			      const CUDA_MEMCPY3D *c, CUcontext ctx)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_MEMCPY };

	CHECK_ARG(c);
	p.memcpy.copyParams = *c;
	return add_typed(out, g, deps, n, &p);
}

CUresult cuGraphAddChildGraphNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n, CUgraph child)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_GRAPH, .graph.graph = child };

	return add_typed(out, g, deps, n, &p);
}

CUresult cuGraphAddEmptyNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_EMPTY };

	return add_typed(out, g, deps, n, &p);
}

CUresult cuGraphAddEventRecordNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n, CUevent e)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_EVENT_RECORD, .eventRecord.event = e };

	return add_typed(out, g, deps, n, &p);
}

CUresult cuGraphAddMemAllocNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
				CUDA_MEM_ALLOC_NODE_PARAMS *a)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_MEM_ALLOC };

	CHECK_ARG(a);
	p.alloc.bytesize = a->bytesize;
	TRY(add_typed(out, g, deps, n, &p));
	a->dptr = p.alloc.dptr;
	return CUDA_SUCCESS;
}

CUresult cuGraphAddMemFreeNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n, CUdeviceptr d)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_MEM_FREE, .free.dptr = d };

	return add_typed(out, g, deps, n, &p);
}

CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec x, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *k)
{
	CUgraphNodeParams p;

	CHECK_ARG(k);
	kernel_params(&p, k);
	return cuGraphExecNodeSetParams(x, node, &p);
}

CUresult cuGraphMemcpyNodeSetParams(CUgraphNode node, const CUDA_MEMCPY3D *c)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_MEMCPY };

	CHECK_ARG(c);
	p.memcpy.copyParams = *c;
	return cuGraphNodeSetParams(node, &p);
}

CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec x, CUgraphNode node, const CUDA_MEMCPY3D *c, CUcontext ctx)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_MEMCPY };

	CHECK_ARG(c);
	p.memcpy.copyParams = *c;
	return cuGraphExecNodeSetParams(x, node, &p);
}

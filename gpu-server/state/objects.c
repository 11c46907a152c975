/*
 * objects.c: what a checkpoint carries by description rather than by the
 * replay log. CUDA graphs are walked through the driver (nodes as
 * graph_params, edges by index) and built again node by node; an
 * executable graph keeps a clone of the graph it was instantiated from,
 * updated as the exec is, and is instantiated again from it; a CUDA
 * array (made again by the replay log) gets its contents back; texture
 * and surface objects are made again in their order, and must come back
 * with their values, which programs hold and pass to kernels. Node, graph
 * and exec handles keep their ids.
 *
 * Not carried yet, refused with one line at the checkpoint: graph memory
 * (allocation and free nodes), host function nodes, copies of host
 * memory in graphs, node kinds the wire does not describe, executable
 * graphs changed in ways the clone cannot follow, and arrays of formats
 * whose element size is not plain.
 */
#include <stdlib.h>
#include <string.h>
#include "objects-internal.h"
#include "snapshot.h"

struct objects *objects_of(struct worker *w)
{
	if (!w->objects)
		w->objects = calloc(1, sizeof(*w->objects));
	return w->objects;
}

/* Encodes args with xargs into a new buffer. */
char *objects_encode(xdrproc_t xargs, void *args, size_t *len)
{
	unsigned n = (unsigned)xdr_sizeof(xargs, args);
	char *buf = malloc(n + 1);
	XDR x;

	if (!buf)
		return NULL;
	xdrmem_create(&x, buf, n, XDR_ENCODE);
	if (!xargs(&x, args)) {
		free(buf);
		buf = NULL;
	}
	*len = xdr_getpos(&x);
	xdr_destroy(&x);
	return buf;
}

int objects_decode(xdrproc_t xargs, void *args, const void *buf, size_t len)
{
	XDR x;
	int ok;

	xdrmem_create(&x, (char *)buf, (unsigned)len, XDR_DECODE);
	ok = xargs(&x, args);
	xdr_destroy(&x);
	return ok ? 0 : -1;
}

/* --- texture and surface objects --- */

void objects_tex_created(struct worker *w, uint64_t value, int surface, const tex_object_args *a)
{
	struct objects *o = objects_of(w);
	struct tex_rec t = { value, replay_seq(w), surface, NULL, 0 };

	if (!o || array_grow((void **)&o->tex, &o->cap_tex, o->ntex, sizeof(*o->tex)) ||
	    !(t.args = objects_encode((xdrproc_t)xdr_tex_object_args, (void *)a, &t.len))) {
		log_error("cannot keep texture object %llu: out of memory; checkpoints will fail",
			  (unsigned long long)value);
		w->replay_broken = 1;
		return;
	}
	o->tex[o->ntex++] = t;
}

void objects_tex_destroyed(struct worker *w, uint64_t value)
{
	struct objects *o = w->objects;

	for (unsigned i = 0; o && i < o->ntex; i++)
		if (o->tex[i].value == value) {
			free(o->tex[i].args);
			memmove(&o->tex[i], &o->tex[i + 1], (--o->ntex - i) * sizeof(*o->tex));
			return;
		}
}

/* --- executable graphs and their shadows --- */

struct exec_rec *objects_exec_find(struct worker *w, CUgraphExec exec)
{
	struct objects *o = w->objects;

	for (unsigned i = 0; o && i < o->nexecs; i++)
		if (o->execs[i].exec == exec)
			return &o->execs[i];
	return NULL;
}

void objects_exec_created(struct worker *w, CUgraphExec exec, CUgraph source, unsigned long long flags)
{
	struct objects *o = objects_of(w);
	struct exec_rec e = { exec, NULL, flags, replay_seq(w), NULL, NULL, 0 };

	if (!o || array_grow((void **)&o->execs, &o->cap_execs, o->nexecs, sizeof(*o->execs))) {
		w->replay_broken = 1;
		return;
	}
	if (source && cuGraphClone(&e.shadow, source))
		e.stale = "its graph could not be cloned";
	o->execs[o->nexecs++] = e;
}

/* The ids child graphs inside g got when their nodes were read: they go
 * with g (the driver frees them with it). */
void objects_graph_destroying(struct worker *w, CUgraph g, int depth)
{
	CUgraphNode *nodes;
	CUgraphNodeType type;
	CUgraph child;
	size_t n = 0;
	uint64_t id;

	if (depth > 16 || cuGraphGetNodes(g, NULL, &n) || !n || !(nodes = calloc(n, sizeof(*nodes))))
		return;
	if (!cuGraphGetNodes(g, nodes, &n))
		for (size_t i = 0; i < n; i++) {
			if (cuGraphNodeGetType(nodes[i], &type) || type != CU_GRAPH_NODE_TYPE_GRAPH ||
			    cuGraphChildGraphNodeGetGraph(nodes[i], &child))
				continue;
			objects_graph_destroying(w, child, depth + 1);
			if ((id = handle_find(w, H_GRAPH, child)))
				handle_forget(w, id);
		}
	free(nodes);
}

void objects_exec_destroyed(struct worker *w, CUgraphExec exec)
{
	struct objects *o = w->objects;
	struct exec_rec *e = objects_exec_find(w, exec);

	if (!e)
		return;
	if (e->shadow) {
		objects_graph_destroying(w, e->shadow, 0);
		cuGraphDestroy(e->shadow);
	}
	free(e->alias);
	*e = o->execs[--o->nexecs];
}

/* The node an exec call on node means: the shadow's, for a restored exec. */
CUgraphNode objects_exec_node(struct worker *w, CUgraphExec exec, CUgraphNode node)
{
	struct exec_rec *e = objects_exec_find(w, exec);

	for (unsigned i = 0; e && node && i < e->nalias; i++)
		if (e->alias[i].from == node)
			return e->alias[i].to;
	return node;
}

/* The shadow's copy of node: itself for a restored exec (aliased). */
static CUresult shadow_node(struct exec_rec *e, CUgraphNode node, CUgraphNode *copy)
{
	for (unsigned i = 0; i < e->nalias; i++)
		if (e->alias[i].to == node) {
			*copy = node;
			return CUDA_SUCCESS;
		}
	return cuGraphNodeFindInClone(copy, node, e->shadow);
}

void objects_exec_stale(struct worker *w, CUgraphExec exec, const char *why)
{
	struct exec_rec *e = objects_exec_find(w, exec);

	if (e && !e->stale)
		e->stale = why;
}

/* The same change on the shadow's copy of the node. */
void objects_exec_node_set(struct worker *w, CUgraphExec exec, CUgraphNode node, CUgraphNodeParams *p)
{
	struct exec_rec *e = objects_exec_find(w, exec);
	CUgraphNode copy;

	if (e && e->shadow && (shadow_node(e, node, &copy) || cuGraphNodeSetParams(copy, p)))
		objects_exec_stale(w, exec, "a node update the checkpoint could not follow");
}

void objects_exec_event_set(struct worker *w, CUgraphExec exec, CUgraphNode node, CUevent event, int wait)
{
	struct exec_rec *e = objects_exec_find(w, exec);
	CUgraphNode copy;

	if (e && e->shadow &&
	    (shadow_node(e, node, &copy) ||
	     (wait ? cuGraphEventWaitNodeSetEvent(copy, event) : cuGraphEventRecordNodeSetEvent(copy, event))))
		objects_exec_stale(w, exec, "an event update the checkpoint could not follow");
}

void objects_exec_updated(struct worker *w, CUgraphExec exec, CUgraph graph)
{
	struct exec_rec *e = objects_exec_find(w, exec);
	CUgraph clone;

	if (!e)
		return;
	if (cuGraphClone(&clone, graph)) {
		objects_exec_stale(w, exec, "its new graph could not be cloned");
		return;
	}
	if (e->shadow) {
		objects_graph_destroying(w, e->shadow, 0);
		cuGraphDestroy(e->shadow);
	}
	e->shadow = clone;
	e->stale = NULL;
	free(e->alias);
	e->alias = NULL;
	e->nalias = 0;
}

/* The bytes of one element of an array format, or 0 if not plain. */
static size_t format_size(CUarray_format f)
{
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
	default: return 0;
	}
}

/* The copy between an array and a packed host buffer; *size its bytes. */
CUresult objects_array_copy(CUarray a, void *host, int to_host, size_t *size)
{
	CUDA_ARRAY3D_DESCRIPTOR d;
	CUDA_MEMCPY3D c;
	size_t row, h, depth;
	CUresult err = cuArray3DGetDescriptor(&d, a);

	if (err)
		return err;
	if (!format_size(d.Format) || (d.Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)))
		return CUDA_ERROR_NOT_SUPPORTED;
	row = d.Width * format_size(d.Format) * d.NumChannels;
	h = d.Height ? d.Height : 1;
	depth = d.Depth ? d.Depth : 1;
	*size = row * h * depth;
	if (!host)
		return CUDA_SUCCESS;
	memset(&c, 0, sizeof(c));
	c.WidthInBytes = row, c.Height = h, c.Depth = depth;
	if (to_host) {
		c.srcMemoryType = CU_MEMORYTYPE_ARRAY, c.srcArray = a;
		c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = host, c.dstPitch = row, c.dstHeight = h;
	} else {
		c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = host, c.srcPitch = row, c.srcHeight = h;
		c.dstMemoryType = CU_MEMORYTYPE_ARRAY, c.dstArray = a;
	}
	return cuMemcpy3D(&c);
}

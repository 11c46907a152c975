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
#include "gpu-server.h"
#include "snapshot.h"

enum { OBJ_ARRAY = 1, OBJ_TEX, OBJ_SURF, OBJ_GRAPH, OBJ_EXEC };

#define SPARE_MAX 4096                       /* texture values held while restoring */

struct tex_rec {
	uint64_t value;
	uint64_t after;                      /* the replay log's seq when made */
	int surface;
	char *args;                          /* tex_object_args, as XDR */
	size_t len;
};

struct alias {
	CUgraphNode from, to;                /* from: NULL until its graph is back */
	uint64_t id;                         /* the client's id of from */
};

/* A restored exec was instantiated from its rebuilt shadow, not from the
 * graph whose nodes the client names in exec calls: alias maps those
 * nodes to the shadow's. */
struct exec_rec {
	CUgraphExec exec;
	CUgraph shadow;                      /* what a restore instantiates */
	unsigned long long flags;
	uint64_t after;                      /* the replay log's seq when instantiated */
	const char *stale;                   /* why the shadow cannot be trusted */
	struct alias *alias;
	unsigned nalias;
};

/* While a restore runs: which objects are back, and the texture values
 * held so that the next ones come back with theirs. */
struct restoring {
	char *done;
	uint64_t *spare;
	unsigned nspare;
};

struct objects {
	struct tex_rec *tex;
	unsigned ntex, cap_tex;
	struct exec_rec *execs;
	unsigned nexecs, cap_execs;
	struct restoring r;
};

static int grow(void **arr, unsigned *cap, unsigned n, size_t elem)
{
	unsigned c = *cap ? *cap * 2 : 16;
	void *p;

	if (n < *cap)
		return 0;
	if (!(p = realloc(*arr, (size_t)c * elem)))
		return -1;
	*arr = p;
	*cap = c;
	return 0;
}

static struct objects *objects_of(struct worker *w)
{
	if (!w->objects)
		w->objects = calloc(1, sizeof(*w->objects));
	return w->objects;
}

/* Encodes args with xargs into a new buffer. */
static char *encode(xdrproc_t xargs, void *args, size_t *len)
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

static int decode(xdrproc_t xargs, void *args, const void *buf, size_t len)
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

	if (!o || grow((void **)&o->tex, &o->cap_tex, o->ntex, sizeof(*o->tex)) ||
	    !(t.args = encode((xdrproc_t)xdr_tex_object_args, (void *)a, &t.len))) {
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

static struct exec_rec *exec_find(struct worker *w, CUgraphExec exec)
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

	if (!o || grow((void **)&o->execs, &o->cap_execs, o->nexecs, sizeof(*o->execs))) {
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
	struct exec_rec *e = exec_find(w, exec);

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
	struct exec_rec *e = exec_find(w, exec);

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
	struct exec_rec *e = exec_find(w, exec);

	if (e && !e->stale)
		e->stale = why;
}

/* The same change on the shadow's copy of the node. */
void objects_exec_node_set(struct worker *w, CUgraphExec exec, CUgraphNode node, CUgraphNodeParams *p)
{
	struct exec_rec *e = exec_find(w, exec);
	CUgraphNode copy;

	if (e && e->shadow && (shadow_node(e, node, &copy) || cuGraphNodeSetParams(copy, p)))
		objects_exec_stale(w, exec, "a node update the checkpoint could not follow");
}

void objects_exec_event_set(struct worker *w, CUgraphExec exec, CUgraphNode node, CUevent event, int wait)
{
	struct exec_rec *e = exec_find(w, exec);
	CUgraphNode copy;

	if (e && e->shadow &&
	    (shadow_node(e, node, &copy) ||
	     (wait ? cuGraphEventWaitNodeSetEvent(copy, event) : cuGraphEventRecordNodeSetEvent(copy, event))))
		objects_exec_stale(w, exec, "an event update the checkpoint could not follow");
}

void objects_exec_updated(struct worker *w, CUgraphExec exec, CUgraph graph)
{
	struct exec_rec *e = exec_find(w, exec);
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

/* --- saving --- */

struct node_id {
	const void *real;
	uint64_t id;
};

static int cmp_node_id(const void *a, const void *b)
{
	const struct node_id *x = a, *y = b;

	return x->real < y->real ? -1 : x->real > y->real;
}

struct saving {
	struct worker *w;
	struct snap_writer *wr;
	Cicada__Manifest *m;
	struct node_id *ids;                 /* node handles the client holds, by pointer */
	size_t nids;
	struct node_id *live;                /* those of them in the graphs saved */
	size_t nlive;
	char *err;
};

static int live_add(struct saving *s, CUgraphNode node, uint64_t id)
{
	struct node_id *v = realloc(s->live, (s->nlive + 1) * sizeof(*v));

	if (!v)
		return -1;
	s->live = v;
	s->live[s->nlive++] = (struct node_id){ node, id };
	return 0;
}


static uint64_t node_id_of(const struct saving *s, const void *node)
{
	struct node_id key = { node, 0 }, *hit;

	hit = bsearch(&key, s->ids, s->nids, sizeof(*s->ids), cmp_node_id);
	return hit ? hit->id : 0;
}

static int index_of(const CUgraphNode *sorted, const unsigned *order, size_t n, CUgraphNode node)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (sorted[mid] == node)
			return (int)order[mid];
		if ((uintptr_t)sorted[mid] < (uintptr_t)node)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* Why a node cannot be carried, or NULL. */
static const char *node_refused(const graph_params *g)
{
	switch (g->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
	case CU_GRAPH_NODE_TYPE_MEMSET:
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
	case CU_GRAPH_NODE_TYPE_GRAPH:
	case CU_GRAPH_NODE_TYPE_EMPTY:
		return NULL;
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		return g->v.v_val[GM_TYPE] == CU_MEMORYTYPE_HOST || g->v.v_val[GM_SIDE + GM_TYPE] == CU_MEMORYTYPE_HOST ?
			       "a copy of host memory" : NULL;
	case CU_GRAPH_NODE_TYPE_HOST:
		return "a host function node";
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
	case CU_GRAPH_NODE_TYPE_MEM_FREE:
		return "graph memory (allocation nodes)";
	default:
		return "a node kind the checkpoint does not describe";
	}
}

struct walk {
	CUgraphNode *nodes, *sorted, *from, *to;
	unsigned *order;
	CUgraphEdgeData *edges;
	size_t n, ne;
};

static void walk_free(struct walk *k)
{
	free(k->nodes), free(k->sorted), free(k->from), free(k->to), free(k->order), free(k->edges);
}

static int cmp_ptr_order(const void *a, const void *b, void *nodes)
{
	uintptr_t x = (uintptr_t)((CUgraphNode *)nodes)[*(const unsigned *)a];
	uintptr_t y = (uintptr_t)((CUgraphNode *)nodes)[*(const unsigned *)b];

	return x < y ? -1 : x > y;
}

/* The graph's nodes and edges, with a sorted copy of the nodes. */
static CUresult walk(CUgraph g, struct walk *k)
{
	CUresult err;

	memset(k, 0, sizeof(*k));
	if ((err = cuGraphGetNodes(g, NULL, &k->n)) || (err = cuGraphGetEdges_v2(g, NULL, NULL, NULL, &k->ne)))
		return err;
	if (k->n > CICADA_GRAPH_NODES_MAX || k->ne > CICADA_GRAPH_NODES_MAX)
		return CUDA_ERROR_OUT_OF_MEMORY;
	k->nodes = calloc(k->n + 1, sizeof(*k->nodes));
	k->sorted = calloc(k->n + 1, sizeof(*k->sorted));
	k->order = calloc(k->n + 1, sizeof(*k->order));
	k->from = calloc(k->ne + 1, sizeof(*k->from));
	k->to = calloc(k->ne + 1, sizeof(*k->to));
	k->edges = calloc(k->ne + 1, sizeof(*k->edges));
	if (!k->nodes || !k->sorted || !k->order || !k->from || !k->to || !k->edges)
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* (the driver refuses a list of no entries) */
	if ((k->n && (err = cuGraphGetNodes(g, k->nodes, &k->n))) ||
	    (k->ne && (err = cuGraphGetEdges_v2(g, k->from, k->to, k->edges, &k->ne))))
		return err;
	for (unsigned i = 0; i < k->n; i++)
		k->order[i] = i;
	qsort_r(k->order, k->n, sizeof(*k->order), cmp_ptr_order, k->nodes);
	for (size_t i = 0; i < k->n; i++)
		k->sorted[i] = k->nodes[k->order[i]];
	return CUDA_SUCCESS;
}

static int image_edges(struct walk *k, graph_image *im)
{
	im->from.from_val = calloc(k->ne + 1, sizeof(unsigned));
	im->to.to_val = calloc(k->ne + 1, sizeof(unsigned));
	im->edges.edges_val = malloc(k->ne * sizeof(*k->edges) + 1);
	if (!im->from.from_val || !im->to.to_val || !im->edges.edges_val)
		return -1;
	im->from.from_len = im->to.to_len = (u_int)k->ne;
	im->edges.edges_len = (u_int)(k->ne * sizeof(*k->edges));
	memcpy(im->edges.edges_val, k->edges, k->ne * sizeof(*k->edges));
	for (size_t i = 0; i < k->ne; i++) {
		int f = index_of(k->sorted, k->order, k->n, k->from[i]), t = index_of(k->sorted, k->order, k->n, k->to[i]);
		if (f < 0 || t < 0)
			return -1;
		im->from.from_val[i] = (unsigned)f;
		im->to.to_val[i] = (unsigned)t;
	}
	return 0;
}

/* An exec's shadow node stands for the client's node it was cloned from. */
static void exec_ids(struct saving *s, struct exec_rec *e, struct walk *k, graph_image *im)
{
	CUgraphNode copy;
	int at;

	if (e->nalias) {                     /* restored: its shadow is no clone */
		for (unsigned i = 0; i < e->nalias; i++)
			if (e->alias[i].from && (at = index_of(k->sorted, k->order, k->n, e->alias[i].to)) >= 0)
				im->nodes.nodes_val[at].id = e->alias[i].id;
		return;
	}
	for (size_t i = 0; i < s->nlive; i++)
		if (!cuGraphNodeFindInClone(&copy, (CUgraphNode)s->live[i].real, e->shadow) &&
		    (at = index_of(k->sorted, k->order, k->n, copy)) >= 0)
			im->nodes.nodes_val[at].id = s->live[i].id;
}

/* The graph's image; what refuses it goes in s->err. */
static int image_of(struct saving *s, CUgraph g, struct exec_rec *exec, uint64_t id, graph_image *im)
{
	const char *what = exec ? "executable graph" : "CUDA graph";
	struct walk k;
	const char *why = NULL;
	CUresult err;
	int rc = -1;

	memset(im, 0, sizeof(*im));
	if ((err = walk(g, &k)) || !(im->nodes.nodes_val = calloc(k.n + 1, sizeof(*im->nodes.nodes_val)))) {
		snprintf(s->err, SNAP_ERRLEN, "cannot walk %s %llu (error %d)", what, (unsigned long long)id,
			 err ? (int)err : (int)CUDA_ERROR_OUT_OF_MEMORY);
		goto out;
	}
	im->nodes.nodes_len = (u_int)k.n;
	for (size_t i = 0; i < k.n && !why; i++) {
		graph_image_node *n = &im->nodes.nodes_val[i];
		if ((err = graph_params_out(s->w, k.nodes[i], &n->params))) {
			snprintf(s->err, SNAP_ERRLEN, "cannot read a node of %s %llu (error %d)", what,
				 (unsigned long long)id, (int)err);
			goto out;
		}
		n->id = exec ? 0 : node_id_of(s, k.nodes[i]);
		if (n->id && live_add(s, k.nodes[i], n->id)) {
			snprintf(s->err, SNAP_ERRLEN, "out of memory");
			goto out;
		}
		why = node_refused(&n->params);
	}
	if (why) {
		snprintf(s->err, SNAP_ERRLEN, "%s %llu holds %s, which a checkpoint cannot carry yet", what,
			 (unsigned long long)id, why);
		goto out;
	}
	if (image_edges(&k, im)) {
		snprintf(s->err, SNAP_ERRLEN, "out of memory");
		goto out;
	}
	if (exec)
		exec_ids(s, exec, &k, im);
	rc = 0;
out:
	walk_free(&k);
	return rc;
}

static Cicada__Object *object_add(struct saving *s, unsigned kind, uint64_t handle)
{
	Cicada__Object *o = calloc(1, sizeof(*o)), **v;

	if (!o || !(v = realloc(s->m->objects, (s->m->n_objects + 1) * sizeof(*v)))) {
		free(o);
		snprintf(s->err, SNAP_ERRLEN, "out of memory");
		return NULL;
	}
	s->m->objects = v;
	v[s->m->n_objects++] = o;
	cicada__object__init(o);
	o->kind = kind;
	o->handle = handle;
	return o;
}

static int save_image(struct saving *s, unsigned kind, uint64_t handle, graph_image *im)
{
	Cicada__Object *o = object_add(s, kind, handle);
	size_t len = 0;

	if (!o)
		return -1;
	if (!(o->body.data = (uint8_t *)encode((xdrproc_t)xdr_graph_image, im, &len))) {
		snprintf(s->err, SNAP_ERRLEN, "out of memory");
		return -1;
	}
	o->body.len = len;
	o->has_body = 1;
	return 0;
}

static int save_graph(struct saving *s, uint64_t id, CUgraph g)
{
	graph_image im;
	int rc = image_of(s, g, NULL, id, &im);

	if (!rc)
		rc = save_image(s, OBJ_GRAPH, id, &im);
	xdr_free((xdrproc_t)xdr_graph_image, (char *)&im);
	return rc;
}

static int save_exec(struct saving *s, uint64_t id, CUgraphExec exec)
{
	struct exec_rec *e = exec_find(s->w, exec);
	graph_image im;
	int rc;

	if (!e || e->stale || !e->shadow) {
		snprintf(s->err, SNAP_ERRLEN, "executable graph %llu cannot be carried by a checkpoint yet: %s",
			 (unsigned long long)id, e && e->stale ? e->stale : "its graph is unknown");
		return -1;
	}
	if (!(rc = image_of(s, e->shadow, e, id, &im))) {
		im.flags = e->flags;
		if (!(rc = save_image(s, OBJ_EXEC, id, &im))) {
			s->m->objects[s->m->n_objects - 1]->after_seq = e->after;
			s->m->objects[s->m->n_objects - 1]->has_after_seq = 1;
		}
	}
	xdr_free((xdrproc_t)xdr_graph_image, (char *)&im);
	return rc;
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
static CUresult array_copy(CUarray a, void *host, int to_host, size_t *size)
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

static int save_array(struct saving *s, uint64_t id, CUarray a)
{
	Cicada__Object *o;
	image_hash hash;
	size_t size = 0;
	void *buf = NULL;
	CUresult err = array_copy(a, NULL, 1, &size);
	int rc = -1;

	if (!err && !(buf = malloc(size + 1)))
		err = CUDA_ERROR_OUT_OF_MEMORY;
	if (!err)
		err = array_copy(a, buf, 1, &size);
	if (err) {
		snprintf(s->err, SNAP_ERRLEN, err == CUDA_ERROR_NOT_SUPPORTED ?
			 "CUDA array %llu is of a format or kind a checkpoint cannot carry yet" :
			 "cannot read CUDA array %llu (error %d)", (unsigned long long)id, (int)err);
		goto out;
	}
	image_hash_compute(buf, size, &hash);
	if (!(o = object_add(s, OBJ_ARRAY, id)) || snap_write_image(s->wr, hash.lo, hash.hi, buf, size, s->err))
		goto out;
	o->image_lo = hash.lo, o->image_hi = hash.hi;
	o->has_image_lo = o->has_image_hi = 1;
	rc = 0;
out:
	free(buf);
	return rc;
}

static int save_textures(struct saving *s)
{
	struct objects *o = s->w->objects;

	for (unsigned i = 0; o && i < o->ntex; i++) {
		Cicada__Object *x = object_add(s, o->tex[i].surface ? OBJ_SURF : OBJ_TEX, o->tex[i].value);
		if (!x)
			return -1;
		x->body.data = (uint8_t *)o->tex[i].args;    /* the worker's: not freed with the manifest */
		x->body.len = o->tex[i].len;
		x->after_seq = o->tex[i].after;
		x->has_body = x->has_after_seq = 1;
	}
	return 0;
}

static int saved(const Cicada__Manifest *m, uint64_t id)
{
	for (size_t i = 0; i < m->n_objects; i++)
		if (m->objects[i]->kind == OBJ_GRAPH && m->objects[i]->handle == id)
			return 1;
	return 0;
}

/* Child graphs get ids as their nodes are read, maybe in free slots
 * already passed: passes until every graph is saved. */
static int save_graphs(struct saving *s)
{
	struct worker *w = s->w;
	int rc = 0;

	for (size_t before = ~(size_t)0; !rc && s->m->n_objects != before;) {
		before = s->m->n_objects;
		for (unsigned i = 0; !rc && i < w->nhandles; i++)
			if (w->handles[i].kind == H_GRAPH && !saved(s->m, HANDLE_BASE + i))
				rc = save_graph(s, HANDLE_BASE + i, w->handles[i].real);
	}
	return rc;
}

static int collect_node_ids(struct saving *s)
{
	struct worker *w = s->w;

	if (!(s->ids = calloc(w->nhandles + 1, sizeof(*s->ids))))
		return snprintf(s->err, SNAP_ERRLEN, "out of memory"), -1;
	for (unsigned i = 0; i < w->nhandles; i++)
		if (w->handles[i].kind == H_GRAPH_NODE)
			s->ids[s->nids++] = (struct node_id){ w->handles[i].real, HANDLE_BASE + i };
	qsort(s->ids, s->nids, sizeof(*s->ids), cmp_node_id);
	return 0;
}

/* Describes every array, texture, graph and exec of the session in
 * m->objects (array contents as images through wr). The handle table may
 * grow meanwhile (child graphs get ids), so it is walked by index. */
int objects_save(struct worker *w, struct snap_writer *wr, Cicada__Manifest *m, char *err)
{
	struct saving s = { w, wr, m, NULL, 0, NULL, 0, err };
	int rc = collect_node_ids(&s);

	for (unsigned i = 0; !rc && i < w->nhandles; i++)
		if (w->handles[i].kind == H_ARRAY)
			rc = save_array(&s, HANDLE_BASE + i, w->handles[i].real);
	if (!rc)
		rc = save_graphs(&s);
	for (unsigned i = 0; !rc && i < w->nhandles; i++)   /* after the graphs: their nodes are known */
		if (w->handles[i].kind == H_GRAPH_EXEC)
			rc = save_exec(&s, HANDLE_BASE + i, w->handles[i].real);
	if (!rc)
		rc = save_graphs(&s);                       /* the execs' child graphs */
	if (!rc)
		rc = save_textures(&s);
	free(s.ids);
	free(s.live);
	return rc;
}

void objects_save_free(Cicada__Manifest *m)
{
	for (size_t i = 0; i < m->n_objects; i++) {
		Cicada__Object *o = m->objects[i];
		if (o->kind == OBJ_GRAPH || o->kind == OBJ_EXEC)
			free(o->body.data);
		free(o);
	}
	free(m->objects);
	m->objects = NULL;
	m->n_objects = 0;
}

/* --- restoring --- */

static int bind_id(struct worker *w, enum handle_kind kind, void *real, uint64_t id)
{
	uint64_t got;

	if (id < HANDLE_BASE || id - HANDLE_BASE > HANDLE_MAX)
		return -1;
	w->replay_id = id;
	got = handle_put(w, kind, real);
	w->replay_id = 0;
	return got == id ? 0 : -1;
}

/* Builds the image's nodes and edges into g; node ids are bound, or for
 * an exec's shadow (e), aliased. */
static int graph_build(struct worker *w, graph_image *im, CUgraph g, struct exec_rec *e, char *err)
{
	static void *ptrs[CICADA_PARAMS_MAX / 4];
	CUgraphNode *nodes = calloc(im->nodes.nodes_len + 1, sizeof(*nodes));
	CUgraphNode *from = calloc(im->from.from_len + 1, sizeof(*from)), *to = calloc(im->to.to_len + 1, sizeof(*to));
	CUgraphNodeParams p;
	CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
	u_int i = 0;
	int ret = -1;

	if (!nodes || !from || !to || im->from.from_len != im->to.to_len ||
	    (im->edges.edges_len && im->edges.edges_len != im->from.from_len * sizeof(CUgraphEdgeData)))
		goto out;
	for (; i < im->nodes.nodes_len; i++) {
		graph_image_node *n = &im->nodes.nodes_val[i];
		if ((rc = graph_params_in(w, &n->params, &p, ptrs)) || (rc = cuGraphAddNode_v2(&nodes[i], g, NULL, NULL, 0, &p)))
			goto out;
		if (n->id && e) {
			struct alias *a = realloc(e->alias, (e->nalias + 1) * sizeof(*a));
			if (!a)
				goto out;
			e->alias = a;
			e->alias[e->nalias++] = (struct alias){ NULL, nodes[i], n->id };
		} else if (n->id && bind_id(w, H_GRAPH_NODE, nodes[i], n->id)) {
			rc = CUDA_ERROR_INVALID_HANDLE;
			goto out;
		}
	}
	for (u_int e = 0; e < im->from.from_len; e++) {
		if (im->from.from_val[e] >= im->nodes.nodes_len || im->to.to_val[e] >= im->nodes.nodes_len)
			goto out;
		from[e] = nodes[im->from.from_val[e]];
		to[e] = nodes[im->to.to_val[e]];
	}
	rc = im->from.from_len ? cuGraphAddDependencies_v2(g, from, to, im->edges.edges_len ?
						      (CUgraphEdgeData *)im->edges.edges_val : NULL,
						      im->from.from_len) : CUDA_SUCCESS;
	ret = rc ? -1 : 0;
out:
	if (ret && i < im->nodes.nodes_len)
		snprintf(err, SNAP_ERRLEN, "cannot make node %u (type %u) of a CUDA graph again (error %d)", i,
			 im->nodes.nodes_val[i].params.type, (int)rc);
	else if (ret)
		snprintf(err, SNAP_ERRLEN, "cannot make the edges of a CUDA graph again (error %d)", (int)rc);
	free(nodes), free(from), free(to);
	return ret;
}

static const Cicada__Object *object_of(const Cicada__Manifest *m, unsigned kind, uint64_t handle, size_t *at)
{
	for (size_t i = 0; i < m->n_objects; i++)
		if (m->objects[i]->kind == kind && m->objects[i]->handle == handle) {
			*at = i;
			return m->objects[i];
		}
	return NULL;
}

static int restore_one(struct worker *w, const Cicada__Manifest *m, size_t i, char *err);
static int depth;                            /* of child graphs made first */

/* Whether the functions and events the image names are back already (an
 * exec updated later may name ones made after it). */
static int refs_ready(struct worker *w, const graph_image *im)
{
	for (u_int i = 0; i < im->nodes.nodes_len; i++) {
		const graph_params *g = &im->nodes.nodes_val[i].params;
		if (g->type == CU_GRAPH_NODE_TYPE_KERNEL && g->v.v_len == GK_N &&
		    handle_kind_of(w, g->v.v_val[GK_FUNC]) != H_FUNCTION &&
		    handle_kind_of(w, g->v.v_val[GK_FUNC]) != H_KERNEL)
			return 0;
		if ((g->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD || g->type == CU_GRAPH_NODE_TYPE_WAIT_EVENT) &&
		    g->v.v_len == GE_N && handle_kind_of(w, g->v.v_val[GE_EVENT]) != H_EVENT)
			return 0;
	}
	return 1;
}

/* The child graphs the image names, made first where they are not yet. */
static int children(struct worker *w, const Cicada__Manifest *m, const graph_image *im, char *err)
{
	for (u_int i = 0; i < im->nodes.nodes_len; i++) {
		const graph_params *g = &im->nodes.nodes_val[i].params;
		size_t at;
		if (g->type != CU_GRAPH_NODE_TYPE_GRAPH || g->v.v_len != GC_N ||
		    handle_kind_of(w, g->v.v_val[GC_GRAPH]) == H_GRAPH)
			continue;
		if (!object_of(m, OBJ_GRAPH, g->v.v_val[GC_GRAPH], &at) || w->objects->r.done[at]) {
			snprintf(err, SNAP_ERRLEN, "a CUDA graph names a child graph the snapshot lacks");
			return -1;
		}
		if (depth >= 16) {
			snprintf(err, SNAP_ERRLEN, "CUDA graphs are nested more than 16 deep");
			return -1;
		}
		depth++;
		int rc = restore_one(w, m, at, err);
		depth--;
		if (rc)
			return -1;
	}
	return 0;
}

/* early: during the replay, where a graph not ready yet waits (1). */
static int restore_graph(struct worker *w, const Cicada__Manifest *m, const Cicada__Object *o, int early, char *err)
{
	struct exec_rec e = { 0 };
	graph_image im;
	CUgraph g = NULL;
	CUgraphExec exec;
	CUresult rc;
	int ret = -1;

	memset(&im, 0, sizeof(im));
	if (decode((xdrproc_t)xdr_graph_image, &im, o->body.data, o->body.len)) {
		snprintf(err, SNAP_ERRLEN, "graph %llu: its description does not decode", (unsigned long long)o->handle);
		return -1;
	}
	if (early && !refs_ready(w, &im)) {
		ret = 1;
		goto out;
	}
	if (children(w, m, &im, err))
		goto out;
	if ((rc = cuGraphCreate(&g, 0))) {
		snprintf(err, SNAP_ERRLEN, "cannot create a CUDA graph (error %d)", (int)rc);
		goto out;
	}
	if (graph_build(w, &im, g, o->kind == OBJ_EXEC ? &e : NULL, err))
		goto out;
	if (o->kind == OBJ_GRAPH) {
		ret = bind_id(w, H_GRAPH, g, o->handle);
		g = ret ? g : NULL;
	} else if ((rc = cuGraphInstantiateWithFlags(&exec, g, im.flags))) {
		snprintf(err, SNAP_ERRLEN, "cannot instantiate executable graph %llu again (error %d)",
			 (unsigned long long)o->handle, (int)rc);
	} else if (!(ret = bind_id(w, H_GRAPH_EXEC, exec, o->handle))) {
		struct exec_rec *r;
		objects_exec_created(w, exec, NULL, im.flags);
		if ((r = exec_find(w, exec))) {
			r->shadow = g, r->alias = e.alias, r->nalias = e.nalias;
			g = NULL, e.alias = NULL;
		}
	}
	if (ret < 0 && !err[0])
		snprintf(err, SNAP_ERRLEN, "graph handle %llu is taken", (unsigned long long)o->handle);
out:
	if (g)
		cuGraphDestroy(g);
	free(e.alias);
	xdr_free((xdrproc_t)xdr_graph_image, (char *)&im);
	return ret;
}

static int restore_array(struct worker *w, const Cicada__Object *o, char *err)
{
	image_hash hash = { o->image_lo, o->image_hi };
	size_t size = 0, want = 0;
	void *data = NULL;
	CUarray a;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	if (!handle_get(w, H_ARRAY, o->handle, (void **)&a) && a && !worker_image_find(w, &hash, &data, &size) &&
	    !array_copy(a, NULL, 0, &want) && want == size)
		rc = array_copy(a, data, 0, &size);
	free(data);
	if (rc)
		snprintf(err, SNAP_ERRLEN, "cannot write CUDA array %llu back (error %d)", (unsigned long long)o->handle,
			 (int)rc);
	return rc ? -1 : 0;
}

/* Makes the object again until it has its old value: values the driver
 * hands out first (freed ones) are held meanwhile, destroyed at the end. */
static int restore_tex(struct worker *w, const Cicada__Object *o, char *err)
{
	struct restoring *st = &w->objects->r;
	tex_object_args a;
	scalar_res r;
	CUresult rc = CUDA_SUCCESS;
	int ret = -1;

	memset(&a, 0, sizeof(a));
	if (decode((xdrproc_t)xdr_tex_object_args, &a, o->body.data, o->body.len))
		return snprintf(err, SNAP_ERRLEN, "texture object %llu: its description does not decode",
				(unsigned long long)o->handle), -1;
	for (unsigned i = 0; i < st->nspare; i++)     /* a value held for an earlier one: free it now */
		if ((st->spare[i] & ~(1ull << 63)) == o->handle) {
			if (st->spare[i] >> 63)
				wrap_cuSurfObjectDestroy(w, o->handle);
			else
				wrap_cuTexObjectDestroy(w, o->handle);
			st->spare[i] = st->spare[--st->nspare];
			break;
		}
	while (st->nspare < SPARE_MAX) {
		memset(&r, 0, sizeof(r));
		rc = o->kind == OBJ_SURF ? hand_surf_object_create(w, &a, &r) : hand_tex_object_create(w, &a, &r);
		if (rc || r.v.v_len != 1)
			break;
		uint64_t v = r.v.v_val[0];
		xdr_free((xdrproc_t)xdr_scalar_res, (char *)&r);
		if (v == o->handle) {
			ret = 0;
			break;
		}
		st->spare[st->nspare++] = v | (o->kind == OBJ_SURF ? 1ull << 63 : 0);
		if (v > o->handle)
			break;
	}
	if (ret)
		snprintf(err, SNAP_ERRLEN, rc ? "cannot make texture object %llu again (error %d)" :
			 "texture object %llu did not come back with its value", (unsigned long long)o->handle, (int)rc);
	xdr_free((xdrproc_t)xdr_tex_object_args, (char *)&a);
	return ret;
}

/* Object i; early as for restore_graph (1: it waits, not done). */
static int restore_object(struct worker *w, const Cicada__Manifest *m, size_t i, int early, char *err)
{
	const Cicada__Object *o = m->objects[i];
	int rc;

	w->objects->r.done[i] = 1;
	switch (o->kind) {
	case OBJ_ARRAY: rc = restore_array(w, o, err); break;
	case OBJ_TEX: case OBJ_SURF: rc = restore_tex(w, o, err); break;
	case OBJ_GRAPH: case OBJ_EXEC: rc = restore_graph(w, m, o, early, err); break;
	default:
		snprintf(err, SNAP_ERRLEN, "the snapshot holds an object of unknown kind %u", o->kind);
		rc = -1;
	}
	if (rc > 0)
		w->objects->r.done[i] = 0;
	return rc;
}

static int restore_one(struct worker *w, const Cicada__Manifest *m, size_t i, char *err)
{
	return restore_object(w, m, i, 0, err);
}

static struct restoring *restoring(struct worker *w, const Cicada__Manifest *m)
{
	struct objects *o = objects_of(w);

	if (!o)
		return NULL;
	if (!o->r.done && (!(o->r.done = calloc(m->n_objects + 1, 1)) ||
			   !(o->r.spare = calloc(SPARE_MAX + 1, sizeof(*o->r.spare))))) {
		free(o->r.done);
		o->r.done = NULL;
		return NULL;
	}
	return &o->r;
}

/* During the replay, before the record seq: the texture objects and
 * executable graphs made before it, where they were made (the driver
 * places later allocations, module variables among them, after theirs). */
int objects_restore_upto(struct worker *w, const Cicada__Manifest *m, uint64_t seq, char *err)
{
	struct restoring *st = m->n_objects ? restoring(w, m) : NULL;

	if (!m->n_objects)
		return 0;
	if (!st)
		return snprintf(err, SNAP_ERRLEN, "out of memory"), -1;
	for (size_t i = 0; i < m->n_objects; i++) {
		const Cicada__Object *o = m->objects[i];
		if (st->done[i] || o->kind == OBJ_ARRAY || o->kind == OBJ_GRAPH || o->after_seq >= seq)
			continue;
		if (restore_object(w, m, i, 1, err) < 0)
			return -1;
	}
	return 0;
}

/* The execs' aliases, now that every graph is back. */
static void resolve_aliases(struct worker *w)
{
	struct objects *o = w->objects;

	for (unsigned i = 0; o && i < o->nexecs; i++)
		for (unsigned j = 0; j < o->execs[i].nalias; j++) {
			struct alias *a = &o->execs[i].alias[j];
			if (!a->from && handle_get(w, H_GRAPH_NODE, a->id, (void **)&a->from))
				a->from = NULL;      /* that graph is gone: no call can name it */
		}
}

/* After the replay log and device memory: arrays' contents, then what
 * is left (graphs, and objects made after the last record). */
int objects_restore(struct worker *w, const Cicada__Manifest *m, char *err)
{
	struct restoring *st;
	int rc = 0;

	if (!m->n_objects)
		return 0;
	if (!(st = restoring(w, m)))
		return snprintf(err, SNAP_ERRLEN, "out of memory"), -1;
	for (size_t i = 0; i < m->n_objects && !rc; i++)
		if (!st->done[i])
			rc = restore_one(w, m, i, err);
	if (!rc)
		resolve_aliases(w);
	for (unsigned i = 0; i < st->nspare; i++)
		if (st->spare[i] >> 63)
			wrap_cuSurfObjectDestroy(w, st->spare[i] & ~(1ull << 63));
		else
			wrap_cuTexObjectDestroy(w, st->spare[i]);
	free(st->done), free(st->spare);
	memset(st, 0, sizeof(*st));
	return rc;
}

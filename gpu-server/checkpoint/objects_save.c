/*
 * objects_save.c: a checkpoint's description of the session's graphs,
 * execs (their shadows), arrays (contents as images) and texture objects,
 * in the manifest's objects (objects.c says what is carried and what is
 * refused).
 */
#include <stdlib.h>
#include <string.h>
#include "checkpoint.h"
#include "state/objects-internal.h"
#include "snapshot.h"

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
		wire_fail(s->err, "cannot walk %s %llu (error %d)", what, (unsigned long long)id,
			 err ? (int)err : (int)CUDA_ERROR_OUT_OF_MEMORY);
		goto out;
	}
	im->nodes.nodes_len = (u_int)k.n;
	for (size_t i = 0; i < k.n && !why; i++) {
		graph_image_node *n = &im->nodes.nodes_val[i];
		if ((err = graph_params_out(s->w, k.nodes[i], &n->params))) {
			wire_fail(s->err, "cannot read a node of %s %llu (error %d)", what,
				 (unsigned long long)id, (int)err);
			goto out;
		}
		n->id = exec ? 0 : node_id_of(s, k.nodes[i]);
		if (n->id && live_add(s, k.nodes[i], n->id)) {
			wire_fail(s->err, "out of memory");
			goto out;
		}
		why = node_refused(&n->params);
	}
	if (why) {
		wire_fail(s->err, "%s %llu holds %s, which a checkpoint cannot carry yet", what,
			 (unsigned long long)id, why);
		goto out;
	}
	if (image_edges(&k, im)) {
		wire_fail(s->err, "out of memory");
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
		wire_fail(s->err, "out of memory");
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
	if (!(o->body.data = (uint8_t *)objects_encode((xdrproc_t)xdr_graph_image, im, &len))) {
		wire_fail(s->err, "out of memory");
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
	struct exec_rec *e = objects_exec_find(s->w, exec);
	graph_image im;
	int rc;

	if (!e || e->stale || !e->shadow) {
		wire_fail(s->err, "executable graph %llu cannot be carried by a checkpoint yet: %s",
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

static int save_array(struct saving *s, uint64_t id, CUarray a)
{
	Cicada__Object *o;
	image_hash hash;
	size_t size = 0;
	void *buf = NULL;
	CUresult err = objects_array_copy(a, NULL, 1, &size);
	int rc = -1;

	if (!err && !(buf = malloc(size + 1)))
		err = CUDA_ERROR_OUT_OF_MEMORY;
	if (!err)
		err = objects_array_copy(a, buf, 1, &size);
	if (err) {
		wire_fail(s->err, err == CUDA_ERROR_NOT_SUPPORTED ?
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
		return wire_fail(s->err, "out of memory");
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

/* Whether a graph or exec the manifest describes records or waits on
 * event id (graph images are only decoded when asked). */
int objects_use_event(const Cicada__Manifest *m, uint64_t id)
{
	int used = 0;

	for (size_t i = 0; i < m->n_objects && !used; i++) {
		const Cicada__Object *o = m->objects[i];
		graph_image im;

		if (o->kind != OBJ_GRAPH && o->kind != OBJ_EXEC)
			continue;
		memset(&im, 0, sizeof(im));
		if (objects_decode((xdrproc_t)xdr_graph_image, &im, o->body.data, o->body.len))
			continue;
		for (u_int n = 0; n < im.nodes.nodes_len && !used; n++) {
			const graph_params *g = &im.nodes.nodes_val[n].params;
			used = (g->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD || g->type == CU_GRAPH_NODE_TYPE_WAIT_EVENT) &&
			       g->v.v_len == GE_N && g->v.v_val[GE_EVENT] == id;
		}
		xdr_free((xdrproc_t)xdr_graph_image, (char *)&im);
	}
	return used;
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

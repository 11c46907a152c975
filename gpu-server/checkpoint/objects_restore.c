/*
 * objects_restore.c: makes a snapshot's graphs, execs, arrays' contents
 * and texture objects again: texture objects and execs where they were
 * made in the replay log (objects_restore_upto), the rest at the end.
 */
#include <stdlib.h>
#include <string.h>
#include "checkpoint.h"
#include "state/objects-internal.h"
#include "snapshot.h"

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
		wire_fail(err, "cannot make node %u (type %u) of a CUDA graph again (error %d)", i,
			 im->nodes.nodes_val[i].params.type, (int)rc);
	else if (ret)
		wire_fail(err, "cannot make the edges of a CUDA graph again (error %d)", (int)rc);
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
			wire_fail(err, "a CUDA graph names a child graph the snapshot lacks");
			return -1;
		}
		if (depth >= 16) {
			wire_fail(err, "CUDA graphs are nested more than 16 deep");
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
	if (objects_decode((xdrproc_t)xdr_graph_image, &im, o->body.data, o->body.len)) {
		wire_fail(err, "graph %llu: its description does not decode", (unsigned long long)o->handle);
		return -1;
	}
	if (early && !refs_ready(w, &im)) {
		ret = 1;
		goto out;
	}
	if (children(w, m, &im, err))
		goto out;
	if ((rc = cuGraphCreate(&g, 0))) {
		wire_fail(err, "cannot create a CUDA graph (error %d)", (int)rc);
		goto out;
	}
	if (graph_build(w, &im, g, o->kind == OBJ_EXEC ? &e : NULL, err))
		goto out;
	if (o->kind == OBJ_GRAPH) {
		ret = bind_id(w, H_GRAPH, g, o->handle);
		g = ret ? g : NULL;
	} else if ((rc = cuGraphInstantiateWithFlags(&exec, g, im.flags))) {
		wire_fail(err, "cannot instantiate executable graph %llu again (error %d)",
			 (unsigned long long)o->handle, (int)rc);
	} else if (!(ret = bind_id(w, H_GRAPH_EXEC, exec, o->handle))) {
		struct exec_rec *r;
		objects_exec_created(w, exec, NULL, im.flags);
		if ((r = objects_exec_find(w, exec))) {
			r->shadow = g, r->alias = e.alias, r->nalias = e.nalias;
			g = NULL, e.alias = NULL;
		}
	}
	if (ret < 0 && !err[0])
		wire_fail(err, "graph handle %llu is taken", (unsigned long long)o->handle);
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
	    !objects_array_copy(a, NULL, 0, &want) && want == size)
		rc = objects_array_copy(a, data, 0, &size);
	free(data);
	if (rc)
		wire_fail(err, "cannot write CUDA array %llu back (error %d)", (unsigned long long)o->handle,
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
	if (objects_decode((xdrproc_t)xdr_tex_object_args, &a, o->body.data, o->body.len))
		return wire_fail(err, "texture object %llu: its description does not decode",
				(unsigned long long)o->handle);
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
		wire_fail(err, rc ? "cannot make texture object %llu again (error %d)" :
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
		wire_fail(err, "the snapshot holds an object of unknown kind %u", o->kind);
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
		return wire_fail(err, "out of memory");
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
		return wire_fail(err, "out of memory");
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

/*
 * userobj.c: user objects (cuUserObjectCreate, Retain, Release, and
 * cuGraphRetainUserObject, cuGraphReleaseUserObject), kept in the
 * application: an object is the program's pointer and destructor with a
 * count of references, some of them held by graphs and executable
 * graphs, which this file tracks by their handles. graph.c tells it when
 * a graph is cloned or instantiated (the copy takes the same references)
 * and when one is destroyed (its references go). NCCL gives graphs that
 * capture its collectives such objects, to free its plans.
 *
 * As natively, a destructor runs on a thread of its own, never the
 * caller's, and an object a destroyed graph held is freed only after the
 * context's work (which may still use it) has finished. A checkpoint
 * carries the objects with the process's memory; the graphs keep their
 * handles through it.
 */
#include <pthread.h>
#include <stdlib.h>
#include "interposer.h"

struct uobj {
	void *ptr;
	CUhostFn destroy;
	unsigned long long refs;
	struct uobj *next;                   /* the live objects */
};

struct uref {
	uint64_t owner;                      /* a graph's or executable graph's handle */
	struct uobj *o;
	unsigned long long count;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct uobj *objects;
static struct uref *refs;
static unsigned nrefs, cap_refs;

/* --- under the lock --- */

static int live(const struct uobj *o)
{
	for (const struct uobj *p = objects; p && o; p = p->next)
		if (p == o)
			return 1;
	return 0;
}

/* Takes n references off o; o itself once none is left (unlinked). */
static struct uobj *drop(struct uobj *o, unsigned long long n)
{
	struct uobj **pp;

	if ((o->refs -= n))
		return NULL;
	for (pp = &objects; *pp && *pp != o; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = o->next;
	return o;
}

static struct uref *find_ref(uint64_t owner, const struct uobj *o)
{
	for (unsigned i = 0; i < nrefs; i++)
		if (refs[i].owner == owner && refs[i].o == o)
			return &refs[i];
	return NULL;
}

static int add_ref(uint64_t owner, struct uobj *o, unsigned long long count)
{
	struct uref *r = find_ref(owner, o);

	if (r) {
		r->count += count;
		return 0;
	}
	if (nrefs == cap_refs) {
		unsigned cap = cap_refs ? 2 * cap_refs : 16;
		struct uref *n = realloc(refs, cap * sizeof(*refs));
		if (!n)
			return -1;
		refs = n, cap_refs = cap;
	}
	refs[nrefs++] = (struct uref){ owner, o, count };
	return 0;
}

/* --- destructors: on a thread of their own --- */

struct dead {
	struct uobj **v;
	unsigned n;
};

static void *run_destructors(void *arg)
{
	struct dead *d = arg;

	for (unsigned i = 0; i < d->n; i++) {
		d->v[i]->destroy(d->v[i]->ptr);
		free(d->v[i]);
	}
	free(d->v);
	free(d);
	return NULL;
}

static void destroy_later(struct dead *d)
{
	pthread_attr_t attr;
	pthread_t t;

	if (!d->n) {
		free(d->v);
		free(d);
		return;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, run_destructors, d))
		run_destructors(d);          /* no thread to be had: here, rather than never */
	pthread_attr_destroy(&attr);
}

static struct dead *dead_one(struct uobj *o)
{
	struct dead *d = calloc(1, sizeof(*d));

	if (d && o && (d->v = malloc(sizeof(*d->v))))
		d->v[d->n++] = o;
	return d;
}

/* --- the driver API --- */

CUresult CUDAAPI cuUserObjectCreate(CUuserObject *object_out, void *ptr, CUhostFn destroy, unsigned int initialRefcount,
				    unsigned int flags)
{
	struct uobj *o;

	if (!object_out || !destroy || !initialRefcount || initialRefcount > INT32_MAX ||
	    flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC || !(o = calloc(1, sizeof(*o))))
		return CUDA_ERROR_INVALID_VALUE;
	o->ptr = ptr, o->destroy = destroy, o->refs = initialRefcount;
	pthread_mutex_lock(&lock);
	o->next = objects;
	objects = o;
	pthread_mutex_unlock(&lock);
	*object_out = (CUuserObject)o;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuUserObjectRetain(CUuserObject object, unsigned int count)
{
	struct uobj *o = (struct uobj *)object;
	CUresult err = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&lock);
	if (count && count <= INT32_MAX && live(o)) {
		o->refs += count;
		err = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&lock);
	return err;
}

CUresult CUDAAPI cuUserObjectRelease(CUuserObject object, unsigned int count)
{
	struct uobj *o = (struct uobj *)object, *gone = NULL;
	CUresult err = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&lock);
	if (count && count <= INT32_MAX && live(o) && count <= o->refs) {
		gone = drop(o, count);
		err = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&lock);
	if (gone)
		destroy_later(dead_one(gone));
	return err;
}

CUresult CUDAAPI cuGraphRetainUserObject(CUgraph graph, CUuserObject object, unsigned int count, unsigned int flags)
{
	struct uobj *o = (struct uobj *)object;
	CUresult err = CUDA_ERROR_INVALID_VALUE;

	if (!graph || !count || count > INT32_MAX || (flags & ~(unsigned)CU_GRAPH_USER_OBJECT_MOVE))
		return err;
	pthread_mutex_lock(&lock);
	if (live(o) && (!(flags & CU_GRAPH_USER_OBJECT_MOVE) || count <= o->refs)) {
		if (add_ref(handle_id(graph), o, count))
			err = CUDA_ERROR_OUT_OF_MEMORY;
		else if (!(flags & CU_GRAPH_USER_OBJECT_MOVE))
			o->refs += count, err = CUDA_SUCCESS;
		else
			err = CUDA_SUCCESS;      /* the caller's references are the graph's now */
	}
	pthread_mutex_unlock(&lock);
	return err;
}

CUresult CUDAAPI cuGraphReleaseUserObject(CUgraph graph, CUuserObject object, unsigned int count)
{
	struct uobj *o = (struct uobj *)object, *gone = NULL;
	CUresult err = CUDA_ERROR_INVALID_VALUE;
	struct uref *r;

	if (!graph || !count || count > INT32_MAX)
		return err;
	pthread_mutex_lock(&lock);
	if (live(o) && (r = find_ref(handle_id(graph), o)) && count <= r->count) {
		if (!(r->count -= count))
			*r = refs[--nrefs];
		gone = drop(o, count);
		err = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&lock);
	if (gone) {
		cuCtxSynchronize();          /* the graph's work may use it still */
		destroy_later(dead_one(gone));
	}
	return err;
}

/* --- graph.c's: graphs copied and destroyed --- */

/* A graph cloned or instantiated: the copy holds what the source held. */
void userobj_copy(uint64_t from, uint64_t to)
{
	pthread_mutex_lock(&lock);
	for (unsigned i = 0, n = nrefs; i < n; i++)
		if (refs[i].owner == from && !add_ref(to, refs[i].o, refs[i].count))
			refs[i].o->refs += refs[i].count;
	pthread_mutex_unlock(&lock);
}

/* A graph or executable graph destroyed: its references go, and the
 * objects left with none are destroyed once the context's work is done. */
void userobj_gone(uint64_t owner)
{
	struct dead *d = calloc(1, sizeof(*d));
	struct uobj *o;

	pthread_mutex_lock(&lock);
	if (d && nrefs)
		d->v = malloc(nrefs * sizeof(*d->v));
	for (unsigned i = 0; i < nrefs;) {
		if (refs[i].owner != owner) {
			i++;
			continue;
		}
		if ((o = drop(refs[i].o, refs[i].count)) && d && d->v)
			d->v[d->n++] = o;
		refs[i] = refs[--nrefs];
	}
	pthread_mutex_unlock(&lock);
	if (!d)
		return;
	if (d->n)
		cuCtxSynchronize();
	destroy_later(d);
}

/*
 * userobj.c: the stand-in's user objects: a pointer, a destructor and a
 * count of references, some held by graphs and executable graphs
 * (graph.c copies them with a graph and drops them with it). Work here is
 * done when it is issued, so a destructor runs as soon as the last
 * reference goes.
 */
#include <pthread.h>
#include <stdlib.h>
#include "fakecuda.h"

struct uobj {
	void *ptr;
	CUhostFn destroy;
	unsigned long long refs;
	struct uobj *next;
};

struct uref {
	const void *owner;
	struct uobj *o;
	unsigned long long count;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct uobj *objects;
static struct uref refs[1024];
static unsigned nrefs;

static int live(const struct uobj *o)
{
	for (const struct uobj *p = objects; p && o; p = p->next)
		if (p == o)
			return 1;
	return 0;
}

/* Under the lock: o, unlinked, if its last reference went. */
static struct uobj *drop(struct uobj *o, unsigned long long n)
{
	struct uobj **pp;

	if ((o->refs -= n))
		return NULL;
	for (pp = &objects; *pp != o; pp = &(*pp)->next)
		;
	*pp = o->next;
	return o;
}

static void run(struct uobj *o)
{
	if (o) {
		o->destroy(o->ptr);
		free(o);
	}
}

static struct uref *find(const void *owner, const struct uobj *o)
{
	for (unsigned i = 0; i < nrefs; i++)
		if (refs[i].owner == owner && refs[i].o == o)
			return &refs[i];
	return NULL;
}

static int add(const void *owner, struct uobj *o, unsigned long long count)
{
	struct uref *r = find(owner, o);

	if (r)
		r->count += count;
	else if (nrefs < sizeof(refs) / sizeof(refs[0]))
		refs[nrefs++] = (struct uref){ owner, o, count };
	else
		return -1;
	return 0;
}

CUresult cuUserObjectCreate(CUuserObject *out, void *ptr, CUhostFn destroy, unsigned int n, unsigned int flags)
{
	struct uobj *o;

	CHECK_ARG(out && destroy && n && n <= INT32_MAX && flags == CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
	CHECK(o = calloc(1, sizeof(*o)), CUDA_ERROR_OUT_OF_MEMORY);
	o->ptr = ptr, o->destroy = destroy, o->refs = n;
	pthread_mutex_lock(&lock);
	o->next = objects;
	objects = o;
	pthread_mutex_unlock(&lock);
	*out = (CUuserObject)o;
	return CUDA_SUCCESS;
}

CUresult cuUserObjectRetain(CUuserObject obj, unsigned int n)
{
	CUresult err = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&lock);
	if (n && n <= INT32_MAX && live((struct uobj *)obj)) {
		((struct uobj *)obj)->refs += n;
		err = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&lock);
	return err;
}

CUresult cuUserObjectRelease(CUuserObject obj, unsigned int n)
{
	struct uobj *o = (struct uobj *)obj, *gone = NULL;
	CUresult err = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&lock);
	if (n && n <= INT32_MAX && live(o) && n <= o->refs) {
		gone = drop(o, n);
		err = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&lock);
	run(gone);
	return err;
}

CUresult cuGraphRetainUserObject(CUgraph g, CUuserObject obj, unsigned int n, unsigned int flags)
{
	struct uobj *o = (struct uobj *)obj;
	int move = flags & CU_GRAPH_USER_OBJECT_MOVE;
	CUresult err = CUDA_ERROR_INVALID_VALUE;

	CHECK_ARG(g && n && n <= INT32_MAX && !(flags & ~(unsigned)CU_GRAPH_USER_OBJECT_MOVE));
	pthread_mutex_lock(&lock);
	if (live(o) && (!move || n <= o->refs) && !add(g, o, n)) {
		if (!move)
			o->refs += n;
		err = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&lock);
	return err;
}

CUresult cuGraphReleaseUserObject(CUgraph g, CUuserObject obj, unsigned int n)
{
	struct uobj *o = (struct uobj *)obj, *gone = NULL;
	CUresult err = CUDA_ERROR_INVALID_VALUE;
	struct uref *r;

	CHECK_ARG(g && n && n <= INT32_MAX);
	pthread_mutex_lock(&lock);
	if (live(o) && (r = find(g, o)) && n <= r->count) {
		if (!(r->count -= n))
			*r = refs[--nrefs];
		gone = drop(o, n);
		err = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&lock);
	run(gone);
	return err;
}

void fc_userobj_copy(const void *from, const void *to)
{
	pthread_mutex_lock(&lock);
	for (unsigned i = 0, n = nrefs; i < n; i++)
		if (refs[i].owner == from && !add(to, refs[i].o, refs[i].count))
			refs[i].o->refs += refs[i].count;
	pthread_mutex_unlock(&lock);
}

void fc_userobj_gone(const void *owner)
{
	struct uobj *gone[1024];
	unsigned n = 0;

	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < nrefs;) {
		if (refs[i].owner != owner) {
			i++;
			continue;
		}
		if ((gone[n] = drop(refs[i].o, refs[i].count)))
			n++;
		refs[i] = refs[--nrefs];
	}
	pthread_mutex_unlock(&lock);
	for (unsigned i = 0; i < n; i++)
		run(gone[i]);
}

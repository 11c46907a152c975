/*
 * Book-keeping of the stand-in: which handles are alive (so a stale or
 * made-up CUstream, CUevent, CUmodule... gives CUDA_ERROR_INVALID_HANDLE
 * instead of a crash) and which address ranges are valid "device" memory
 * (allocations, pinned or registered host memory, module globals, mapped
 * VMM ranges), so copies and memsets can be range-checked like the real
 * driver does.  Both tables are plain arrays under a mutex; tests keep
 * them small.
 */
#include <pthread.h>
#include <stdlib.h>
#include "fakecuda.h"

struct obj {
	const void *p;
	int kind;
	struct fc_ctx *ctx;
	void (*drop)(void *);
};

static pthread_mutex_t obj_lock = PTHREAD_MUTEX_INITIALIZER;
static struct obj *objs;
static size_t nobjs, cap_objs;

static pthread_mutex_t range_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fc_range *ranges;
static size_t nranges, cap_ranges;
static unsigned long long next_id = 1;
static size_t used;

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	void *p;

	if (n < *cap)
		return 0;
	p = realloc(*arr, (*cap ? *cap * 2 : 64) * elem);
	if (!p)
		return -1;
	*arr = p;
	*cap = *cap ? *cap * 2 : 64;
	return 0;
}

int fc_obj_add(void *p, int kind, struct fc_ctx *ctx, void (*drop)(void *))
{
	int ret = -1;

	pthread_mutex_lock(&obj_lock);
	if (!grow((void **)&objs, &cap_objs, nobjs, sizeof(*objs))) {
		objs[nobjs++] = (struct obj){ p, kind, ctx, drop };
		ret = 0;
	}
	pthread_mutex_unlock(&obj_lock);
	return ret;
}

int fc_obj_has(const void *p, int kind)
{
	size_t i;
	int found = 0;

	pthread_mutex_lock(&obj_lock);
	for (i = 0; i < nobjs && !found; i++)
		found = objs[i].p == p && objs[i].kind == kind;
	pthread_mutex_unlock(&obj_lock);
	return p && found;
}

/* Forget a handle; returns 0 when it was not a live one of that kind. */
int fc_obj_del(const void *p, int kind)
{
	size_t i;
	int found = 0;

	pthread_mutex_lock(&obj_lock);
	for (i = 0; i < nobjs; i++) {
		if (objs[i].p == p && objs[i].kind == kind) {
			objs[i] = objs[--nobjs];
			found = 1;
			break;
		}
	}
	pthread_mutex_unlock(&obj_lock);
	return p && found;
}

/* Destroy everything a context owns, one object at a time, unlocked. */
void fc_obj_drop_ctx(struct fc_ctx *ctx)
{
	for (;;) {
		struct obj o = { 0 };
		size_t i;

		pthread_mutex_lock(&obj_lock);
		for (i = 0; i < nobjs; i++) {
			if (objs[i].ctx == ctx && objs[i].kind != FC_CTX) {
				o = objs[i];
				objs[i] = objs[--nobjs];
				break;
			}
		}
		pthread_mutex_unlock(&obj_lock);
		if (!o.p)
			break;
		if (o.drop)
			o.drop((void *)o.p);
	}
	fc_range_drop_ctx(ctx);
}

int fc_range_add(uintptr_t base, size_t size, int kind, struct fc_ctx *ctx, int usable)
{
	int ret = -1;

	pthread_mutex_lock(&range_lock);
	if (!grow((void **)&ranges, &cap_ranges, nranges, sizeof(*ranges))) {
		ranges[nranges++] = (struct fc_range){ base, size, kind, usable, ctx, next_id++, 0 };
		ret = 0;
	}
	pthread_mutex_unlock(&range_lock);
	return ret;
}

/* The flags of the range that starts at base (host memory's). */
void fc_range_set_flags(uintptr_t base, unsigned flags)
{
	pthread_mutex_lock(&range_lock);
	for (size_t i = 0; i < nranges; i++)
		if (ranges[i].base == base)
			ranges[i].flags = flags;
	pthread_mutex_unlock(&range_lock);
}

static struct fc_range *lookup(uintptr_t addr)
{
	size_t i;

	for (i = 0; i < nranges; i++)
		if (addr >= ranges[i].base && addr - ranges[i].base < ranges[i].size)
			return &ranges[i];
	return NULL;
}

int fc_range_find(uintptr_t addr, struct fc_range *out)
{
	struct fc_range *r;

	pthread_mutex_lock(&range_lock);
	r = lookup(addr);
	if (r && out)
		*out = *r;
	pthread_mutex_unlock(&range_lock);
	return r != NULL;
}

int fc_range_overlaps(uintptr_t base, size_t size)
{
	size_t i;
	int hit = 0;

	pthread_mutex_lock(&range_lock);
	for (i = 0; i < nranges && !hit; i++)
		hit = base < ranges[i].base + ranges[i].size && ranges[i].base < base + size;
	pthread_mutex_unlock(&range_lock);
	return hit;
}

/* [addr, addr+n) must lie inside one usable range. */
CUresult fc_range_check(uintptr_t addr, size_t n)
{
	struct fc_range r;

	if (!fc_range_find(addr, &r) || !r.usable)
		return CUDA_ERROR_INVALID_VALUE;
	return n <= r.size - (addr - r.base) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

int fc_range_del(uintptr_t base, int kind, struct fc_range *out)
{
	size_t i;
	int found = 0;

	pthread_mutex_lock(&range_lock);
	for (i = 0; i < nranges; i++) {
		if (ranges[i].base == base && ranges[i].kind == kind) {
			if (out)
				*out = ranges[i];
			ranges[i] = ranges[--nranges];
			found = 1;
			break;
		}
	}
	pthread_mutex_unlock(&range_lock);
	return found;
}

/* Mark (or delete) the ranges of one kind inside [lo, lo+n); returns count. */
int fc_range_span(uintptr_t lo, size_t n, int kind, int usable, int del)
{
	size_t i = 0;
	int count = 0;

	pthread_mutex_lock(&range_lock);
	while (i < nranges) {
		struct fc_range *r = &ranges[i];

		if (r->kind == kind && r->base >= lo && r->base + r->size <= lo + n) {
			count++;
			if (del) {
				*r = ranges[--nranges];
				continue;
			}
			r->usable = usable;
		}
		i++;
	}
	pthread_mutex_unlock(&range_lock);
	return count;
}

/* Free the allocations of a context that goes away. */
void fc_range_drop_ctx(struct fc_ctx *ctx)
{
	size_t i = 0;

	pthread_mutex_lock(&range_lock);
	while (i < nranges) {
		struct fc_range *r = &ranges[i];

		if (r->ctx == ctx && (r->kind == FC_MEM_DEVICE || r->kind == FC_MEM_HOST ||
				      r->kind == FC_MEM_REGISTERED)) {
			if (r->kind == FC_MEM_DEVICE)
				used -= r->size;
			if (r->kind != FC_MEM_REGISTERED)
				free((void *)r->base);
			*r = ranges[--nranges];
			continue;
		}
		i++;
	}
	pthread_mutex_unlock(&range_lock);
}

size_t fc_total_mem(void)
{
	static size_t total;

	if (!total) {
		const char *mib = getenv("FAKECUDA_TOTAL_MIB");
		total = mib && atoll(mib) > 0 ? (size_t)atoll(mib) << 20 : 16ULL << 30;
	}
	return total;
}

/* Account device memory; returns the new total, or -1 when it would overflow. */
size_t fc_mem_used(long long delta)
{
	size_t u = (size_t)-1;

	pthread_mutex_lock(&range_lock);
	if (delta <= 0 || used + delta <= FC_TOTAL_MEM) {
		used += delta;
		u = used;
	}
	pthread_mutex_unlock(&range_lock);
	return u;
}

/*
 * hostarea.c: a worker's own large host mappings (the client's shared
 * segment and pinned regions, snapshot buffers, the stacks of its
 * threads) in an address range of their own.
 *
 * The driver takes the device addresses of what it places itself (module
 * variables above all) from the process's default mapping area, top
 * down, as mmap(NULL) does. A mapping of the worker's made there between
 * two module loads moves the second module's variables down; a restoring
 * worker, which replays the loads without it, puts them back higher, and
 * the pointers the program holds no longer meet them. So once a worker
 * calls hostarea_enable (before CUDA starts), what it maps itself goes
 * here, at fixed places well away from the default area, the device
 * arena and the application's own reservations; only the driver's own
 * mappings stay in the default area. Elsewhere (tools, tests) these
 * calls are plain mmap, munmap and pthread_create.
 *
 * Only the worker keeps such an area, so it lives in gpu-server/state/
 * (hostarea.h). The shared-memory ring (wire/shm.c) maps a client's
 * segment through the mapper hostarea_enable gives it (shm_set_mapper)
 * and knows nothing of the layout.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "hostarea.h"
#include "wire.h"

#define AREA_BASE 0x180000000000ull          /* 24 TiB: below the arena (32 TiB) */
#define AREA_SIZE (4ull << 40)
#define AREA_ALIGN (2ull << 20)
#define FREE_MAX 256
#define STACK_SIZE (8u << 20)
#define THREADS_MAX 256

struct range {
	uint64_t at, size;
};

static struct {
	int on;
	uint64_t next;                       /* never handed out beyond this */
	struct range free[FREE_MAX];
	unsigned nfree;
	struct { pthread_t t; void *stack; } threads[THREADS_MAX];
	unsigned nthreads;
	pthread_mutex_t lock;
} area = { .lock = PTHREAD_MUTEX_INITIALIZER };

void hostarea_enable(void)
{
	/* malloc stays in the brk heap (no mmap'd blocks, one arena), far
	 * below the default area, for the driver's allocations as for ours */
	mallopt(M_MMAP_MAX, 0);
	mallopt(M_ARENA_MAX, 1);
	area.on = 1;
	area.next = AREA_BASE;
	shm_set_mapper(hostarea_map, hostarea_unmap);   /* the client's segment too */
}

int hostarea_enabled(void)
{
	return area.on;
}

static uint64_t round_up(uint64_t n)
{
	return (n + AREA_ALIGN - 1) & ~(AREA_ALIGN - 1);
}

/* A free place of size bytes (first fit, else fresh), or 0. */
static uint64_t take(uint64_t size)
{
	uint64_t at = 0;

	pthread_mutex_lock(&area.lock);
	for (unsigned i = 0; i < area.nfree && !at; i++) {
		if (area.free[i].size < size)
			continue;
		at = area.free[i].at;
		area.free[i].at += size;
		area.free[i].size -= size;
		if (!area.free[i].size)
			area.free[i] = area.free[--area.nfree];
	}
	if (!at && area.next + size <= AREA_BASE + AREA_SIZE) {
		at = area.next;
		area.next += size;
	}
	pthread_mutex_unlock(&area.lock);
	return at;
}

static void give_back(uint64_t at, uint64_t size)
{
	pthread_mutex_lock(&area.lock);
	for (unsigned i = 0; i < area.nfree; i++) {
		if (area.free[i].at + area.free[i].size == at) {
			area.free[i].size += size;
			goto out;
		}
		if (at + size == area.free[i].at) {
			area.free[i].at = at;
			area.free[i].size += size;
			goto out;
		}
	}
	if (area.nfree < FREE_MAX)
		area.free[area.nfree++] = (struct range){ at, size };
out:
	pthread_mutex_unlock(&area.lock);
}

void *hostarea_map(size_t size, int prot, int flags, int fd, off_t off)
{
	uint64_t len = round_up(size), at;
	void *p;

	if (!area.on || !size)
		return mmap(NULL, size, prot, flags, fd, off);
	for (int tries = 0; tries < 4; tries++) {
		if (!(at = take(len)))
			break;
		p = mmap((void *)(uintptr_t)at, size, prot, flags | MAP_FIXED_NOREPLACE, fd, off);
		if (p == (void *)(uintptr_t)at)
			return p;
		if (p != MAP_FAILED)         /* a kernel without NOREPLACE put it elsewhere */
			munmap(p, size);
		if (errno != EEXIST)
			break;               /* (that place stays taken: someone is there) */
	}
	return mmap(NULL, size, prot, flags, fd, off);
}

/* Takes [at, at + size) of the area if no part of it is handed out. */
static int take_at(uint64_t at, uint64_t size)
{
	int rc = -1;

	pthread_mutex_lock(&area.lock);
	if (at >= area.next) {
		if (at + size > AREA_BASE + AREA_SIZE || (at > area.next && area.nfree >= FREE_MAX))
			goto out;
		if (at > area.next)
			area.free[area.nfree++] = (struct range){ area.next, at - area.next };
		area.next = at + size;
		rc = 0;
		goto out;
	}
	for (unsigned i = 0; i < area.nfree; i++) {
		struct range f = area.free[i];

		if (at < f.at || at + size > f.at + f.size)
			continue;
		if (at > f.at)
			area.free[i].size = at - f.at;
		else
			area.free[i] = area.free[--area.nfree];
		if (f.at + f.size > at + size && area.nfree < FREE_MAX)      /* (else that rest is lost) */
			area.free[area.nfree++] = (struct range){ at + size, f.at + f.size - at - size };
		rc = 0;
		break;
	}
out:
	pthread_mutex_unlock(&area.lock);
	return rc;
}

/* As hostarea_map, at at if that place of the area is free (a restored
 * client's region goes back where it was); elsewhere otherwise. */
void *hostarea_map_at(uint64_t at, size_t size, int prot, int flags, int fd, off_t off)
{
	uint64_t len = round_up(size);
	void *p;

	if (!area.on || !size || !at || at % AREA_ALIGN || at < AREA_BASE || at >= AREA_BASE + AREA_SIZE ||
	    len > AREA_BASE + AREA_SIZE - at || take_at(at, len))
		return hostarea_map(size, prot, flags, fd, off);
	p = mmap((void *)(uintptr_t)at, size, prot, flags | MAP_FIXED_NOREPLACE, fd, off);
	if (p == (void *)(uintptr_t)at)
		return p;
	if (p != MAP_FAILED)
		munmap(p, size);
	else if (errno != EEXIST)
		give_back(at, len);          /* (else that place stays taken: someone is there) */
	return hostarea_map(size, prot, flags, fd, off);
}

void hostarea_unmap(void *p, size_t size)
{
	uint64_t at = (uintptr_t)p;

	if (!p || p == MAP_FAILED)
		return;
	munmap(p, size);
	if (area.on && at >= AREA_BASE && at < AREA_BASE + AREA_SIZE)
		give_back(at, round_up(size));
}

/* --- threads whose stacks live in the area --- */

int hostarea_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	void *stack;
	int rc;

	if (!area.on)
		return pthread_create(t, NULL, fn, arg);
	stack = hostarea_map(STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		return EAGAIN;
	pthread_attr_init(&attr);
	pthread_attr_setstack(&attr, stack, STACK_SIZE);
	pthread_mutex_lock(&area.lock);
	rc = area.nthreads < THREADS_MAX ? pthread_create(t, &attr, fn, arg) : EAGAIN;
	if (!rc)
		area.threads[area.nthreads++] = (typeof(area.threads[0])){ *t, stack };
	pthread_mutex_unlock(&area.lock);
	pthread_attr_destroy(&attr);
	if (rc)
		hostarea_unmap(stack, STACK_SIZE);
	return rc;
}

/* Joins a thread of hostarea_thread (or pthread_create) and frees its stack. */
int hostarea_join(pthread_t t, void **ret)
{
	void *stack = NULL;
	int rc;

	pthread_mutex_lock(&area.lock);
	for (unsigned i = 0; i < area.nthreads; i++)
		if (pthread_equal(area.threads[i].t, t)) {
			stack = area.threads[i].stack;
			area.threads[i] = area.threads[--area.nthreads];
			break;
		}
	pthread_mutex_unlock(&area.lock);
	rc = pthread_join(t, ret);
	if (stack)
		hostarea_unmap(stack, STACK_SIZE);
	return rc;
}

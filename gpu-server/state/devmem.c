/*
 * devmem.c: the client's device memory. Every allocation lives in one
 * virtual address arena that the worker reserves at a fixed device address
 * and backs with physical memory through the VMM API (cuMemCreate,
 * cuMemMap). A restoring worker reserves the same arena and maps the same
 * chunks, so every allocation comes back at its old address and pointers
 * stored anywhere stay valid.
 *
 * Each GPU the client sees has a slice of ARENA_SIZE in the arena, in the
 * order of the client's ordinals: an allocation lands in the slice of the
 * current context's device, and a restore onto other GPUs keeps every
 * address, each slice backed by the GPU that now has that ordinal. A
 * chunk is mapped for its own GPU and for every GPU of the client that
 * can reach it (peer access), so unified addressing holds across them.
 *
 * A chunk is one physical allocation. Requests of half a granule or more
 * get a chunk of their own; smaller ones share granule-sized chunks,
 * carved in 256-byte units (the driver's own alignment).
 *
 * Only the worker's main thread changes the chunks, but a migration's
 * pre-copy thread reads them while the application runs: it reads under
 * the lock that adding and unmapping a chunk take (devmem_read_live).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "state.h"

#define UNIT 256u
#define ARENA_BASE 0x200000000000ull         /* 32 TiB: clear of host mappings */
#define ARENA_SIZE (1ull << 40)

struct chunk {
	uint64_t va, size;
	CUmemGenericAllocationHandle handle;
	uint64_t *units;                     /* shared chunks: bitmap of used units */
	unsigned used;                       /* allocations in the chunk */
};

struct alloc {
	uint64_t va, size;
};

struct devmem {
	uint64_t base, size, gran;
	struct worker *w;                    /* its GPUs (gpus.c) */
	struct chunk *chunks;                /* sorted by va */
	unsigned nchunks, cap_chunks;
	struct alloc *allocs;                /* sorted by va */
	unsigned nallocs, cap_allocs;
	pthread_rwlock_t lock;               /* chunks: written by the main thread */
	/* a restore's source of physical memory already written (preload.c) */
	int (*take)(void *ctx, uint64_t va, uint64_t size, CUmemGenericAllocationHandle *h);
	void *take_ctx;
	void (*unmapped)(struct worker *w, uint64_t va);   /* a chunk went (ipc.c's hook) */
};

/* Makes room for element n of an array of *cap (doubling, from 64). */
int array_grow(void **arr, unsigned *cap, unsigned n, size_t elem)
{
	unsigned c = *cap ? *cap * 2 : 64;
	void *p;

	if (n < *cap)
		return 0;
	if (!(p = realloc(*arr, (size_t)c * elem)))
		return -1;
	*arr = p;
	*cap = c;
	return 0;
}

/* The slice of va, the client's ordinal of its GPU. */
static unsigned slot_of(const struct devmem *m, uint64_t va)
{
	return (unsigned)((va - m->base) / ARENA_SIZE);
}

/* The real GPU of the slice of va, or -1. */
static CUdevice device_of(const struct devmem *m, uint64_t va)
{
	unsigned s = slot_of(m, va);

	return s < (unsigned)m->w->ngpus ? m->w->gpu[s] : -1;
}

static CUmemAllocationProp chunk_prop(CUdevice dev)
{
	CUmemAllocationProp p = { 0 };

	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = dev;
	p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;   /* IPC (ipc.c) */
	return p;
}

/* Reserves the arena at base (0: the default address, with a slice for
 * each GPU of the node). */
CUresult devmem_init(struct worker *w, uint64_t base, uint64_t size)
{
	struct devmem *m = w->devmem;
	CUmemAllocationProp prop;
	CUdeviceptr got;
	CUresult err;

	if (!m) {
		if (!(m = w->devmem = calloc(1, sizeof(*m))))
			return CUDA_ERROR_OUT_OF_MEMORY;
		pthread_rwlockattr_t attr;

		/* the application's allocations do not wait behind a pre-copy */
		pthread_rwlockattr_init(&attr);
		pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		pthread_rwlock_init(&m->lock, &attr);
		pthread_rwlockattr_destroy(&attr);
		m->w = w;
	}
	base = base ? base : ARENA_BASE;
	size = size ? size : ARENA_SIZE * (uint64_t)(w->nreal > 1 ? w->nreal : 1);
	if (m->base) {
		if (m->base == base && m->size == size)
			return CUDA_SUCCESS;
		if (m->nchunks)
			return CUDA_ERROR_INVALID_VALUE;
		cuMemAddressFree(m->base, m->size);
		m->base = 0;
	}
	prop = chunk_prop(w->ngpus ? w->gpu[0] : 0);
	if ((err = cuMemGetAllocationGranularity(&m->gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)))
		return err;
	if ((err = cuMemAddressReserve(&got, size, m->gran, base, 0)))
		return err;
	if (got != base) {
		cuMemAddressFree(got, size);
		log_error("device address range 0x%llx is taken on this GPU",
			  (unsigned long long)base);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	m->base = base;
	m->size = size;
	return CUDA_SUCCESS;
}

void devmem_arena(const struct worker *w, uint64_t *base, uint64_t *size)
{
	*base = w->devmem ? w->devmem->base : 0;
	*size = w->devmem ? w->devmem->size : 0;
}

/* The real GPU whose memory backs va (by its slice), or -1. */
CUdevice devmem_device(const struct worker *w, uint64_t va)
{
	const struct devmem *m = w->devmem;

	return m && va >= m->base && va - m->base < m->size ? device_of(m, va) : -1;
}

/* Physical memory for the chunk at va, on the GPU of its slice. */
CUresult devmem_create(struct worker *w, uint64_t va, uint64_t size, CUmemGenericAllocationHandle *h)
{
	CUdevice dev = devmem_device(w, va);
	CUmemAllocationProp prop = chunk_prop(dev);

	return dev < 0 ? CUDA_ERROR_INVALID_DEVICE : cuMemCreate(h, size, &prop, 0);
}

/* Who may use a chunk on dev: dev, and the client's other GPUs that can
 * reach its memory. Returns how many descriptors it filled. */
unsigned devmem_access(const struct worker *w, CUdevice dev, CUmemAccessDesc *d)
{
	unsigned n = 0;

	d[n++] = (CUmemAccessDesc){ { CU_MEM_LOCATION_TYPE_DEVICE, dev }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	for (int i = 0; i < w->ngpus; i++) {
		int can = 0;

		if (w->gpu[i] != dev && !cuDeviceCanAccessPeer(&can, w->gpu[i], dev) && can)
			d[n++] = (CUmemAccessDesc){ { CU_MEM_LOCATION_TYPE_DEVICE, w->gpu[i] },
						    CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	}
	return n;
}

/* A restore maps chunks that take gives (written already) as they are;
 * take NULL ends it. */
void devmem_set_source(struct worker *w, int (*take)(void *, uint64_t, uint64_t, CUmemGenericAllocationHandle *),
		       void *ctx)
{
	if (w->devmem) {
		w->devmem->take = take;
		w->devmem->take_ctx = ctx;
	}
}

/* Creates (or takes) and maps physical memory at va. */
static CUresult chunk_map(struct devmem *m, struct chunk *c)
{
	CUmemAccessDesc access[CICADA_MAX_GPUS];
	CUdevice dev = device_of(m, c->va);
	CUresult err = CUDA_SUCCESS;

	if (dev < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!m->take || m->take(m->take_ctx, c->va, c->size, &c->handle))
		err = devmem_create(m->w, c->va, c->size, &c->handle);
	if (err)
		return err;
	if ((err = cuMemMap(c->va, c->size, 0, c->handle, 0))) {
		cuMemRelease(c->handle);
		return err;
	}
	if ((err = cuMemSetAccess(c->va, c->size, access, devmem_access(m->w, dev, access)))) {
		cuMemUnmap(c->va, c->size);
		cuMemRelease(c->handle);
	}
	return err;
}

/* Lowest free address for size bytes in the slice of GPU slot, or 0. */
static uint64_t find_gap(struct devmem *m, unsigned slot, uint64_t size, unsigned *at)
{
	uint64_t lo = m->base + (uint64_t)slot * ARENA_SIZE, va = lo;
	uint64_t hi = lo + (m->size - (lo - m->base) < ARENA_SIZE ? m->size - (lo - m->base) : ARENA_SIZE);
	unsigned i;

	for (i = 0; i < m->nchunks && m->chunks[i].va + m->chunks[i].size <= lo; i++)
		;
	for (; i < m->nchunks && m->chunks[i].va < hi && m->chunks[i].va - va < size; i++)
		va = m->chunks[i].va + m->chunks[i].size;
	*at = i;
	return va < hi && size <= hi - va ? va : 0;
}

/* Index of the first entry above va in a va-sorted array of structs that
 * start with their va (chunks and allocations both do). */
static unsigned first_above(const void *arr, unsigned n, size_t stride, uint64_t va)
{
	unsigned lo = 0, hi = n;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		if (*(const uint64_t *)((const char *)arr + (size_t)mid * stride) <= va)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static unsigned chunk_index(struct devmem *m, uint64_t va)
{
	return first_above(m->chunks, m->nchunks, sizeof(*m->chunks), va);
}

/* Adds a mapped chunk at va (a fresh one, or one being restored). */
static CUresult chunk_add(struct devmem *m, uint64_t va, uint64_t size, int shared, struct chunk **out)
{
	struct chunk c = { .va = va, .size = size };
	unsigned at = chunk_index(m, va);
	CUresult err;
	int grown;

	pthread_rwlock_wrlock(&m->lock);
	grown = !array_grow((void **)&m->chunks, &m->cap_chunks, m->nchunks, sizeof(c));
	pthread_rwlock_unlock(&m->lock);
	if (!grown)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if ((err = quota_charge(m->w, size, "device memory")))
		return err;
	if (shared && !(c.units = calloc(size / UNIT / 64, sizeof(uint64_t)))) {
		quota_release(m->w, size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if ((err = chunk_map(m, &c))) {
		quota_release(m->w, size);
		free(c.units);
		return err;
	}
	pthread_rwlock_wrlock(&m->lock);
	memmove(&m->chunks[at + 1], &m->chunks[at], (m->nchunks - at) * sizeof(c));
	m->chunks[at] = c;
	m->nchunks++;
	pthread_rwlock_unlock(&m->lock);
	*out = &m->chunks[at];
	return CUDA_SUCCESS;
}

static void chunk_remove(struct devmem *m, unsigned i)
{
	struct chunk *c = &m->chunks[i];

	if (m->unmapped)
		m->unmapped(m->w, c->va);
	pthread_rwlock_wrlock(&m->lock);
	cuMemUnmap(c->va, c->size);
	cuMemRelease(c->handle);
	quota_release(m->w, c->size);
	free(c->units);
	memmove(c, c + 1, (m->nchunks - i - 1) * sizeof(*c));
	m->nchunks--;
	pthread_rwlock_unlock(&m->lock);
}

static struct chunk *chunk_of(struct devmem *m, uint64_t va)
{
	unsigned i = chunk_index(m, va);

	if (i == 0 || va - m->chunks[i - 1].va >= m->chunks[i - 1].size)
		return NULL;
	return &m->chunks[i - 1];
}

/* Finds n free units in a shared chunk; returns the first or -1. */
static long units_find(const struct chunk *c, unsigned n)
{
	unsigned total = (unsigned)(c->size / UNIT), run = 0;

	for (unsigned u = 0; u < total; u++) {
		run = (c->units[u / 64] >> (u % 64)) & 1 ? 0 : run + 1;
		if (run == n)
			return (long)(u + 1 - n);
	}
	return -1;
}

static void units_mark(struct chunk *c, uint64_t va, uint64_t size, int used)
{
	unsigned first = (unsigned)((va - c->va) / UNIT), n = (unsigned)((size + UNIT - 1) / UNIT);

	for (unsigned u = first; u < first + n; u++)
		if (used)
			c->units[u / 64] |= 1ull << (u % 64);
		else
			c->units[u / 64] &= ~(1ull << (u % 64));
	c->used += used ? 1 : -1;
}

static CUresult alloc_small(struct devmem *m, unsigned slot, uint64_t size, uint64_t *va)
{
	unsigned n = (unsigned)((size + UNIT - 1) / UNIT), at;
	struct chunk *c = NULL;
	long u = -1;
	CUresult err;

	for (unsigned i = 0; i < m->nchunks && u < 0; i++)
		if (m->chunks[i].units && slot_of(m, m->chunks[i].va) == slot &&
		    (u = units_find(&m->chunks[i], n)) >= 0)
			c = &m->chunks[i];
	if (u < 0) {
		uint64_t base = find_gap(m, slot, m->gran, &at);
		if (!base)
			return CUDA_ERROR_OUT_OF_MEMORY;
		if ((err = chunk_add(m, base, m->gran, 1, &c)))
			return err;
		u = 0;
	}
	*va = c->va + (uint64_t)u * UNIT;
	units_mark(c, *va, size, 1);
	return CUDA_SUCCESS;
}

static CUresult alloc_large(struct devmem *m, unsigned slot, uint64_t size, uint64_t *va)
{
	uint64_t rounded = (size + m->gran - 1) / m->gran * m->gran;
	struct chunk *c;
	unsigned at;
	CUresult err;

	if (!(*va = find_gap(m, slot, rounded, &at)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if ((err = chunk_add(m, *va, rounded, 0, &c)))
		return err;
	c->used = 1;
	return CUDA_SUCCESS;
}

static unsigned alloc_index(struct devmem *m, uint64_t va)
{
	return first_above(m->allocs, m->nallocs, sizeof(*m->allocs), va);
}

static CUresult alloc_note(struct devmem *m, uint64_t va, uint64_t size)
{
	unsigned at = alloc_index(m, va);

	if (array_grow((void **)&m->allocs, &m->cap_allocs, m->nallocs, sizeof(*m->allocs)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	memmove(&m->allocs[at + 1], &m->allocs[at], (m->nallocs - at) * sizeof(*m->allocs));
	m->allocs[at] = (struct alloc){ va, size };
	m->nallocs++;
	return CUDA_SUCCESS;
}

CUresult devmem_alloc(struct worker *w, uint64_t size, uint64_t *va)
{
	struct devmem *m = w->devmem;
	CUdevice dev;
	CUresult err;
	int slot;

	if (!size)
		return CUDA_ERROR_INVALID_VALUE;
	if (!m || !m->base)
		return CUDA_ERROR_NOT_INITIALIZED;
	if ((err = cuCtxGetDevice(&dev)))
		return err;
	/* the current context's GPU, which has a slice if the client sees it */
	if ((slot = device_slot(w, dev)) < 0 || (uint64_t)slot >= m->size / ARENA_SIZE + (m->size < ARENA_SIZE))
		return CUDA_ERROR_INVALID_DEVICE;
	err = size < m->gran / 2 ? alloc_small(m, (unsigned)slot, size, va) : alloc_large(m, (unsigned)slot, size, va);
	if (!err && (err = alloc_note(m, *va, size)))
		devmem_free(w, *va);
	return err;
}

/* Finds the allocation holding va: its index, or -1. */
static long alloc_find(struct devmem *m, uint64_t va)
{
	unsigned i = alloc_index(m, va);

	if (i == 0 || va - m->allocs[i - 1].va >= m->allocs[i - 1].size)
		return -1;
	return (long)i - 1;
}

CUresult devmem_free(struct worker *w, uint64_t va)
{
	struct devmem *m = w->devmem;
	long i = m ? alloc_find(m, va) : -1;
	struct chunk *c;

	if (i < 0 || m->allocs[i].va != va)
		return CUDA_ERROR_INVALID_VALUE;
	c = chunk_of(m, va);
	if (c->units)
		units_mark(c, va, m->allocs[i].size, 0);
	else
		c->used = 0;
	if (!c->used)
		chunk_remove(m, (unsigned)(c - m->chunks));
	memmove(&m->allocs[i], &m->allocs[i + 1], (m->nallocs - i - 1) * sizeof(*m->allocs));
	m->nallocs--;
	return CUDA_SUCCESS;
}

CUresult devmem_range(struct worker *w, uint64_t va, uint64_t *base, uint64_t *size)
{
	long i = w->devmem ? alloc_find(w->devmem, va) : -1;

	if (i < 0)
		return CUDA_ERROR_NOT_FOUND;
	*base = w->devmem->allocs[i].va;
	*size = w->devmem->allocs[i].size;
	return CUDA_SUCCESS;
}

/* --- snapshot support --- */

unsigned devmem_count(const struct worker *w, int chunks)
{
	const struct devmem *m = w->devmem;

	return !m ? 0 : chunks ? m->nchunks : m->nallocs;
}

/* The i-th chunk (chunks) or allocation: address and size. */
void devmem_get(const struct worker *w, int chunks, unsigned i, uint64_t *va, uint64_t *size)
{
	const struct devmem *m = w->devmem;

	*va = chunks ? m->chunks[i].va : m->allocs[i].va;
	*size = chunks ? m->chunks[i].size : m->allocs[i].size;
}

/* Maps a chunk of a snapshot at its old address. */
CUresult devmem_restore_chunk(struct worker *w, uint64_t va, uint64_t size)
{
	struct devmem *m = w->devmem;
	struct chunk *c;
	unsigned at;

	if (!m || va < m->base || size > m->size || va - m->base > m->size - size ||
	    size % m->gran || chunk_of(m, va) || chunk_of(m, va + size - 1))
		return CUDA_ERROR_INVALID_VALUE;
	at = chunk_index(m, va);
	if (at < m->nchunks && m->chunks[at].va < va + size)
		return CUDA_ERROR_INVALID_VALUE;
	return chunk_add(m, va, size, size == m->gran, &c);
}

/* Re-enters an allocation of a snapshot into its (restored) chunk. A
 * granule-sized chunk holds either one allocation or small ones. */
CUresult devmem_restore_alloc(struct worker *w, uint64_t va, uint64_t size)
{
	struct devmem *m = w->devmem;
	struct chunk *c = m ? chunk_of(m, va) : NULL;

	if (!c || !size || size > c->size - (va - c->va) || alloc_find(m, va) >= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (size >= m->gran / 2) {
		free(c->units);
		c->units = NULL;
		c->used = 1;
	} else if (c->units) {
		units_mark(c, va, size, 1);
	}
	return alloc_note(m, va, size);
}

/* From any thread: copies [va, va + size) of a chunk that is still mapped
 * into buf through stream s, or zeros if the application freed it
 * meanwhile. 0, or -1 if the copy failed. */
int devmem_read_live(struct worker *w, uint64_t va, void *buf, size_t size, CUstream s)
{
	struct devmem *m = w->devmem;
	struct chunk *c;
	int rc = 0;

	if (!m)
		return -1;
	pthread_rwlock_rdlock(&m->lock);
	c = chunk_of(m, va);
	if (!c || va + size > c->va + c->size)
		memset(buf, 0, size);
	else if (cuMemcpyDtoHAsync(buf, (CUdeviceptr)va, size, s) || cuStreamSynchronize(s))
		rc = -1;
	pthread_rwlock_unlock(&m->lock);
	return rc;
}

/* The chunk holding the allocation at va (ipc.c exports it): its
 * address, size, driver handle and GPU. 0, or -1 if none. */
int devmem_chunk(struct worker *w, uint64_t va, uint64_t *chunk_va, uint64_t *size,
		 CUmemGenericAllocationHandle *handle, int32_t *dev)
{
	struct devmem *m = w->devmem;
	struct chunk *c = m && alloc_find(m, va) >= 0 ? chunk_of(m, va) : NULL;

	if (!c)
		return -1;
	*chunk_va = c->va;
	*size = c->size;
	*handle = c->handle;
	*dev = device_of(m, c->va);
	return 0;
}

/* Tells hook of every chunk that goes from now on. */
void devmem_on_unmap(struct worker *w, void (*hook)(struct worker *w, uint64_t va))
{
	if (w->devmem)
		w->devmem->unmapped = hook;
}

/* Holds the chunks mapped (hold 1) for another thread's reads of them,
 * until released (hold 0): devhash.c hashes them meanwhile. */
void devmem_hold(struct worker *w, int hold)
{
	if (!w->devmem)
		return;
	if (hold)
		pthread_rwlock_rdlock(&w->devmem->lock);
	else
		pthread_rwlock_unlock(&w->devmem->lock);
}

/* Whether [va, va + size) lies in one mapped chunk (chunks held). */
int devmem_mapped(struct worker *w, uint64_t va, uint64_t size)
{
	struct chunk *c = w->devmem ? chunk_of(w->devmem, va) : NULL;

	return c && size <= c->size && va - c->va <= c->size - size;
}

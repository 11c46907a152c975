/*
 * mempool.c: the stream-ordered allocator (cudaMallocAsync) and its
 * memory pools. The memory comes from the worker's arena like any
 * allocation, so it is carried by a checkpoint and comes back at the same
 * address; the worker frees it once the stream has reached the free
 * (gpu-server/state/ordered.c). A pool is a token kept here: each device's
 * default pool, and pools of the program's own (cuMemPoolCreate, as RAPIDS
 * memory resources make them) on a device, with the attributes a program
 * may set, the access it gave other devices, and what it holds: bytes in
 * use (what is allocated and not freed) and their high-water mark. A pool
 * keeps no memory of its own, so what it has reserved is what is in use.
 * Pools that export (handle types) or live in host memory are not offered.
 */
#include <pthread.h>
#include "interposer.h"

#define MAX_DEVICES 64
#define MAX_OWN 64

struct pool {
	int used;                            /* own pools: made, not destroyed */
	CUdevice dev;
	int reuse[3];                        /* the three REUSE_* flags */
	cuuint64_t release_threshold;
	unsigned long long access;           /* devices given read-write access (its own always) */
	cuuint64_t in_use, high;             /* bytes allocated and not freed; their peak */
};

/* Tokens: device d's default pool is d + 1, own pool i is MAX_DEVICES + i + 1. */
static struct pool pools[MAX_DEVICES + MAX_OWN] = {
	[0 ... MAX_DEVICES + MAX_OWN - 1] = { .reuse = { 1, 1, 1 } }
};
static uintptr_t current[MAX_DEVICES];       /* each device's current pool (0: its default) */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

/* What each stream-ordered allocation came from. */
struct async_alloc {
	CUdeviceptr ptr;
	size_t size;
	uintptr_t pool;
};
static struct async_alloc *allocs;
static unsigned nallocs, cap_allocs;

/* Under the lock: the pool a token names, or NULL. */
static struct pool *pool_of(CUmemoryPool p)
{
	uintptr_t i = (uintptr_t)p;

	if (i >= 1 && i <= MAX_DEVICES) {
		pools[i - 1].dev = (CUdevice)(i - 1);
		return &pools[i - 1];
	}
	if (i > MAX_DEVICES && i <= MAX_DEVICES + MAX_OWN && pools[i - 1].used)
		return &pools[i - 1];
	return NULL;
}

static int pool_known(CUmemoryPool pool)
{
	int ok;

	pthread_mutex_lock(&pool_lock);
	ok = pool_of(pool) != NULL;
	pthread_mutex_unlock(&pool_lock);
	return ok;
}

static CUresult device_ok(CUdevice dev)
{
	int count;
	CUresult err;

	if ((err = cuDeviceGetCount(&count)))
		return err;
	return dev >= 0 && dev < count && dev < MAX_DEVICES ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
	CUresult err;

	if (!pool_out)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = device_ok(dev)))
		return err;
	*pool_out = (CUmemoryPool)(uintptr_t)(dev + 1);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	CUresult err = cuDeviceGetDefaultMemPool(pool, dev);

	if (!err) {
		pthread_mutex_lock(&pool_lock);
		if (current[dev])
			*pool = (CUmemoryPool)current[dev];
		pthread_mutex_unlock(&pool_lock);
	}
	return err;
}

/* A pool of that device becomes the one its cuMemAllocAsync draws on. */
CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
	CUresult err = device_ok(dev);
	struct pool *p;

	if (err)
		return err;
	pthread_mutex_lock(&pool_lock);
	if (!(p = pool_of(pool)) || p->dev != dev)
		err = CUDA_ERROR_INVALID_VALUE;
	else
		current[dev] = (uintptr_t)pool == (uintptr_t)dev + 1 ? 0 : (uintptr_t)pool;
	pthread_mutex_unlock(&pool_lock);
	return err;
}

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
	CUresult err;
	unsigned i;

	if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || props->handleTypes != CU_MEM_HANDLE_TYPE_NONE)
		return CUDA_ERROR_NOT_SUPPORTED;     /* host pools, exports: the attributes say so */
	if ((err = device_ok(props->location.id)))
		return err == CUDA_ERROR_INVALID_DEVICE ? CUDA_ERROR_INVALID_VALUE : err;
	pthread_mutex_lock(&pool_lock);
	for (i = MAX_DEVICES; i < MAX_DEVICES + MAX_OWN && pools[i].used; i++)
		;
	if (i < MAX_DEVICES + MAX_OWN)
		pools[i] = (struct pool){ .used = 1, .dev = props->location.id, .reuse = { 1, 1, 1 } };
	pthread_mutex_unlock(&pool_lock);
	if (i == MAX_DEVICES + MAX_OWN)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*pool = (CUmemoryPool)(uintptr_t)(i + 1);
	return CUDA_SUCCESS;
}

/* Allocations still out stay valid until they are freed, as natively. */
CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
	CUresult err = CUDA_SUCCESS;
	struct pool *p;

	pthread_mutex_lock(&pool_lock);
	if ((uintptr_t)pool <= MAX_DEVICES || !(p = pool_of(pool))) {
		err = CUDA_ERROR_INVALID_VALUE;
	} else {
		p->used = 0;
		for (unsigned d = 0; d < MAX_DEVICES; d++)
			if (current[d] == (uintptr_t)pool)
				current[d] = 0;      /* the device's default is current again */
	}
	pthread_mutex_unlock(&pool_lock);
	return err;
}

static void note_alloc(CUdeviceptr ptr, size_t size, uintptr_t token)
{
	struct pool *p;

	pthread_mutex_lock(&pool_lock);
	if (nallocs == cap_allocs) {
		unsigned cap = cap_allocs ? 2 * cap_allocs : 256;
		struct async_alloc *n = realloc(allocs, cap * sizeof(*allocs));
		if (n)
			allocs = n, cap_allocs = cap;
	}
	if (nallocs < cap_allocs && (p = pool_of((CUmemoryPool)token))) {
		allocs[nallocs++] = (struct async_alloc){ ptr, size, token };
		p->in_use += size;
		if (p->in_use > p->high)
			p->high = p->in_use;
	}
	pthread_mutex_unlock(&pool_lock);
}

static void note_free(CUdeviceptr ptr)
{
	struct pool *p;

	pthread_mutex_lock(&pool_lock);
	for (unsigned i = 0; i < nallocs; i++)
		if (allocs[i].ptr == ptr) {
			if ((p = pool_of((CUmemoryPool)allocs[i].pool)))
				p->in_use -= allocs[i].size;
			allocs[i] = allocs[--nallocs];
			break;
		}
	pthread_mutex_unlock(&pool_lock);
}

/* The current context's device's current pool. */
static uintptr_t current_pool(void)
{
	uintptr_t token = 0;
	CUdevice dev;

	if (cuCtxGetDevice(&dev) || dev < 0 || dev >= MAX_DEVICES)
		return 0;
	pthread_mutex_lock(&pool_lock);
	token = current[dev] ? current[dev] : (uintptr_t)dev + 1;
	pthread_mutex_unlock(&pool_lock);
	return token;
}

/* As natively, zero bytes succeed and leave *dptr as it was. */
static CUresult alloc_async(CUdeviceptr *dptr, size_t bytesize, CUstream hStream, uintptr_t pool)
{
	CUresult err;

	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	if (!bytesize)
		return CUDA_SUCCESS;
	err = rpc_cuMemAllocAsync(dptr, bytesize, hStream);

	if (!err) {
		devmem_note_alloc(*dptr, bytesize);
		note_alloc(*dptr, bytesize, pool ? pool : current_pool());
	}
	return err;
}

/* From the current pool (array.c stages copies in such memory). */
CUresult mempool_alloc_async(CUdeviceptr *dptr, size_t size, CUstream stream)
{
	return alloc_async(dptr, size, stream, 0);
}

/* As natively, freeing 0 succeeds and does nothing. */
CUresult mempool_free_async(CUdeviceptr dptr, CUstream stream)
{
	CUresult err;

	if (!dptr)
		return CUDA_SUCCESS;
	err = rpc_cuMemFreeAsync(dptr, stream);

	if (!err) {
		devmem_note_free(dptr);
		note_free(dptr);
	}
	return err;
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	return mempool_alloc_async(dptr, bytesize, hStream);
}

CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
	if (!pool_known(pool))
		return CUDA_ERROR_INVALID_VALUE;
	return alloc_async(dptr, bytesize, hStream, (uintptr_t)pool);
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	return mempool_free_async(dptr, hStream);
}

/* Memory goes back to the arena as soon as its stream is past the free. */
CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
	return pool_known(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Under the lock: a counter attribute (the high-water marks may be set
 * to 0, which resets them). */
static CUresult counter(struct pool *p, CUmemPool_attribute attr, cuuint64_t *value, int set)
{
	int high = attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH || attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH;

	if (set) {
		if (!high || *value)
			return CUDA_ERROR_INVALID_VALUE;
		p->high = p->in_use;
		return CUDA_SUCCESS;
	}
	*value = high ? p->high : p->in_use;
	return CUDA_SUCCESS;
}

static CUresult pool_attr(CUmemoryPool pool, CUmemPool_attribute attr, void *value, int set)
{
	CUresult err = CUDA_SUCCESS;
	struct pool *p;

	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&pool_lock);
	if (!(p = pool_of(pool))) {
		err = CUDA_ERROR_INVALID_VALUE;
	} else if (attr >= CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES &&
		   attr <= CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES) {
		int *slot = &p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
		if (set)
			*slot = *(int *)value != 0;
		else
			*(int *)value = *slot;
	} else if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) {
		if (set)
			p->release_threshold = *(cuuint64_t *)value;
		else
			*(cuuint64_t *)value = p->release_threshold;
	} else if (attr >= CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT && attr <= CU_MEMPOOL_ATTR_USED_MEM_HIGH) {
		err = counter(p, attr, value, set);
	} else {
		err = CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_unlock(&pool_lock);
	return err;
}

CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	return pool_attr(pool, attr, value, 1);
}

CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	return pool_attr(pool, attr, value, 0);
}

/* Arena memory is mapped for every GPU that can reach it; what a pool
 * was told is kept, and answered. */
CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
	CUresult err = CUDA_SUCCESS;
	struct pool *p;

	if (!map && count)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count && !err; i++)
		if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
		    (map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) ||
		    device_ok(map[i].location.id))
			err = CUDA_ERROR_INVALID_VALUE;
	if (err)
		return err;
	pthread_mutex_lock(&pool_lock);
	if (!(p = pool_of(pool)))
		err = CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count && !err; i++) {
		unsigned long long bit = 1ull << map[i].location.id;
		if (map[i].location.id == p->dev)
			err = map[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
		else if (map[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			p->access |= bit;
		else
			p->access &= ~bit;
	}
	pthread_mutex_unlock(&pool_lock);
	return err;
}

CUresult CUDAAPI cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool, CUmemLocation *location)
{
	CUresult err = CUDA_SUCCESS;
	struct pool *p;

	if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE || device_ok(location->id))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&pool_lock);
	if (!(p = pool_of(memPool)))
		err = CUDA_ERROR_INVALID_VALUE;
	else
		*flags = location->id == p->dev || (p->access >> location->id & 1) ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE :
										     CU_MEM_ACCESS_FLAGS_PROT_NONE;
	pthread_mutex_unlock(&pool_lock);
	return err;
}

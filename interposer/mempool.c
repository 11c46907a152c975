/*
 * mempool.c: the stream-ordered allocator (cudaMallocAsync). Its memory
 * comes from the worker's arena like any allocation, so it is carried by a
 * checkpoint and comes back at the same address; the worker frees it once
 * the stream has reached the free (gpu-server/ordered.c). Each device has
 * one pool, its default: the pool handle is a token the interposer keeps,
 * with the attributes an application may set. Pools of its own
 * (cuMemPoolCreate) are not offered.
 */
#include <pthread.h>
#include "interposer.h"

#define MAX_POOLS 64

struct pool {
	int reuse[3];                        /* the three REUSE_* flags */
	cuuint64_t release_threshold;
};

static struct pool pools[MAX_POOLS] = { [0 ... MAX_POOLS - 1] = { { 1, 1, 1 }, 0 } };
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

/* A device's pool token: its ordinal plus one (never NULL). */
static struct pool *pool_of(CUmemoryPool p)
{
	uintptr_t i = (uintptr_t)p;

	return i >= 1 && i <= MAX_POOLS ? &pools[i - 1] : NULL;
}

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
	int count;
	CUresult err;

	if (!pool_out)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = cuDeviceGetCount(&count)))
		return err;
	if (dev < 0 || dev >= count || dev >= MAX_POOLS)
		return CUDA_ERROR_INVALID_DEVICE;
	*pool_out = (CUmemoryPool)(uintptr_t)(dev + 1);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	return cuDeviceGetDefaultMemPool(pool, dev);
}

CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
	CUmemoryPool own;
	CUresult err = cuDeviceGetDefaultMemPool(&own, dev);

	if (err)
		return err;
	return pool == own ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	CUresult err = rpc_cuMemAllocAsync(dptr, bytesize, hStream);

	if (!err)
		devmem_note_alloc(*dptr, bytesize);
	return err;
}

CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
	if (!pool_of(pool))
		return CUDA_ERROR_INVALID_VALUE;
	return cuMemAllocAsync(dptr, bytesize, hStream);
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	CUresult err = rpc_cuMemFreeAsync(dptr, hStream);

	if (!err)
		devmem_note_free(dptr);
	return err;
}

/* Memory goes back to the arena as soon as its stream is past the free. */
CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
	return pool_of(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The settable attributes are kept; usage counters are not tracked. */
static CUresult pool_attr(CUmemoryPool pool, CUmemPool_attribute attr, void *value, int set)
{
	struct pool *p = pool_of(pool);
	CUresult err = CUDA_SUCCESS;

	if (!p || !value)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&pool_lock);
	if (attr >= CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES && attr <= CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES) {
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
	} else {
		log_missing_once("memory pool attribute", "usage counters", 1);
		err = CUDA_ERROR_NOT_SUPPORTED;
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

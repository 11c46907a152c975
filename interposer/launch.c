/*
 * launch.c: kernel launches. The layout of a function's parameters is
 * asked of the server once and cached, so each launch packs its arguments
 * into one buffer and goes out pipelined, without waiting for a reply.
 * A filter from above (hostmem.c) may then change argument words that
 * point at host memory the device reaches elsewhere.
 */
#include <pthread.h>
#include <stdlib.h>
#include "interposer.h"

#define PARAM_CACHE_SIZE 4096                /* power of two */

struct param_layout {
	uint64_t func;
	unsigned n;
	unsigned *offsets, *sizes;
};

static struct param_layout cache[PARAM_CACHE_SIZE];
static CUresult (*param_filter)(char *buf, unsigned len);
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult fetch_layout(uint64_t func, struct param_layout *out)
{
	scalars a = { { 1, &func } };
	param_info_res r;
	CUresult err;

	memset(&r, 0, sizeof(r));
	err = rpc_func_get_param_info(&a, &r);
	if (err) {
		xdr_free((xdrproc_t)xdr_param_info_res, (char *)&r);
		return err;
	}
	if (r.offsets.offsets_len != r.sizes.sizes_len) {
		xdr_free((xdrproc_t)xdr_param_info_res, (char *)&r);
		return client_lost("malformed parameter layout");
	}
	out->func = func;
	out->n = r.offsets.offsets_len;
	out->offsets = r.offsets.offsets_val;
	out->sizes = r.sizes.sizes_val;
	return CUDA_SUCCESS;
}

static unsigned cache_slot(uint64_t id)
{
	return (unsigned)(id * 0x9E3779B97F4A7C15ull >> 52) & (PARAM_CACHE_SIZE - 1);
}

/* Returns func's layout with cache_lock held; the caller unlocks. */
static CUresult lock_layout(CUfunction f, const struct param_layout **out)
{
	uint64_t id = handle_id(f);
	struct param_layout *slot = &cache[cache_slot(id)], fresh;
	CUresult err;

	pthread_mutex_lock(&cache_lock);
	while (slot->func != id) {
		pthread_mutex_unlock(&cache_lock);
		if ((err = fetch_layout(id, &fresh)))
			return err;
		pthread_mutex_lock(&cache_lock);
		free(slot->offsets);
		free(slot->sizes);
		*slot = fresh;
	}
	*out = slot;
	return CUDA_SUCCESS;
}

/* After a module or library is unloaded, the server may give its
 * functions' ids (or their driver handles) to new functions: every
 * layout is asked again (cuFFT loads and unloads hundreds of modules). */
void launch_forget_layouts(void)
{
	pthread_mutex_lock(&cache_lock);
	for (unsigned i = 0; i < PARAM_CACHE_SIZE; i++) {
		free(cache[i].offsets);
		free(cache[i].sizes);
		cache[i] = (struct param_layout){ 0 };
	}
	pthread_mutex_unlock(&cache_lock);
}

CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
	const struct param_layout *l;
	CUresult err;

	if (!func)
		return CUDA_ERROR_INVALID_HANDLE;
	if ((err = lock_layout(func, &l)))
		return err;
	if (paramIndex >= l->n) {
		err = CUDA_ERROR_INVALID_VALUE;
	} else {
		if (paramOffset)
			*paramOffset = l->offsets[paramIndex];
		if (paramSize)
			*paramSize = l->sizes[paramIndex];
	}
	pthread_mutex_unlock(&cache_lock);
	return err;
}

static CUresult pack_extra(void **extra, char *buf, unsigned *len)
{
	void *ptr = NULL;
	size_t size = 0;

	for (unsigned i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
			ptr = extra[i + 1];
		} else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
			size = *(size_t *)extra[i + 1];
		} else {
			log_info("launch refused: unknown key %p in its extra list", extra[i]);
			return CUDA_ERROR_INVALID_VALUE;
		}
	}
	if (size > CICADA_PARAMS_MAX || (size && !ptr)) {
		log_info("launch refused: a parameter buffer of %zu bytes at %p", size, ptr);
		return CUDA_ERROR_INVALID_VALUE;
	}
	memcpy(buf, ptr, size);
	*len = (unsigned)size;
	return CUDA_SUCCESS;
}

/* hostmem.c sets it while such memory exists, and clears it after: a
 * launch without it pays nothing. */
void launch_set_param_filter(CUresult (*filter)(char *buf, unsigned len))
{
	__atomic_store_n(&param_filter, filter, __ATOMIC_RELEASE);
}

static CUresult pack_params(CUfunction f, void **params, char *buf, unsigned *len)
{
	CUresult (*filter)(char *, unsigned) = __atomic_load_n(&param_filter, __ATOMIC_ACQUIRE);
	const struct param_layout *l;
	CUresult err;

	if ((err = lock_layout(f, &l)))
		return err;
	for (unsigned i = 0; i < l->n && !err; i++) {
		if (!l->sizes[i])
			continue;                    /* nothing to read, as natively */
		if (l->offsets[i] + l->sizes[i] > CICADA_PARAMS_MAX) {
			log_info("launch refused: parameter %u of %u (offset %u, %u bytes) is past the parameter space",
				 i, l->n, l->offsets[i], l->sizes[i]);
			err = CUDA_ERROR_INVALID_VALUE;
			break;
		}
		if (!params[i]) {
			log_info("launch refused: parameter %u of %u (offset %u, %u bytes) is NULL", i, l->n,
				 l->offsets[i], l->sizes[i]);
			err = CUDA_ERROR_INVALID_VALUE;
			break;
		}
		memcpy(buf + l->offsets[i], params[i], l->sizes[i]);
		if (l->offsets[i] + l->sizes[i] > *len)
			*len = l->offsets[i] + l->sizes[i];
		/* (pointers: 8 bytes, 8-aligned; two 4-byte arguments never form one) */
		if (filter && l->sizes[i] >= 8 && !(l->offsets[i] & 7))
			err = filter(buf + l->offsets[i], l->sizes[i] & ~7u);
	}
	pthread_mutex_unlock(&cache_lock);
	return err;
}

/* f's arguments (from params, or extra's one buffer) packed into buf. */
CUresult launch_pack(CUfunction f, void **params, void **extra, char *buf, unsigned *len)
{
	CUresult (*filter)(char *, unsigned) = __atomic_load_n(&param_filter, __ATOMIC_ACQUIRE);
	CUresult err = CUDA_SUCCESS;

	*len = 0;
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	if (params)
		return pack_params(f, params, buf, len);
	if (extra)
		err = pack_extra(extra, buf, len);
	if (!err && filter && *len)
		err = filter(buf, *len);      /* (one buffer: its layout unknown here) */
	return err;
}

static CUresult launch(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	char buf[CICADA_PARAMS_MAX];
	launch_attr attrs[16];
	launch_args a = {
		.func = handle_id(f), .grid = { c->gridDimX, c->gridDimY, c->gridDimZ },
		.block = { c->blockDimX, c->blockDimY, c->blockDimZ }, .shared_mem = c->sharedMemBytes,
		.stream = handle_id(c->hStream), .params = { 0, buf }, .attrs = { 0, attrs },
	};
	CUresult err = launch_pack(f, params, extra, buf, &a.params.params_len);

	if (err)
		return err;
	if (c->numAttrs > 16)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < c->numAttrs; i++) {
		attrs[i].id = c->attrs[i].id;
		memcpy(attrs[i].value, &c->attrs[i].value, sizeof(attrs[i].value));
	}
	a.attrs.attrs_len = c->numAttrs;
	return rpc_launch_kernel(&a);
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
				unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
				unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
	CUlaunchConfig c = { gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
			     sharedMemBytes, hStream, NULL, 0 };

	return launch(&c, f, kernelParams, extra);
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
	if (!config)
		return CUDA_ERROR_INVALID_VALUE;
	return launch(config, f, kernelParams, extra);
}

CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
					   unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
					   unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
					   void **kernelParams)
{
	CUlaunchAttribute coop = { .id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE, .value.cooperative = 1 };
	CUlaunchConfig c = { gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
			     sharedMemBytes, hStream, &coop, 1 };

	return launch(&c, f, kernelParams, NULL);
}

/* Packs c into 7 scalars: the stream, the grid, block and
 * shared-memory sizes, the cluster dimension (x = 0: none) and the cluster
 * scheduling policy (0: none, else policy + 1). Other attributes have no
 * wire form yet. */
CUresult launch_config_pack(const CUlaunchConfig *c, uint64_t *v)
{
	uint64_t cx = 0, cy = 0, cz = 0, policy = 0;

	if (!c || (c->numAttrs && !c->attrs))
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < c->numAttrs; i++) {
		const CUlaunchAttribute *a = &c->attrs[i];

		if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
			cx = a->value.clusterDim.x;
			cy = a->value.clusterDim.y;
			cz = a->value.clusterDim.z;
		} else if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE) {
			policy = (uint64_t)a->value.clusterSchedulingPolicyPreference + 1;
		} else if (a->id != CU_LAUNCH_ATTRIBUTE_IGNORE) {
			log_error("launch attribute %d is not supported in this call", (int)a->id);
			return CUDA_ERROR_NOT_SUPPORTED;
		}
	}
	v[0] = (uint64_t)(uintptr_t)c->hStream;
	v[1] = c->gridDimX | (uint64_t)c->gridDimY << 32;
	v[2] = c->gridDimZ | (uint64_t)c->blockDimX << 32;
	v[3] = c->blockDimY | (uint64_t)c->blockDimZ << 32;
	v[4] = c->sharedMemBytes | cz << 32;
	v[5] = cx | cy << 32;
	v[6] = policy;
	return CUDA_SUCCESS;
}

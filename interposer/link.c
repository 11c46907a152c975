/*
 * link.c: the JIT linker (cuLinkCreate, cuLinkAddData, cuLinkAddFile,
 * cuLinkComplete, cuLinkDestroy). The link state lives in the worker.
 * Here a record per state keeps the application's log buffers, filled
 * after every call as the driver fills them, and the linked image that
 * cuLinkComplete hands out, valid until cuLinkDestroy, as natively.
 */
#include <pthread.h>
#include <stdlib.h>
#include "interposer.h"

struct link_local {
	uint64_t id;
	struct jit_request jit;
	void *cubin;
	struct link_local *next;
};

static struct link_local *links;
static pthread_mutex_t links_lock = PTHREAD_MUTEX_INITIALIZER;

static struct link_local *link_find(CUlinkState state, int unlink)
{
	struct link_local **p, *l = NULL;

	pthread_mutex_lock(&links_lock);
	for (p = &links; *p && (*p)->id != handle_id(state); p = &(*p)->next)
		;
	if ((l = *p) && unlink)
		*p = l->next;
	pthread_mutex_unlock(&links_lock);
	return l;
}

CUresult CUDAAPI cuLinkCreate_v2(unsigned int n, CUjit_option *options, void **values, CUlinkState *stateOut)
{
	struct link_local *l;
	link_create_args a;
	link_res r = { 0 };
	CUresult err;

	if (!stateOut)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(l = calloc(1, sizeof(*l))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if ((err = jit_read(&l->jit, n, options, values))) {
		free(l);
		return err;
	}
	a.options.options_len = l->jit.n;
	a.options.options_val = l->jit.opts;
	err = rpc_link_create(&a, &r);
	jit_write_back(&l->jit, &r.logs);
	l->id = r.id;
	xdr_free((xdrproc_t)xdr_link_res, (char *)&r);
	if (err) {
		free(l);
		return err;
	}
	pthread_mutex_lock(&links_lock);
	l->next = links;
	links = l;
	pthread_mutex_unlock(&links_lock);
	*stateOut = (CUlinkState)(uintptr_t)l->id;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,
				  unsigned int n, CUjit_option *options, void **values)
{
	struct link_local *l = link_find(state, 0);
	struct jit_request j;
	link_add_args a;
	link_res r = { 0 };
	CUresult err;

	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!host_range_valid(data, size) || !size || size > CICADA_IMAGE_MAX ||
	    (name && strnlen(name, CICADA_NAME_MAX) == CICADA_NAME_MAX))
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = jit_read(&j, n, options, values)))
		return err;
	a.state = l->id;
	a.type = (unsigned)type;
	a.data.data_len = (u_int)size;
	a.data.data_val = data;
	a.name = (char *)(name ? name : "");
	a.options.options_len = j.n;
	a.options.options_val = j.opts;
	err = rpc_link_add_data(&a, &r);
	jit_write_back(&l->jit, &r.logs);
	xdr_free((xdrproc_t)xdr_link_res, (char *)&r);
	return err;
}

CUresult CUDAAPI cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path, unsigned int n,
				  CUjit_option *options, void **values)
{
	size_t size = 0;
	void *data = path ? file_read(path, &size) : NULL;
	CUresult err;

	if (!path)
		return CUDA_ERROR_INVALID_VALUE;
	if (!data)
		return CUDA_ERROR_FILE_NOT_FOUND;
	err = cuLinkAddData_v2(state, type, data, size, path, n, options, values);
	free(data);
	return err;
}

CUresult CUDAAPI cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
	struct link_local *l = link_find(state, 0);
	link_res r = { 0 };
	scalars a;
	CUresult err;

	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!cubinOut || !sizeOut)
		return CUDA_ERROR_INVALID_VALUE;
	a.v.v_len = 1;
	a.v.v_val = &l->id;
	err = rpc_link_complete(&a, &r);
	jit_write_back(&l->jit, &r.logs);
	if (!err) {
		free(l->cubin);
		l->cubin = r.cubin.cubin_val;      /* kept until cuLinkDestroy */
		*cubinOut = l->cubin;
		*sizeOut = r.cubin.cubin_len;
		r.cubin.cubin_val = NULL;
		r.cubin.cubin_len = 0;
	}
	xdr_free((xdrproc_t)xdr_link_res, (char *)&r);
	return err;
}

CUresult CUDAAPI cuLinkDestroy(CUlinkState state)
{
	struct link_local *l = link_find(state, 1);
	CUresult err;

	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	err = rpc_cuLinkDestroy(state);
	free(l->cubin);
	free(l);
	return err;
}

/*
 * link.c: the JIT linker (cuLinkCreate, cuLinkAddData, cuLinkComplete,
 * cuLinkDestroy) in the worker. A link state keeps the driver's state and
 * the log buffers its options asked for; every reply carries the logs as
 * they stand, and completion the linked image, which the client keeps
 * until it destroys the state and loads like any other image. Link states
 * are not carried by a checkpoint (they last only while a program links).
 */
#include <stdlib.h>
#include <string.h>
#include "calls.h"

struct link {
	CUlinkState state;
	struct jit_set jit;
};

CUresult hand_link_create(struct worker *w, void *args, void *res)
{
	link_create_args *a = args;
	link_res *r = res;
	struct link *l = calloc(1, sizeof(*l));
	CUresult err;

	if (!l)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if ((err = jit_set_make(&l->jit, a->options.options_val, a->options.options_len)) ||
	    (err = cuLinkCreate(l->jit.n, l->jit.opt, l->jit.val, &l->state))) {
		jit_set_logs(&l->jit, &r->logs);
		jit_set_free(&l->jit);
		free(l);
		return err;
	}
	if (!(r->id = handle_put(w, H_LINK, l))) {
		cuLinkDestroy(l->state);
		jit_set_free(&l->jit);
		free(l);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

CUresult hand_link_add_data(struct worker *w, void *args, void *res)
{
	link_add_args *a = args;
	link_res *r = res;
	struct jit_set jit;
	struct link *l;
	CUresult err;

	if ((err = handle_get(w, H_LINK, a->state, (void **)&l)) || !l)
		return err ? err : CUDA_ERROR_INVALID_HANDLE;
	if (!a->data.data_len)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = jit_set_make(&jit, a->options.options_val, a->options.options_len)))
		return err;
	err = cuLinkAddData(l->state, (CUjitInputType)a->type, a->data.data_val, a->data.data_len,
			    a->name, jit.n, jit.opt, jit.val);
	jit_set_free(&jit);
	jit_set_logs(&l->jit, &r->logs);
	return err;
}

CUresult hand_link_complete(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	link_res *r = res;
	struct link *l;
	void *cubin;
	size_t size;
	CUresult err;

	if (a->v.v_len != 1)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = handle_get(w, H_LINK, a->v.v_val[0], (void **)&l)) || !l)
		return err ? err : CUDA_ERROR_INVALID_HANDLE;
	err = cuLinkComplete(l->state, &cubin, &size);
	jit_set_logs(&l->jit, &r->logs);
	if (err)
		return err;
	if (size > CICADA_IMAGE_MAX || !(r->cubin.cubin_val = malloc(size)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	memcpy(r->cubin.cubin_val, cubin, size);  /* the driver's copy goes with the state */
	r->cubin.cubin_len = (u_int)size;
	return CUDA_SUCCESS;
}

CUresult wrap_cuLinkDestroy(struct worker *w, CUlinkState state)
{
	struct link *l = (struct link *)state;

	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	cuLinkDestroy(l->state);
	jit_set_free(&l->jit);
	free(l);
	return CUDA_SUCCESS;
}

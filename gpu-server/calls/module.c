/*
 * module.c: module and library loading (through the content-hash cache),
 * symbol lookups by name, kernel parameter layouts and kernel launches.
 */
#include <stdlib.h>
#include <string.h>
#include "calls.h"

/* Loads an image with the client's JIT options (their logs go to logs);
 * its variables are tracked for checkpoints. */
static CUresult load_image(struct worker *w, const module_load_args *a, const void *image, size_t size,
			   uint64_t *id, jit_logs *logs)
{
	struct jit_set jit;
	void *handle;
	CUresult err;

	if ((err = jit_set_make(&jit, a->options.options_val, a->options.options_len)))
		return err;
	if (a->library)
		err = cuLibraryLoadData((CUlibrary *)&handle, image, jit.opt, jit.val, jit.n, NULL, NULL, 0);
	else
		err = cuModuleLoadDataEx((CUmodule *)&handle, image, jit.n, jit.opt, jit.val);
	jit_set_logs(&jit, logs);
	jit_set_free(&jit);
	if (err)
		return err;
	if (!(*id = handle_put(w, a->library ? H_LIBRARY : H_MODULE, handle)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	globals_track(w, *id, handle, a->library, image, size);
	log_debug("loaded an image of %zu bytes (%016llx%016llx) as %s %llu in context %llu", size,
		  (unsigned long long)a->hash.hi, (unsigned long long)a->hash.lo, a->library ? "library" : "module",
		  (unsigned long long)*id, (unsigned long long)w->current_ctx);
	return CUDA_SUCCESS;
}

/* An empty image asks whether the cache has it (CUDA_ERROR_NOT_FOUND). */
CUresult hand_module_load(struct worker *w, void *args, void *res)
{
	module_load_args *a = args;
	module_load_res *r = res;
	image_hash check;
	void *image = a->image.image_val;
	size_t size = a->image.image_len;
	uint64_t id = 0;
	CUresult err;

	if (!size) {
		if (modcache_lookup(w, &a->hash, &image, &size) &&
		    worker_image_find(w, &a->hash, &image, &size))
			return CUDA_ERROR_NOT_FOUND;
	} else {
		image_hash_compute(image, size, &check);
		if (check.lo != a->hash.lo || check.hi != a->hash.hi)
			return CUDA_ERROR_INVALID_IMAGE;
	}
	err = load_image(w, a, image, size, &id, &r->logs);
	if (!err && a->image.image_len)
		modcache_store(w, &a->hash, image, size);
	if (image != a->image.image_val)
		free(image);
	a->image.image_len = 0;              /* the replay log keeps the hash only */
	r->id = id;
	return err;
}

CUresult hand_module_get_function(struct worker *w, void *args, void *res)
{
	handle_name_args *a = args;
	CUmodule mod;
	CUfunction f;
	CUresult err;

	if ((err = handle_get(w, H_MODULE, a->handle, (void **)&mod)) ||
	    (err = cuModuleGetFunction(&f, mod, a->name)))
		return err;
	w->calls->call_parent = a->handle;
	return one_scalar(res, handle_put(w, H_FUNCTION, f));
}

CUresult hand_library_get_kernel(struct worker *w, void *args, void *res)
{
	handle_name_args *a = args;
	CUlibrary lib;
	CUkernel k;
	CUresult err;

	if ((err = handle_get(w, H_LIBRARY, a->handle, (void **)&lib)) ||
	    (err = cuLibraryGetKernel(&k, lib, a->name)))
		return err;
	w->calls->call_parent = a->handle;
	return one_scalar(res, handle_put(w, H_KERNEL, k));
}

/* in: 0 and a function, or 1 and a kernel; out: its name, as the driver
 * gives it. */
CUresult hand_func_get_name(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	name_res *r = res;
	const char *name = NULL;
	void *f;
	CUresult err;

	if (a->v.v_len != 2 || a->v.v_val[0] > 1)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = handle_get(w, a->v.v_val[0] ? H_KERNEL : H_FUNCTION, a->v.v_val[1], &f)) ||
	    (err = a->v.v_val[0] ? cuKernelGetName(&name, f) : cuFuncGetName(&name, f)))
		return err;
	if (!name || !(r->name = strdup(name)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	return CUDA_SUCCESS;
}

/* The functions of a module (or kernels of a library), for table
 * 6e163fbe's walk (interposer/export_tables.c). */
static CUresult list_functions(struct worker *w, enum handle_kind kind, void *owner, void ***out, unsigned *n)
{
	CUresult err = kind == H_MODULE ? cuModuleGetFunctionCount(n, owner) : cuLibraryGetKernelCount(n, owner);

	if (err)
		return err;
	if (*n > CICADA_CHUNK_MAX / 8 || !(*out = calloc(*n ? *n : 1, sizeof(void *))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	err = kind == H_MODULE ? cuModuleEnumerateFunctions((CUfunction *)*out, *n, owner) :
				 cuLibraryEnumerateKernels((CUkernel *)*out, *n, owner);
	if (err)
		free(*out);
	return err;
}

/* Appends id and name (length, then bytes) to the reply buffer. */
static int put_function(struct wire_buf *b, uint64_t id, const char *name)
{
	uint32_t len = name ? (uint32_t)strnlen(name, CICADA_SYMBOL_MAX - 1) : 0;

	if (!id || wire_buf_reserve(b, b->len + 12 + len))
		return -1;
	memcpy(b->data + b->len, &id, 8);
	memcpy(b->data + b->len + 8, &len, 4);
	memcpy(b->data + b->len + 12, name, len);
	b->len += 12 + len;
	return 0;
}

/* A function handed out by a walk is kept in the replay log as the
 * lookup by name that makes it again (a restore binds the same id). */
static void note_lookup(struct worker *w, enum handle_kind kind, uint64_t owner, const char *name)
{
	handle_name_args a = { owner, (char *)name };
	const struct proc_desc *d = worker_proc(kind == H_MODULE ? P_module_get_function : P_library_get_kernel);

	if (d)
		replay_note(w, d, &a, owner);
}

/* Each function of a module (or kernel of a library): its id, then its
 * name, as table 6e163fbe's walk hands them out. */
CUresult hand_module_functions(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	bytes_res *r = res;
	struct wire_buf b = { 0 };
	enum handle_kind kind;
	void *owner, **fns;
	unsigned n;
	CUresult err;

	if (a->v.v_len != 1)
		return CUDA_ERROR_INVALID_VALUE;
	kind = handle_kind_of(w, a->v.v_val[0]);
	if (kind != H_MODULE && kind != H_LIBRARY)
		return CUDA_ERROR_INVALID_HANDLE;
	if ((err = handle_get(w, kind, a->v.v_val[0], &owner)) || (err = list_functions(w, kind, owner, &fns, &n)))
		return err;
	for (unsigned i = 0; i < n && !err; i++) {
		const char *name = NULL;
		uint64_t id;

		if (kind == H_MODULE ? cuFuncGetName(&name, fns[i]) : cuKernelGetName(&name, fns[i]))
			name = NULL;
		w->created = 0;
		id = handle_put(w, kind == H_MODULE ? H_FUNCTION : H_KERNEL, fns[i]);
		if (put_function(&b, id, name))
			err = CUDA_ERROR_OUT_OF_MEMORY;
		else if (w->created && name)
			note_lookup(w, kind, a->v.v_val[0], name);
	}
	free(fns);
	if (err || b.len > CICADA_CHUNK_MAX) {
		wire_buf_free(&b);
		return err ? err : CUDA_ERROR_OUT_OF_MEMORY;
	}
	r->data.data_val = b.data;
	r->data.data_len = (u_int)b.len;
	return CUDA_SUCCESS;
}

CUresult hand_module_get_global(struct worker *w, void *args, void *res)
{
	handle_name_args *a = args;
	global_res *r = res;
	CUmodule mod;
	CUdeviceptr ptr;
	size_t size;
	CUresult err;

	if ((err = handle_get(w, H_MODULE, a->handle, (void **)&mod)) ||
	    (err = cuModuleGetGlobal(&ptr, &size, mod, a->name)))
		return err;
	w->calls->call_parent = a->handle;
	replay_note_global(w, a->handle, ptr, size);
	log_debug("variable %s of module %llu in context %llu: 0x%llx (%zu bytes)", a->name,
		  (unsigned long long)a->handle, (unsigned long long)w->current_ctx, (unsigned long long)ptr, size);
	r->ptr = ptr;
	r->size = size;
	return CUDA_SUCCESS;
}

CUresult hand_library_get_global(struct worker *w, void *args, void *res)
{
	handle_name_args *a = args;
	global_res *r = res;
	CUlibrary lib;
	CUdeviceptr ptr;
	size_t size;
	CUresult err;

	if ((err = handle_get(w, H_LIBRARY, a->handle, (void **)&lib)) ||
	    (err = cuLibraryGetGlobal(&ptr, &size, lib, a->name)))
		return err;
	w->calls->call_parent = a->handle;
	replay_note_global(w, a->handle, ptr, size);
	log_debug("variable %s of library %llu in context %llu: 0x%llx (%zu bytes)", a->name,
		  (unsigned long long)a->handle, (unsigned long long)w->current_ctx, (unsigned long long)ptr, size);
	r->ptr = ptr;
	r->size = size;
	return CUDA_SUCCESS;
}

/* Returns every parameter's offset and size in one reply. */
CUresult hand_func_get_param_info(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	param_info_res *r = res;
	static unsigned offsets[1024], sizes[1024];
	CUfunction f;
	CUresult err;
	unsigned n = 0;

	if (a->v.v_len != 1)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = handle_get(w, H_FUNCTION, a->v.v_val[0], (void **)&f)))
		return err;
	if (handle_kind_of(w, a->v.v_val[0]) == H_KERNEL && (err = cuKernelGetFunction(&f, (CUkernel)f)))
		return err;
	for (; n < 1024; n++) {
		size_t off, size;
		if (cuFuncGetParamInfo(f, n, &off, &size))
			break;
		offsets[n] = (unsigned)off;
		sizes[n] = (unsigned)size;
	}
	r->offsets.offsets_val = malloc(n * sizeof(unsigned) + 1);
	r->sizes.sizes_val = malloc(n * sizeof(unsigned) + 1);
	if (!r->offsets.offsets_val || !r->sizes.sizes_val)
		return CUDA_ERROR_OUT_OF_MEMORY;
	memcpy(r->offsets.offsets_val, offsets, n * sizeof(unsigned));
	memcpy(r->sizes.sizes_val, sizes, n * sizeof(unsigned));
	r->offsets.offsets_len = r->sizes.sizes_len = n;
	return CUDA_SUCCESS;
}

/* Launch attributes that hold events carry client ids: translate them. */
static CUresult copy_attrs(struct worker *w, const launch_args *a, CUlaunchAttribute *out)
{
	for (unsigned i = 0; i < a->attrs.attrs_len; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].id = (CUlaunchAttributeID)a->attrs.attrs_val[i].id;
		memcpy(&out[i].value, a->attrs.attrs_val[i].value, sizeof(out[i].value));
		if (out[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT ||
		    out[i].id == CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT) {
			CUresult err = handle_get(w, H_EVENT, (uint64_t)(uintptr_t)out[i].value.programmaticEvent.event,
						  (void **)&out[i].value.programmaticEvent.event);
			if (err)
				return err;
		}
	}
	return CUDA_SUCCESS;
}

/* Says which launch failed, and how it was made (pipelined: the client
 * hears only the error, at its next synchronising call). */
static void launch_failed(CUfunction f, const CUlaunchConfig *c, size_t size, CUresult err)
{
	const char *name = "?", *why = "?";

	cuFuncGetName(&name, f);
	cuGetErrorName(err, &why);
	log_info("launch of %.120s (grid %u,%u,%u, block %u,%u,%u, %u bytes shared, %zu bytes of parameters) "
		 "failed: %s", name, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
		 c->blockDimZ, c->sharedMemBytes, size, why);
}

CUresult hand_launch_kernel(struct worker *w, void *args, void *res)
{
	launch_args *a = args;
	CUlaunchAttribute attrs[16];
	size_t size = a->params.params_len;
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, a->params.params_val,
			  CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END };
	CUlaunchConfig cfg = {
		.gridDimX = a->grid[0], .gridDimY = a->grid[1], .gridDimZ = a->grid[2],
		.blockDimX = a->block[0], .blockDimY = a->block[1], .blockDimZ = a->block[2],
		.sharedMemBytes = a->shared_mem, .attrs = attrs, .numAttrs = a->attrs.attrs_len,
	};
	CUfunction f;
	CUresult err;

	if ((err = handle_get(w, H_FUNCTION, a->func, (void **)&f)) ||
	    (err = handle_get(w, H_STREAM, a->stream, (void **)&cfg.hStream)) ||
	    (err = copy_attrs(w, a, attrs)))
		return err;
	if (!a->attrs.attrs_len)
		err = cuLaunchKernel(f, cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, cfg.blockDimX, cfg.blockDimY,
				     cfg.blockDimZ, cfg.sharedMemBytes, cfg.hStream, NULL, size ? extra : NULL);
	else
		err = cuLaunchKernelEx(&cfg, f, NULL, size ? extra : NULL);
	if (err && log_enabled(LOG_INFO))
		launch_failed(f, &cfg, size, err);
	return err;
}

/* The launch configuration launch_config_pack (interposer) sent. */
CUresult launch_config_unpack(struct worker *w, const uint64_t *v, CUlaunchConfig *c,
				     CUlaunchAttribute *attrs)
{
	CUresult err = handle_get(w, H_STREAM, v[0], (void **)&c->hStream);

	if (err != CUDA_SUCCESS)
		return err;
	c->gridDimX = (unsigned)v[1];
	c->gridDimY = (unsigned)(v[1] >> 32);
	c->gridDimZ = (unsigned)v[2];
	c->blockDimX = (unsigned)(v[2] >> 32);
	c->blockDimY = (unsigned)v[3];
	c->blockDimZ = (unsigned)(v[3] >> 32);
	c->sharedMemBytes = (unsigned)v[4];
	c->attrs = attrs;
	c->numAttrs = 0;
	memset(attrs, 0, 2 * sizeof(*attrs));
	if ((unsigned)v[5]) {
		attrs[c->numAttrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
		attrs[c->numAttrs].value.clusterDim.x = (unsigned)v[5];
		attrs[c->numAttrs].value.clusterDim.y = (unsigned)(v[5] >> 32);
		attrs[c->numAttrs++].value.clusterDim.z = (unsigned)(v[4] >> 32);
	}
	if (v[6]) {
		attrs[c->numAttrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
		attrs[c->numAttrs++].value.clusterSchedulingPolicyPreference = (CUclusterSchedulingPolicy)(v[6] - 1);
	}
	return CUDA_SUCCESS;
}

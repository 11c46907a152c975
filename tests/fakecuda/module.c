/*
 * Modules, libraries and functions.  The stand-in never compiles or runs
 * device code: an image (cubin ELF, fatbin or PTX text) is only sized and
 * searched for the names of the kernels and globals in kernels.c, and a
 * module "contains" those whose names appear in it (all of them when none
 * does, e.g. in a compressed fatbin).  Each module has its own copy of its
 * globals.  A library is a module that belongs to no context; its CUkernel
 * handles are the same objects as its CUfunctions.  As on a GPU, a
 * library's kernel is loaded into a context at its first use there (a
 * launch, an attribute or occupancy query, cuKernelGetFunction,
 * cuFuncLoad), and its code then takes room among that context's module
 * variables. PTX goes through the stand-in's compiler and its cache
 * (jit.c) and holds only what it names.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <elf.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include "fakecuda.h"

#define FUNC_CTXS 8
#define FUNC_CODE 512                   /* bytes a kernel's code takes in a context */

struct func {
	const struct fc_kernel *k;
	struct module *mod;
	int attrs[CU_FUNC_ATTRIBUTE_MAX];
	struct fc_ctx *loaded[FUNC_CTXS];	/* a library's: the contexts it is loaded in */
};

struct module {
	struct fc_ctx *ctx;
	int lib;
	int nfuncs, nglobals;
	struct func **funcs;	/* NULL where the image lacks the kernel */
	void **globals;		/* likewise for globals */
};

static size_t elf_size(const unsigned char *img)
{
	Elf64_Ehdr eh;
	Elf64_Shdr sh;
	size_t size, end;
	int i;

	if (img[EI_CLASS] != ELFCLASS64)
		return sizeof(Elf32_Ehdr);
	memcpy(&eh, img, sizeof(eh));
	size = eh.e_shoff + (size_t)eh.e_shnum * eh.e_shentsize;
	end = eh.e_phoff + (size_t)eh.e_phnum * eh.e_phentsize;
	size = end > size ? end : size;
	for (i = 0; eh.e_shentsize >= sizeof(sh) && i < eh.e_shnum; i++) {
		memcpy(&sh, img + eh.e_shoff + (size_t)i * eh.e_shentsize, sizeof(sh));
		end = sh.sh_type == SHT_NOBITS ? 0 : sh.sh_offset + sh.sh_size;
		size = end > size ? end : size;
	}
	return size > sizeof(eh) ? size : sizeof(eh);
}

/* Bytes of a cubin, fatbin or PTX image; 0 when it is none of them. */
static size_t image_size(const unsigned char *img)
{
	uint16_t hsize;
	uint64_t fsize;

	if (img[0] == 0x50 && img[1] == 0xed && img[2] == 0x55 && img[3] == 0xba) {
		memcpy(&hsize, img + 6, sizeof(hsize));
		memcpy(&fsize, img + 8, sizeof(fsize));
		return hsize + fsize;
	}
	if (img[0] == 0x7f && img[1] == 'E' && img[2] == 'L' && img[3] == 'F')
		return elf_size(img);
	if (isprint(img[0]) || isspace(img[0]))
		return strlen((const char *)img);
	return 0;
}

static int has(const void *img, size_t len, const char *name)
{
	return memmem(img, len, name, strlen(name)) != NULL;
}

static int is_ptx(const unsigned char *img)
{
	int fatbin = img[0] == 0x50 && img[1] == 0xed && img[2] == 0x55 && img[3] == 0xba;
	int elf = img[0] == 0x7f && img[1] == 'E' && img[2] == 'L' && img[3] == 'F';

	return !fatbin && !elf && (isprint(img[0]) || isspace(img[0]));
}

/* Whether a PTX text names any kernel or variable the stand-in has. */
static int knows_some(const void *img)
{
	size_t len = strlen(img);

	for (int i = 0; fc_kernel_at(i); i++)
		if (has(img, len, fc_kernel_at(i)->name))
			return 1;
	for (int i = 0; fc_global_at(i); i++)
		if (has(img, len, fc_global_at(i)->name))
			return 1;
	return 0;
}

static const char *skip_space(const char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	return s;
}

/* Whether every kernel of a PTX text does nothing (its body: ret;), as
 * the gpu-server's warm-up kernel: the stand-in compiles those too. */
static int does_nothing(const char *ptx)
{
	const char *p = ptx, *b;
	int n = 0;

	while ((p = strstr(p, ".entry"))) {
		if (!(b = strchr(p, '{')) || strncmp(b = skip_space(b + 1), "ret;", 4) || *(b = skip_space(b + 4)) != '}')
			return 0;
		p = b;
		n++;
	}
	return n > 0;
}

static void module_free(void *p)
{
	struct module *m = p;
	int i;

	for (i = 0; m->funcs && i < m->nfuncs; i++) {
		fc_obj_del(m->funcs[i], FC_FUNC);
		free(m->funcs[i]);
	}
	for (i = 0; m->globals && i < m->nglobals; i++) {
		fc_range_del((uintptr_t)m->globals[i], FC_MEM_GLOBAL, NULL);
	}
	free(m->funcs);
	free(m->globals);
	free(m);
}

static struct func *func_new(const struct fc_kernel *k, struct module *m)
{
	struct func *f = calloc(1, sizeof(*f));

	if (!f || fc_obj_add(f, FC_FUNC, NULL, NULL)) {
		free(f);
		return NULL;
	}
	f->k = k;
	f->mod = m;
	f->attrs[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = 1024;
	f->attrs[CU_FUNC_ATTRIBUTE_NUM_REGS] = 16;
	f->attrs[CU_FUNC_ATTRIBUTE_PTX_VERSION] = 90;
	f->attrs[CU_FUNC_ATTRIBUTE_BINARY_VERSION] = 90;
	f->attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] = 49152;
	f->attrs[CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES] = (int)fc_kernel_stack(k);
	f->attrs[CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT] = -1;
	return f;
}

/* Module variables live where the real driver puts them: in windows it
 * takes from the process's default mapping area, top down, as mmap(NULL)
 * does, each context's own (the first when its first module loads, after
 * the context's own addresses: context.c), filled in load order and never
 * reused. So the same loads in a new process give the same addresses,
 * unless the process mapped something else of its own in between, or made
 * its contexts in another order, as on a GPU (the gpu-server's workers
 * keep their own mappings elsewhere: gpu-server/state/hostarea.c). */
#define GLOBALS_WINDOW (2ull << 20)

static void *globals_take(struct fc_ctx *c, size_t size)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static struct fc_ctx none;           /* (a module of no context) */
	void *p = NULL;

	if (!c)
		c = &none;
	size = (size + 255) & ~(size_t)255;
	pthread_mutex_lock(&lock);
	if (!c->globals || size > c->globals_room - c->globals_used) {
		size_t len = (size + GLOBALS_WINDOW - 1) & ~(GLOBALS_WINDOW - 1);
		char *w = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (w != MAP_FAILED) {
			c->globals = w;
			c->globals_used = 0;
			c->globals_room = len;
		}
	}
	if (c->globals && size <= c->globals_room - c->globals_used) {
		p = c->globals + c->globals_used;
		c->globals_used += size;
	}
	pthread_mutex_unlock(&lock);
	return p;
}

static void *global_new(const struct fc_global *g, struct fc_ctx *ctx)
{
	void *p = globals_take(ctx, g->size);

	if (!p)
		return NULL;
	memcpy(p, g->init, g->size);
	if (fc_range_add((uintptr_t)p, g->size, FC_MEM_GLOBAL, ctx, 1))
		return NULL;
	return p;
}

/* Fill m from the image; 0 on success. */
static int populate(struct module *m, const void *img, size_t len)
{
	int i, any = is_ptx(img);            /* PTX holds only what it names */

	while (fc_kernel_at(m->nfuncs))
		any |= has(img, len, fc_kernel_at(m->nfuncs++)->name);
	while (fc_global_at(m->nglobals))
		any |= has(img, len, fc_global_at(m->nglobals++)->name);
	m->funcs = calloc(m->nfuncs + 1, sizeof(*m->funcs));
	m->globals = calloc(m->nglobals + 1, sizeof(*m->globals));
	if (!m->funcs || !m->globals)
		return -1;
	for (i = 0; i < m->nfuncs; i++)
		if (!any || has(img, len, fc_kernel_at(i)->name))
			if (!(m->funcs[i] = func_new(fc_kernel_at(i), m)))
				return -1;
	for (i = 0; i < m->nglobals; i++)
		if (!any || has(img, len, fc_global_at(i)->name))
			if (!(m->globals[i] = global_new(fc_global_at(i), m->ctx)))
				return -1;
	return 0;
}

static CUresult load(struct module **out, const void *image, struct fc_ctx *ctx)
{
	struct module *m;

	CHECK_ARG(out && image);
	CHECK(image_size(image), CUDA_ERROR_INVALID_IMAGE);
	if (is_ptx(image))
		TRY(fc_ptx_compile(image, knows_some(image) || does_nothing(image)));
	/* an ELF cubin is for sm_90 only: another model has no code to run */
	CHECK(fc_cc() == 90 || memcmp(image, "\177ELF", 4), CUDA_ERROR_NO_BINARY_FOR_GPU);
	m = calloc(1, sizeof(*m));
	CHECK(m, CUDA_ERROR_OUT_OF_MEMORY);
	m->ctx = ctx;
	m->lib = !ctx;
	if (populate(m, image, image_size(image)) || fc_obj_add(m, FC_MODULE, ctx, ctx ? module_free : NULL) ||
	    (m->lib && fc_obj_add(m, FC_LIBRARY, NULL, NULL))) {
		fc_obj_del(m, FC_MODULE);
		module_free(m);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*out = m;
	return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	struct fc_ctx *ctx;

	TRY(fc_current(&ctx));
	return load((struct module **)module, image, ctx);
}

CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatbin)
{
	return cuModuleLoadData(module, fatbin);
}

CUresult cuModuleUnload(CUmodule hmod)
{
	struct module *m = (struct module *)hmod;

	TRY(fc_need_init());
	CHECK(!fc_obj_has(m, FC_LIBRARY) && fc_obj_del(m, FC_MODULE), CUDA_ERROR_INVALID_HANDLE);
	module_free(m);
	return CUDA_SUCCESS;
}

static CUresult lookup(struct func **out, void *mod, int kind, const char *name)
{
	struct module *m = mod;
	int i;

	TRY(fc_need_init());
	CHECK_ARG(out && name);
	CHECK(fc_obj_has(m, kind), CUDA_ERROR_INVALID_HANDLE);
	for (i = 0; i < m->nfuncs; i++) {
		if (m->funcs[i] && !strcmp(m->funcs[i]->k->name, name)) {
			*out = m->funcs[i];
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_NOT_FOUND;
}

static CUresult global(CUdeviceptr *dptr, size_t *bytes, void *mod, int kind, const char *name)
{
	struct module *m = mod;
	int i;

	TRY(fc_need_init());
	CHECK_ARG(name);
	CHECK(fc_obj_has(m, kind), CUDA_ERROR_INVALID_HANDLE);
	for (i = 0; i < m->nglobals; i++) {
		if (m->globals[i] && !strcmp(fc_global_at(i)->name, name)) {
			if (dptr)
				*dptr = (CUdeviceptr)m->globals[i];
			if (bytes)
				*bytes = fc_global_at(i)->size;
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_NOT_FOUND;
}

void *fc_global(const struct fc_launch *l, const char *name)
{
	CUdeviceptr p;

	return global(&p, NULL, l->mod, FC_MODULE, name) ? NULL : (void *)p;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	return lookup((struct func **)hfunc, hmod, FC_MODULE, name);
}

CUresult cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
	return global(dptr, bytes, hmod, FC_MODULE, name);
}

CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jit_options,
			   void **jit_values, unsigned int njit, CUlibraryOption *lib_options,
			   void **lib_values, unsigned int nlib)
{
	TRY(fc_need_init());
	return load((struct module **)library, code, NULL);
}

CUresult cuLibraryUnload(CUlibrary library)
{
	TRY(fc_need_init());
	CHECK(fc_obj_del(library, FC_LIBRARY), CUDA_ERROR_INVALID_HANDLE);
	fc_obj_del(library, FC_MODULE);
	module_free(library);
	return CUDA_SUCCESS;
}

CUresult cuLibraryGetKernel(CUkernel *kernel, CUlibrary library, const char *name)
{
	return lookup((struct func **)kernel, library, FC_LIBRARY, name);
}

CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
	return global(dptr, bytes, library, FC_LIBRARY, name);
}

CUresult cuLibraryGetModule(CUmodule *mod, CUlibrary library)
{
	TRY(fc_current(NULL));
	CHECK_ARG(mod);
	CHECK(fc_obj_has(library, FC_LIBRARY), CUDA_ERROR_INVALID_HANDLE);
	*mod = (CUmodule)library;
	return CUDA_SUCCESS;
}

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether library kernel f is loaded in context c (slot: where it is, or
 * a free place for it, or -1). */
static int loaded_in(struct func *f, struct fc_ctx *c, int *slot)
{
	*slot = -1;
	for (int i = 0; i < FUNC_CTXS; i++) {
		if (f->loaded[i] == c)
			return 1;
		if (!f->loaded[i] && *slot < 0)
			*slot = i;
	}
	return 0;
}

/* A library kernel's first use in the current context loads it there. */
static void lib_load(struct func *f)
{
	struct fc_ctx *c;
	int slot;

	if (!f->mod || !f->mod->lib || fc_current(&c) || !c)
		return;
	pthread_mutex_lock(&load_lock);
	if (!loaded_in(f, c, &slot) && slot >= 0 && globals_take(c, FUNC_CODE))
		f->loaded[slot] = c;
	pthread_mutex_unlock(&load_lock);
}

CUresult cuKernelGetFunction(CUfunction *func, CUkernel kernel)
{
	TRY(fc_current(NULL));
	CHECK_ARG(func);
	CHECK(fc_obj_has(kernel, FC_FUNC), CUDA_ERROR_INVALID_HANDLE);
	lib_load((struct func *)kernel);
	*func = (CUfunction)kernel;
	return CUDA_SUCCESS;
}

CUresult cuKernelGetName(const char **name, CUkernel kernel)
{
	TRY(fc_need_init());
	CHECK(fc_obj_has(kernel, FC_FUNC), CUDA_ERROR_INVALID_HANDLE);
	CHECK_ARG(name);
	*name = ((struct func *)kernel)->k->name;   /* (loads nothing) */
	return CUDA_SUCCESS;
}

/* For launch.c: what a CUfunction (or CUkernel) runs. */
CUresult fc_func(CUfunction hfunc, const struct fc_kernel **k, void **mod, int *max_shmem)
{
	struct func *f = (struct func *)hfunc;

	TRY(fc_need_init());
	CHECK(fc_obj_has(f, FC_FUNC), CUDA_ERROR_INVALID_HANDLE);
	lib_load(f);
	if (k)
		*k = f->k;
	if (mod)
		*mod = f->mod;
	if (max_shmem)
		*max_shmem = f->attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES];
	return CUDA_SUCCESS;
}

CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attr, CUfunction hfunc)
{
	TRY(fc_func(hfunc, NULL, NULL, NULL));
	CHECK_ARG(pi && (unsigned)attr < CU_FUNC_ATTRIBUTE_MAX);
	*pi = ((struct func *)hfunc)->attrs[attr];
	return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attr, int value)
{
	int ok;

	TRY(fc_func(hfunc, NULL, NULL, NULL));
	switch (attr) {
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
		ok = value >= 0 && value <= 232448;
		break;
	case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
		ok = value >= -1 && value <= 100;
		break;
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
	case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
	case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
		ok = value >= 0;
		break;
	default:
		ok = 0;
	}
	CHECK_ARG(ok);
	((struct func *)hfunc)->attrs[attr] = value;
	return CUDA_SUCCESS;
}

/* A library kernel and the functions it gives share their attributes, as
 * on the real driver (and on all the stand-in's devices). */
CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attr, CUkernel kernel, CUdevice dev)
{
	CHECK(dev >= 0 && dev < fc_ndev(), CUDA_ERROR_INVALID_DEVICE);
	return cuFuncGetAttribute(pi, attr, (CUfunction)kernel);
}

CUresult cuKernelSetAttribute(CUfunction_attribute attr, int value, CUkernel kernel, CUdevice dev)
{
	CHECK(dev >= 0 && dev < fc_ndev(), CUDA_ERROR_INVALID_DEVICE);
	return cuFuncSetAttribute((CUfunction)kernel, attr, value);
}

CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
	TRY(fc_func(hfunc, NULL, NULL, NULL));
	return (unsigned)config <= CU_FUNC_CACHE_PREFER_EQUAL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuFuncGetParamInfo(CUfunction hfunc, size_t index, size_t *offset, size_t *size)
{
	const struct fc_kernel *k;

	TRY(fc_func(hfunc, &k, NULL, NULL));
	CHECK_ARG(index < (size_t)k->nparams);
	if (offset)
		*offset = fc_param_offset(k, (int)index);
	if (size)
		*size = k->sizes[index];
	return CUDA_SUCCESS;
}

CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
	const struct fc_kernel *k;

	TRY(fc_func(hfunc, &k, NULL, NULL));
	CHECK_ARG(name);
	*name = k->name;
	return CUDA_SUCCESS;
}

CUresult cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
	void *mod;

	TRY(fc_func(hfunc, NULL, &mod, NULL));
	CHECK_ARG(hmod);
	*hmod = (CUmodule)mod;
	return CUDA_SUCCESS;
}

CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
	CHECK_ARG(mode);
	*mode = CU_MODULE_LAZY_LOADING;
	return CUDA_SUCCESS;
}

/* A module's functions are loaded with it; a library's, per context. */
CUresult cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction hfunc)
{
	struct func *f = (struct func *)hfunc;
	struct fc_ctx *c = NULL;
	int slot, in;

	TRY(fc_need_init());
	CHECK(fc_obj_has(f, FC_FUNC), CUDA_ERROR_INVALID_HANDLE);
	CHECK_ARG(state);
	if (f->mod && f->mod->lib && !fc_current(&c) && c) {
		pthread_mutex_lock(&load_lock);
		in = loaded_in(f, c, &slot);
		pthread_mutex_unlock(&load_lock);
		*state = in ? CU_FUNCTION_LOADING_STATE_LOADED : CU_FUNCTION_LOADING_STATE_UNLOADED;
		return CUDA_SUCCESS;
	}
	*state = CU_FUNCTION_LOADING_STATE_LOADED;
	return CUDA_SUCCESS;
}

CUresult cuFuncLoad(CUfunction hfunc)
{
	TRY(fc_func(hfunc, NULL, NULL, NULL));
	return CUDA_SUCCESS;
}

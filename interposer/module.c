/*
 * module.c: module and library images. An image crosses the wire once:
 * the interposer first sends its content hash, and the whole image only
 * if the server's cache does not have it. The size of an image passed by
 * pointer is read from its own header (ELF cubin, fatbin, or PTX text).
 */
#include <ctype.h>
#include <elf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>
#include "interposer.h"

#define FATBIN_MAGIC 0xBA55ED50u
#define FATBIN_WRAPPER_MAGIC 0x466243B1u

struct fatbin_header {
	uint32_t magic;
	uint16_t version;
	uint16_t header_size;
	uint64_t fat_size;
};

struct fatbin_wrapper {
	uint32_t magic;
	uint32_t version;
	const void *data;
	void *filename_or_fatbins;
};

static size_t elf_size(const Elf64_Ehdr *e)
{
	const Elf64_Shdr *sh = (const void *)((const char *)e + e->e_shoff);
	size_t end = e->e_shoff + (size_t)e->e_shnum * e->e_shentsize;
	size_t ph = e->e_phoff + (size_t)e->e_phnum * e->e_phentsize;

	if (ph > end)
		end = ph;
	for (unsigned i = 0; i < e->e_shnum; i++)
		if (sh[i].sh_type != SHT_NOBITS && sh[i].sh_offset + sh[i].sh_size > end)
			end = sh[i].sh_offset + sh[i].sh_size;
	return end;
}

/* Finds the image proper and its size; 0 if the format is unknown. */
static size_t image_size(const void **image)
{
	const unsigned char *p = *image;
	uint32_t magic;

	memcpy(&magic, p, 4);
	if (magic == FATBIN_WRAPPER_MAGIC) {
		*image = ((const struct fatbin_wrapper *)p)->data;
		return image_size(image);
	}
	if (magic == FATBIN_MAGIC) {
		const struct fatbin_header *h = (const void *)p;
		return h->header_size + h->fat_size;
	}
	if (!memcmp(p, ELFMAG, SELFMAG) && p[EI_CLASS] == ELFCLASS64)
		return elf_size((const Elf64_Ehdr *)p);
	if (!isprint(p[0]) && !isspace(p[0]))
		return 0;                          /* no format we know (an LTO image wants the linker) */
	return strnlen((const char *)p, CICADA_IMAGE_MAX) + 1;   /* PTX text */
}

/* Loads image (a library if library) with JIT options j (NULL: none). */
static CUresult load_image(const void *image, int library, uint64_t *id, const struct jit_request *j)
{
	module_load_args a = { 0 };
	module_load_res r;
	XXH128_hash_t h;
	size_t size;
	CUresult err;

	if (!image)
		return CUDA_ERROR_INVALID_VALUE;
	size = image_size(&image);
	if (!size || size > CICADA_IMAGE_MAX)
		return CUDA_ERROR_INVALID_IMAGE;
	h = XXH3_128bits(image, size);
	a.hash.lo = h.low64;
	a.hash.hi = h.high64;
	a.library = library;
	if (j) {
		a.options.options_len = j->n;
		a.options.options_val = (jit_option *)j->opts;
	}
	memset(&r, 0, sizeof(r));
	err = rpc_module_load(&a, &r);
	if (err != CUDA_ERROR_NOT_FOUND)
		log_debug("image %016llx%016llx: %zu bytes, already cached on the server",
			  (unsigned long long)h.high64, (unsigned long long)h.low64, size);
	if (err == CUDA_ERROR_NOT_FOUND) {
		log_debug("image %016llx%016llx: sending %zu bytes", (unsigned long long)h.high64,
			  (unsigned long long)h.low64, size);
		xdr_free((xdrproc_t)xdr_module_load_res, (char *)&r);
		memset(&r, 0, sizeof(r));
		a.image.image_len = (u_int)size;
		a.image.image_val = (char *)image;
		err = rpc_module_load(&a, &r);
	}
	if (j)
		jit_write_back(j, &r.logs);
	if (!err)
		*id = r.id;
	xdr_free((xdrproc_t)xdr_module_load_res, (char *)&r);
	return err;
}

static CUresult load_module(CUmodule *mod, const void *image, const struct jit_request *j)
{
	uint64_t id;
	CUresult err;

	if (!mod)
		return CUDA_ERROR_INVALID_VALUE;
	err = load_image(image, 0, &id, j);
	if (!err)
		*mod = (CUmodule)(uintptr_t)id;
	return err;
}

CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
	return load_module(module, image, NULL);
}

/* The JIT runs in the worker with the same options; its logs come back. */
CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n, CUjit_option *options,
				    void **values)
{
	struct jit_request j;
	CUresult err = jit_read(&j, n, options, values);

	return err ? err : load_module(module, image, &j);
}

CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	return load_module(module, fatCubin, NULL);
}

/* A whole file, with a NUL after it (PTX is text); NULL if unreadable. */
void *file_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	long size;
	char *buf = NULL;

	if (!f)
		return NULL;
	if (!fseek(f, 0, SEEK_END) && (size = ftell(f)) > 0 && !fseek(f, 0, SEEK_SET) &&
	    (buf = malloc(size + 1)) && fread(buf, 1, size, f) == (size_t)size) {
		buf[size] = 0;
		if (len)
			*len = (size_t)size;
	} else {
		free(buf), buf = NULL;
	}
	fclose(f);
	return buf;
}

CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname)
{
	void *image = fname ? file_read(fname, NULL) : NULL;
	CUresult err;

	if (!image)
		return CUDA_ERROR_FILE_NOT_FOUND;
	err = load_module(module, image, NULL);
	free(image);
	return err;
}

CUresult CUDAAPI cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
				   void **jitOptionsValues, unsigned int numJitOptions,
				   CUlibraryOption *libraryOptions, void **libraryOptionValues,
				   unsigned int numLibraryOptions)
{
	struct jit_request j;
	uint64_t id;
	CUresult err;

	if (!library)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = jit_read(&j, numJitOptions, jitOptions, jitOptionsValues)))
		return err;
	err = load_image(code, 1, &id, &j);
	if (!err)
		*library = (CUlibrary)(uintptr_t)id;
	return err;
}

CUresult CUDAAPI cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
				       void **jitOptionsValues, unsigned int numJitOptions,
				       CUlibraryOption *libraryOptions, void **libraryOptionValues,
				       unsigned int numLibraryOptions)
{
	void *image = fileName ? file_read(fileName, NULL) : NULL;
	CUresult err;

	if (!image)
		return CUDA_ERROR_FILE_NOT_FOUND;
	err = cuLibraryLoadData(library, image, jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
				libraryOptionValues, numLibraryOptions);
	free(image);
	return err;
}

static CUresult lookup(unsigned proc, const void *handle, const char *name, uint64_t *id)
{
	handle_name_args a = { handle_id(handle), (char *)name };
	uint64_t buf[1];
	scalar_res r = { 0, { 0, buf } };
	CUresult err;

	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	if (strlen(name) >= CICADA_SYMBOL_MAX)
		return CUDA_ERROR_NOT_FOUND;
	err = client_call(proc, (xdrproc_t)xdr_handle_name_args, &a, (xdrproc_t)xdr_scalar_res, &r);
	if (!err && r.v.v_len != 1)
		return client_lost("malformed reply");
	if (!err)
		*id = r.v.v_val[0];
	return err;
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
	CUresult err = rpc_cuModuleUnload(hmod);

	launch_forget_layouts();
	return err;
}

CUresult CUDAAPI cuLibraryUnload(CUlibrary library)
{
	CUresult err = rpc_cuLibraryUnload(library);

	launch_forget_layouts();
	return err;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	uint64_t id = 0;
	CUresult err;

	if (!hfunc)
		return CUDA_ERROR_INVALID_VALUE;
	err = lookup(P_module_get_function, hmod, name, &id);
	if (!err)
		*hfunc = (CUfunction)(uintptr_t)id;
	return err;
}

CUresult CUDAAPI cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	uint64_t id = 0;
	CUresult err;

	if (!pKernel)
		return CUDA_ERROR_INVALID_VALUE;
	err = lookup(P_library_get_kernel, library, name, &id);
	if (!err)
		*pKernel = (CUkernel)(uintptr_t)id;
	return err;
}

/* The name of a function (kind 0) or kernel (1), from the worker's driver.
 * The driver's string lives as long as the function; here every name is
 * kept once for the process's life, so a pointer given out stays good. */
static CUresult func_name(unsigned kind, const void *f, const char **name)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static char **names;
	static unsigned nnames, cap;
	uint64_t in[2] = { kind, handle_id(f) };
	scalars a = { { 2, in } };
	name_res r = { 0 };
	CUresult err;

	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = rpc_func_get_name(&a, &r)))       /* (a function that is none: the driver's answer) */
		return err;
	if (!r.name)
		return client_lost("malformed function name");
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < nnames && !*name; i++)
		if (!strcmp(names[i], r.name))
			*name = names[i];
	if (!*name && nnames == cap) {
		char **more = realloc(names, (cap ? 2 * cap : 64) * sizeof(*names));
		if (more)
			names = more, cap = cap ? 2 * cap : 64;
	}
	if (!*name && nnames < cap) {
		names[nnames] = r.name, r.name = NULL;
		*name = names[nnames++];
	}
	pthread_mutex_unlock(&lock);
	xdr_free((xdrproc_t)xdr_name_res, (char *)&r);
	return *name ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction hfunc)
{
	if (name)
		*name = NULL;
	return func_name(0, hfunc, name);
}

CUresult CUDAAPI cuKernelGetName(const char **name, CUkernel hfunc)
{
	if (name)
		*name = NULL;
	return func_name(1, hfunc, name);
}

static CUresult get_global(unsigned proc, const void *handle, const char *name, CUdeviceptr *dptr,
			   size_t *bytes)
{
	handle_name_args a = { handle_id(handle), (char *)name };
	global_res r = { 0 };
	CUresult err;

	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	if (strlen(name) >= CICADA_SYMBOL_MAX)
		return CUDA_ERROR_NOT_FOUND;
	err = client_call(proc, (xdrproc_t)xdr_handle_name_args, &a, (xdrproc_t)xdr_global_res, &r);
	if (err)
		return err;
	devmem_note_alloc(r.ptr, r.size);
	if (dptr)
		*dptr = r.ptr;
	if (bytes)
		*bytes = r.size;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
	return get_global(P_module_get_global, hmod, name, dptr, bytes);
}

CUresult CUDAAPI cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
	return get_global(P_library_get_global, library, name, dptr, bytes);
}

/*
 * loader.c: how applications find libcicada.so. Loaded with LD_PRELOAD, it
 * answers dlopen("libcuda.so.1") with itself, so the CUDA runtime, which
 * loads the driver that way, binds to Cicada. It also answers
 * cuGetProcAddress by looking its own exports up by name and version, and
 * cuGetExportTable for the runtime's private tables.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include "interposer.h"

static void *self_handle(void)
{
	static void *self;
	Dl_info info;

	if (!self && dladdr((void *)self_handle, &info) && info.dli_fname)
		self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
	return self;
}

static int is_libcuda(const char *file)
{
	const char *base = strrchr(file, '/');

	base = base ? base + 1 : file;
	return !strcmp(base, "libcuda.so.1") || !strcmp(base, "libcuda.so");
}

void *dlopen(const char *file, int flags)
{
	static void *(*real_dlopen)(const char *, int);

	if (!real_dlopen)
		real_dlopen = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
	if (file && is_libcuda(file) && self_handle())
		return self_handle();
	return real_dlopen(file, flags);
}

/* The newest exported version of name, or its per-thread-stream variant. */
static void *find_symbol(const char *name, cuuint64_t flags)
{
	static const char *suffixes[] = { "_v4", "_v3", "_v2", "" };
	char buf[256];
	void *p;

	if (strlen(name) > 200)
		return NULL;
	if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
		for (int i = 0; i < 4; i++) {
			snprintf(buf, sizeof(buf), "%s%s_ptsz", name, suffixes[i]);
			if ((p = dlsym(self_handle(), buf)))
				return p;
			snprintf(buf, sizeof(buf), "%s%s_ptds", name, suffixes[i]);
			if ((p = dlsym(self_handle(), buf)))
				return p;
		}
	}
	for (int i = 0; i < 4; i++) {
		snprintf(buf, sizeof(buf), "%s%s", name, suffixes[i]);
		if ((p = dlsym(self_handle(), buf)))
			return p;
	}
	return NULL;
}

static void log_missing_once(const char *what, const char *name)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static char seen[64][80];
	static int nseen;
	int i;

	pthread_mutex_lock(&lock);
	for (i = 0; i < nseen && strncmp(seen[i], name, 79); i++)
		;
	if (i == nseen && nseen < 64) {
		snprintf(seen[nseen++], 80, "%s", name);
		log_warn("%s %s is not implemented", what, name);
	}
	pthread_mutex_unlock(&lock);
}

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
				     CUdriverProcAddressQueryResult *symbolStatus)
{
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = find_symbol(symbol, flags);
	if (symbolStatus)
		*symbolStatus = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	if (!*pfn) {
		log_missing_once("driver function", symbol);
		return CUDA_ERROR_NOT_FOUND;
	}
	return CUDA_SUCCESS;
}

#undef cuGetProcAddress
CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

CUresult CUDAAPI cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
	char id[40];
	const unsigned char *b;

	if (!ppExportTable || !pExportTableId)
		return CUDA_ERROR_INVALID_VALUE;
	b = (const unsigned char *)pExportTableId->bytes;
	snprintf(id, sizeof(id), "{%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x}",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
	log_missing_once("export table", id);
	*ppExportTable = NULL;
	return CUDA_ERROR_NOT_SUPPORTED;
}

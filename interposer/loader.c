/*
 * loader.c: how applications find libcicada.so. Loaded with LD_PRELOAD, it
 * answers dlopen("libcuda.so.1") with itself, so the CUDA runtime, which
 * loads the driver that way, binds to Cicada; and dlopen("libnvidia-ml.so.1")
 * with Cicada's NVML replacement beside it, so NVML sees the same GPU.
 */
#include <dlfcn.h>
#include <stdio.h>
#include "interposer.h"

/* Logging works from the first call, before any connection is made. */
__attribute__((constructor)) static void loader_init(void)
{
	log_init("cicada");
}

static void *real_dlopen(const char *file, int flags)
{
	static void *(*fn)(const char *, int);

	if (!fn)
		fn = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
	return fn(file, flags);
}

/* This library's own handle, through the real dlopen (ours would answer
 * a libcuda.so.1 path by calling here again). */
void *interposer_self(void)
{
	static void *self;
	Dl_info info;

	if (!self && dladdr((void *)interposer_self, &info) && info.dli_fname)
		self = real_dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
	return self;
}

static int is_lib(const char *file, const char *name)
{
	const char *base = strrchr(file, '/');
	size_t n = strlen(name);

	base = base ? base + 1 : file;
	return !strncmp(base, name, n) && (!base[n] || !strcmp(base + n, ".1"));
}

/* libnvidia-ml.so.1 in this library's folder; NULL if it is not there. */
static void *nvml_replacement(int flags)
{
	char path[4096];
	Dl_info info;
	const char *slash;

	if (!dladdr((void *)interposer_self, &info) || !info.dli_fname || !(slash = strrchr(info.dli_fname, '/')))
		return NULL;
	snprintf(path, sizeof(path), "%.*s/libnvidia-ml.so.1", (int)(slash - info.dli_fname), info.dli_fname);
	return real_dlopen(path, flags);
}

void *dlopen(const char *file, int flags)
{
	if (file && is_lib(file, "libcuda.so") && interposer_self())
		return interposer_self();
	if (file && is_lib(file, "libnvidia-ml.so")) {
		void *h = nvml_replacement(flags);
		if (h)
			return h;
	}
	return real_dlopen(file, flags);
}

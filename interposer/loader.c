/*
 * loader.c: how applications find libcicada.so. Loaded with LD_PRELOAD, it
 * answers dlopen("libcuda.so.1") with itself, so the CUDA runtime, which
 * loads the driver that way, binds to Cicada.
 */
#include <dlfcn.h>
#include <stdio.h>
#include "interposer.h"

/* Logging works from the first call, before any connection is made. */
__attribute__((constructor)) static void loader_init(void)
{
	log_init("cicada");
}

void *interposer_self(void)
{
	static void *self;
	Dl_info info;

	if (!self && dladdr((void *)interposer_self, &info) && info.dli_fname)
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
	if (file && is_libcuda(file) && interposer_self())
		return interposer_self();
	return real_dlopen(file, flags);
}

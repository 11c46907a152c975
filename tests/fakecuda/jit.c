/*
 * jit.c: the stand-in's PTX compiler, as the driver has it. PTX the
 * compute cache holds (CUDA_CACHE_PATH, else ~/.nv/ComputeCache;
 * CUDA_CACHE_DISABLE=1: none) is taken from there; any other is compiled,
 * which maps the compiler, libnvidia-ptxjitcompiler.so.1 (the tests
 * build one of the same name and size, jitcompiler.c), the first time,
 * and stores what compiled in the cache. So a process that compiles maps
 * some 36 MiB in its default mapping area, below which module variables
 * then land, and one whose PTX is all in the cache does not: the
 * gpu-server's workers map it before CUDA starts (gpu-server/front/worker.c).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fakecuda.h"

/* The cache's folder (made if missing), or "" when there is none. */
static void cache_dir(char *dir, size_t len)
{
	const char *off = getenv("CUDA_CACHE_DISABLE"), *path = getenv("CUDA_CACHE_PATH");
	const char *home = getenv("HOME");

	dir[0] = 0;
	if (off && !strcmp(off, "1"))
		return;
	if (path && *path)
		snprintf(dir, len, "%s", path);
	else if (home && *home && snprintf(dir, len, "%s/.nv", home) < (int)len)
		mkdir(dir, 0700), snprintf(dir, len, "%s/.nv/ComputeCache", home);
	if (dir[0] && mkdir(dir, 0700) && errno != EEXIST)
		dir[0] = 0;
}

static unsigned long long fnv(const char *s)
{
	unsigned long long h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

/* Compiles ptx (valid: whether the stand-in takes it), or finds it in the
 * cache: 0, CUDA_ERROR_INVALID_PTX, or CUDA_ERROR_JIT_COMPILER_NOT_FOUND. */
CUresult fc_ptx_compile(const char *ptx, int valid)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static void *compiler;
	char dir[PATH_MAX - 64], entry[PATH_MAX];
	int fd;

	cache_dir(dir, sizeof(dir));
	snprintf(entry, sizeof(entry), "%s/fakecuda-%016llx", dir, fnv(ptx));
	if (dir[0] && !access(entry, F_OK))
		return CUDA_SUCCESS;
	pthread_mutex_lock(&lock);
	if (!compiler)
		compiler = dlopen("libnvidia-ptxjitcompiler.so.1", RTLD_LAZY | RTLD_LOCAL);
	pthread_mutex_unlock(&lock);
	CHECK(compiler, CUDA_ERROR_JIT_COMPILER_NOT_FOUND);
	CHECK(valid, CUDA_ERROR_INVALID_PTX);
	if (dir[0] && (fd = open(entry, O_WRONLY | O_CREAT, 0600)) >= 0)
		close(fd);
	return CUDA_SUCCESS;
}

/*
 * Shared helpers for the test programs: messages, kernel file loading
 * and deterministic input data. No libcuda calls here (see common.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

const char *prog = "test";

/* Names the program and line-buffers stdout so a crash loses nothing. */
void start(const char *name)
{
	prog = name;
	setvbuf(stdout, NULL, _IOLBF, 0);
}

void fail(const char *fmt, ...)
{
	va_list ap;

	printf("%s: ", prog);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	exit(1);
}

void cu_fail(const char *file, int line, const char *call, CUresult r,
	     const char *name)
{
	const char *base = strrchr(file, '/');

	base = base ? base + 1 : file;
	if (name)
		fail("%s:%d %s failed: %s", base, line, call, name);
	fail("%s:%d %s failed: CUresult %d", base, line, call, (int)r);
}

void *xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);

	if (!p)
		fail("out of host memory (%zu bytes)", size);
	return p;
}

/*
 * Reads $CICADA_KERNELS/<name> (default build/tests/kernels) whole.
 * A NUL is appended past the end so PTX text can be passed as is;
 * *size is the file size without it.
 */
void *load_kernel(const char *name, size_t *size)
{
	const char *dir = getenv("CICADA_KERNELS");
	char path[4096];
	char *buf;
	long len;
	FILE *f;

	if (!dir || !*dir)
		dir = "build/tests/kernels";
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "rb");
	if (!f)
		fail("cannot open %s: %s", path, strerror(errno));
	if (fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET))
		fail("cannot size %s: %s", path, strerror(errno));
	buf = xmalloc(len + 1);
	if (fread(buf, 1, len, f) != (size_t)len)
		fail("short read on %s", path);
	fclose(f);
	buf[len] = 0;
	if (size)
		*size = len;
	return buf;
}

/* Small multiples of 1/4, so every sum below is exact in float. */
void fill_inputs(float *a, float *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		a[i] = (float)(i % 1000) * 0.5f;
		b[i] = (float)(i % 777) * 0.25f - 64.0f;
	}
}

double vecadd_max_err(const float *a, const float *b, const float *c, size_t n)
{
	double max = 0;

	for (size_t i = 0; i < n; i++) {
		double d = (double)c[i] - ((double)a[i] + (double)b[i]);

		if (d < 0)
			d = -d;
		if (d != d)
			return 1e30;
		if (d > max)
			max = d;
	}
	return max;
}

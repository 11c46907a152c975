/*
 * link.c: the stand-in's JIT logs and linker. Loading with options writes
 * a line to the info log (an error line when the image is refused), as a
 * driver's JIT does; the linker concatenates its text inputs into an
 * image the stand-in's loader takes (kernels are found by name) and logs
 * each step into the buffers its options gave.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fakecuda.h"

struct logs {
	char *info, *error;
	size_t info_size, error_size;
	int info_at, error_at;
	void **values;
};

static void logs_read(struct logs *l, unsigned n, const CUjit_option *o, void **v)
{
	memset(l, 0, sizeof(*l));
	l->info_at = l->error_at = -1;
	l->values = v;
	for (unsigned i = 0; o && v && i < n; i++) {
		if (o[i] == CU_JIT_INFO_LOG_BUFFER)
			l->info = v[i];
		else if (o[i] == CU_JIT_ERROR_LOG_BUFFER)
			l->error = v[i];
		else if (o[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
			l->info_size = (size_t)(uintptr_t)v[i], l->info_at = (int)i;
		else if (o[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
			l->error_size = (size_t)(uintptr_t)v[i], l->error_at = (int)i;
	}
}

/* The size options say how much of each buffer is filled (0: nothing). */
static void logs_sizes(struct logs *l)
{
	if (l->info_at >= 0 && l->info && l->info_size)
		l->values[l->info_at] = (void *)(uintptr_t)strlen(l->info);
	if (l->error_at >= 0 && l->error && l->error_size)
		l->values[l->error_at] = (void *)(uintptr_t)strlen(l->error);
}

static void logs_put(struct logs *l, int error, const char *text)
{
	char *buf = error ? l->error : l->info;
	size_t size = error ? l->error_size : l->info_size, n;

	if (buf && size) {
		n = strlen(buf) < size ? strlen(buf) : 0;
		snprintf(buf + n, size - n, "%s%s", n ? "\n" : "", text);
	}
	logs_sizes(l);
}

#undef cuModuleLoadDataEx
CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n, CUjit_option *options,
			    void **values)
{
	struct logs l;
	CUresult err;

	logs_read(&l, n, options, values);
	if (l.info)
		l.info[0] = 0;
	if (l.error)
		l.error[0] = 0;
	err = cuModuleLoadData(module, image);
	if (err == CUDA_ERROR_INVALID_PTX)
		logs_put(&l, 1, "fakecuda: this PTX holds no kernel the stand-in knows");
	else
		logs_put(&l, err != CUDA_SUCCESS, err ? "fakecuda: not a module image" : "fakecuda: module loaded");
	return err;
}

struct link {
	struct logs logs;
	char *text;
	size_t len;
	unsigned inputs;
};

CUresult cuLinkCreate(unsigned int n, CUjit_option *options, void **values, CUlinkState *out)
{
	struct link *k;

	CHECK_ARG(out);
	k = calloc(1, sizeof(*k));
	CHECK(k, CUDA_ERROR_OUT_OF_MEMORY);
	logs_read(&k->logs, n, options, values);
	if (k->logs.info)
		k->logs.info[0] = 0;
	if (k->logs.error)
		k->logs.error[0] = 0;
	*out = (CUlinkState)k;
	return CUDA_SUCCESS;
}

CUresult cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,
		       unsigned int n, CUjit_option *options, void **values)
{
	struct link *k = (struct link *)state;
	char line[300];
	char *grown;

	CHECK(k, CUDA_ERROR_INVALID_HANDLE);
	CHECK_ARG(data && size);
	if (type != CU_JIT_INPUT_PTX || !memchr(data, '.', size)) {
		snprintf(line, sizeof(line), "fakecuda: cannot link %s (only PTX text)", name ? name : "input");
		logs_put(&k->logs, 1, line);
		return CUDA_ERROR_INVALID_IMAGE;
	}
	grown = realloc(k->text, k->len + size + 2);
	CHECK(grown, CUDA_ERROR_OUT_OF_MEMORY);
	k->text = grown;
	memcpy(k->text + k->len, data, size);
	k->len += strnlen(k->text + k->len, size);
	k->text[k->len++] = '\n';
	k->text[k->len] = 0;
	k->inputs++;
	snprintf(line, sizeof(line), "fakecuda: added %s", name && name[0] ? name : "an input");
	logs_put(&k->logs, 0, line);
	return CUDA_SUCCESS;
}

CUresult cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path, unsigned int n,
		       CUjit_option *options, void **values)
{
	FILE *f = path ? fopen(path, "rb") : NULL;
	char *buf = NULL;
	long size;
	CUresult err = CUDA_ERROR_FILE_NOT_FOUND;

	CHECK_ARG(path);
	CHECK(f, CUDA_ERROR_FILE_NOT_FOUND);
	if (!fseek(f, 0, SEEK_END) && (size = ftell(f)) > 0 && !fseek(f, 0, SEEK_SET) && (buf = calloc(1, size + 1)) &&
	    fread(buf, 1, size, f) == (size_t)size)
		err = cuLinkAddData(state, type, buf, size + 1, path, n, options, values);
	free(buf);
	fclose(f);
	return err;
}

CUresult cuLinkComplete(CUlinkState state, void **cubin, size_t *size)
{
	struct link *k = (struct link *)state;
	char line[64];

	CHECK(k, CUDA_ERROR_INVALID_HANDLE);
	CHECK_ARG(cubin && size);
	CHECK(k->inputs, CUDA_ERROR_INVALID_VALUE);
	snprintf(line, sizeof(line), "fakecuda: linked %u inputs", k->inputs);
	logs_put(&k->logs, 0, line);
	*cubin = k->text;
	*size = k->len + 1;
	return CUDA_SUCCESS;
}

CUresult cuLinkDestroy(CUlinkState state)
{
	struct link *k = (struct link *)state;

	CHECK(k, CUDA_ERROR_INVALID_HANDLE);
	free(k->text);
	free(k);
	return CUDA_SUCCESS;
}

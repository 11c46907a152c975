/*
 * jit.c: JIT and linker options a client sent, made into the arrays the
 * driver takes. Only options that hold plain values cross the wire; the
 * log buffers are the worker's, sized as the client asked (at most
 * CICADA_JIT_LOG_MAX), and what the driver wrote there goes back in the
 * reply (jit_logs) for the client to copy into its own buffers. Options
 * that would point into the client (symbol tables, name lists) are
 * refused.
 */
#include <stdlib.h>
#include <string.h>
#include "calls.h"

static CUresult add(struct jit_set *s, CUjit_option o, void *v)
{
	if (s->n == JIT_SET_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	s->opt[s->n] = o;
	s->val[s->n++] = v;
	return CUDA_SUCCESS;
}

/* A log buffer of the size the client asked for, and its two options. */
static CUresult add_log(struct jit_set *s, int error, uint64_t size)
{
	char **buf = error ? &s->error : &s->info;
	size_t *len = error ? &s->error_size : &s->info_size;
	CUresult err;

	if (*buf || !size)
		return *buf ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
	*len = size < CICADA_JIT_LOG_MAX ? (size_t)size : CICADA_JIT_LOG_MAX;
	if (!(*buf = calloc(1, *len)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if ((err = add(s, error ? CU_JIT_ERROR_LOG_BUFFER : CU_JIT_INFO_LOG_BUFFER, *buf)))
		return err;
	return add(s, error ? CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES : CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
		   (void *)(uintptr_t)*len);
}

static CUresult add_wall_time(struct jit_set *s)
{
	if (s->wall)
		return CUDA_ERROR_INVALID_VALUE;
	s->wall = 1;
	return add(s, CU_JIT_WALL_TIME, &s->wall_time);
}

CUresult jit_set_make(struct jit_set *s, const jit_option *o, unsigned n)
{
	CUresult err = CUDA_SUCCESS;

	memset(s, 0, sizeof(*s));
	for (unsigned i = 0; i < n && !err; i++) {
		if (o[i].option == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES || o[i].option == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
			err = add_log(s, o[i].option == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, o[i].value);
		else if (o[i].option == CU_JIT_WALL_TIME)
			err = add_wall_time(s);
		else if (wire_jit_option_plain(o[i].option))
			err = add(s, (CUjit_option)o[i].option, (void *)(uintptr_t)o[i].value);
		else
			err = CUDA_ERROR_INVALID_VALUE;
	}
	if (err)
		jit_set_free(s);
	return err;
}

static void copy_log(const char *buf, size_t size, char **val, u_int *len)
{
	size_t n = buf ? strnlen(buf, size) : 0;

	*len = 0;
	if (!n || !(*val = malloc(n + 1)))
		return;
	memcpy(*val, buf, n);
	(*val)[n] = 0;
	*len = (u_int)(n + 1);
}

/* The logs as they stand, for a reply (freed with it). */
void jit_set_logs(const struct jit_set *s, jit_logs *out)
{
	copy_log(s->info, s->info_size, &out->info.info_val, &out->info.info_len);
	copy_log(s->error, s->error_size, &out->error.error_val, &out->error.error_len);
	out->wall_time = s->wall_time;
}

void jit_set_free(struct jit_set *s)
{
	free(s->info);
	free(s->error);
	s->info = s->error = NULL;
	s->n = 0;
}

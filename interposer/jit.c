/*
 * jit.c: an application's JIT and linker options (cuModuleLoadDataEx,
 * cuLibraryLoadData, cuLink*). Options holding plain values go to the
 * worker as they are. The log buffers stay here: their sizes go, and what
 * the worker's JIT wrote comes back and is copied into them, with the
 * size options set to what was written and the wall time filled in, as
 * the driver does. Options that point into this process (symbol tables,
 * name lists) cannot be served remotely: they are left out and named.
 */
#include <stdio.h>
#include "interposer.h"

/* Whether option o goes to the worker: plain values only. */
static int jit_remote(CUjit_option o)
{
	if (wire_jit_option_plain((unsigned)o))
		return 1;
	if (o != CU_JIT_INFO_LOG_BUFFER && o != CU_JIT_ERROR_LOG_BUFFER)
		log_missing_once("JIT option", "symbol and name lists (CU_JIT_GLOBAL_SYMBOL_*, CU_JIT_REFERENCED_*)", 1);
	return 0;
}

/* Reads the application's options (n of them, values beside them). */
CUresult jit_read(struct jit_request *j, unsigned n, const CUjit_option *opts, void **values)
{
	memset(j, 0, sizeof(*j));
	j->values = values;
	j->info_size_at = j->error_size_at = j->wall_at = -1;
	if (n && (!opts || !values))
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < n; i++) {
		if (opts[i] == CU_JIT_INFO_LOG_BUFFER)
			j->info = values[i];
		else if (opts[i] == CU_JIT_ERROR_LOG_BUFFER)
			j->error = values[i];
		if (opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
			j->info_size_at = (int)i;
		else if (opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
			j->error_size_at = (int)i;
		else if (opts[i] == CU_JIT_WALL_TIME)
			j->wall_at = (int)i;
		if (!jit_remote(opts[i]))
			continue;
		if (j->n == CICADA_JIT_OPTIONS_MAX)
			return CUDA_ERROR_INVALID_VALUE;
		j->opts[j->n].option = (unsigned)opts[i];
		j->opts[j->n++].value = (uint64_t)(uintptr_t)values[i];
	}
	j->info_size = j->info_size_at >= 0 && j->info ? (size_t)(uintptr_t)values[j->info_size_at] : 0;
	j->error_size = j->error_size_at >= 0 && j->error ? (size_t)(uintptr_t)values[j->error_size_at] : 0;
	for (unsigned i = 0; i < j->n; i++)             /* no buffer here: ask for no log there */
		if ((j->opts[i].option == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES && !j->info) ||
		    (j->opts[i].option == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES && !j->error))
			j->opts[i].value = 0;
	return CUDA_SUCCESS;
}

static void copy_log(char *buf, size_t size, int at, void **values, const char *log, size_t len)
{
	size_t n;

	if (!buf || !size)
		return;
	n = len && log ? strnlen(log, len) : 0;
	if (n >= size)
		n = size - 1;
	memcpy(buf, log, n);
	buf[n] = 0;
	if (at >= 0)
		values[at] = (void *)(uintptr_t)n;      /* as the driver says: the characters written */
}

/* Copies what the worker's JIT said into the application's buffers. */
void jit_write_back(const struct jit_request *j, const jit_logs *logs)
{
	copy_log(j->info, j->info_size, j->info_size_at, j->values, logs->info.info_val, logs->info.info_len);
	copy_log(j->error, j->error_size, j->error_size_at, j->values, logs->error.error_val, logs->error.error_len);
	if (j->wall_at >= 0)
		memcpy(&j->values[j->wall_at], &logs->wall_time, sizeof(float));
}

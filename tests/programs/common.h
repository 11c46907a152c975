/*
 * Helpers shared by the driver-API test programs: the CHECK macro that
 * turns a failed CUresult into a message and exit status 1, kernel file
 * loading from $CICADA_KERNELS, and the vec_add input data.
 *
 * common.c itself calls nothing in libcuda, so dlopen_app can link it
 * without -lcuda; only CHECK (through cu_error_name) needs the library.
 */
#ifndef CICADA_TESTS_COMMON_H
#define CICADA_TESTS_COMMON_H

#include <stddef.h>
#include <cuda.h>

#define BLOCK 256
#define GRID(n) ((unsigned)(((n) + BLOCK - 1) / BLOCK))

extern const char *prog;

void start(const char *name);
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void cu_fail(const char *file, int line, const char *call, CUresult r,
	     const char *name) __attribute__((noreturn));
void *load_kernel(const char *name, size_t *size);
void *xmalloc(size_t size);
void fill_inputs(float *a, float *b, size_t n);
double vecadd_max_err(const float *a, const float *b, const float *c, size_t n);

static inline const char *cu_error_name(CUresult r)
{
	const char *s = NULL;

	if (cuGetErrorName(r, &s) != CUDA_SUCCESS)
		return NULL;
	return s;
}

/* For messages: never NULL. */
static inline const char *errname(CUresult r)
{
	const char *s = cu_error_name(r);

	return s ? s : "unrecognized CUresult";
}

#define CHECK(call)							\
	do {								\
		CUresult r_ = (call);					\
		if (r_ != CUDA_SUCCESS)					\
			cu_fail(__FILE__, __LINE__, #call, r_,		\
				cu_error_name(r_));			\
	} while (0)

#endif

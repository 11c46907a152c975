/*
 * trace.h: what the generated tracing twins (gen-driver.py trace) and
 * trace.c share. Kept apart from interposer.h, which the generated file
 * does not need.
 */
#ifndef CICADA_TRACE_H
#define CICADA_TRACE_H

#include <cuda.h>

struct trace_fn {
	const char *name;                    /* the exported name */
	void *fn;                            /* its tracing twin */
};

extern const struct trace_fn trace_fns[];  /* sorted by name */
extern const unsigned trace_nfns;
extern int trace_every;                    /* CICADA_TRACE=1: every call, not only failures */

void trace_result(unsigned i, CUresult r);

#endif

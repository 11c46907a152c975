/*
 * sweep.h: the table of callers that wire/gen-driver.py generates from
 * cuda.h for the never-crash sweep: one per exported driver function,
 * each making the call with NULL and zero arguments (pass 1) or invalid
 * ones (pass 2: handles that were never made, scalars of all ones).
 */
#ifndef CICADA_SWEEP_H
#define CICADA_SWEEP_H

#include <cuda.h>

struct sweep_fn {
	const char *name;
	CUresult (*call)(void *fn, int pass);
};

extern const struct sweep_fn sweep_fns[];

#endif

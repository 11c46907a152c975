/*
 * trace.h: what the generated exported functions (gen-driver.py trace)
 * and trace.c share. Kept apart from interposer.h, which the generated
 * file does not need.
 */
#ifndef CICADA_TRACE_H
#define CICADA_TRACE_H

#include <stdint.h>
#include <cuda.h>

extern const char *const trace_names[];   /* the exported names, by index */
extern const unsigned trace_nfns;
extern int trace_every;                    /* every call, not only failures: */
enum { TRACE_LOG = 1, TRACE_COUNT = 2 };   /* CICADA_TRACE=1 logs it, CICADA_STATS=1 counts it */

uint64_t trace_clock(void);                /* monotonic ns; what t0 is read with */
void trace_result(unsigned i, CUresult r, uint64_t t0);   /* t0: when the call began (counted calls) */

#endif

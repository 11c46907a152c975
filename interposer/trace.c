/*
 * trace.c: which driver call failed, and with what. When the client logs
 * at info level or lower (CICADA_LOG=info, debug) or CICADA_TRACE=1 is
 * set, cuGetProcAddress hands the runtime and the libraries a tracing
 * twin of each function (generated from cuda.h), which calls it and
 * reports here. A failure is logged at info level the first time a
 * function returns that error, and every time at debug level;
 * CICADA_TRACE=1 logs every call, failed or not, at debug level.
 * CUDA_ERROR_NOT_READY (a query's ordinary answer) is logged only at
 * debug level. With tracing off, the functions themselves are handed
 * out and nothing is added to a call.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "interposer.h"
#include "trace.h"

#define SEEN_MAX 1024

int trace_every;
static int trace_on = -1;

static int trace_enabled(void)
{
	const char *e;

	if (trace_on < 0) {
		e = getenv("CICADA_TRACE");
		trace_every = e && *e && strcmp(e, "0");
		trace_on = trace_every || log_enabled(LOG_INFO);
	}
	return trace_on;
}

static int by_name(const void *key, const void *elem)
{
	return strcmp(key, ((const struct trace_fn *)elem)->name);
}

/* The tracing twin of the exported function name, or fn itself when
 * tracing is off or name has none. */
void *trace_wrap(const char *name, void *fn)
{
	const struct trace_fn *t;

	if (!fn || !trace_enabled())
		return fn;
	t = bsearch(name, trace_fns, trace_nfns, sizeof(*trace_fns), by_name);
	return t ? t->fn : fn;
}

/* Whether function i has returned r before (and remember it if not). */
static int seen_before(unsigned i, CUresult r)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static uint32_t seen[SEEN_MAX];
	static unsigned nseen;
	uint32_t key = i << 12 | ((unsigned)r & 0xfff);
	unsigned k;
	int found = 0;

	pthread_mutex_lock(&lock);
	for (k = 0; k < nseen && !found; k++)
		found = seen[k] == key;
	if (!found && nseen < SEEN_MAX)
		seen[nseen++] = key;
	pthread_mutex_unlock(&lock);
	return found || nseen == SEEN_MAX;
}

void trace_result(unsigned i, CUresult r)
{
	const char *name = i < trace_nfns ? trace_fns[i].name : "?";
	const char *err = error_name(r);

	if (!r) {
		log_debug("%s: CUDA_SUCCESS", name);
		return;
	}
	if (r == CUDA_ERROR_NOT_READY || seen_before(i, r))
		log_debug("%s failed: %s (%d)", name, err ? err : "unknown error", (int)r);
	else
		log_info("%s failed: %s (%d)%s", name, err ? err : "unknown error", (int)r,
			 log_enabled(LOG_DEBUG) ? "" : " (logged once; CICADA_LOG=debug logs each)");
}

/*
 * trace.c: which driver call failed, and with what. Every exported
 * function the interposer serves is generated (gen-driver.py trace): it
 * calls the implementation and reports here when the result is an error,
 * however the caller found it (linked, dlsym, cuGetProcAddress). A
 * failure is logged at info level the first time a function returns that
 * error, and every time at debug level; CUDA_ERROR_NOT_READY (a query's
 * ordinary answer) only at debug level. CICADA_TRACE=1 also logs every
 * call's result at info level, never rate-limited; a sticky error also stops the client
 * keeping answers (answers.c). CICADA_STATS=1 counts and times every call (stats.c).
 * Successful calls cost one test.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "interposer.h"
#include "trace.h"

#define SEEN_MAX 1024

int trace_every;

__attribute__((constructor)) static void trace_init(void)
{
	const char *e = getenv("CICADA_TRACE");

	trace_every = e && *e && strcmp(e, "0") ? TRACE_LOG : 0;
	e = getenv("CICADA_STATS");
	if (e && *e && strcmp(e, "0"))
		trace_every |= TRACE_COUNT;
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

uint64_t trace_clock(void)
{
	return stats_now();
}

void trace_result(unsigned i, CUresult r, uint64_t t0)
{
	const char *name = i < trace_nfns ? trace_names[i] : "?";
	const char *err = error_name(r);

	if (r)
		answers_error(r);
	if (trace_every & TRACE_COUNT)
		stats_driver_call(i, name, stats_now() - t0);
	if (trace_every & TRACE_LOG) {
		if (r)
			log_every(LOG_INFO, "%s failed: %s (%d)", name, err ? err : "unknown error", (int)r);
		else
			log_every(LOG_INFO, "%s: CUDA_SUCCESS", name);
		return;
	}
	if (!r)
		return;
	if (r == CUDA_ERROR_NOT_READY || seen_before(i, r))
		log_debug("%s failed: %s (%d)", name, err ? err : "unknown error", (int)r);
	else
		log_info("%s failed: %s (%d)%s", name, err ? err : "unknown error", (int)r,
			 log_enabled(LOG_DEBUG) ? "" : " (logged once; CICADA_LOG=debug logs each)");
}

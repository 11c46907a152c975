/*
 * profile.c: where a worker's time goes, the server's half of
 * CICADA_STATS=1 (interposer/stats.c asks for it with worker_stats when
 * its session starts, and reads it at exit). Off, it costs one test a
 * call. On, the worker times each record it serves: the wait for the
 * client's next record, decoding it, the bookkeeping before it runs,
 * running it (by procedure: the driver's time and the worker's own
 * translation), and freeing and replying. A client whose calls are
 * slower than natively sees here whether the worker or the wire holds
 * them up.
 */
#include <stdlib.h>
#include <string.h>
#include "calls.h"

#define PROF_PROCS 512
#define PROF_PAGE 5                          /* procedures a reply page holds */

struct worker_profile {
	uint64_t started_ns, records;
	uint64_t part_ns[PROF_PARTS];
	uint64_t calls[PROF_PROCS], run_ns[PROF_PROCS];
};

uint64_t profile_add_on(struct worker *w, enum prof_part part, unsigned proc, uint64_t since)
{
	struct worker_profile *p = w->calls->prof;
	uint64_t now = wire_now_ns();

	if (!since)
		return now;
	p->part_ns[part] += now - since;
	if (part == PROF_RUN && proc < PROF_PROCS && proc != P_worker_stats) {   /* (not its own reading) */
		p->calls[proc]++;
		p->run_ns[proc] += now - since;
	}
	if (part == PROF_WAIT)
		p->records++;
	return now;
}

static int by_run(const void *a, const void *b, void *arg)
{
	const struct worker_profile *p = arg;
	uint64_t x = p->run_ns[*(const unsigned *)a], y = p->run_ns[*(const unsigned *)b];

	return x < y ? 1 : x > y ? -1 : 0;
}

/* Page 0: elapsed ns, records, then each part's ns, then how many
 * procedures ran; page k: the k-th PROF_PAGE procedures by time, as
 * (procedure, calls, ns). */
static unsigned page(const struct worker_profile *p, uint64_t k, uint64_t *out)
{
	unsigned order[PROF_PROCS], n = 0, len = 0;

	for (unsigned i = 0; i < PROF_PROCS; i++)
		if (p->calls[i])
			order[n++] = i;
	if (!k) {
		out[len++] = wire_now_ns() - p->started_ns;
		out[len++] = p->records;
		for (unsigned i = 0; i < PROF_PARTS; i++)
			out[len++] = p->part_ns[i];
		out[len++] = n;
		return len;
	}
	qsort_r(order, n, sizeof(*order), by_run, (void *)p);
	for (uint64_t i = (k - 1) * PROF_PAGE; i < n && i < k * PROF_PAGE; i++) {
		out[len++] = order[i];
		out[len++] = p->calls[order[i]];
		out[len++] = p->run_ns[order[i]];
	}
	return len;
}

/* worker_stats [1]: start (again) from zero; [2, k]: page k. */
CUresult hand_worker_stats(struct worker *w, void *args, void *res)
{
	const scalars *a = args;
	scalar_res *r = res;

	if (a->v.v_len < 1 || a->v.v_val[0] < 1 || a->v.v_val[0] > 2 || (a->v.v_val[0] == 2 && a->v.v_len != 2))
		return CUDA_ERROR_INVALID_VALUE;
	if (a->v.v_val[0] == 1) {
		if (!w->calls->prof && !(w->calls->prof = malloc(sizeof(struct worker_profile))))
			return CUDA_ERROR_OUT_OF_MEMORY;
		memset(w->calls->prof, 0, sizeof(struct worker_profile));
		w->calls->prof->started_ns = wire_now_ns();
		return CUDA_SUCCESS;
	}
	if (!w->calls->prof)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (a->v.v_val[1] > PROF_PROCS / PROF_PAGE + 1)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(r->v.v_val = calloc(CICADA_SCALARS_MAX, sizeof(uint64_t))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	r->v.v_len = page(w->calls->prof, a->v.v_val[1], r->v.v_val);
	return CUDA_SUCCESS;
}

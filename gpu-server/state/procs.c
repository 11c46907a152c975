/*
 * procs.c: the procedure table by number, and the replies every part
 * shares: below the calls (dispatch.c), the replay log and the
 * checkpoints, which all look procedures up here.
 */
#include <stdlib.h>
#include "state.h"

#define MAX_PROC 1024                         /* above every number in calls.tbl */

static const struct proc_desc *proc_index[MAX_PROC];

void worker_index_procs(void)
{
	for (const struct proc_desc *d = server_procs; d->name; d++)
		if (d->proc < MAX_PROC)
			proc_index[d->proc] = d;
		else
			log_error("procedure %u (%s) is past MAX_PROC: raise it", d->proc, d->name);
}

/* A reply of one scalar (a handle id, mostly); 0 is an id never given. */
CUresult one_scalar(scalar_res *r, uint64_t v)
{
	if (!v || !(r->v.v_val = malloc(sizeof(uint64_t))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	r->v.v_val[0] = v;
	r->v.v_len = 1;
	return CUDA_SUCCESS;
}

const struct proc_desc *worker_proc(unsigned proc)
{
	return proc < MAX_PROC ? proc_index[proc] : NULL;
}

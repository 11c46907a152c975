/*
 * dispatch.c: a worker's calls, in order: decodes each record, runs the
 * procedure the table (wire/calls.tbl) names with the client's handles
 * translated, and replies. Pipelined calls get no reply; their first
 * error is kept and returned by the next call that synchronises with the
 * device. A restore's replay runs recorded calls through here too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "calls.h"

static void set_pending(struct worker *w, CUresult err)
{
	if (err != CUDA_SUCCESS && w->calls->pending == CUDA_SUCCESS)
		w->calls->pending = err;
}

static CUresult run_scalar(struct worker *w, const struct proc_desc *d, scalars *a, scalar_res *r, uint64_t *out)
{
	if (a->v.v_len != d->nin)
		return CUDA_ERROR_INVALID_VALUE;
	r->v.v_val = out;
	r->v.v_len = d->nout;
	return d->scalar(w, a->v.v_val, out);
}

/* Points inline host-to-device data at pinned scratch, and a launch's
 * parameters at the worker's own buffer, before decoding: no allocation
 * for the commonest calls. */
static void prepare_args(struct worker *w, unsigned proc, void *args)
{
	if (proc == P_memcpy_htod || proc == P_memcpy_htod_async)
		((htod_args *)args)->data.data_val = w->calls->scratch_in;
	if (proc == P_launch_kernel)
		((launch_args *)args)->params.params_val = w->calls->params;
}

static void release_args(unsigned proc, void *args)
{
	if (proc == P_memcpy_htod || proc == P_memcpy_htod_async)
		((htod_args *)args)->data.data_val = NULL;
	if (proc == P_launch_kernel)
		((launch_args *)args)->params.params_val = NULL;
}

static void release_res(unsigned proc, void *res)
{
	if (proc == P_memcpy_dtoh)
		((bytes_res *)res)->data.data_val = NULL;
}

static int send_reply(struct worker *w, struct wire_buf *out, uint32_t xid, enum wire_accept stat,
		      xdrproc_t xres, void *res)
{
	if (wire_encode_reply(out, xid, stat, xres, res) || wire_send_record(&w->calls->stream, out))
		return -1;
	return 0;
}

/* Decodes one call record; on success the caller executes and frees it.
 * Returns 0, or -1 (malformed: drop the connection), or WIRE_PROG_MISMATCH. */
int worker_decode(struct worker *w, const struct wire_buf *in, struct wire_call_hdr *hdr,
		  const struct proc_desc **desc, void *args)
{
	const struct proc_desc *d;
	char err[WIRE_ERRLEN];
	XDR x;
	int st = wire_decode_call(in, hdr, &x, err);

	if (st == WIRE_PROG_MISMATCH) {
		log_warn("client %s: %s; dropping it", w->peer, err);
		xdr_destroy(&x);
		return WIRE_PROG_MISMATCH;
	}
	if (st) {
		log_warn("client %s: malformed message (%s); dropping it", w->peer, err);
		return -1;
	}
	d = worker_proc(hdr->proc);
	if (!d || d->args_size > ARGS_MAX) {
		log_warn("client %s: unknown procedure %u; dropping it", w->peer, hdr->proc);
		xdr_destroy(&x);
		return -1;
	}
	memset(args, 0, d->args_size);
	prepare_args(w, hdr->proc, args);
	if (!d->xargs(&x, args) || xdr_getpos(&x) != in->len) {
		log_warn("client %s: malformed arguments for %s; dropping it", w->peer, d->name);
		worker_free_args(hdr->proc, d, args);
		xdr_destroy(&x);
		return -1;
	}
	xdr_destroy(&x);
	*desc = d;
	return 0;
}

void worker_free_args(unsigned proc, const struct proc_desc *d, void *args)
{
	release_args(proc, args);
	xdr_free(d->xargs, (char *)args);
}

/* What a successful call changes in the worker itself. */
static void after_call(struct worker *w, const struct proc_desc *d, void *args)
{
	scalars *a = args;
	uint64_t parent = w->calls->call_parent;

	if (d->proc == P_cuCtxSetCurrent && a->v.v_len == 1)
		w->current_ctx = a->v.v_val[0];
	if (!(d->flags & PROC_RECORD))
		return;
	if (d->scalar && d->parent_arg >= 0)
		parent = a->v.v_val[d->parent_arg];
	replay_note(w, d, args, parent);
}

/* Runs a decoded call (from the client, or replayed from a snapshot). */
CUresult worker_execute(struct worker *w, const struct proc_desc *d, void *args, void *res,
			uint64_t *scalar_out)
{
	CUresult rc;

	w->created = 0;
	w->calls->call_parent = 0;
	if (d->scalar)
		rc = run_scalar(w, d, (scalars *)args, (scalar_res *)res, scalar_out);
	else
		rc = d->hand(w, args, res);
	if (rc == CUDA_SUCCESS)
		after_call(w, d, args);
	return rc;
}

/* Executes one call record; -1 drops the connection. */
static int dispatch(struct worker *w, struct wire_buf *in, struct wire_buf *out)
{
	union { char c[ARGS_MAX]; uint64_t align; } args, res;
	uint64_t scalar_out[CICADA_SCALARS_MAX];
	struct wire_call_hdr hdr;
	const struct proc_desc *d;
	CUresult rc;
	uint64_t t = profile_mark(w);
	int st = worker_decode(w, in, &hdr, &d, &args);

	t = profile_add(w, PROF_DECODE, 0, t);
	if (st == WIRE_PROG_MISMATCH)
		send_reply(w, out, hdr.xid, WIRE_PROG_MISMATCH, NULL, NULL);
	if (st)
		return -1;
	if (w->stat)
		w->stat->calls++;            /* (cicadactl list: calls a second) */
	stat_wait_resumed(w);                /* (cicadactl pause) */
	green_take_asked(w);                 /* (cicadactl resize --sms) */
	memset(&res, 0, d->res_size > sizeof(int) ? d->res_size : sizeof(int));
	log_debug("%s", d->name);
	t = profile_add(w, PROF_BOOK, 0, t);
	rc = worker_execute(w, d, &args, &res, scalar_out);
	t = profile_add(w, PROF_RUN, hdr.proc, t);
	if (rc &&
	    (log_enabled(LOG_DEBUG) || ((d->flags & PROC_ASYNC) && !w->calls->pending && log_enabled(LOG_INFO)))) {
		const char *name = "?";
		cuGetErrorName(rc, &name);
		if (d->flags & PROC_ASYNC)
			log_info("client %s: pipelined %s failed: %s (the client hears it at its next synchronising call)",
				 w->peer, d->name, name);
		else
			log_debug("%s failed: %s", d->name, name);
	}
	worker_free_args(hdr.proc, d, &args);
	if (d->flags & PROC_ASYNC) {
		set_pending(w, rc);
		profile_add(w, PROF_REPLY, 0, t);
		return w->calls->exiting ? -1 : 0;
	}
	if (rc == CUDA_SUCCESS && (d->flags & PROC_SYNCPOINT) && w->calls->pending) {
		rc = w->calls->pending;
		w->calls->pending = CUDA_SUCCESS;
	}
	*(int *)&res = rc;
	if (d->xres == (xdrproc_t)xdr_name_res && !((name_res *)&res)->name)
		((name_res *)&res)->name = strdup("");     /* a failed call has no name */
	st = output_forward(w, out);
	if (!st)
		st = send_reply(w, out, hdr.xid, WIRE_SUCCESS, d->xres, &res);
	if (d->scalar) {
		((scalar_res *)&res)->v.v_val = NULL;
	} else {
		release_res(hdr.proc, &res);
		xdr_free(d->xres, (char *)&res);
	}
	profile_add(w, PROF_REPLY, 0, t);
	return st ? st : w->calls->detach;
}

/* Serves the client until it goes away (0) or detaches (1). */
int worker_serve(struct worker *w)
{
	struct wire_buf in = { 0 }, out = { 0 };
	int rc, result = 0;

	for (;;) {
		uint64_t t = profile_mark(w);

		rc = wire_recv_record(&w->calls->stream, &in, WIRE_MAX_RECORD);
		profile_add(w, PROF_WAIT, 0, t);
		if (rc == -1) {
			log_info("client %s disconnected", w->peer);
			break;
		}
		if (rc == -2) {
			log_warn("client %s: oversized message; dropping it", w->peer);
			break;
		}
		if ((rc = dispatch(w, &in, &out))) {
			result = rc > 0;
			break;
		}
	}
	wire_buf_free(&in);
	wire_buf_free(&out);
	return result;
}

/*
 * green.c: a session held to a share of a GPU's SMs (gpu-server
 * --sm-share). The server gives each such session whole groups of SMs
 * (front/sm_share.c): the groups cuDevSmResourceSplitByCount makes of
 * the GPU at its granularity (8 SMs on an H100 or H200), as a mask, the
 * same in every process of the node. The session's context on that GPU
 * is then a green context of those groups: the worker answers the
 * client's primary context with it (cuCtxFromGreenCtx), so its streams,
 * its NULL stream and its launches run there, while modules, memory and
 * events stay the primary context's, as the driver shares them. The
 * client's SM count (cuDeviceGetAttribute) is the share's.
 *
 * A new share (cicadactl resize --sms) is taken between two calls: the
 * session's work on the GPU finishes, a green context of the new groups
 * is made (none for the whole GPU), every stream of the old one is made
 * again there with its flags and priority under the same handle, and
 * the client's context handle names the new context. The old green
 * context stays until the worker ends: graphs instantiated there keep
 * working. A program may ask for fewer SMs (CICADA_SM_LIMIT,
 * green_lower): it keeps that many of its groups, or, on a whole GPU,
 * takes the first groups (which then are not its alone).
 */
#include <stdlib.h>
#include <string.h>
#include "state.h"

/* GPU dev's SM count and group size (0s if it has no green contexts). */
static void sm_layout(CUdevice dev, unsigned *total, unsigned *unit)
{
	CUdevResource all;

	*total = *unit = 0;
	if (cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM))
		return;
	*total = all.sm.smCount;
	*unit = all.sm.minSmPartitionSize > all.sm.smCoscheduledAlignment ? all.sm.minSmPartitionSize
									    : all.sm.smCoscheduledAlignment;
}

/* Before the worker says it is ready: each GPU's SMs and group size, for
 * the server to share out. */
void green_describe(struct worker *w)
{
	unsigned total, unit;

	if (!w->stat)
		return;
	for (int d = 0; d < w->nreal && d < CICADA_MAX_GPUS; d++) {
		sm_layout(d, &total, &unit);
		w->stat->sm_total[d] = (uint16_t)total;
		w->stat->sm_unit[d] = (uint16_t)unit;
	}
}

/* A green context of the groups in mask on dev. */
static CUresult make(CUdevice dev, uint64_t mask, CUgreenCtx *green, CUcontext *view)
{
	CUdevResource all, groups[GREEN_GROUPS_MAX], pick[GREEN_GROUPS_MAX];
	unsigned total, unit, n = GREEN_GROUPS_MAX, np = 0;
	CUdevResourceDesc desc;
	CUresult err;

	sm_layout(dev, &total, &unit);
	if (!unit)
		return CUDA_ERROR_NOT_SUPPORTED;
	if ((err = cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM)) ||
	    (err = cuDevSmResourceSplitByCount(groups, &n, &all, NULL, 0, unit)))
		return err;
	for (unsigned i = 0; i < n; i++)
		if (mask >> i & 1)
			pick[np++] = groups[i];
	if (!np)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = cuDevResourceGenerateDesc(&desc, pick, np)) ||
	    (err = cuGreenCtxCreate(green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM)))
		return err;
	return cuCtxFromGreenCtx(view, *green);
}

/* The session's context on dev: *ctx (the primary) as it is, or the green
 * context of its share there. */
CUresult green_context(struct worker *w, CUdevice dev, CUcontext *ctx)
{
	CUresult err;

	if (dev < 0 || dev >= CICADA_MAX_GPUS || !w->sm_mask[dev])
		return CUDA_SUCCESS;
	if (!w->green_view[dev] && (err = make(dev, w->sm_mask[dev], &w->green[dev], &w->green_view[dev]))) {
		const char *name = "?";
		cuGetErrorName(err, &name);
		log_error("client %s: no green context for its SMs on GPU %d: %s", w->peer, (int)dev, name);
		return err;
	}
	*ctx = w->green_view[dev];
	return CUDA_SUCCESS;
}

/* The SMs the session has on dev, or 0 for the whole GPU. */
int green_sms(struct worker *w, CUdevice dev)
{
	unsigned total, unit, n;

	if (dev < 0 || dev >= CICADA_MAX_GPUS || !w->sm_mask[dev])
		return 0;
	sm_layout(dev, &total, &unit);
	n = (unsigned)__builtin_popcountll(w->sm_mask[dev]) * unit;
	return (int)(n < total ? n : total);
}

/* Whether stream s runs in the context named by green (NULL: dev's
 * primary context, primary). */
static int stream_in(CUstream s, CUgreenCtx green, CUcontext primary)
{
	CUcontext ctx;
	CUgreenCtx g;

	if (cuStreamGetCtx_v2(s, &ctx, &g))
		return 0;
	return green ? g == green : !g && ctx == primary;
}

/* Whether any stream of that context is capturing a graph (the move waits). */
static int capturing(struct worker *w, CUgreenCtx green, CUcontext primary)
{
	CUstreamCaptureStatus st;

	for (unsigned i = 0; i < w->nhandles; i++)
		if (w->handles[i].kind == H_STREAM && stream_in(w->handles[i].real, green, primary) &&
		    !cuStreamIsCapturing(w->handles[i].real, &st) && st != CU_STREAM_CAPTURE_STATUS_NONE)
			return 1;
	return 0;
}

/* Every stream of that context made again in now, under its handle: all
 * made first, then swapped, so a failure leaves every stream where it was. */
static CUresult move_streams(struct worker *w, CUgreenCtx green, CUcontext primary, CUcontext now)
{
	CUresult err = CUDA_SUCCESS;
	unsigned n = 0, k = 0;
	CUstream *fresh;

	for (unsigned i = 0; i < w->nhandles; i++)
		n += w->handles[i].kind == H_STREAM && stream_in(w->handles[i].real, green, primary);
	if (!n)
		return CUDA_SUCCESS;
	if (!(fresh = calloc(n, sizeof(*fresh))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (unsigned i = 0; i < w->nhandles && !err && k < n; i++) {
		CUstream s = w->handles[i].real;
		unsigned flags;
		int prio;

		if (w->handles[i].kind != H_STREAM || !stream_in(s, green, primary))
			continue;
		if ((err = cuStreamGetFlags(s, &flags)) || (err = cuStreamGetPriority(s, &prio)) ||
		    (err = cuCtxPushCurrent(now)))
			break;
		err = cuStreamCreateWithPriority(&fresh[k], flags, prio);
		cuCtxPopCurrent(NULL);
		k += !err;
	}
	for (unsigned i = 0, m = 0; i < w->nhandles && m < k; i++) {
		CUstream s = w->handles[i].real;

		if (w->handles[i].kind != H_STREAM || !stream_in(s, green, primary))
			continue;
		if (err) {
			cuStreamDestroy(fresh[m++]);      /* (undone: each stays where it was) */
			continue;
		}
		w->handles[i].real = fresh[m++];
		cuStreamDestroy(s);
	}
	free(fresh);
	return err;
}

/* Every handle of context old names now; the current context follows. */
static void rename_ctx(struct worker *w, CUcontext old, CUcontext now)
{
	CUcontext cur = NULL;

	for (unsigned i = 0; i < w->nhandles; i++)
		if (w->handles[i].kind == H_CTX && w->handles[i].real == old)
			w->handles[i].real = now;
	if (!cuCtxGetCurrent(&cur) && cur == old)
		cuCtxSetCurrent(now);
}

/* The session on dev moves to the groups of mask (0: the whole GPU). */
static CUresult resize(struct worker *w, CUdevice dev, uint64_t mask)
{
	CUcontext primary = primary_held(dev) ? primary_ctx(w, dev) : NULL;
	CUcontext old = w->green_view[dev] ? w->green_view[dev] : primary, now = primary;
	CUgreenCtx green = NULL;
	CUresult err;

	if (!primary || !handle_find(w, H_CTX, old)) {
		w->sm_mask[dev] = mask;              /* no context yet: made when asked for */
		w->green[dev] = NULL;
		w->green_view[dev] = NULL;
		return CUDA_SUCCESS;
	}
	if (capturing(w, w->green[dev], primary))
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	if ((err = cuCtxPushCurrent(old)))
		return err;
	err = cuCtxSynchronize();            /* what runs now finishes where it is */
	cuCtxPopCurrent(NULL);
	if (err || (mask && (err = make(dev, mask, &green, &now))))
		return err;
	if ((err = move_streams(w, w->green[dev], primary, now))) {
		if (green)
			cuGreenCtxDestroy(green);    /* (nothing of the session is in it) */
		return err;
	}
	rename_ctx(w, old, now);
	w->sm_mask[dev] = mask;
	w->green[dev] = green;               /* (the old one stays: see above) */
	w->green_view[dev] = mask ? now : NULL;
	return CUDA_SUCCESS;
}

/* Between two calls: a new share the operator gave (cicadactl resize),
 * taken once: the worker answers the request's number with the groups it
 * then has (the server holds old and new until then). */
void green_take_asked(struct worker *w)
{
	struct session_stat *st = w->stat;
	uint32_t seq;

	if (!st || (seq = __atomic_load_n(&st->sm_ask_seq, __ATOMIC_ACQUIRE)) == st->sm_ack)
		return;
	for (int d = 0; d < w->nreal && d < CICADA_MAX_GPUS; d++) {
		uint64_t mask = __atomic_load_n(&st->sm_asked[d], __ATOMIC_ACQUIRE);
		CUresult err;

		if (mask == w->sm_mask[d])
			continue;
		if ((err = resize(w, d, mask)) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
			return;                  /* after the capture */
		if (err) {
			const char *name = "?";
			cuGetErrorName(err, &name);
			log_error("client %s: its SMs on GPU %d stay as they were: %s", w->peer, d, name);
		} else {
			log_info("client %s: now on %d SMs of GPU %d", w->peer, green_sms(w, d), d);
		}
	}
	memcpy(st->sm_mask, w->sm_mask, sizeof(st->sm_mask));
	__atomic_store_n(&st->sm_ack, seq, __ATOMIC_RELEASE);
}

/* What the client is told a context is: a GPU's primary context is the
 * session's green context there, if it has one. */
CUcontext green_view_of(struct worker *w, CUcontext ctx)
{
	for (int d = 0; d < w->nreal && d < CICADA_MAX_GPUS; d++)
		if (w->green_view[d] && primary_held(d) && ctx == primary_ctx(w, d))
			return w->green_view[d];
	return ctx;
}

/* The first k groups of mask, or of a whole GPU of n groups (mask 0). */
static uint64_t first_groups(uint64_t mask, unsigned k, unsigned n)
{
	uint64_t out = 0;

	if (!mask)
		mask = n >= 64 ? ~0ull : (1ull << n) - 1;
	for (unsigned g = 0; g < 64 && k; g++)
		if (mask >> g & 1) {
			out |= 1ull << g;
			k--;
		}
	return out;
}

/* A program's own cap of sms SMs on each of its GPUs, never more than
 * its share (CICADA_SM_LIMIT). Answers the SMs it has on its first
 * GPU (0: the whole GPU). */
int green_lower(struct worker *w, unsigned sms)
{
	for (int d = 0; d < w->nreal && d < CICADA_MAX_GPUS; d++) {
		unsigned total, unit, k, have;
		uint64_t mask;

		sm_layout(d, &total, &unit);
		if (!unit || !sms)
			continue;
		k = (sms + unit - 1) / unit;
		have = w->sm_mask[d] ? (unsigned)__builtin_popcountll(w->sm_mask[d]) : total / unit;
		if (k >= have)
			continue;
		mask = first_groups(w->sm_mask[d], k, total / unit);
		if (resize(w, d, mask))
			continue;
		if (w->stat)                 /* (the server lets the others go: sm_share.c) */
			w->stat->sm_mask[d] = mask;
	}
	return w->ngpus ? green_sms(w, w->gpu[0]) : green_sms(w, 0);
}

/*
 * Streams and events.  Every operation of the stand-in finishes before the
 * call that issued it returns, so a stream is only a remembered handle
 * (flags, priority) and synchronising is a handle check.  An event keeps
 * its flags and the CLOCK_MONOTONIC time of its last record, which is all
 * cuEventElapsedTime needs. As the driver's, a context's streams take
 * room in blocks: when the most streams ever alive at once in it passes a
 * multiple of STREAMS_BLOCK, a block takes 2 MiB of the process's default
 * mapping area (top down), never given back, so what is placed after it
 * (module variables, contexts) lands lower; streams made and destroyed
 * one after another take no more room than one.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include "fakecuda.h"

struct stream {
	struct fc_ctx *ctx;
	struct fc_ctx *view;		/* the green context current when made (green.c) */
	unsigned flags;
	int priority;
	struct fc_graph *capture;	/* the graph a capture is recording */
};

struct event {
	unsigned flags;
	int recorded;
	struct timespec at;
};

CUresult fc_check_stream(CUstream s)
{
	if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
		return fc_current(NULL);
	TRY(fc_need_init());
	CHECK(fc_obj_has(s, FC_STREAM), CUDA_ERROR_INVALID_HANDLE);
	CHECK(!((struct stream *)s)->view || ((struct stream *)s)->view->live, CUDA_ERROR_CONTEXT_IS_DESTROYED);
	return ((struct stream *)s)->capture ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

/* The green context s runs in (the current one for the special streams),
 * or NULL. */
static struct fc_ctx *stream_view(CUstream s)
{
	struct fc_ctx *v = NULL;

	if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
		return fc_current_view(&v) || !v->base ? NULL : v;
	return fc_obj_has(s, FC_STREAM) ? ((struct stream *)s)->view : NULL;
}

/* The SMs work on s runs on (NULL: all). */
const uint64_t *fc_stream_sms(CUstream s)
{
	struct fc_ctx *v = stream_view(s);

	return v ? v->sms : NULL;
}

/* A created stream's capture slot (NULL for the special streams). */
struct fc_graph **fc_stream_capture(CUstream s)
{
	return fc_obj_has(s, FC_STREAM) ? &((struct stream *)s)->capture : NULL;
}

static CUresult check_event(CUevent e)
{
	TRY(fc_need_init());
	return fc_obj_has(e, FC_EVENT) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Handles are only remembered for what the getters return. */
static void *remember(size_t size, int kind, struct fc_ctx *ctx)
{
	void *p = calloc(1, size);

	if (p && fc_obj_add(p, kind, ctx, free)) {
		free(p);
		return NULL;
	}
	return p;
}

#define STREAMS_BLOCK 4

static void stream_made(struct fc_ctx *c)
{
	if (++c->streams <= c->streams_most)
		return;
	c->streams_most = c->streams;
	if (c->streams_most > 1 && (c->streams_most - 1) % STREAMS_BLOCK == 0)
		mmap(NULL, 2u << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

CUresult cuStreamCreateWithPriority(CUstream *ps, unsigned int flags, int priority)
{
	struct fc_ctx *ctx;
	struct stream *s;

	TRY(fc_current(&ctx));
	CHECK_ARG(ps && !(flags & ~CU_STREAM_NON_BLOCKING));
	s = remember(sizeof(*s), FC_STREAM, ctx);
	CHECK(s, CUDA_ERROR_OUT_OF_MEMORY);
	s->ctx = ctx;
	s->view = stream_view(NULL);
	s->flags = flags;
	s->priority = priority > 0 ? 0 : priority < -5 ? -5 : priority;
	stream_made(ctx);
	*ps = (CUstream)s;
	return CUDA_SUCCESS;
}

CUresult cuStreamGetCtx(CUstream s, CUcontext *pctx)
{
	struct fc_ctx *c;

	CHECK_ARG(pctx);
	if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
		TRY(fc_current(&c));
	} else {
		TRY(fc_need_init());
		CHECK(fc_obj_has(s, FC_STREAM), CUDA_ERROR_INVALID_HANDLE);
		c = ((struct stream *)s)->ctx;
	}
	*pctx = (CUcontext)c;
	return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *ps, unsigned int flags)
{
	return cuStreamCreateWithPriority(ps, flags, 0);
}

CUresult cuStreamDestroy(CUstream s)
{
	TRY(fc_need_init());
	CHECK(fc_obj_has(s, FC_STREAM), CUDA_ERROR_INVALID_HANDLE);
	((struct stream *)s)->ctx->streams--;
	fc_obj_del(s, FC_STREAM);
	free(s);
	return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream s)
{
	return fc_check_stream(s);
}

CUresult cuStreamQuery(CUstream s)
{
	return fc_check_stream(s);
}

CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
	TRY(fc_check_stream(s));
	return check_event(e);
}

CUresult cuStreamGetPriority(CUstream s, int *priority)
{
	TRY(fc_check_stream(s));
	CHECK_ARG(priority);
	*priority = fc_obj_has(s, FC_STREAM) ? ((struct stream *)s)->priority : 0;
	return CUDA_SUCCESS;
}

CUresult cuStreamGetFlags(CUstream s, unsigned int *flags)
{
	TRY(fc_check_stream(s));
	CHECK_ARG(flags);
	*flags = fc_obj_has(s, FC_STREAM) ? ((struct stream *)s)->flags : 0;
	return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent *pe, unsigned int flags)
{
	struct fc_ctx *ctx;
	struct event *e;

	TRY(fc_current(&ctx));
	CHECK_ARG(pe && !(flags & ~(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
				      CU_EVENT_INTERPROCESS)));
	e = remember(sizeof(*e), FC_EVENT, ctx);
	CHECK(e, CUDA_ERROR_OUT_OF_MEMORY);
	e->flags = flags;
	*pe = (CUevent)e;
	return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent e)
{
	TRY(fc_need_init());
	CHECK(fc_obj_del(e, FC_EVENT), CUDA_ERROR_INVALID_HANDLE);
	free(e);
	return CUDA_SUCCESS;
}

CUresult cuEventRecordWithFlags(CUevent ev, CUstream s, unsigned int flags)
{
	struct event *e = (struct event *)ev;

	TRY(check_event(ev));
	TRY(fc_check_stream(s));
	clock_gettime(CLOCK_MONOTONIC, &e->at);
	e->recorded = 1;
	return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent e, CUstream s)
{
	return cuEventRecordWithFlags(e, s, 0);
}

CUresult cuEventSynchronize(CUevent e)
{
	return check_event(e);
}

CUresult cuEventQuery(CUevent e)
{
	return check_event(e);
}

/* Interprocess events. The stand-in runs work as it is issued, so an event
 * is complete once recorded: the process that opens a handle gets an
 * interprocess event of its own. The handle names the exporter's pid and
 * event, as the driver's does. */
struct ipc_event {
	char magic[8];
	uint64_t pid;
	uint64_t event;
	char pad[40];
};
_Static_assert(sizeof(struct ipc_event) == sizeof(CUipcEventHandle), "an event handle is 64 bytes");

CUresult cuIpcGetEventHandle(CUipcEventHandle *handle, CUevent ev)
{
	struct ipc_event h = { .magic = "FCIPCEV", .pid = (uint64_t)getpid(), .event = (uint64_t)(uintptr_t)ev };
	unsigned need = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;

	TRY(check_event(ev));
	CHECK_ARG(handle && (((struct event *)ev)->flags & need) == need);
	memcpy(handle, &h, sizeof(h));
	return CUDA_SUCCESS;
}

CUresult cuIpcOpenEventHandle(CUevent *pe, CUipcEventHandle handle)
{
	struct ipc_event h;

	memcpy(&h, &handle, sizeof(h));
	CHECK_ARG(pe && !memcmp(h.magic, "FCIPCEV", 8) && h.event);
	return cuEventCreate(pe, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING);
}

CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end)
{
	struct event *a = (struct event *)start, *b = (struct event *)end;

	TRY(check_event(start));
	TRY(check_event(end));
	CHECK_ARG(ms);
	CHECK(!((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING), CUDA_ERROR_INVALID_HANDLE);
	/* as the driver's: an event never recorded has no time to give */
	CHECK(a->recorded && b->recorded, CUDA_ERROR_INVALID_HANDLE);
	*ms = (b->at.tv_sec - a->at.tv_sec) * 1e3f + (b->at.tv_nsec - a->at.tv_nsec) / 1e6f;
	return CUDA_SUCCESS;
}

/* Stream memory operations on device memory. Work runs as it is issued
 * here, so a wait must hold when it is issued: one that does not is
 * CUDA_ERROR_NOT_READY (on a GPU the stream would wait). */
static CUresult memop_ok(CUstream s, CUdeviceptr addr, size_t size)
{
	TRY(fc_check_stream(s));
	CHECK_ARG(addr && addr % size == 0);
	return fc_range_check((uintptr_t)addr, size);
}

static int wait_holds(uint64_t have, uint64_t want, unsigned flags, int wide)
{
	uint64_t mask = wide ? ~0ull : 0xffffffffull;

	have &= mask, want &= mask;
	switch (flags & 0xf) {
	case CU_STREAM_WAIT_VALUE_GEQ: return wide ? (int64_t)(have - want) >= 0 : (int32_t)(uint32_t)(have - want) >= 0;
	case CU_STREAM_WAIT_VALUE_EQ: return have == want;
	case CU_STREAM_WAIT_VALUE_AND: return (have & want) != 0;
	case CU_STREAM_WAIT_VALUE_NOR: return (~(have | want) & mask) != 0;
	default: return -1;
	}
}

static CUresult wait_value(CUstream s, CUdeviceptr addr, uint64_t value, unsigned flags, int wide)
{
	uint64_t have;
	int holds;

	TRY(memop_ok(s, addr, wide ? 8 : 4));
	have = wide ? *(volatile uint64_t *)(uintptr_t)addr : *(volatile uint32_t *)(uintptr_t)addr;
	holds = wait_holds(have, value, flags, wide);
	CHECK_ARG(holds >= 0);
	return holds ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuStreamWaitValue32_v2(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
	return wait_value(s, addr, value, flags, 0);
}

CUresult cuStreamWaitValue64_v2(CUstream s, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
	return wait_value(s, addr, value, flags, 1);
}

CUresult cuStreamWriteValue32_v2(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
	TRY(memop_ok(s, addr, 4));
	*(volatile uint32_t *)(uintptr_t)addr = value;
	return CUDA_SUCCESS;
}

CUresult cuStreamWriteValue64_v2(CUstream s, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
	TRY(memop_ok(s, addr, 8));
	*(volatile uint64_t *)(uintptr_t)addr = value;
	return CUDA_SUCCESS;
}

/* A batch: each operation in turn (a barrier or a flush is nothing here). */
CUresult cuStreamBatchMemOp_v2(CUstream s, unsigned int count, CUstreamBatchMemOpParams *ops, unsigned int flags)
{
	CHECK_ARG(count && count < 256 && ops && !flags);
	for (unsigned i = 0; i < count; i++) {
		const CUstreamBatchMemOpParams *op = &ops[i];
		switch (op->operation) {
		case CU_STREAM_MEM_OP_WAIT_VALUE_32:
			TRY(cuStreamWaitValue32_v2(s, op->waitValue.address, op->waitValue.value, op->waitValue.flags));
			break;
		case CU_STREAM_MEM_OP_WAIT_VALUE_64:
			TRY(cuStreamWaitValue64_v2(s, op->waitValue.address, op->waitValue.value64, op->waitValue.flags));
			break;
		case CU_STREAM_MEM_OP_WRITE_VALUE_32:
			TRY(cuStreamWriteValue32_v2(s, op->writeValue.address, op->writeValue.value, op->writeValue.flags));
			break;
		case CU_STREAM_MEM_OP_WRITE_VALUE_64:
			TRY(cuStreamWriteValue64_v2(s, op->writeValue.address, op->writeValue.value64,
						    op->writeValue.flags));
			break;
		case CU_STREAM_MEM_OP_BARRIER:
		case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
			TRY(fc_check_stream(s));
			break;
		default:
			return CUDA_ERROR_INVALID_VALUE;
		}
	}
	return CUDA_SUCCESS;
}

CUresult cuStreamGetCtx_v2(CUstream s, CUcontext *pctx, CUgreenCtx *green)
{
	CHECK_ARG(pctx && green);
	TRY(cuStreamGetCtx(s, pctx));
	*green = (CUgreenCtx)stream_view(s);    /* a view is its green context's first field */
	return CUDA_SUCCESS;
}

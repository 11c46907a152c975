/*
 * hostfn.c: host functions on streams (cuLaunchHostFunc,
 * cuStreamAddCallback) run in the application, called from the server.
 * The client registers the function under an id and sends the id; the
 * worker enqueues its own host function on the stream, which, when the
 * stream reaches it, writes the id on the session's callback channel and
 * waits until the client writes it back (the function has returned). The
 * stream waits meanwhile, as CUDA defines. The channel is a second
 * connection that the client opens on first use (host_func_channel); it
 * carries an id and a status out, the id back. If the client is gone the
 * stream goes on. A stream callback (cuStreamAddCallback) gets the
 * stream's status, as natively.
 * A host function captured into a graph, or a graph's host node, runs at
 * every launch of the graph: its id is persistent (the client keeps the
 * function), and so is the worker's record of it.
 * A copy of the program's pageable memory captured by a remote client
 * (no shared memory) is staged here: a pinned buffer of the worker's, a
 * copy node between it and the device, and a host node whose call
 * carries the bytes, to the client after a copy from the device, from it
 * before a copy to the device; so they move at every launch, from or to
 * the program's memory as it is then. A graph's copy node of pageable
 * memory (graph_stage.c) is staged the same way, or, for a local client,
 * in the client's shared stage, which the client's own function fills or
 * empties when its host node calls it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "calls.h"

#define STAGE_MAX (1ull << 32)               /* one staged copy's bytes */

struct host_call {
	struct worker *w;
	uint64_t id;
	uint64_t status;                     /* the stream's, for a stream callback */
	int persistent;                      /* a graph's: runs at every launch */
	uint64_t flags;                      /* a staged copy: HOSTFN_DATA or HOSTFN_WANT */
	void *stage;                         /* its pinned buffer */
	uint64_t size;
	uint64_t *params;                    /* a copy node's, as the client set them */
	unsigned nparams;
};

static pthread_mutex_t channel_lock = PTHREAD_MUTEX_INITIALIZER;

/* One exchange on the channel: the call out (with a staged copy's bytes,
 * or asking for them), the id back (then the bytes asked for). */
static int exchange(struct wire_stream *st, struct host_call *c)
{
	uint64_t msg[3] = { c->id, c->status | c->flags | (c->persistent ? 0 : HOSTFN_ONCE), c->size }, back = 0;

	if (wire_write(st, msg, c->flags ? sizeof(msg) : 2 * sizeof(msg[0])) ||
	    ((c->flags & HOSTFN_DATA) && wire_write(st, c->stage, c->size)) || wire_read(st, &back, 8) ||
	    back != c->id)
		return -1;
	return (c->flags & HOSTFN_WANT) ? wire_read(st, c->stage, c->size) : 0;
}

/* Runs on the driver's callback thread: the id and status go to the
 * client, which writes the id back once the function has returned. */
static void call_client(struct host_call *c)
{
	struct wire_stream st;

	pthread_mutex_lock(&channel_lock);
	wire_stream_init(&st, c->w->calls->callback_fd);
	if (c->w->calls->callback_fd >= 0 && exchange(&st, c)) {
		log_warn("client %s: host function channel lost", c->w->peer);
		close(c->w->calls->callback_fd);
		c->w->calls->callback_fd = -1;
	}
	pthread_mutex_unlock(&channel_lock);
	if (!c->persistent)
		free(c);
}

static void CUDA_CB run_host_func(void *arg)
{
	call_client(arg);
}

static void CUDA_CB run_callback(CUstream stream, CUresult status, void *arg)
{
	((struct host_call *)arg)->status = (uint64_t)status;
	call_client(arg);
}

/* callback: bit 0, a stream callback; bit 1, the client's id is
 * persistent (it was launched while a capture was under way). A one-shot
 * id cannot be captured: the graph would run it again. */
CUresult wrap_host_func_launch(struct worker *w, CUstream stream, unsigned long long id, unsigned int callback)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	struct host_call *c;
	CUresult err;

	if (w->calls->callback_fd < 0)
		return CUDA_ERROR_NOT_INITIALIZED;
	if ((err = cuStreamIsCapturing(stream, &st)))
		return err;
	if (st != CU_STREAM_CAPTURE_STATUS_NONE && !(callback & 2))
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	if (!(c = malloc(sizeof(*c))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	*c = (struct host_call){ .w = w, .id = id, .persistent = st != CU_STREAM_CAPTURE_STATUS_NONE };
	err = (callback & 1) ? cuStreamAddCallback(stream, run_callback, c, 0) : cuLaunchHostFunc(stream, run_host_func, c);
	if (err)
		free(c);
	return err;
}

/* Pinning is no stream operation, but a global-mode capture on this
 * thread forbids it: relaxed for the while (and the context kept). */
static void *stage_buffer(struct worker *w, size_t size)
{
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	CUcontext cur = NULL;
	void *p;

	if (client_pinned_take(w, size, "staged pageable copies"))
		return NULL;
	cuCtxGetCurrent(&cur);
	cuThreadExchangeStreamCaptureMode(&mode);
	p = worker_pinned(w, size);
	cuThreadExchangeStreamCaptureMode(&mode);
	cuCtxSetCurrent(cur);
	if (!p)
		client_pinned_give(size);
	return p;
}

/* A copy of the remote program's pageable memory on a capturing stream
 * (the client's id names its side of it): staged through a pinned buffer
 * that lives as long as the worker (a graph may be launched at any time). */
CUresult wrap_capture_host_copy(struct worker *w, CUstream stream, CUdeviceptr dptr, size_t size,
				unsigned int to_device, unsigned long long id)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	struct host_call *c;
	CUresult err;

	if (w->calls->callback_fd < 0)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!id || !size || size > STAGE_MAX || to_device > 1)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = cuStreamIsCapturing(stream, &st)))
		return err;
	if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	if (!(c = calloc(1, sizeof(*c))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	*c = (struct host_call){ .w = w, .id = id, .persistent = 1, .flags = to_device ? HOSTFN_WANT : HOSTFN_DATA,
				 .size = size };
	if (!(c->stage = stage_buffer(w, size))) {
		free(c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (to_device)
		err = cuLaunchHostFunc(stream, run_host_func, c) ?: cuMemcpyHtoDAsync(dptr, c->stage, size, stream);
	else
		err = cuMemcpyDtoHAsync(c->stage, dptr, size, stream) ?: cuLaunchHostFunc(stream, run_host_func, c);
	/* on failure the capture is broken, but a node may hold c: it stays */
	return err;
}

/* A graph's host node: the function and data the driver calls. */
CUresult hostfn_node(struct worker *w, uint64_t id, CUhostFn *fn, void **data)
{
	struct host_call *c;

	if (w->calls->callback_fd < 0)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!id || !(c = malloc(sizeof(*c))))
		return id ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
	*c = (struct host_call){ .w = w, .id = id, .persistent = 1 };
	*fn = run_host_func;
	*data = c;
	return CUDA_SUCCESS;
}

/* A graph copy node of the client's pageable memory: the host node that
 * moves its bytes (id: the client's side of it). shared: a local client's
 * stage; else the worker pins one and the bytes cross the channel. *stage
 * is where the copy node finds them. */
CUresult hostfn_copy_node(struct worker *w, const uint64_t *params, unsigned n, void *shared, uint64_t size,
			  int to_device, CUhostFn *fn, void **data, void **stage)
{
	struct host_call *c;

	if (w->calls->callback_fd < 0)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!params[GM_STAGE_ID] || !size || size > STAGE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(c = calloc(1, sizeof(*c))) || !(c->params = malloc(n * sizeof(*params)))) {
		free(c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	memcpy(c->params, params, n * sizeof(*params));
	c->nparams = n, c->w = w, c->id = params[GM_STAGE_ID], c->persistent = 1;
	if (!shared) {
		c->flags = to_device ? HOSTFN_WANT : HOSTFN_DATA;
		c->size = size;
		if (!(shared = c->stage = stage_buffer(w, size))) {
			free(c->params);
			free(c);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	/* (c lives as long as the worker: executables may share it) */
	*stage = shared;
	*fn = run_host_func;
	*data = c;
	return CUDA_SUCCESS;
}

/* A copy node's parameters as the client set them, if this host node
 * moves a copy's bytes (NULL: it does not). */
const uint64_t *hostfn_copy_params(CUhostFn fn, void *data, unsigned *n)
{
	struct host_call *c = data;

	if (fn != run_host_func || !c || !c->params)
		return NULL;
	*n = c->nparams;
	return c->params;
}

/* The client's id behind a host node's function, or 0. */
uint64_t hostfn_node_id(CUhostFn fn, void *data)
{
	return fn == run_host_func && data ? ((struct host_call *)data)->id : 0;
}

/* The host-function channel: the worker's channel hook (session.c) says how it opens. */
CUresult hand_host_func_channel(struct worker *w, void *args, void *res)
{
	CUresult err;
	int fd;

	if (!w->calls->channel_call)
		return CUDA_ERROR_NOT_SUPPORTED;       /* no session (cannot happen) */
	if ((err = w->calls->channel_call(w, args, res, &fd)) || fd < 0)
		return err;
	pthread_mutex_lock(&channel_lock);
	if (w->calls->callback_fd >= 0)
		close(w->calls->callback_fd);
	w->calls->callback_fd = fd;
	pthread_mutex_unlock(&channel_lock);
	log_info("client %s: host function channel open", w->peer);
	return CUDA_SUCCESS;
}

/* A pause ends the channel (the device is idle, so no call is waiting). */
void hostfn_close(struct worker *w)
{
	pthread_mutex_lock(&channel_lock);
	if (w->calls->callback_fd >= 0)
		close(w->calls->callback_fd);
	w->calls->callback_fd = -1;
	pthread_mutex_unlock(&channel_lock);
}

/*
 * hostfn.c: host functions on streams (cuLaunchHostFunc,
 * cuStreamAddCallback) run here, in the application, when the worker's
 * stream reaches them (gpu-server/calls/hostfn.c). Each launch registers the
 * function under a new id and sends only the id, pipelined. The worker
 * calls back on a channel of its own, a second connection opened on first
 * use; a thread here reads an id, runs the function and writes the id
 * back, and the stream goes on. A pause closes the channel; the resumed
 * session opens one at once if it had one (to whichever worker holds it
 * then), else the next launch does. A host
 * function launched while a capture is under way, or a graph's host node,
 * may run many times: its id is persistent. A staged copy's bytes (a
 * captured copy, a graph's copy node of pageable memory, graph_stage.c)
 * cross the channel within the call, straight from or into the program's
 * memory, row by row or through a bounded buffer; the rows of such a
 * shape (struct stage_shape) are reckoned here, for graph_stage.c too.
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include "interposer.h"

struct host_call {
	uint64_t id;
	CUhostFn fn;                         /* cuLaunchHostFunc, or */
	CUstreamCallback callback;           /* cuStreamAddCallback, or */
	struct stage_shape stage;            /* a staged copy's memory (remote) */
	int staged;
	size_t stage_size;
	int stage_in;                        /* its bytes go to the device */
	CUstream stream;
	void *data;
	int persistent;                      /* a graph's: kept after it runs */
};

static pthread_mutex_t calls_lock = PTHREAD_MUTEX_INITIALIZER;
static struct host_call *calls;
static unsigned ncalls, cap_calls;
static uint64_t next_id = 1;
static int channel = -1;                 /* guarded by the client lock */
static pthread_t channel_thread;
static int channel_ended;                /* the thread saw the channel end */

/* --- the rows of a staged copy's memory (struct stage_shape) --- */
size_t stage_shape_rows(const struct stage_shape *s)
{
	return (s->rows ? s->rows : 1) * (s->depth ? s->depth : 1);
}

/* Row i (of every slice's rows, in order) in the program's memory. */
char *stage_shape_row(const struct stage_shape *s, size_t i)
{
	size_t rows = s->rows ? s->rows : 1, pitch = s->pitch ? s->pitch : s->width;
	size_t height = s->height ? s->height : rows, d = i / rows, r = i % rows;

	return s->base + s->x + ((s->z + d) * height + s->y + r) * pitch;
}

/* Whether the rows lie back to back (one span of width * rows). */
int stage_shape_flat(const struct stage_shape *s)
{
	size_t rows = s->rows ? s->rows : 1;

	return stage_shape_rows(s) == 1 || ((!s->pitch || s->pitch == s->width) &&
					    ((s->depth ? s->depth : 1) == 1 || !s->height || s->height == rows));
}

static uint64_t calls_add(struct host_call c)
{
	uint64_t id = 0;

	pthread_mutex_lock(&calls_lock);
	if (ncalls == cap_calls) {
		unsigned cap = cap_calls ? 2 * cap_calls : 64;
		struct host_call *n = realloc(calls, cap * sizeof(*n));
		if (!n)
			goto out;
		calls = n;
		cap_calls = cap;
	}
	c.id = id = next_id++;
	calls[ncalls++] = c;
out:
	pthread_mutex_unlock(&calls_lock);
	return id;
}

/* Finds id's call; removes it unless it is persistent and not the last. */
static int calls_take(uint64_t id, struct host_call *out, int last)
{
	int found = 0;

	pthread_mutex_lock(&calls_lock);
	for (unsigned i = 0; i < ncalls && !found; i++)
		if (calls[i].id == id) {
			*out = calls[i];
			if (last || !calls[i].persistent)
				calls[i] = calls[--ncalls];
			found = 1;
		}
	pthread_mutex_unlock(&calls_lock);
	return found;
}

#define BOUNCE_MAX (1u << 20)

/* A staged copy's rows, out (send) or in, packed on the wire: one span if
 * they lie back to back, else each wide row by itself and narrow ones
 * through a buffer of at most BOUNCE_MAX. */
static int rows_move(struct wire_stream *st, const struct stage_shape *s, int send)
{
	size_t n = stage_shape_rows(s), w = s->width, per = BOUNCE_MAX / w, k;
	char *buf;
	int bad = 0;

	if (stage_shape_flat(s))
		return send ? wire_write(st, stage_shape_row(s, 0), w * n) : wire_read(st, stage_shape_row(s, 0), w * n);
	if (per < 4) {
		for (size_t i = 0; i < n && !bad; i++)
			bad = send ? wire_write(st, stage_shape_row(s, i), w) : wire_read(st, stage_shape_row(s, i), w);
		return bad;
	}
	if (!(buf = malloc(per * w)))
		return -1;
	for (size_t i = 0; i < n && !bad; i += k) {
		k = n - i < per ? n - i : per;
		for (size_t j = 0; send && j < k; j++)
			memcpy(buf + j * w, stage_shape_row(s, i + j), w);
		bad = send ? wire_write(st, buf, k * w) : wire_read(st, buf, k * w);
		for (size_t j = 0; !send && !bad && j < k; j++)
			memcpy(stage_shape_row(s, i + j), buf + j * w, w);
	}
	free(buf);
	return bad;
}

/* A staged copy's part of one call: its bytes arrive into the program's
 * memory (HOSTFN_DATA), or go from it after the id (HOSTFN_WANT); only
 * for a staged copy of this size (the server names no other memory). */
static int stage_move(struct wire_stream *st, const struct host_call *c, const uint64_t *msg)
{
	uint64_t len;
	int in = (msg[1] & HOSTFN_WANT) != 0;

	if (!(msg[1] & (HOSTFN_DATA | HOSTFN_WANT)))
		return c->staged ? -1 : 0;
	if (wire_read(st, &len, 8) || !c->staged || len != c->stage_size || in != c->stage_in)
		return -1;
	if (!in && rows_move(st, &c->stage, 0))
		return -1;
	return wire_write(st, &msg[0], 8) || (in && rows_move(st, &c->stage, 1)) ? -1 : 1;
}

/* The channel's thread: one id in, the function runs, the id goes back.
 * It ends when the channel does; channel_close joins it. */
static void *serve_channel(void *arg)
{
	struct wire_stream st;
	struct host_call c;
	uint64_t msg[2];                     /* id, the stream's status | HOSTFN_* */
	int moved;

	wire_stream_init(&st, (int)(intptr_t)arg);
	while (!wire_read(&st, msg, sizeof(msg))) {
		if (!calls_take(msg[0], &c, (msg[1] & HOSTFN_ONCE) != 0)) {
			log_warn("the gpu-server called unknown host function %llu", (unsigned long long)msg[0]);
			break;
		}
		if ((moved = stage_move(&st, &c, msg)) < 0) {
			log_warn("the gpu-server's call of host function %llu does not fit it",
				 (unsigned long long)msg[0]);
			break;
		}
		if (moved)
			continue;
		if (c.fn)
			c.fn(c.data);
		else
			c.callback(c.stream, (CUresult)(msg[1] & ~HOSTFN_FLAGS), c.data);
		if (wire_write(&st, &msg[0], 8))
			break;
	}
	__atomic_store_n(&channel_ended, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Opens the channel (the caller holds the client lock). */
static CUresult channel_open(void)
{
	char err[WIRE_ERRLEN] = "";
	int fd = client_open_channel(P_host_func_channel, err);

	if (fd < 0) {
		if (!client_connected())
			return client_lost(err);
		log_error("cannot open the host function channel: %s", err);
		return CUDA_ERROR_OPERATING_SYSTEM;
	}
	channel_ended = 0;
	if (pthread_create(&channel_thread, NULL, serve_channel, (void *)(intptr_t)fd)) {
		close(fd);
		return CUDA_ERROR_OPERATING_SYSTEM;
	}
	channel = fd;
	return CUDA_SUCCESS;
}

/* Ends the channel (a pause, or the worker dropped it): its thread stops
 * and is joined, then the fd closes (never before: the number could go to
 * another file meanwhile). The caller holds the client lock. */
static void hostfn_forget_channel(void)
{
	if (channel < 0)
		return;
	shutdown(channel, SHUT_RDWR);
	pthread_join(channel_thread, NULL);
	close(channel);
	channel = -1;
}

/* A pause ends the channel; the resumed session gets a new one at once
 * if it had one, since graphs may hold host nodes that call back without
 * the application making any call that would open it. */
static int had_channel;

static void channel_pause(void)
{
	if (channel < 0)
		return;                      /* (a failed reattach closes the link too) */
	had_channel = 1;
	hostfn_forget_channel();
}

static int channel_resume(int regions_lost)
{
	if (had_channel && channel_open())
		log_error("the host function channel did not open again after the pause");
	had_channel = 0;
	return 0;
}

static const struct client_hooks hostfn_hooks = { .pause = channel_pause, .resume = channel_resume };

__attribute__((constructor)) static void hostfn_hook(void)
{
	client_add_hooks(&hostfn_hooks);
}

/* The channel, open (the caller holds the client lock). */
static CUresult channel_ready(void)
{
	if (channel >= 0 && __atomic_load_n(&channel_ended, __ATOMIC_ACQUIRE))
		hostfn_forget_channel();     /* the worker dropped it: a new one */
	return channel < 0 ? channel_open() : CUDA_SUCCESS;
}

/* What makes the worker call id: the launch of a host function, or a
 * staged copy. */
struct send {
	CUstream stream;
	CUdeviceptr dev;                     /* a staged copy's device side */
};

static CUresult send_call(const struct host_call *c, uint64_t id, const struct send *s)
{
	if (c->staged)
		return rpc_capture_host_copy(s->stream, s->dev, c->stage_size, (unsigned)c->stage_in, id);
	return rpc_host_func_launch(s->stream, id, (c->callback != NULL) | (c->persistent ? 2 : 0));
}

/* Registers c under a new id and sends it (the channel opened first);
 * the id goes again if the worker refuses it. */
static CUresult register_and_send(struct host_call c, const struct send *s)
{
	CUresult err = client_connect();
	uint64_t id;

	if (err)
		return err;
	client_lock();
	if ((err = channel_ready()))
		goto out;
	if (!(id = calls_add(c))) {
		err = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	if ((err = send_call(&c, id, s)))
		calls_take(id, &c, 1);
out:
	client_unlock();
	return err;
}

static CUresult launch(CUstream stream, struct host_call c)
{
	struct send s = { .stream = stream };

	c.persistent = capture_running();
	return register_and_send(c, &s);
}

/* A graph host node's function: a persistent id (0: failed, in *err). */
uint64_t hostfn_register(CUhostFn fn, void *data, CUresult *err)
{
	uint64_t id = 0;

	if ((*err = client_connect()))
		return 0;
	client_lock();
	if (!(*err = channel_ready()) && !(id = calls_add((struct host_call){ .fn = fn, .data = data, .persistent = 1 })))
		*err = CUDA_ERROR_OUT_OF_MEMORY;
	client_unlock();
	return id;
}

/* A copy of the program's pageable memory on a capturing stream of a
 * remote server: the worker stages it (gpu-server/calls/hostfn.c), and its bytes
 * cross this channel at every launch of the graph. */
CUresult hostfn_stage_copy(CUstream stream, CUdeviceptr dev, void *host, size_t n, int to_device)
{
	struct host_call c = { .stage = { .base = host, .width = n }, .staged = 1, .stage_size = n,
			       .stage_in = to_device, .persistent = 1 };
	struct send s = { .stream = stream, .dev = dev };

	return register_and_send(c, &s);
}

/* A graph copy node's side in pageable memory of a remote client: the
 * worker's host node for it calls this id with the bytes, or for them
 * (0: failed, in *err). */
uint64_t hostfn_stage_node(const struct stage_shape *s, int to_device, CUresult *err)
{
	struct host_call c = { .stage = *s, .staged = 1, .stage_size = s->width * stage_shape_rows(s),
			       .stage_in = to_device, .persistent = 1 };
	uint64_t id = 0;

	if ((*err = client_connect()))
		return 0;
	client_lock();
	if (!(*err = channel_ready()) && !(id = calls_add(c)))
		*err = CUDA_ERROR_OUT_OF_MEMORY;
	client_unlock();
	return id;
}

/* The function and data behind a persistent id. */
int hostfn_lookup(uint64_t id, CUhostFn *fn, void **data)
{
	int found = -1;

	pthread_mutex_lock(&calls_lock);
	for (unsigned i = 0; i < ncalls && found; i++)
		if (calls[i].id == id && calls[i].persistent) {
			*fn = calls[i].fn;
			*data = calls[i].data;
			found = 0;
		}
	pthread_mutex_unlock(&calls_lock);
	return found;
}

CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
	if (!fn)
		return CUDA_ERROR_INVALID_VALUE;
	return launch(hStream, (struct host_call){ .fn = fn, .data = userData });
}

CUresult CUDAAPI cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData,
				     unsigned int flags)
{
	if (!callback || flags)
		return CUDA_ERROR_INVALID_VALUE;
	return launch(hStream, (struct host_call){ .callback = callback, .stream = hStream, .data = userData });
}

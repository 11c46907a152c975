/*
 * client.c: the interposer's connection to its gpu-server. It connects on
 * first use (CICADA_SERVER, default unix:/run/cicada/gpu.sock), says hello
 * with the token (CICADA_TOKEN_FILE or CICADA_TOKEN) and, for a unix
 * socket, sets up the shared-memory data path (CICADA_SHM=0 turns it off).
 * Calls are serialised on the connection; pipelined ones return at once.
 * If the server cannot be reached or goes away, one line says so on
 * stderr and every call from then on fails quickly. The hello's answer
 * is awaited at most CICADA_CONNECT_TIMEOUT seconds (120): a busy server
 * may queue a new session for a while, or answer "server busy".
 *
 * For a checkpoint the session can be paused: the worker finishes the
 * device's work and keeps the state under a ticket, and the connection
 * closes (whatever it was, so CRIU has no socket to carry). Resuming dials
 * a server, possibly another, and reattaches to the ticket's worker.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include "interposer.h"

#define STAGING_SLOTS 8
#define STAGING_SLOT_SIZE (4u << 20)

enum { ST_NEW = 0, ST_CONNECTED = 1, ST_PAUSED = 2, ST_FAILED = -1 };

struct client {
	pthread_mutex_t lock;
	int state;
	CUresult fail_err;
	char addr_text[300];
	struct wire_stream stream;
	struct shm_segment shm;
	int use_shm;
	struct wire_buf out, in;
	uint32_t xid;
	int wait_blocking;              /* replies are awaited asleep, not polled */
	CUcontext server_ctx;
	int server_ctx_known;
	void *scratch;
};

static struct client cl = { .lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP, .shm = { .fd = -1 } };

#define MAX_HOOKS 8
static const struct client_hooks *hooks[MAX_HOOKS];   /* client_add_hooks */
static unsigned nhooks;
static CUcontext (*current_ctx)(void);

static CUresult fail(CUresult err, const char *fmt, const char *detail)
{
	fprintf(stderr, "cicada: ");
	fprintf(stderr, fmt, cl.addr_text, detail);
	fprintf(stderr, "\n");
	cl.state = -1;
	cl.fail_err = err;
	return err;
}

/* A token set by a migration (the new server's), in place of the
 * environment's. */
static struct {
	char token[CICADA_TOKEN_MAX];
	size_t len;
	int set;
} token_override;

static size_t read_token(char *buf, size_t len)
{
	const char *path = getenv("CICADA_TOKEN_FILE"), *env = getenv("CICADA_TOKEN");
	size_t n = 0;

	if (token_override.set) {
		n = token_override.len < len ? token_override.len : len;
		memcpy(buf, token_override.token, n);
		return n;
	}
	if (path) {
		/* read(), not stdio: no buffer of ours keeps a copy (and the
		 * caller wipes its own) */
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t got = fd >= 0 ? read(fd, buf, len) : -1;

		if (fd >= 0)
			close(fd);
		if (got < 0)
			log_warn("cannot read CICADA_TOKEN_FILE %s: %s", path, strerror(errno));
		n = got > 0 ? (size_t)got : 0;
	} else if (env) {
		n = strlen(env) < len ? strlen(env) : len;
		memcpy(buf, env, n);
	}
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		n--;
	return n;
}

struct hello_buf {
	char token[CICADA_TOKEN_MAX], host[64];
	char devices[CICADA_NAME_MAX];
};

/* The hello for op; its token field proves the token for the server's
 * challenge (wire/auth.c), and holds nothing without a token. */
static void hello_fill(hello_args *h, struct hello_buf *hb, hello_op op, const char *ticket,
		       const uint8_t nonce[WIRE_NONCE_LEN])
{
	char token[CICADA_TOKEN_MAX];
	size_t n = read_token(token, sizeof(token));

	memset(h, 0, sizeof(*h));
	memset(hb, 0, sizeof(*hb));
	gethostname(hb->host, sizeof(hb->host) - 1);
	h->proto_version = CICADA_PROTO_VERSION;
	h->pid = (uint64_t)getpid();
	h->op = op;
	h->ticket = (char *)ticket;
	h->snapshot = "";
	h->parent = "";
	h->host = hb->host;
	/* The driver reads CUDA_VISIBLE_DEVICES; here the worker does (gpu-server/state/gpus.c). */
	if (getenv("CUDA_VISIBLE_DEVICES"))
		snprintf(hb->devices, sizeof(hb->devices), "=%s", getenv("CUDA_VISIBLE_DEVICES"));
	h->devices = hb->devices;
	h->gpus = getenv("CICADA_GPUS") ? (unsigned)atoi(getenv("CICADA_GPUS")) : 0;
	h->token.token_val = hb->token;
	h->token.token_len = (unsigned)wire_token_proof(token, n, nonce, (uint8_t *)hb->token);
	explicit_bzero(token, sizeof(token));
}

/* Sends hello h on st, with the shm segment's fd if there is one. */
static int hello_send(struct wire_stream *st, hello_args *h, int shm_fd)
{
	return wire_encode_call(&cl.out, ++cl.xid, P_hello, (xdrproc_t)xdr_hello_args, h) ||
	       wire_send_record(st, &cl.out) || (shm_fd >= 0 && wire_send_fd(st->fd, shm_fd)) ? -1 : 0;
}

/* Reads the answer to the hello; a refusal's reason is in r->message. */
static int hello_answer(struct wire_stream *st, uint32_t xid, hello_res *r, char *err)
{
	memset(r, 0, sizeof(*r));
	if (wire_recv_record(st, &cl.in, 65536)) {
		wire_fail(err, "closed the connection during hello");
		return -1;
	}
	return wire_decode_reply(&cl.in, xid, (xdrproc_t)xdr_hello_res, r, err);
}

static int connect_timeout(void)
{
	const char *env = getenv("CICADA_CONNECT_TIMEOUT");
	int s = env ? atoi(env) : 120;

	return s > 0 ? s : 120;
}

/* The error a refused hello gives the application. */
static CUresult refusal_error(int err)
{
	return err == CUDA_ERROR_NOT_PERMITTED || err == CUDA_ERROR_DEVICE_UNAVAILABLE ||
	       err == CUDA_ERROR_NOT_SUPPORTED ? (CUresult)err : CUDA_ERROR_NO_DEVICE;
}

/* Says hello on the dialled connection; the shm segment, if any, was
 * made before dialling, so nothing slow stands between connect and hello. */
static CUresult say_hello(hello_op op, const char *ticket, int *regions_lost)
{
	struct timeval tv = { connect_timeout(), 0 };
	uint8_t nonce[WIRE_NONCE_LEN];
	struct hello_buf hb;
	hello_args h;
	hello_res r;
	char err[WIRE_ERRLEN];

	if (wire_recv_challenge(cl.stream.fd, nonce, connect_timeout() * 1000, err))
		return fail(CUDA_ERROR_NO_DEVICE, "gpu-server at %s: %s", err);
	hello_fill(&h, &hb, op, ticket, nonce);
	h.want_shm = cl.use_shm;
	h.shm_size = cl.use_shm ? cl.shm.size : 0;
	setsockopt(cl.stream.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	errno = 0;
	/* A server that refuses at once may close before the segment's
	 * descriptor is sent: its answer still says why. */
	if (hello_send(&cl.stream, &h, cl.use_shm ? cl.shm.fd : -1))
		errno = 0;
	if (hello_answer(&cl.stream, cl.xid, &r, err)) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			snprintf(err, sizeof(err), "did not answer the hello within %d s (CICADA_CONNECT_TIMEOUT)",
				 (int)tv.tv_sec);
		else
			snprintf(err, sizeof(err), "closed the connection during hello");
		return fail(CUDA_ERROR_NO_DEVICE, "gpu-server at %s %s", err);
	}
	tv.tv_sec = 0;
	setsockopt(cl.stream.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (r.err) {
		fail(refusal_error(r.err), "gpu-server at %s refused the connection: %s", r.message);
		xdr_free((xdrproc_t)xdr_hello_res, (char *)&r);
		return cl.fail_err;
	}
	log_info("%s %s (worker %llu%s)", op == OP_REATTACH ? "reattached to" : "connected to", cl.addr_text,
		 (unsigned long long)r.worker_pid, r.shm_ok ? ", shared memory" : "");
	*regions_lost = (int)r.regions_lost;
	if (r.shm_ok)
		wire_stream_use_shm(&cl.stream, &cl.shm, 0);
	else if (cl.use_shm)
		shm_segment_detach(&cl.shm), cl.use_shm = 0;
	xdr_free((xdrproc_t)xdr_hello_res, (char *)&r);
	return CUDA_SUCCESS;
}

/* Calls a channel procedure (host_func_channel, lane_open): take 0 makes
 * the worker ready and answers the ticket to dial with, take 1 has it
 * take the connection dialled meanwhile. */
static CUresult channel_call(unsigned proc, uint64_t take, name_res *r)
{
	scalars a = { { 1, &take } };

	return client_call_locked(proc, (xdrproc_t)xdr_scalars, &a, (xdrproc_t)xdr_name_res, r);
}

/* A further connection to the session's worker, for what the channel
 * procedure proc serves (hostfn.c, lanes.c). The worker answers its hello
 * only once proc tells it to take it. The caller holds the client lock.
 * Returns the socket, or -1 with err set. */
int client_open_channel(unsigned proc, char *err)
{
	uint8_t nonce[WIRE_NONCE_LEN];
	struct wire_addr addr;
	struct wire_stream st;
	struct hello_buf hb;
	hello_args h;
	hello_res r = { 0 };
	name_res ticket = { 0 }, taken = { 0 };
	uint32_t xid;
	CUresult rc;
	int fd = -1;

	if ((rc = channel_call(proc, 0, &ticket)) || !ticket.name) {
		wire_fail(err, "the worker offers no such channel (error %d)", (int)rc);
		xdr_free((xdrproc_t)xdr_name_res, (char *)&ticket);
		return -1;
	}
	if (wire_parse_addr(cl.addr_text, &addr, err) || (fd = wire_dial(&addr, err)) < 0 ||
	    wire_recv_challenge(fd, nonce, 10000, err))
		goto fail;
	wire_stream_init(&st, fd);
	hello_fill(&h, &hb, OP_CALLBACK, ticket.name, nonce);
	if (hello_send(&st, &h, -1)) {
		wire_fail(err, "the server closed the connection");
		goto fail;
	}
	xid = cl.xid;
	rc = channel_call(proc, 1, &taken);
	xdr_free((xdrproc_t)xdr_name_res, (char *)&taken);
	if (rc) {
		wire_fail(err, "the worker did not take the connection (error %d)", (int)rc);
		goto fail;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){ 10, 0 }, sizeof(struct timeval));
	if (hello_answer(&st, xid, &r, err))
		goto fail;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){ 0, 0 }, sizeof(struct timeval));
	if (r.err) {
		wire_fail(err, "%s", r.message ? r.message : "refused");
		goto fail;
	}
	xdr_free((xdrproc_t)xdr_hello_res, (char *)&r);
	xdr_free((xdrproc_t)xdr_name_res, (char *)&ticket);
	return fd;
fail:
	xdr_free((xdrproc_t)xdr_hello_res, (char *)&r);
	xdr_free((xdrproc_t)xdr_name_res, (char *)&ticket);
	if (fd >= 0)
		close(fd);
	return -1;
}

static void close_link(void);

/* Dials text and says hello with op; the connection becomes the session's. */
static CUresult dial_locked(const char *text, hello_op op, const char *ticket, int *regions_lost)
{
	const char *shm = getenv("CICADA_SHM");
	struct wire_addr addr;
	char err[WIRE_ERRLEN];
	int fd;

	snprintf(cl.addr_text, sizeof(cl.addr_text), "%s", text);
	if (wire_parse_addr(text, &addr, err))
		return fail(CUDA_ERROR_NO_DEVICE, "CICADA_SERVER=%s: %s", err);
	if (!cl.scratch && !(cl.scratch = malloc(CICADA_CHUNK_MAX)))
		return fail(CUDA_ERROR_OUT_OF_MEMORY, "%s: %s", "out of memory");
	cl.use_shm = addr.kind == WIRE_UNIX && !(shm && !strcmp(shm, "0")) &&
		     !shm_segment_create(&cl.shm, STAGING_SLOTS, STAGING_SLOT_SIZE);
	fd = wire_dial(&addr, err);
	if (fd < 0) {
		if (cl.use_shm)
			shm_segment_detach(&cl.shm), cl.use_shm = 0;
		return fail(CUDA_ERROR_NO_DEVICE, "cannot reach gpu-server at %s: %s", strchr(err, ':') ?
			    strrchr(err, ':') + 2 : err);
	}
	wire_stream_init(&cl.stream, fd);
	if (say_hello(op, ticket, regions_lost)) {
		close_link();
		return cl.fail_err;
	}
	cl.state = ST_CONNECTED;
	cl.server_ctx_known = 0;
	cl.stream.poll_wait = !cl.wait_blocking;
	return CUDA_SUCCESS;
}

/* How the application waits for the device, as the driver would: a
 * context made with CU_CTX_SCHED_BLOCKING_SYNC sleeps until its reply
 * comes, the others (spin, yield, auto) poll for it, yielding the CPU.
 * CICADA_WAIT=block or poll overrides the contexts' flags. */
void client_wait_mode(unsigned ctx_flags)
{
	const char *e = getenv("CICADA_WAIT");

	if (e && !strcmp(e, "block"))
		cl.wait_blocking = 1;
	else if (e && !strcmp(e, "poll"))
		cl.wait_blocking = 0;
	else
		cl.wait_blocking = (ctx_flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC;
	cl.stream.poll_wait = !cl.wait_blocking;
}

static CUresult connect_locked(void)
{
	const char *text = getenv("CICADA_SERVER");
	int lost;

	log_init("cicada");
	client_wait_mode(0);
	if (dial_locked(text ? text : "unix:/run/cicada/gpu.sock", OP_CONNECT, "", &lost))
		return cl.fail_err;
	for (unsigned i = 0; i < nhooks; i++)
		if (hooks[i]->connected)
			hooks[i]->connected();
	return CUDA_SUCCESS;
}

/* The client's users learn of its events through hooks (registered from
 * their constructors), so that it never calls up into them. */
void client_add_hooks(const struct client_hooks *h)
{
	if (nhooks < MAX_HOOKS)
		hooks[nhooks++] = h;
	if (h->current)
		current_ctx = h->current;
}

static void close_link(void)
{
	for (unsigned i = 0; i < nhooks; i++)
		if (hooks[i]->pause)
			hooks[i]->pause();
	close(cl.stream.fd);
	wire_stream_init(&cl.stream, -1);
	if (cl.use_shm)
		shm_segment_detach(&cl.shm);
	cl.use_shm = 0;
}

/* Pauses the session for a checkpoint. The caller holds the client lock,
 * and keeps holding it (every other thread waits) until client_resume. */
int client_pause(char *ticket, size_t tlen, char *server, size_t slen, char *err)
{
	uint64_t none = 0;
	scalars a = { { 0, &none } };
	name_res r = { 0 };
	CUresult rc;

	if (cl.state != ST_CONNECTED) {
		wire_fail(err, cl.state == ST_NEW ? "no GPU session yet" : "the GPU session is lost");
		return cl.state == ST_NEW ? 1 : -1;
	}
	rc = rpc_detach_locked(&a, &r);
	if (rc || !r.name) {
		if (r.name && r.name[0])
			wire_fail(err, "cannot pause the GPU session: %s", r.name);
		else
			wire_fail(err, "the gpu-server could not pause the session (error %d)", (int)rc);
		xdr_free((xdrproc_t)xdr_name_res, (char *)&r);
		return -1;
	}
	snprintf(ticket, tlen, "%s", r.name);
	snprintf(server, slen, "%s", cl.addr_text);
	xdr_free((xdrproc_t)xdr_name_res, (char *)&r);
	close_link();
	cl.state = ST_PAUSED;
	return 0;
}

/* A migration's pre-copy round (gpu-server/checkpoint/precopy.c): starts it, then
 * asks how it goes every 10 ms, taking the lock only for each question,
 * so the application's calls go on meanwhile. 0 when done, with its
 * figures; 1 without a session; -1 with err. */
int client_precopy(int dirfd, const char *name, const char *parent, uint64_t out[3], char *err)
{
	precopy_args a = { (char *)name, (char *)parent };
	uint64_t none = 0;
	scalars q = { { 0, &none } };
	precopy_res r;
	CUresult rc;

	pthread_mutex_lock(&cl.lock);
	if (cl.state != ST_CONNECTED) {
		pthread_mutex_unlock(&cl.lock);
		wire_fail(err, "no GPU session");
		return 1;
	}
	if (strncmp(cl.addr_text, "unix:", 5)) {
		pthread_mutex_unlock(&cl.lock);
		wire_fail(err, "pre-copy needs a client on the server's node");
		return 1;
	}
	memset(&r, 0, sizeof(r));
	/* the directory first, as host regions go (hostmem.c) */
	rc = wire_send_fd(client_socket(), dirfd) ? client_lost("cannot pass a directory") :
		rpc_precopy_locked(&a, &r);
	pthread_mutex_unlock(&cl.lock);
	while (!rc && r.state == PRECOPY_RUNNING) {
		struct timespec nap = { 0, 10000000 };

		xdr_free((xdrproc_t)xdr_precopy_res, (char *)&r);
		nanosleep(&nap, NULL);
		memset(&r, 0, sizeof(r));
		pthread_mutex_lock(&cl.lock);
		rc = cl.state == ST_CONNECTED ? rpc_precopy_status_locked(&q, &r)
					      : CUDA_ERROR_NOT_READY;
		pthread_mutex_unlock(&cl.lock);
	}
	if (rc || r.state != PRECOPY_DONE)
		wire_fail(err, "%s", r.message && r.message[0] ? r.message : "the pre-copy round failed");
	else
		out[0] = r.pieces, out[1] = r.unchanged, out[2] = r.stored;
	rc = rc || r.state != PRECOPY_DONE ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
	xdr_free((xdrproc_t)xdr_precopy_res, (char *)&r);
	return rc ? -1 : 0;
}

/* Reattaches a paused session, through server, to the worker of ticket.
 * If it cannot (the server unreachable or refusing, a hook failing), the
 * connection made is closed and the session stays paused, so that it can
 * resume on the worker it came from, which still holds it. */
int client_resume(const char *server, const char *ticket, char *err)
{
	int regions_lost = 0;

	if (cl.state != ST_PAUSED)
		return 0;
	if (dial_locked(server, OP_REATTACH, ticket, &regions_lost)) {
		wire_fail(err, "cannot reattach the GPU session at %s", server);
		cl.state = ST_PAUSED;
		return -1;
	}
	for (unsigned i = 0; i < nhooks; i++)
		if (hooks[i]->resume && hooks[i]->resume(regions_lost)) {
			wire_fail(err, "cannot share pinned memory with the restored worker");
			close_link();
			cl.state = ST_PAUSED;
			return -1;
		}
	return 0;
}

/* Sets the token to present from now on, in hex ("-": none); NULL goes
 * back to the environment's. -1 if hex is malformed. */
int client_set_token(const char *hex)
{
	size_t n = 0;
	unsigned v;

	if (!hex) {
		token_override.set = 0;
		return 0;
	}
	if (strcmp(hex, "-")) {
		if (strlen(hex) % 2 || strlen(hex) / 2 > sizeof(token_override.token))
			return -1;
		for (; hex[2 * n]; n++) {
			if (sscanf(hex + 2 * n, "%2x", &v) != 1)
				return -1;
			token_override.token[n] = (char)v;
		}
	}
	token_override.len = n;
	token_override.set = 1;
	return 0;
}

/* The token this process presents (the plugin needs it to reach the
 * server on the process's behalf). */
size_t client_token(char *buf, size_t len)
{
	return read_token(buf, len);
}

CUresult client_connect(void)
{
	CUresult err;

	if (cl.state == ST_CONNECTED)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&cl.lock);
	if (cl.state == ST_NEW)
		connect_locked();
	err = cl.state == ST_CONNECTED ? CUDA_SUCCESS : cl.fail_err;
	pthread_mutex_unlock(&cl.lock);
	return err;
}

void client_lock(void)
{
	pthread_mutex_lock(&cl.lock);
}

void client_unlock(void)
{
	pthread_mutex_unlock(&cl.lock);
}

/* 0 with the lock taken, else nonzero (another thread holds it). */
int client_trylock(void)
{
	return pthread_mutex_trylock(&cl.lock);
}

struct shm_segment *client_shm(void)
{
	return cl.use_shm ? &cl.shm : NULL;
}

int client_wait_polls(void)
{
	return !cl.wait_blocking;
}

int client_connected(void)
{
	return cl.state == ST_CONNECTED;
}

int client_socket(void)
{
	return cl.stream.fd;
}

void *client_scratch(void)
{
	return cl.scratch;
}

/* The server went away: say so once, and fail every call from now on. */
CUresult client_lost(const char *why)
{
	if (cl.state == ST_CONNECTED)
		fail(CUDA_ERROR_DEVICE_UNAVAILABLE, "lost the connection to gpu-server at %s: %s", why);
	return cl.fail_err;
}

/* Makes the server's current context the calling thread's. */
static CUresult sync_context(unsigned proc)
{
	CUcontext cur = current_ctx ? current_ctx() : NULL;
	uint64_t id;
	scalars a = { { 1, &id } };

	if (proc == P_cuCtxSetCurrent || proc == P_hello || (cl.server_ctx_known && cl.server_ctx == cur))
		return CUDA_SUCCESS;
	id = handle_id(cur);
	if (stats_on)
		stats_sent(P_cuCtxSetCurrent);
	if (wire_encode_call(&cl.out, ++cl.xid, P_cuCtxSetCurrent, (xdrproc_t)xdr_scalars, &a) ||
	    wire_send_record(&cl.stream, &cl.out))
		return client_lost("write failed");
	cl.server_ctx = cur;
	cl.server_ctx_known = 1;
	return CUDA_SUCCESS;
}

/* A notice from the server: device output, written where the driver
 * would have written it natively (the application's stdout, or its
 * stderr for a device assert's message). */
static int take_notice(void)
{
	notice_output n = { { 0, NULL } };
	struct wire_call_hdr hdr;
	char err[WIRE_ERRLEN];
	FILE *to;
	XDR x;
	int ok;

	if (wire_decode_call(&cl.in, &hdr, &x, err))
		return -1;
	to = hdr.proc == CICADA_NOTICE_OUTPUT ? stdout : hdr.proc == CICADA_NOTICE_ERROR_OUTPUT ? stderr : NULL;
	ok = to && xdr_notice_output(&x, &n);
	xdr_destroy(&x);
	if (ok && n.data.data_len) {
		fwrite(n.data.data_val, 1, n.data.data_len, to);
		fflush(to);
	}
	xdr_free((xdrproc_t)xdr_notice_output, (char *)&n);
	return ok ? 0 : -1;
}

/* Reads the reply to a call, taking the notices that come before it. */
static CUresult read_reply(void)
{
	for (;;) {
		if (wire_recv_record(&cl.stream, &cl.in, WIRE_MAX_RECORD))
			return client_lost("the server closed the connection");
		if (!wire_record_is_call(&cl.in))
			return CUDA_SUCCESS;
		if (take_notice())
			return client_lost("malformed notice");
	}
}

#define MAX_WORK_HOOKS 4
static void (*device_work_hooks[MAX_WORK_HOOKS])(unsigned proc);
static void (*synced_hook)(unsigned proc);

/* hook runs before every call, under the client lock, and may make calls
 * of its own (managed.c keeps managed memory coherent with it, mapped.c
 * mapped host memory). Each hook is added once. */
void client_set_device_work_hook(void (*hook)(unsigned proc))
{
	for (unsigned i = 0; i < MAX_WORK_HOOKS; i++)
		if (!device_work_hooks[i] || device_work_hooks[i] == hook) {
			device_work_hooks[i] = hook;
			return;
		}
}

/* hook runs after every call that client_call made and the server
 * answered with success (synchronisations among them), under the client
 * lock, and may make calls of its own (mapped.c). */
void client_set_synced_hook(void (*hook)(unsigned proc))
{
	synced_hook = hook;
}

static void run_work_hooks(unsigned proc)
{
	for (unsigned i = 0; i < MAX_WORK_HOOKS && device_work_hooks[i]; i++)
		device_work_hooks[i](proc);
}

/* Sends a call; its reply, if it has one, is read by client_reply_locked,
 * in the order the calls went. Several may be in flight (a pipelined
 * copy): the hook and the context run only before the first of them,
 * when nothing may read a reply meanwhile. */
CUresult client_send_locked(unsigned proc, xdrproc_t xargs, void *args, int first, uint32_t *xid)
{
	CUresult rc;

	if (cl.state != ST_CONNECTED)
		return cl.fail_err;
	if (first)
		run_work_hooks(proc);
	if (first && (rc = sync_context(proc)))
		return rc;
	*xid = ++cl.xid;
	if (stats_on)
		stats_sent(proc);
	if (wire_encode_call(&cl.out, *xid, proc, xargs, args))
		return CUDA_ERROR_INVALID_VALUE;
	if (wire_send_record(&cl.stream, &cl.out))
		return client_lost("the server closed the connection");
	return CUDA_SUCCESS;
}

CUresult client_reply_locked(unsigned proc, uint32_t xid, xdrproc_t xres, void *res)
{
	char err[WIRE_ERRLEN];
	uint64_t t0 = stats_on ? stats_now() : 0;
	CUresult rc;

	if (cl.state != ST_CONNECTED)
		return cl.fail_err;
	if ((rc = read_reply()))
		return rc;
	if (stats_on)
		stats_waited(proc, stats_now() - t0);
	if (wire_decode_reply(&cl.in, xid, xres, res, err))
		return client_lost(err);
	if ((rc = (CUresult) * (int *)res) && log_enabled(LOG_DEBUG))
		log_debug("%s: %s", rpc_name(proc), error_name(rc) ? error_name(rc) : "unknown error");
	return rc;
}

CUresult client_call_locked(unsigned proc, xdrproc_t xargs, void *args, xdrproc_t xres, void *res)
{
	uint32_t xid;
	CUresult rc = client_send_locked(proc, xargs, args, 1, &xid);

	return rc || !xres ? rc : client_reply_locked(proc, xid, xres, res);
}

CUresult client_call(unsigned proc, xdrproc_t xargs, void *args, xdrproc_t xres, void *res)
{
	CUresult rc = client_connect();

	if (rc)
		return rc;
	client_lock();
	rc = client_call_locked(proc, xargs, args, xres, res);
	if (rc == CUDA_SUCCESS && xres && synced_hook)
		synced_hook(proc);
	client_unlock();
	return rc;
}

CUresult client_scalar_call(unsigned proc, int async, const uint64_t *in, unsigned nin, uint64_t *out,
			    unsigned nout)
{
	scalars a = { { nin, (u_quad_t *)in } };
	uint64_t buf[CICADA_SCALARS_MAX];
	scalar_res r = { 0, { 0, buf } };
	CUresult rc;

	if (async)
		return client_call(proc, (xdrproc_t)xdr_scalars, &a, NULL, NULL);
	rc = client_call(proc, (xdrproc_t)xdr_scalars, &a, (xdrproc_t)xdr_scalar_res, &r);
	if (rc == CUDA_SUCCESS && r.v.v_len != nout)
		return client_lost("malformed reply");
	for (unsigned i = 0; i < nout && rc == CUDA_SUCCESS; i++)
		out[i] = r.v.v_val[i];
	return rc;
}

/* Forced after cuCtxCreate/cuCtxDestroy, which change the server's context. */
void client_set_server_ctx(CUcontext ctx, int known)
{
	cl.server_ctx = ctx;
	cl.server_ctx_known = known;
}

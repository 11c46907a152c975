/*
 * session.c: what a connection handed to this worker is for, by the op of
 * its hello: a client session (new, or reattaching after a pause), a
 * checkpoint of the paused session, a restore into this fresh worker, or
 * the end of a paused session. A paused ("detached") worker waits on its
 * session socket, <run_dir>/<ticket>.sock, where the gpu-server passes it
 * the connections that name its ticket. The token was already checked by
 * the gpu-server.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "front.h"
#include "snapshot.h"

#define DETACH_TIMEOUT_S 600
#define CONTROL_IO_TIMEOUT_MS 30000      /* each send or receive of a control request */

struct handed {
	int fd;
	struct wire_call_hdr hdr;
	hello_args h;
	hello_res r;
	char msg[WIRE_ERRLEN];
};

static int reply(struct handed *c)
{
	struct wire_stream st;
	struct wire_buf out = { 0 };
	int rc;

	c->r.proto_version = CICADA_PROTO_VERSION;
	c->r.worker_pid = (uint64_t)getpid();
	c->msg[CICADA_NAME_MAX - 1] = 0;     /* the wire's limit: a longer one would not encode */
	c->r.message = c->msg;
	if (!c->r.ticket)
		c->r.ticket = "";
	wire_stream_init(&st, c->fd);
	rc = wire_encode_reply(&out, c->hdr.xid, WIRE_SUCCESS, (xdrproc_t)xdr_hello_res, &c->r) ||
	     wire_send_record(&st, &out) ? -1 : 0;
	wire_buf_free(&out);
	return rc;
}

static int refuse(struct handed *c, CUresult err, const char *why)
{
	if (why != c->msg)
		snprintf(c->msg, sizeof(c->msg), "%s", why);
	c->r.err = err;
	log_warn("%s %s: %s", c->h.host ? c->h.host : "?", "refused", why);
	return reply(c);
}

/* The session's ticket: random, made once, kept across pauses. */
static int ticket_make(struct worker *w)
{
	unsigned char rnd[CICADA_TICKET_LEN / 2];

	if (w->ckpt->ticket[0])
		return 0;
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return -1;
	for (unsigned i = 0; i < sizeof(rnd); i++)
		sprintf(w->ckpt->ticket + 2 * i, "%02x", rnd[i]);
	return 0;
}

static int session_listen(struct worker *w, int *lfd)
{
	struct sockaddr_un sa;
	unsigned len;

	if (ticket_make(w))
		return -1;
	len = handoff_path(w->calls->run_dir, w->ckpt->ticket, &sa);
	*lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*lfd < 0 || bind(*lfd, (struct sockaddr *)&sa, len) || listen(*lfd, 8)) {
		log_error("cannot listen for session %.8s: %s", w->ckpt->ticket, strerror(errno));
		if (*lfd >= 0)
			close(*lfd);
		return -1;
	}
	return 0;
}

static void session_unlisten(struct worker *w, int lfd)
{
	close(lfd);                          /* (abstract: no file to remove) */
}

static int attach_shm(struct worker *w, const hello_args *h, char *err)
{
	int fd = wire_recv_fd_within(w->sock, CLIENT_FD_TIMEOUT_MS);

	if (fd < 0) {
		wire_fail(err, "no shared memory segment received");
		return -1;
	}
	if (shm_segment_attach(&w->calls->shm, fd, h->shm_size, err)) {
		close(fd);
		return -1;
	}
	if (w->calls->shm.nslots &&
	    cuMemHostRegister(shm_slot(&w->calls->shm, 0, 0), (size_t)w->calls->shm.nslots * w->calls->shm.slot_size,
			      CU_MEMHOSTREGISTER_PORTABLE)) {
		wire_fail(err, "cannot pin the staging area");
		shm_segment_detach(&w->calls->shm);
		return -1;
	}
	return 0;
}

static void detach_shm(struct worker *w)
{
	if (!w->calls->shm.hdr)
		return;
	cuCtxSetCurrent(w->base_ctx);
	if (w->calls->shm.nslots)
		cuMemHostUnregister(shm_slot(&w->calls->shm, 0, 0));
	shm_segment_detach(&w->calls->shm);
}

/* A client session, new or reattached. Returns 1 if it detached. */
static int serve_client(struct worker *w, struct handed *c)
{
	int detached;

	w->sock = c->fd;
	modcache_identify(w);                /* its own index of the module cache */
	wire_stream_init(&w->calls->stream, c->fd);
	snprintf(w->peer, sizeof(w->peer), "%s/%llu", c->h.host, (unsigned long long)c->h.pid);
	w->calls->client_pid = c->h.pid;
	if (c->h.want_shm && attach_shm(w, &c->h, c->msg)) {
		refuse(c, CUDA_ERROR_OPERATING_SYSTEM, c->msg);
		return 0;
	}
	if (ipc_resume(w, c->msg)) {             /* a restored session's CUDA IPC */
		log_error("client %s: %s", w->peer, c->msg);
		refuse(c, CUDA_ERROR_INVALID_VALUE, c->msg);
		detach_shm(w);
		return 0;
	}
	c->r.shm_ok = c->h.want_shm;
	c->r.regions_lost = w->ckpt->regions_lost;
	if (reply(c)) {
		detach_shm(w);
		return 0;
	}
	w->ckpt->regions_lost = 0;
	log_info("client %s %s%s", w->peer, c->h.op == OP_REATTACH ? "reattached" : "connected",
		 c->r.shm_ok ? " (shared memory)" : "");
	if (c->r.shm_ok)
		wire_stream_use_shm(&w->calls->stream, &w->calls->shm, 1);
	w->calls->detach = 0;
	detached = worker_serve(w);
	wire_stream_init(&w->calls->stream, -1);
	detach_shm(w);
	w->sock = -1;
	return detached;
}

/* Opens the directory a snapshot goes to or comes from: passed by the
 * requester (local), or a private temporary one for a stream (remote). */
static int snapshot_dir(struct worker *w, struct handed *c, char *tmp, size_t len)
{
	int dirfd;

	tmp[0] = 0;
	if (!c->h.stream)
		return wire_recv_fd_within(c->fd, CLIENT_FD_TIMEOUT_MS);
	snprintf(tmp, len, "%s/xfer-XXXXXX", w->front->scratch_dir ? w->front->scratch_dir : w->calls->run_dir);
	if (!mkdtemp(tmp))
		return -1;
	dirfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		rmdir(tmp);
	return dirfd;
}

static void snapshot_dir_done(int dirfd, const char *tmp, const char *name)
{
	char err[WIRE_ERRLEN];

	if (tmp[0]) {
		snap_remove_dir(dirfd, name, err);
		rmdir(tmp);
	}
	close(dirfd);
}

static int name_valid(const char *name)
{
	return name && name[0] && name[0] != '.' && strlen(name) < 200 &&
	       strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == strlen(name);
}

static void checkpoint(struct worker *w, struct handed *c)
{
	char tmp[PATH_MAX], err[WIRE_ERRLEN];
	int dirfd = -1;

	if (!name_valid(c->h.snapshot) || (dirfd = snapshot_dir(w, c, tmp, sizeof(tmp))) < 0) {
		refuse(c, CUDA_ERROR_INVALID_VALUE, "no valid snapshot directory");
		return;
	}
	/* a worker that runs as its tenant writes only where the tenant may:
	 * root's image directory is asked for again with the snapshot sent */
	if (!c->h.stream && faccessat(dirfd, ".", W_OK | X_OK, AT_EACCESS)) {
		c->r.stream_only = 1;
		snprintf(err, sizeof(err), "the session's worker runs as uid %u, which may not write that directory",
			 (unsigned)geteuid());
		refuse(c, CUDA_ERROR_NOT_PERMITTED, err);
		close(dirfd);
		return;
	}
	/* only root or the server's user (CRIU's plugin) may name a parent,
	 * which the worker opens by path */
	if (worker_checkpoint(w, dirfd, c->h.snapshot, c->h.stream || !peer_privileged(c->fd) ? "" : c->h.parent, err)) {
		refuse(c, CUDA_ERROR_UNKNOWN, err);
	} else if (!reply(c) && c->h.stream && snap_send_dir(dirfd, c->h.snapshot, c->fd, err)) {
		log_error("sending snapshot %s: %s", c->h.snapshot, err);
	}
	snapshot_dir_done(dirfd, tmp, c->h.snapshot);
}

/* A migration's pre-copy rounds come to this fresh worker (migrate_in.c,
 * on the connection it handed over, which the preload keeps); its restore
 * comes later, naming the ticket the reply gives. */
static int preload(struct worker *w, struct handed *c, int *lfd)
{
	if (!peer_privileged(c->fd) || session_listen(w, lfd)) {
		refuse(c, CUDA_ERROR_NOT_PERMITTED, "no preload here");
		close(c->fd);
		return -1;
	}
	c->r.ticket = w->ckpt->ticket;
	if (reply(c)) {
		close(c->fd);
		return -1;
	}
	preload_start(w, c->fd);
	return 0;
}

/* Restores into this fresh worker; on failure the worker is spent. */
static int restore(struct worker *w, struct handed *c, int *lfd)
{
	char tmp[PATH_MAX], err[WIRE_ERRLEN];
	uint64_t t0 = wire_now_ns();
	int dirfd = -1, rc = -1;

	if (!name_valid(c->h.snapshot) || (dirfd = snapshot_dir(w, c, tmp, sizeof(tmp))) < 0) {
		refuse(c, CUDA_ERROR_INVALID_VALUE, "no valid snapshot directory");
		return -1;
	}
	w->ckpt->req_stream = !!c->h.stream;
	if (c->h.stream && snap_recv_dir(c->fd, dirfd, c->h.snapshot, err))
		refuse(c, CUDA_ERROR_INVALID_VALUE, err);
	else if (worker_restore(w, dirfd, c->h.snapshot, err))
		refuse(c, CUDA_ERROR_INVALID_IMAGE, err);
	else if (*lfd < 0 && session_listen(w, lfd))      /* (a preloading worker listens already) */
		refuse(c, CUDA_ERROR_OPERATING_SYSTEM, "cannot create the session socket");
	else {
		c->r.ticket = w->ckpt->ticket;
		rc = reply(c);
		log_info("restored snapshot %s as session %.8s in %.3f s", c->h.snapshot, w->ckpt->ticket,
			 (wire_now_ns() - t0) / 1e9);
	}
	snapshot_dir_done(dirfd, tmp, c->h.snapshot);
	return rc;
}

static int decode_hello(struct handed *c, struct wire_buf *hello)
{
	XDR x;
	char err[WIRE_ERRLEN];

	memset(&c->h, 0, sizeof(c->h));
	if (wire_decode_call(hello, &c->hdr, &x, err))
		return -1;
	if (c->hdr.proc != P_hello || !xdr_hello_args(&x, &c->h)) {
		xdr_destroy(&x);
		return -1;
	}
	xdr_destroy(&x);
	return 0;
}

/* Waits on the session socket for the next connection naming our ticket. */
static int wait_handed(struct worker *w, int lfd, struct wire_buf *hello, int timeout)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	uint64_t end = wire_now_ns() + (uint64_t)timeout * 1000000000u;
	int fd = -2;

	while (fd == -2) {
		uint64_t now = wire_now_ns();

		if (now >= end || poll(&p, 1, (int)((end - now) / 1000000) + 1) <= 0) {
			log_warn("session %.8s: nobody came within %d s", w->ckpt->ticket, timeout);
			return -1;
		}
		fd = handoff_accept(lfd, hello);
	}
	return fd;
}

/* The host-function channel of a live session (hostfn.c): the client
 * dialled the server with OP_CALLBACK and our ticket, and the server
 * passed the connection to our session socket. */
static int open_channel(struct worker *w, int prepare)
{
	struct wire_buf hello = { 0 };
	struct handed c = { .fd = -1 };
	int fd;

	if (prepare)
		return w->front->session_fd < 0 ? session_listen(w, &w->front->session_fd) : 0;
	if (w->front->session_fd < 0 || (c.fd = wait_handed(w, w->front->session_fd, &hello, 5)) < 0) {
		wire_buf_free(&hello);
		return -1;
	}
	if (decode_hello(&c, &hello) || c.h.op != OP_CALLBACK || strcmp(c.h.ticket, w->ckpt->ticket)) {
		refuse(&c, CUDA_ERROR_INVALID_VALUE, "this request does not fit the worker's session");
		close(c.fd);
		c.fd = -1;
	} else if (reply(&c)) {
		close(c.fd);
		c.fd = -1;
	}
	fd = c.fd;
	xdr_free((xdrproc_t)xdr_hello_args, (char *)&c.h);
	wire_buf_free(&hello);
	return fd;
}

/* A channel procedure's call (host_func_channel, lane_open), the worker's
 * channel hook: v[0] = 0 makes the worker ready (the session socket
 * listens; the reply names the ticket to dial with), v[0] = 1 takes the
 * connection the client dialled meanwhile into *fd. *fd is -1 after a
 * v[0] = 0 call. */
static CUresult channel_call(struct worker *w, const scalars *a, name_res *r, int *fd)
{
	*fd = -1;
	if (a->v.v_len != 1 || a->v.v_val[0] > 1)
		return CUDA_ERROR_INVALID_VALUE;
	if (a->v.v_val[0] == 0 && open_channel(w, 1))
		return CUDA_ERROR_OPERATING_SYSTEM;
	if (!(r->name = strdup(w->ckpt->ticket)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (a->v.v_val[0] == 1 && (*fd = open_channel(w, 0)) < 0)
		return CUDA_ERROR_OPERATING_SYSTEM;
	return CUDA_SUCCESS;
}

/* A paused session's ticket is not enough over a unix socket (it lies in
 * image directories): the peer must also be the session's user (the
 * first unix client it served), root or the server's user. TCP peers
 * proved the token already. */
static int owner_ok(struct worker *w, int fd)
{
	struct ucred cred;

	if (peer_cred(fd, &cred)) {
		w->ckpt->req_class = REQ_REMOTE;
		if (!w->ckpt->owner[0])
			snprintf(w->ckpt->owner, sizeof(w->ckpt->owner), "token");
		return 1;                    /* the token and the ticket */
	}
	w->ckpt->req_class = peer_is_server(cred.uid) ? REQ_PRIVILEGED : REQ_USER;
	w->ckpt->req_uid = cred.uid;
	if (w->ckpt->req_class == REQ_PRIVILEGED) {
		if (!w->ckpt->owner[0] && !w->ckpt->ticket[0]) /* a new session of root's (a restore names its own) */
			snprintf(w->ckpt->owner, sizeof(w->ckpt->owner), "uid %u", (unsigned)cred.uid);
		return 1;
	}
	if (w->ckpt->owner_uid == (uid_t)-1) {
		w->ckpt->owner_uid = cred.uid;
		snprintf(w->ckpt->owner, sizeof(w->ckpt->owner), "uid %u", (unsigned)cred.uid);
	}
	return cred.uid == w->ckpt->owner_uid;
}

/* A new session's device memory quota, by its tenant (--memory-quota):
 * a unix peer by its uid and group, a TCP or TLS one as remote (a TLS
 * client by its verified name first: "tls:NAME"); and who it is, for the
 * operator (stat.c). */
static void session_started(struct worker *w, int fd, uint64_t client_pid)
{
	const char *policy = getenv("CICADA_MEMORY_QUOTA");
	struct ucred cred;
	int remote = peer_cred(fd, &cred) != 0;
	char tenant[48];

	if (policy)
		quota_set(w, quota_for(policy, w->front->token, w->front->tls_name, remote, remote ? 0 : cred.uid,
				       remote ? 0 : cred.gid));
	if (remote && w->front->tls_name[0])
		snprintf(tenant, sizeof(tenant), "tls:%.40s", w->front->tls_name);
	else if (remote)
		snprintf(tenant, sizeof(tenant), "remote");
	else
		snprintf(tenant, sizeof(tenant), "uid %u", (unsigned)cred.uid);
	stat_session(w, client_pid, remote ? (uint32_t)-1 : cred.uid, tenant);
}

/* One handed connection: returns 1 to stay (detached), 0 to exit. */
static int handle_one(struct worker *w, int fd, struct wire_buf *hello, int *lfd)
{
	struct handed c = { .fd = fd };
	int fresh = !w->ckpt->ticket[0], stay = 0, drop;

	if (decode_hello(&c, hello)) {
		log_warn("handed connection without a valid hello");
		close(fd);
		return !fresh;
	}
	/* a control request's every send and receive has a deadline; a
	 * session's own calls wait on the client as long as it likes */
	if (c.h.op != OP_CONNECT && c.h.op != OP_REATTACH && c.h.op != OP_PRELOAD)
		wire_set_timeouts(fd, CONTROL_IO_TIMEOUT_MS);
	if (c.h.proto_version != CICADA_PROTO_VERSION) {
		snprintf(c.msg, sizeof(c.msg), "protocol version %u is not supported (server speaks %u)",
			 c.h.proto_version, CICADA_PROTO_VERSION);
		refuse(&c, CUDA_ERROR_NOT_SUPPORTED, c.msg);
	} else if (fresh && gpus_setup(w, c.h.devices, c.msg)) {
		refuse(&c, CUDA_ERROR_NO_DEVICE, c.msg);
	} else if (c.h.op == OP_PRELOAD && fresh) {
		stay = !preload(w, &c, lfd);
		c.fd = -1;                   /* the preload keeps it */
	} else if (w->ckpt->preload && c.h.op == OP_RESTORE && !strcmp(c.h.ticket, w->ckpt->ticket) &&
		   peer_privileged(fd)) {
		w->ckpt->req_class = REQ_PRIVILEGED;
		stay = !restore(w, &c, lfd);     /* into what the pre-copy rounds loaded */
	} else if ((c.h.op == OP_CONNECT || c.h.op == OP_RESTORE) != fresh ||
		   (!fresh && strcmp(c.h.ticket, w->ckpt->ticket))) {
		refuse(&c, CUDA_ERROR_INVALID_VALUE, "this request does not fit the worker's session");
		stay = !fresh;
	} else if (!owner_ok(w, fd)) {
		log_warn("refused %s of session %.8s: another user's", c.h.op == OP_REATTACH ? "a reattach" : "a request",
			 w->ckpt->ticket);
		refuse(&c, CUDA_ERROR_NOT_PERMITTED, "this session belongs to another user");
		stay = !fresh;
	} else if ((drop = privsep_drop_for(w, fd, c.msg))) {
		log_error("session %.8s: %s", w->ckpt->ticket[0] ? w->ckpt->ticket : "(new)", c.msg);
		refuse(&c, CUDA_ERROR_NOT_PERMITTED, c.msg);
		stay = !fresh && drop != -2;         /* a drop failed part-way: nothing to trust */
	} else if (c.h.op == OP_CONNECT || c.h.op == OP_REATTACH) {
		if (fresh)
			session_started(w, fd, c.h.pid);
		else if (w->stat)
			w->stat->client_pid = c.h.pid;   /* (a restored one's process) */
		if (!fresh)
			session_unlisten(w, *lfd);
		*lfd = w->front->session_fd = -1;
		stay = serve_client(w, &c);
		if (!stay && w->stat)            /* (its SMs are the next session's soon: pool.c) */
			__atomic_store_n(&w->stat->ended, 1, __ATOMIC_RELEASE);
		*lfd = w->front->session_fd;     /* opened by the detach */
	} else if (c.h.op == OP_CHECKPOINT) {
		checkpoint(w, &c);
		stay = 1;
	} else if (c.h.op == OP_RESTORE) {
		stay = !restore(w, &c, lfd);
	} else if (c.h.op == OP_RELEASE) {
		reply(&c);
		log_info("session %.8s released", w->ckpt->ticket);
		session_unlisten(w, *lfd);
		*lfd = -1;
	} else {
		refuse(&c, CUDA_ERROR_INVALID_VALUE, "unknown request");
		stay = !fresh;
	}
	xdr_free((xdrproc_t)xdr_hello_args, (char *)&c.h);
	if (c.fd >= 0)
		close(fd);
	return stay;
}

void session_run(struct worker *w, int fd, struct wire_buf *hello)
{
	const char *env = getenv("CICADA_DETACH_TIMEOUT");
	int timeout = env ? atoi(env) : DETACH_TIMEOUT_S, lfd = -1;

	w->calls->channel_call = channel_call;
	while (fd >= 0 && handle_one(w, fd, hello, &lfd))
		fd = w->ckpt->preload ? preload_wait(w, lfd, hello, timeout, handoff_accept) :
					wait_handed(w, lfd, hello, timeout);
	preload_end(w);
	if (lfd >= 0)
		session_unlisten(w, lfd);
}

/* The client pauses: the device finishes its work, the session gets a
 * ticket, and the worker waits, detached, for what comes next. */
CUresult hand_detach(struct worker *w, void *args, void *res)
{
	name_res *r = res;
	char err[WIRE_ERRLEN];

	precopy_end(w);                      /* a round still running finishes first */
	if (worker_quiesce(w, err)) {
		log_error("client %s: cannot pause: %s", w->peer, err);
		r->name = strndup(err, CICADA_NAME_MAX - 1);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	hostfn_close(w);
	lanes_close(w);
	/* The socket listens before the ticket leaves: the plugin's next
	 * request may come at once. */
	if (w->front->session_fd < 0 && session_listen(w, &w->front->session_fd))
		return CUDA_ERROR_OPERATING_SYSTEM;
	if (!(r->name = strdup(w->ckpt->ticket)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	w->calls->detach = 1;
	log_info("client %s paused (session %.8s)", w->peer, w->ckpt->ticket);
	return CUDA_SUCCESS;
}

CUresult hand_hello(struct worker *w, void *args, void *res)
{
	return CUDA_ERROR_INVALID_VALUE;     /* only once, at the start */
}

CUresult hand_goodbye(struct worker *w, void *args, void *res)
{
	w->calls->exiting = 1;
	return CUDA_SUCCESS;
}

/*
 * main.c: the gpu-server daemon. It listens on unix and TCP sockets, keeps
 * a pool of pre-initialised worker processes (each re-executes this binary
 * with --worker-fd, so CUDA is never initialised in the parent), checks
 * each client's hello (protocol, token) and hands the connection to a
 * worker. One worker serves one client and exits with it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "gpu-server.h"

#define MAX_LISTENERS 8
#define MAX_POOL 64

struct listener {
	struct wire_addr addr;
	int fd;
};

struct pool_worker {
	pid_t pid;
	int control_fd;
};

struct server {
	struct listener listeners[MAX_LISTENERS];
	int nlisteners;
	char token[CICADA_TOKEN_MAX + 1];
	char cache_dir[1024];
	char run_dir[1024];
	int pool_size;
	int refill_delay_ms;                 /* after a worker is taken */
	uint64_t last_take_ns;
	struct pool_worker idle[MAX_POOL];
	int nidle;
	pthread_mutex_t lock;
};

struct client_job {
	struct server *srv;
	int fd;
	int is_tcp;
	char peer[128];
};

static struct server srv = { .pool_size = 2, .refill_delay_ms = 5000, .lock = PTHREAD_MUTEX_INITIALIZER };

static int spawn_worker(struct server *s)
{
	int sv[2];
	char fdarg[16];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return -1;
	snprintf(fdarg, sizeof(fdarg), "%d", sv[1]);
	pid = fork();
	if (pid == 0) {
		/* Every worker gets the same address-space layout, so objects the
		 * driver places itself (module globals) land at the same device
		 * addresses in a restoring worker as in the original. */
		personality((unsigned long)personality(0xffffffff) | ADDR_NO_RANDOMIZE);
		close(sv[0]);
		execl("/proc/self/exe", "gpu-server", "--worker-fd", fdarg, "--cache-dir", s->cache_dir,
		      "--run-dir", s->run_dir, (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return -1;
	}
	fcntl(sv[0], F_SETFD, FD_CLOEXEC);
	s->idle[s->nidle].pid = pid;
	s->idle[s->nidle].control_fd = sv[0];
	s->nidle++;
	return 0;
}

static void fill_pool(struct server *s)
{
	pthread_mutex_lock(&s->lock);
	while (s->nidle < s->pool_size)
		if (spawn_worker(s)) {
			log_error("cannot start a worker: %s", strerror(errno));
			break;
		}
	pthread_mutex_unlock(&s->lock);
}

/* A new worker's CUDA initialisation takes GPU time from the sessions
 * running: a thread refills the pool only once no worker has been taken
 * for --refill-delay, unless the pool is empty (the next client would
 * wait for a worker's CUDA start). */
static void *refill_loop(void *arg)
{
	struct server *s = arg;

	for (;;) {
		uint64_t quiet = (uint64_t)s->refill_delay_ms * 1000000u;
		int due;

		usleep(100000);
		pthread_mutex_lock(&s->lock);
		due = s->nidle < s->pool_size && (!s->nidle || wire_now_ns() - s->last_take_ns >= quiet);
		pthread_mutex_unlock(&s->lock);
		if (due)
			fill_pool(s);
	}
	return NULL;
}

/* Takes a ready worker, waiting for one that is still initialising. */
static int take_worker(struct server *s, struct pool_worker *out)
{
	for (int tries = 0; tries < 4; tries++) {
		char ready;

		pthread_mutex_lock(&s->lock);
		if (s->nidle == 0 && spawn_worker(s)) {
			pthread_mutex_unlock(&s->lock);
			return -1;
		}
		*out = s->idle[0];
		memmove(&s->idle[0], &s->idle[1], (size_t)(--s->nidle) * sizeof(s->idle[0]));
		s->last_take_ns = wire_now_ns();
		pthread_mutex_unlock(&s->lock);
		if (read(out->control_fd, &ready, 1) == 1 && ready == 'R')
			return 0;
		log_error("worker %d failed to initialise", (int)out->pid);
		close(out->control_fd);
	}
	return -1;
}

static int read_hello(int fd, struct wire_buf *b, hello_args *h, char *err)
{
	struct wire_stream st;
	struct wire_call_hdr hdr;
	XDR x;

	wire_stream_init(&st, fd);
	if (wire_recv_record(&st, b, 65536)) {
		snprintf(err, WIRE_ERRLEN, "no hello received");
		return -1;
	}
	if (wire_decode_call(b, &hdr, &x, err))
		return -1;
	if (hdr.proc != P_hello || !xdr_hello_args(&x, h)) {
		xdr_destroy(&x);
		snprintf(err, WIRE_ERRLEN, "first message is not a valid hello");
		return -1;
	}
	xdr_destroy(&x);
	return 0;
}

static void refuse(int fd, const struct wire_buf *b, const char *why)
{
	struct wire_stream st;
	struct wire_buf out = { 0 };
	hello_res r = { .err = CUDA_ERROR_NOT_PERMITTED, .proto_version = CICADA_PROTO_VERSION };
	uint32_t xid = 0;

	if (b->len >= 4)
		xid = ntohl(*(uint32_t *)b->data);
	r.message = (char *)why;
	r.ticket = "";
	wire_stream_init(&st, fd);
	if (!wire_encode_reply(&out, xid, WIRE_SUCCESS, (xdrproc_t)xdr_hello_res, &r))
		wire_send_record(&st, &out);
	wire_buf_free(&out);
}

static int hand_over(struct server *s, int fd, const struct wire_buf *b)
{
	struct pool_worker w;
	uint32_t len = (uint32_t)b->len;
	int rc = -1;

	if (take_worker(s, &w))
		return -1;
	if (!wire_send_fd(w.control_fd, fd) && write(w.control_fd, &len, 4) == 4 &&
	    write(w.control_fd, b->data, len) == (ssize_t)len)
		rc = 0;
	close(w.control_fd);
	return rc;
}

static void *client_thread(void *arg)
{
	struct client_job *job = arg;
	struct timeval tv = { 5, 0 };
	struct wire_buf b = { 0 };
	hello_args h;
	char err[WIRE_ERRLEN];

	memset(&h, 0, sizeof(h));
	setsockopt(job->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (read_hello(job->fd, &b, &h, err)) {
		log_warn("refused connection from %s: %s", job->peer, err);
		goto out;
	}
	if (job->is_tcp && !token_equal(job->srv->token, h.token.token_val, h.token.token_len)) {
		log_warn("refused connection from %s (pid %llu on %s): %s", job->peer,
			 (unsigned long long)h.pid, h.host, h.token.token_len ? "wrong token" : "no token");
		refuse(job->fd, &b, h.token.token_len ? "wrong token" : "this server requires a token");
		goto out;
	}
	tv.tv_sec = 0;
	setsockopt(job->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (h.op == OP_REATTACH || h.op == OP_CHECKPOINT || h.op == OP_RELEASE || h.op == OP_CALLBACK) {
		if (!ticket_valid(h.ticket) || session_pass(job->srv->run_dir, h.ticket, job->fd, &b)) {
			log_warn("refused connection from %s: no session %.8s here", job->peer, h.ticket);
			refuse(job->fd, &b, "no session with that ticket on this server");
		}
	} else if (hand_over(job->srv, job->fd, &b)) {
		log_error("no worker available for %s", job->peer);
		refuse(job->fd, &b, "no worker available");
	}
out:
	xdr_free((xdrproc_t)xdr_hello_args, (char *)&h);
	wire_buf_free(&b);
	close(job->fd);
	free(job);
	return NULL;
}

static void describe_peer(int fd, const struct listener *l, char *out, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[64] = "?";

	if (l->addr.kind == WIRE_UNIX) {
		snprintf(out, len, "unix:%s", l->addr.path);
		return;
	}
	getpeername(fd, (struct sockaddr *)&ss, &sl);
	if (ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof(host));
	else if (ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof(host));
	snprintf(out, len, "tcp:%s", host);
}

static void accept_one(struct server *s, struct listener *l)
{
	struct client_job *job;
	pthread_t t;
	int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return;
	job = calloc(1, sizeof(*job));
	if (!job) {
		close(fd);
		return;
	}
	job->srv = s;
	job->fd = fd;
	job->is_tcp = l->addr.kind == WIRE_TCP;
	describe_peer(fd, l, job->peer, sizeof(job->peer));
	if (pthread_create(&t, NULL, client_thread, job)) {
		close(fd);
		free(job);
		return;
	}
	pthread_detach(t);
}

static int serve(struct server *s)
{
	struct pollfd pfd[MAX_LISTENERS];

	for (int i = 0; i < s->nlisteners; i++)
		pfd[i] = (struct pollfd){ .fd = s->listeners[i].fd, .events = POLLIN };
	for (;;) {
		if (poll(pfd, s->nlisteners, -1) < 0 && errno != EINTR)
			return 1;
		for (int i = 0; i < s->nlisteners; i++)
			if (pfd[i].revents & POLLIN)
				accept_one(s, &s->listeners[i]);
	}
}

/* Paused sessions listen here: private to the server's user. */
static int make_run_dir(struct server *s)
{
	if (!s->run_dir[0]) {
		snprintf(s->run_dir, sizeof(s->run_dir), "%s/cicada-run-XXXXXX",
			 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		if (!mkdtemp(s->run_dir)) {
			fprintf(stderr, "gpu-server: cannot create %s: %s\n", s->run_dir, strerror(errno));
			return -1;
		}
	} else if ((mkdir(s->run_dir, 0700) && errno != EEXIST) || chmod(s->run_dir, 0700)) {
		fprintf(stderr, "gpu-server: cannot use --run-dir %s: %s\n", s->run_dir, strerror(errno));
		return -1;
	}
	log_info("paused sessions live in %s", s->run_dir);
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: gpu-server --listen ADDR [--listen ADDR]... [--token-file FILE]\n"
		"                  [--workers N] [--refill-delay MS] [--cache-dir DIR] [--run-dir DIR]\n"
		"  ADDR is unix:/path or tcp:host:port (tcp:port binds 127.0.0.1).\n"
		"  TCP listeners require --token-file. CICADA_LOG=debug|info|warn|error.\n");
}

static int add_listener(struct server *s, const char *text, char *err)
{
	char buf[512];

	if (s->nlisteners == MAX_LISTENERS) {
		snprintf(err, WIRE_ERRLEN, "too many listeners");
		return -1;
	}
	if (!strncmp(text, "tcp:", 4) && !strchr(text + 4, ':')) {
		snprintf(buf, sizeof(buf), "tcp:127.0.0.1:%s", text + 4);
		text = buf;
	}
	return wire_parse_addr(text, &s->listeners[s->nlisteners++].addr, err);
}

static int parse_args(struct server *s, int argc, char **argv, int *worker_fd)
{
	static const struct option opts[] = {
		{ "listen", required_argument, 0, 'l' }, { "token-file", required_argument, 0, 't' },
		{ "workers", required_argument, 0, 'w' }, { "cache-dir", required_argument, 0, 'c' },
		{ "worker-fd", required_argument, 0, 'W' }, { "run-dir", required_argument, 0, 'r' },
		{ "refill-delay", required_argument, 0, 'D' }, { "help", no_argument, 0, 'h' }, { 0 } };
	char err[WIRE_ERRLEN];
	int c, has_tcp = 0;

	snprintf(s->cache_dir, sizeof(s->cache_dir), "/var/tmp/cicada-modules");
	while ((c = getopt_long(argc, argv, "l:t:w:c:h", opts, NULL)) != -1) {
		switch (c) {
		case 'l': if (add_listener(s, optarg, err)) goto bad; break;
		case 't': if (token_load(optarg, s->token, sizeof(s->token), err)) goto bad; break;
		case 'w': s->pool_size = atoi(optarg); break;
		case 'D': s->refill_delay_ms = atoi(optarg); break;
		case 'c': snprintf(s->cache_dir, sizeof(s->cache_dir), "%s", optarg); break;
		case 'W': *worker_fd = atoi(optarg); break;
		case 'r': snprintf(s->run_dir, sizeof(s->run_dir), "%s", optarg); break;
		default: usage(); return -1;
		}
	}
	if (*worker_fd >= 0)
		return 0;
	if (s->refill_delay_ms < 0 || s->refill_delay_ms > 3600000) {
		snprintf(err, sizeof(err), "--refill-delay must be between 0 and 3600000 ms");
		goto bad;
	}
	if (s->pool_size < 1 || s->pool_size > MAX_POOL) {
		snprintf(err, sizeof(err), "--workers must be between 1 and %d", MAX_POOL);
		goto bad;
	}
	for (int i = 0; i < s->nlisteners; i++)
		has_tcp |= s->listeners[i].addr.kind == WIRE_TCP;
	if (!s->nlisteners) {
		usage();
		return -1;
	}
	if (has_tcp && !s->token[0]) {
		snprintf(err, sizeof(err), "a TCP listener requires --token-file");
		goto bad;
	}
	return 0;
bad:
	fprintf(stderr, "gpu-server: %s\n", err);
	return -1;
}

int main(int argc, char **argv)
{
	char err[WIRE_ERRLEN], text[300];
	pthread_t refill;
	int worker_fd = -1;

	signal(SIGPIPE, SIG_IGN);
	log_init("gpu-server");
	if (!getenv("CICADA_LOG"))
		setenv("CICADA_LOG", "info", 0), log_init("gpu-server");
	if (parse_args(&srv, argc, argv, &worker_fd))
		return 2;
	if (worker_fd >= 0) {
		log_init("gpu-worker");
		return worker_main(worker_fd, srv.cache_dir, srv.run_dir);
	}
	if (make_run_dir(&srv))
		return 1;
	signal(SIGCHLD, SIG_IGN);
	if (mkdir(srv.cache_dir, 0700) && errno != EEXIST)
		log_warn("cannot create module cache %s: %s", srv.cache_dir, strerror(errno));
	for (int i = 0; i < srv.nlisteners; i++) {
		srv.listeners[i].fd = wire_listen(&srv.listeners[i].addr, err);
		if (srv.listeners[i].fd < 0) {
			fprintf(stderr, "gpu-server: %s\n", err);
			return 1;
		}
		if (srv.listeners[i].addr.kind == WIRE_UNIX)
			chmod(srv.listeners[i].addr.path, 0660);
		wire_format_addr(&srv.listeners[i].addr, text, sizeof(text));
		log_info("listening on %s", text);
	}
	fill_pool(&srv);
	if (pthread_create(&refill, NULL, refill_loop, &srv)) {
		log_error("cannot start the pool's refill thread: %s", strerror(errno));
		return 1;
	}
	return serve(&srv);
}

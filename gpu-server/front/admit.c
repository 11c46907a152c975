/*
 * admit.c: the gpu-server's front door. One thread reads the hello of
 * every new connection with poll, never a thread per connection; each
 * connection has one deadline for its whole hello (--hello-timeout), and
 * at most --max-pending wait at once (more are closed at once). A whole
 * hello is checked, protocol version and token, before any worker is
 * taken. A new session (a client, or a restore) is admitted under
 * --max-sessions and --max-sessions-per-client, a client being a unix
 * peer's uid or a TCP peer's address; past the total cap it waits in a
 * queue of --queue places for at most --queue-timeout, and past that, or
 * past its own cap, it is told "server busy" at once. A session lasts as
 * long as its worker: the pool's reaper frees the place.
 *
 * A request for a paused session (a reattach, a checkpoint, a release, a
 * callback channel) counts too: at most --max-requests-per-client of a
 * client's, and --max-requests in all, are handed on at once; past that
 * it is told "server busy". Hellos not yet whole are shared out too:
 * once PENDING_PER_CLIENT of a client's wait (a handshake counts), its
 * new connections take no place of the last quarter of --max-pending,
 * which stays for the others.
 *
 * Handing a connection over can wait (for a worker's CUDA start), so a
 * few handover threads do it; requests for paused sessions have threads
 * of their own, so that they can never hold up a new session, and each
 * such handover is bounded (handoff.c: a busy worker is refused). A TLS
 * listener's connections have their handshake in a thread each, then come
 * in through their relay (wire/tls.c) as TCP peers; the worker is told
 * that such a connection is remote, since its socket's credentials are
 * the server's own. With --tls-client-ca a TLS client's name (its
 * certificate's CN, verified by the handshake) travels with its
 * connection, as a --token-dir token's name does, to the tenant rules
 * (pool.c, sm_share.c) and to the worker (handoff.c, session.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "front.h"

#define HANDOVER_THREADS 16
#define CONTROL_THREADS 8
#define PENDING_PER_CLIENT 16
#define IDENT_LEN 64

enum { C_HELLO, C_QUEUED };

struct conn {
	int fd, is_tcp, state;
	int relayed;                         /* a TLS relay's inner end (wire/tls.c) */
	uint64_t deadline_ns, seq;
	char peer[80], ident[IDENT_LEN];
	unsigned char mark[4];               /* record marking: this fragment's header */
	uint8_t nonce[WIRE_NONCE_LEN];       /* the challenge it was sent */
	char tag[TOKEN_NAME_MAX];            /* the --token-dir token it proved, or "" */
	uint64_t tag_print;
	char tls_name[WIRE_TLS_NAME_MAX];    /* its verified TLS client name, or "" */
	size_t mark_got, frag_len, frag_got;
	int last_frag;
	struct wire_buf b;
	hello_args h;
};

struct session {
	pid_t pid;                           /* 0: admitted, no worker yet */
	char ident[IDENT_LEN];
};

struct job {
	struct job *next;
	int fd, slot;                        /* slot < 0: pass to a paused worker */
	int relayed;
	char ident[IDENT_LEN];
	hello_op op;
	unsigned gpus;                       /* GPUs the client asked for (0: default) */
	pid_t bound;                         /* the worker bound to the slot */
	char ticket[CICADA_TICKET_LEN + 1], peer[80];
	char tag[TOKEN_NAME_MAX];            /* as the conn's */
	uint64_t tag_print;
	char tls_name[WIRE_TLS_NAME_MAX];    /* as the conn's */
	struct wire_buf b;
};

static struct {
	const struct admit_config *cfg;
	struct conn **conns;
	int nconns, cap_conns, npending, nqueued;
	uint64_t seq;
	struct session *sessions;            /* cfg->max_sessions places */
	int nsessions;
	struct job *jobs[2], **jobs_tail[2];   /* new sessions, requests for paused ones */
	struct control *controls;            /* requests handed on now, by client */
	int ncontrols;
	struct tls_conn *tls_ready;          /* TLS connections past their handshake */
	int tls_shaking;                     /* TLS handshakes running (count as pending) */
	char (*shaking)[IDENT_LEN];          /* whose they are (max_pending places) */
	pthread_mutex_t lock;
	pthread_cond_t more_jobs[2];
	int wake[2];
} adm = { .lock = PTHREAD_MUTEX_INITIALIZER, .more_jobs = { PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER } };

enum { Q_SESSION, Q_CONTROL };

/* A client's requests for paused sessions being handed on. */
struct control {
	char ident[IDENT_LEN];
	int n;
};

static void wake_loop(void)
{
	char one = 1;

	if (write(adm.wake[1], &one, 1) < 0 && errno != EAGAIN)
		log_debug("cannot wake the front door: %s", strerror(errno));
}

/* --- sessions ---------------------------------------------------------- */

static int sessions_of(const char *ident)
{
	int n = 0;

	for (int i = 0; i < adm.cfg->max_sessions; i++)
		n += adm.sessions[i].ident[0] && !strcmp(adm.sessions[i].ident, ident);
	return n;
}

static int session_take(const char *ident)
{
	for (int i = 0; i < adm.cfg->max_sessions; i++)
		if (!adm.sessions[i].ident[0]) {
			adm.sessions[i].pid = 0;
			snprintf(adm.sessions[i].ident, IDENT_LEN, "%s", ident);
			adm.nsessions++;
			return i;
		}
	return -1;
}

static void session_free(int slot)
{
	adm.sessions[slot].ident[0] = 0;
	adm.sessions[slot].pid = 0;
	adm.nsessions--;
}

/* The pool's reaper: a worker ended, and with it its session. */
void admit_worker_ended(pid_t pid)
{
	tokens_untag(pid);
	pthread_mutex_lock(&adm.lock);
	for (int i = 0; adm.sessions && i < adm.cfg->max_sessions; i++)
		if (adm.sessions[i].ident[0] && adm.sessions[i].pid == pid) {
			log_debug("session of %s ended (worker %d)", adm.sessions[i].ident, (int)pid);
			session_free(i);
			break;
		}
	pthread_mutex_unlock(&adm.lock);
	wake_loop();
}

static void session_bound(pid_t pid, void *arg)
{
	struct job *j = arg;

	tokens_tag(pid, j->tag, j->tag_print);
	pthread_mutex_lock(&adm.lock);
	adm.sessions[j->slot].pid = j->bound = pid;
	pthread_mutex_unlock(&adm.lock);
}

/* --- handover threads -------------------------------------------------- */

/* An answer to a hello that needs no worker: a refusal, or (migrate_in.c)
 * a migration's progress; msg is cut to the wire's limit. */
static void refuse(int fd, const struct wire_buf *b, CUresult err, const char *why)
{
	hello_reply(fd, b->len >= 4 ? ntohl(*(uint32_t *)b->data) : 0, err, 0, why);
}

/* A migration's restore naming the worker that preloaded its device
 * memory (migrate_in.c) goes to that worker; 1 if it went. */
static int restore_preloaded(struct job *j)
{
	pid_t pid = migrate_preloader(j->ticket);

	if (pid <= 0)
		return 0;
	session_bound(pid, j);
	if (!handoff_pass(adm.cfg->run_dir, j->ticket, j->fd, j->relayed ? j->ident : NULL, &j->b, NULL))
		return 1;
	log_warn("the worker that preloaded session %.8s is gone; restoring into a fresh one", j->ticket);
	pthread_mutex_lock(&adm.lock);
	adm.sessions[j->slot].pid = j->bound = 0;
	pthread_mutex_unlock(&adm.lock);
	return 0;
}

static void run_job(struct job *j)
{
	if (j->slot < 0) {
		pid_t worker = 0;

		if (handoff_pass(adm.cfg->run_dir, j->ticket, j->fd, j->relayed ? j->ident : NULL, &j->b, &worker)) {
			log_warn("refused connection from %s: no session %.8s here, or it is busy", j->peer, j->ticket);
			refuse(j->fd, &j->b, CUDA_ERROR_NOT_PERMITTED,
			       "no session with that ticket on this server, or it is busy with another request");
		} else {
			tokens_tag(worker, j->tag, j->tag_print);   /* (a reattach with a job's token) */
		}
		return;
	}
	if (j->op == OP_RESTORE && j->ticket[0] && restore_preloaded(j)) {
		;                            /* into the worker that holds its memory */
	} else {
		char why[WIRE_ERRLEN] = "";
		pid_t pid = pool_hand_over(j->fd, j->relayed ? j->ident : NULL, j->tag, j->tls_name, &j->b, j->gpus,
					   j->op == OP_RESTORE, session_bound, j, why, sizeof(why));
		if (pid == -2) {
			log_warn("refused %s: %s", j->peer, why);
			refuse(j->fd, &j->b, CUDA_ERROR_OUT_OF_MEMORY, why);
		} else if (pid < 0) {
			log_error("no worker available for %s", j->peer);
			refuse(j->fd, &j->b, CUDA_ERROR_NO_DEVICE, "no worker available");
		}
	}
	/* A place nobody else will free: no worker was bound to it, or its
	 * worker was reaped before it was bound (the reaper did not know the
	 * pid then). A worker not reaped yet still answers kill(0). */
	pthread_mutex_lock(&adm.lock);
	if (!j->bound || (adm.sessions[j->slot].pid == j->bound && kill(j->bound, 0) && errno == ESRCH))
		session_free(j->slot);
	pthread_mutex_unlock(&adm.lock);
	wake_loop();
}

/* --- requests for paused sessions: how many each client has in hand --- */

static struct control *control_of(const char *ident)
{
	for (int i = 0; i < adm.ncontrols; i++)
		if (!strcmp(adm.controls[i].ident, ident))
			return &adm.controls[i];
	return NULL;
}

static int controls_total(void)
{
	int n = 0;

	for (int i = 0; i < adm.ncontrols; i++)
		n += adm.controls[i].n;
	return n;
}

/* One more of ident's requests in hand: 0, or -1 past a cap (adm.lock). */
static int control_take(const char *ident)
{
	struct control *c = control_of(ident);

	if (controls_total() >= adm.cfg->max_requests || (c && c->n >= adm.cfg->max_requests_per_client))
		return -1;
	if (!c) {
		c = &adm.controls[adm.ncontrols++];      /* (fewer than max_requests have any) */
		snprintf(c->ident, IDENT_LEN, "%s", ident);
		c->n = 0;
	}
	c->n++;
	return 0;
}

static void control_put(const char *ident)
{
	struct control *c = control_of(ident);

	if (c && !--c->n)
		*c = adm.controls[--adm.ncontrols];
}

static void *handover_loop(void *arg)
{
	int q = (int)(intptr_t)arg;

	for (;;) {
		struct job *j;

		pthread_mutex_lock(&adm.lock);
		while (!adm.jobs[q])
			pthread_cond_wait(&adm.more_jobs[q], &adm.lock);
		j = adm.jobs[q];
		adm.jobs[q] = j->next;
		if (!adm.jobs[q])
			adm.jobs_tail[q] = &adm.jobs[q];
		pthread_mutex_unlock(&adm.lock);
		run_job(j);
		close(j->fd);
		if (q == Q_CONTROL) {
			pthread_mutex_lock(&adm.lock);
			control_put(j->ident);
			pthread_mutex_unlock(&adm.lock);
		}
		wire_buf_free(&j->b);
		free(j);
	}
	return NULL;
}

/* Gives c's connection to a handover thread (slot < 0: to the paused
 * worker of its ticket); c is consumed. Called with adm.lock held. */
static void queue_job(struct conn *c, int slot)
{
	struct job *j = calloc(1, sizeof(*j));
	int q = slot < 0 ? Q_CONTROL : Q_SESSION;

	if (!j) {
		close(c->fd);
		wire_buf_free(&c->b);
		if (slot >= 0)
			session_free(slot);
		else
			control_put(c->ident);
		return;
	}
	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) & ~O_NONBLOCK);
	j->fd = c->fd;
	j->relayed = c->relayed;
	snprintf(j->ident, sizeof(j->ident), "%s", c->ident);
	j->slot = slot;
	j->op = c->h.op;
	j->gpus = c->h.gpus;
	j->b = c->b;
	memcpy(j->tag, c->tag, sizeof(j->tag));
	j->tag_print = c->tag_print;
	memcpy(j->tls_name, c->tls_name, sizeof(j->tls_name));
	snprintf(j->peer, sizeof(j->peer), "%s", c->peer);
	if (c->h.ticket)
		snprintf(j->ticket, sizeof(j->ticket), "%s", c->h.ticket);
	*adm.jobs_tail[q] = j;
	adm.jobs_tail[q] = &j->next;
	pthread_cond_signal(&adm.more_jobs[q]);
}

/* --- connections ------------------------------------------------------- */

static void conn_drop(int i)
{
	struct conn *c = adm.conns[i];

	if (c->state == C_QUEUED)
		adm.nqueued--;
	else
		adm.npending--;
	xdr_free((xdrproc_t)xdr_hello_args, (char *)&c->h);
	if (c->fd >= 0)
		close(c->fd);
	wire_buf_free(&c->b);
	free(c);
	adm.conns[i] = adm.conns[--adm.nconns];
}

static void conn_refuse(int i, CUresult err, const char *why)
{
	refuse(adm.conns[i]->fd, &adm.conns[i]->b, err, why);
	conn_drop(i);
}

/* Hands conn i on (consumed); slot as for queue_job. */
static void conn_hand(int i, int slot)
{
	struct conn *c = adm.conns[i];

	queue_job(c, slot);
	c->fd = -1;
	c->b = (struct wire_buf){ 0 };
	conn_drop(i);
}

static void describe_peer(int fd, const struct wire_addr *addr, struct conn *c)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct ucred cred;
	char host[64] = "?";

	if (addr->kind == WIRE_UNIX) {
		snprintf(c->peer, sizeof(c->peer), "unix:%.70s", addr->path);
		if (peer_cred(fd, &cred))
			cred.uid = (uid_t)-1;
		snprintf(c->ident, IDENT_LEN, "uid %u", (unsigned)cred.uid);
		return;
	}
	if (!getpeername(fd, (struct sockaddr *)&ss, &sl)) {
		if (ss.ss_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof(host));
		else if (ss.ss_family == AF_INET6)
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof(host));
	}
	snprintf(c->peer, sizeof(c->peer), "%s:%s", addr->tls ? "tls" : "tcp", host);
	snprintf(c->ident, IDENT_LEN, "%s", host);
}

/* How many of ident's connections wait for their hello or handshake. */
static int pending_of(const char *ident)
{
	int n = 0;

	for (int i = 0; i < adm.nconns; i++)
		n += adm.conns[i]->state == C_HELLO && !strcmp(adm.conns[i]->ident, ident);
	for (int i = 0; i < adm.cfg->max_pending; i++)
		n += adm.shaking[i][0] && !strcmp(adm.shaking[i], ident);
	return n;
}

/* Whether ident may have one more connection wait for its hello: while
 * it has few, or while the others keep a quarter of the places. */
static int pending_allowed(const char *ident)
{
	int max = adm.cfg->max_pending;

	return pending_of(ident) < PENDING_PER_CLIENT || adm.npending + adm.tls_shaking < max - max / 4;
}

/* A new connection (its hello to come), who it is from (its peer, ident
 * and TLS name); fd is consumed. */
static void admit_conn(int fd, int is_tcp, int relayed, const struct conn *who)
{
	const char *peer = who->peer, *ident = who->ident;
	struct conn *c;

	if (!pending_allowed(ident)) {
		log_warn("%s (%s) has %d connections waiting for their hello, and the last places are kept for "
			 "others; closed a new one", peer, ident, pending_of(ident));
		close(fd);
		return;
	}
	if (adm.npending >= adm.cfg->max_pending || adm.nconns == adm.cap_conns || !(c = calloc(1, sizeof(*c)))) {
		log_warn("too many connections waiting for their hello (%d, --max-pending); closed a new one",
			 adm.npending);
		close(fd);
		return;
	}
	if (wire_send_challenge(fd, c->nonce)) {
		close(fd);
		free(c);
		return;
	}
	c->fd = fd;
	c->is_tcp = is_tcp;
	c->relayed = relayed;
	c->state = C_HELLO;
	c->deadline_ns = wire_now_ns() + (uint64_t)adm.cfg->hello_timeout_ms * 1000000u;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	snprintf(c->ident, IDENT_LEN, "%s", ident);
	memcpy(c->tls_name, who->tls_name, sizeof(c->tls_name));
	adm.conns[adm.nconns++] = c;
	adm.npending++;
}

/* --- TLS: each connection's handshake runs in a thread of its own, then
 * its relay's inner end joins the others here, as a TCP peer. */
struct tls_conn {
	struct tls_conn *next;
	int fd, slot;                        /* slot: its place in adm.shaking */
	struct conn who;                     /* peer, ident and tls_name only */
};

/* (the handshake's thread; adm.tls_shaking counted it, under adm.lock) */
static void *tls_accept(void *arg)
{
	struct tls_conn *t = arg;
	char err[WIRE_ERRLEN];

	t->fd = wire_tls_server(t->fd, adm.cfg->hello_timeout_ms, t->who.tls_name, err);
	if (t->fd >= 0 && t->who.tls_name[0])
		log_debug("TLS client %s at %s", t->who.tls_name, t->who.peer);
	pthread_mutex_lock(&adm.lock);
	adm.tls_shaking--;
	adm.shaking[t->slot][0] = 0;
	if (t->fd >= 0) {
		t->next = adm.tls_ready;
		adm.tls_ready = t;
	}
	pthread_mutex_unlock(&adm.lock);
	if (t->fd < 0) {
		log_info("refused connection from %s: %s", t->who.peer, err);
		free(t);
		return NULL;
	}
	wake_loop();
	return NULL;
}

/* With adm.lock held. */
static void tls_take_ready(void)
{
	while (adm.tls_ready) {
		struct tls_conn *t = adm.tls_ready;

		adm.tls_ready = t->next;
		admit_conn(t->fd, 1, 1, &t->who);
		free(t);
	}
}

static void accept_one(const struct listener *l)
{
	struct conn who = { 0 };
	int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	describe_peer(fd, &l->addr, &who);
	if (l->addr.tls) {
		struct tls_conn *t = NULL;
		pthread_attr_t a;
		pthread_t th;
		int ok, slot = 0;

		/* A handshake is a hello not yet read: the same caps. */
		while (slot < adm.cfg->max_pending && adm.shaking[slot][0])
			slot++;
		if (adm.npending + adm.tls_shaking >= adm.cfg->max_pending || slot == adm.cfg->max_pending ||
		    !pending_allowed(who.ident) || !(t = calloc(1, sizeof(*t)))) {
			log_warn("too many connections waiting for their hello (--max-pending, or %s's share); "
				 "closed a new TLS one", who.ident);
			close(fd);
			return;
		}
		t->fd = fd;
		t->slot = slot;
		t->who = who;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		ok = !pthread_create(&th, &a, tls_accept, t);
		pthread_attr_destroy(&a);
		if (!ok) {
			close(fd);
			free(t);
			return;
		}
		adm.tls_shaking++;
		snprintf(adm.shaking[slot], IDENT_LEN, "%s", who.ident);
		return;
	}
	admit_conn(fd, l->addr.kind == WIRE_TCP, 0, &who);
}

/* Reads what has come of c's hello, never past its record (a shared
 * memory segment's descriptor may follow it). Returns 1 when the record
 * is whole, 0 for more to come, -1 when the connection is to be dropped
 * (err says why). */
static int read_more(struct conn *c, char *err)
{
	for (;;) {
		ssize_t n;

		if (c->mark_got < 4) {
			n = read(c->fd, c->mark + c->mark_got, 4 - c->mark_got);
		} else {
			n = c->frag_len - c->frag_got ? read(c->fd, c->b.data + c->b.len, c->frag_len - c->frag_got) : 0;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (n < 0 || (n == 0 && (c->mark_got < 4 || c->frag_len > c->frag_got))) {
			wire_fail(err, "closed before its hello was whole");
			return -1;
		}
		if (c->mark_got < 4) {
			uint32_t mark;

			c->mark_got += (size_t)n;
			if (c->mark_got < 4)
				continue;
			memcpy(&mark, c->mark, 4);
			mark = ntohl(mark);
			c->last_frag = !!(mark & 0x80000000u);
			c->frag_len = mark & 0x7fffffffu;
			c->frag_got = 0;
			if (c->b.len + c->frag_len > 65536 || wire_buf_reserve(&c->b, c->b.len + c->frag_len + 8)) {
				wire_fail(err, "hello too large");
				return -1;
			}
		} else {
			c->frag_got += (size_t)n;
			c->b.len += (size_t)n;
		}
		if (c->mark_got == 4 && c->frag_got == c->frag_len) {
			if (c->last_frag)
				return 1;
			c->mark_got = 0;
		}
	}
}

static int is_pass_op(hello_op op)
{
	return op == OP_REATTACH || op == OP_CHECKPOINT || op == OP_RELEASE || op == OP_CALLBACK;
}

/* Admits a new session for conn i, queues it, or refuses it. */
static void admit_new(int i)
{
	struct conn *c = adm.conns[i];
	const struct admit_config *cfg = adm.cfg;
	char why[160];
	int mine = sessions_of(c->ident), slot;

	if (mine >= cfg->max_per_client && cfg->max_per_client < cfg->max_sessions) {
		snprintf(why, sizeof(why), "server busy: this client already holds %d sessions, its most here (--max-sessions-per-client)", mine);
		log_warn("refused a session to %s (%s): %s", c->peer, c->ident, why);
		conn_refuse(i, CUDA_ERROR_DEVICE_UNAVAILABLE, why);
		return;
	}
	if (adm.nsessions < cfg->max_sessions && (slot = session_take(c->ident)) >= 0) {
		if (c->state == C_QUEUED)
			adm.nqueued--, adm.npending++, c->state = C_HELLO;
		conn_hand(i, slot);
		return;
	}
	if (c->state == C_QUEUED)
		return;
	if (adm.nqueued >= cfg->queue_len) {
		snprintf(why, sizeof(why), "server busy: %d sessions running and %d waiting", adm.nsessions,
			 adm.nqueued);
		log_warn("refused a session to %s: %s", c->peer, why);
		conn_refuse(i, CUDA_ERROR_DEVICE_UNAVAILABLE, why);
		return;
	}
	c->state = C_QUEUED;
	c->seq = ++adm.seq;
	c->deadline_ns = wire_now_ns() + (uint64_t)cfg->queue_timeout_ms * 1000000u;
	adm.npending--;
	adm.nqueued++;
	log_info("%s waits for a session (%d running, %d waiting)", c->peer, adm.nsessions, adm.nqueued);
}

static int decode_hello(struct conn *c)
{
	struct wire_call_hdr hdr;
	char err[WIRE_ERRLEN];
	XDR x;
	int ok;

	memset(&c->h, 0, sizeof(c->h));
	if (wire_decode_call(&c->b, &hdr, &x, err))
		return -1;
	ok = hdr.proc == P_hello && xdr_hello_args(&x, &c->h);
	xdr_destroy(&x);
	return ok ? 0 : -1;
}

/* A migrating process (OP_MIGRATE): its images follow the hello. Only
 * with --accept-migrations; over TCP only with the migration token (never
 * the tenants'), over unix only from root or our user. */
static void migrate_accept(int i)
{
	struct conn *c = adm.conns[i];
	char why[WIRE_ERRLEN];
	uint32_t xid = c->b.len >= 4 ? ntohl(*(uint32_t *)c->b.data) : 0;
	const char *mt = adm.cfg->migration_token;

	if (!adm.cfg->migrate) {
		log_warn("refused a migration from %s: this server does not accept them", c->peer);
		conn_refuse(i, CUDA_ERROR_NOT_PERMITTED, "this server does not accept migrations (--accept-migrations)");
	} else if (c->is_tcp &&
		   (!mt || !wire_proof_ok(mt, strlen(mt), c->nonce, c->h.token.token_val, c->h.token.token_len))) {
		/* a tenant's token never restores a process as root here */
		log_warn("refused a migration from %s: %s", c->peer,
			 mt ? "wrong migration token" : "no --migration-token-file, so none over TCP");
		conn_refuse(i, CUDA_ERROR_NOT_PERMITTED, mt ? "wrong migration token" :
			    "this server takes migrations over TCP only with --migration-token-file");
	} else if (!c->is_tcp && !peer_privileged(c->fd)) {
		conn_refuse(i, CUDA_ERROR_NOT_PERMITTED, "only root or the server's user may migrate a process here");
	} else if (c->h.ticket && c->h.ticket[0]) {         /* a further stream of one under way */
		if (migrate_in_join(c->h.ticket, c->h.snapshot, c->fd, xid, why, sizeof(why))) {
			log_warn("refused a migration stream from %s: %s", c->peer, why);
			conn_refuse(i, CUDA_ERROR_NOT_PERMITTED, why);
		} else {
			c->fd = -1;
			conn_drop(i);
		}
	} else if (migrate_in_start(adm.cfg->migrate, c->fd, xid, (pid_t)c->h.pid, c->peer, c->h.devices,
				    c->h.snapshot && !strcmp(c->h.snapshot, "gpu-only"), why, sizeof(why))) {
		conn_refuse(i, CUDA_ERROR_DEVICE_UNAVAILABLE, why);
	} else {
		log_info("migration coming in from %s (pid %llu on %s)", c->peer, (unsigned long long)c->h.pid,
			 c->h.host ? c->h.host : "?");
		c->fd = -1;
		conn_drop(i);
	}
}

static int unix_peer_allowed(struct conn *c)
{
	struct ucred cred;

	return !peer_cred(c->fd, &cred) && allow_peer(adm.cfg->allow, cred.uid, cred.gid);
}

/* Whether a TCP client proved the server's token or one of --token-dir's
 * (which then names its session); a unix client's proof of one of those
 * names its session too. */
static int tenant_proved(struct conn *c)
{
	const char *t = adm.cfg->token;

	if (c->is_tcp && wire_proof_ok(t, strlen(t), c->nonce, c->h.token.token_val, c->h.token.token_len))
		return 1;
	return tokens_match(c->nonce, c->h.token.token_val, c->h.token.token_len, c->tag, &c->tag_print);
}

/* A whole hello on conn i: checked here, before any worker is taken. */
static void on_hello(int i)
{
	struct conn *c = adm.conns[i];
	char why[WIRE_ERRLEN];

	if (decode_hello(c)) {
		log_warn("refused connection from %s: first message is not a valid hello", c->peer);
		conn_drop(i);
		return;
	}
	if (!c->is_tcp && c->h.op != OP_MIGRATE)
		tenant_proved(c);                /* (a unix client needs no token; a job's names its session) */
	if (c->h.proto_version != CICADA_PROTO_VERSION) {
		snprintf(why, sizeof(why), "protocol version %u is not supported (server speaks %u)",
			 c->h.proto_version, CICADA_PROTO_VERSION);
		log_warn("refused connection from %s: %s", c->peer, why);
		conn_refuse(i, CUDA_ERROR_NOT_SUPPORTED, why);
	} else if (c->is_tcp && c->h.op == OP_MIGRATE) {
		migrate_accept(i);               /* its own token */
	} else if (c->is_tcp && !tenant_proved(c)) {
		log_warn("refused connection from %s (pid %llu on %s): %s", c->peer, (unsigned long long)c->h.pid,
			 c->h.host ? c->h.host : "?", c->h.token.token_len ? "wrong token" : "no token");
		conn_refuse(i, CUDA_ERROR_NOT_PERMITTED,
			    c->h.token.token_len ? "wrong token" : "this server requires a token");
	} else if (!c->is_tcp && !unix_peer_allowed(c)) {
		log_warn("refused connection from %s (%s): not on the allow list", c->peer, c->ident);
		conn_refuse(i, CUDA_ERROR_NOT_PERMITTED, "this user is not allowed on this server (--allow-users, --allow-groups)");
	} else if (is_pass_op(c->h.op)) {
		if (!ticket_valid(c->h.ticket)) {
			conn_refuse(i, CUDA_ERROR_NOT_PERMITTED, "no session with that ticket on this server");
		} else if (control_take(c->ident)) {
			log_warn("refused a request from %s (%s): too many in hand (--max-requests-per-client %d, "
				 "--max-requests %d)", c->peer, c->ident, adm.cfg->max_requests_per_client,
				 adm.cfg->max_requests);
			conn_refuse(i, CUDA_ERROR_DEVICE_UNAVAILABLE, "server busy: too many requests in hand");
		} else {
			conn_hand(i, -1);
		}
	} else if (c->h.op == OP_CONNECT || c->h.op == OP_RESTORE) {
		admit_new(i);
	} else if (c->h.op == OP_MIGRATE) {
		migrate_accept(i);
	} else {
		conn_refuse(i, CUDA_ERROR_INVALID_VALUE, "unknown request");
	}
}

/* Queued connections, oldest first, as places free up. */
static void dequeue(void)
{
	for (;;) {
		int best = -1;

		if (adm.nsessions >= adm.cfg->max_sessions)
			return;
		for (int i = 0; i < adm.nconns; i++)
			if (adm.conns[i]->state == C_QUEUED && (best < 0 || adm.conns[i]->seq < adm.conns[best]->seq))
				best = i;
		if (best < 0)
			return;
		admit_new(best);
	}
}

/* Connections past their deadline: a hello not whole, or a queue wait. */
static int expire(uint64_t now)
{
	int next_ms = -1;

	for (int i = 0; i < adm.nconns;) {
		struct conn *c = adm.conns[i];
		int64_t left = (int64_t)(c->deadline_ns - now);

		if (left > 0) {
			int ms = (int)(left / 1000000) + 1;
			next_ms = next_ms < 0 || ms < next_ms ? ms : next_ms;
			i++;
		} else if (c->state == C_HELLO) {
			log_warn("refused connection from %s: no whole hello within %d ms", c->peer,
				 adm.cfg->hello_timeout_ms);
			conn_drop(i);
		} else {
			log_warn("refused a session to %s: server busy, waited %d ms", c->peer, adm.cfg->queue_timeout_ms);
			conn_refuse(i, CUDA_ERROR_DEVICE_UNAVAILABLE, "server busy: no session free in time");
		}
	}
	return next_ms;
}

static void poll_conns(struct pollfd *p, int n)
{
	char err[WIRE_ERRLEN];

	/* Backwards: dropping conn i moves the last one into its place. */
	for (int i = n - 1; i >= 0; i--) {
		struct conn *c = adm.conns[i];
		int r;

		if (!p[i].revents)
			continue;
		if (c->state == C_QUEUED) {
			if (p[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
				log_info("%s left the queue", c->peer);
				conn_drop(i);
			}
			continue;
		}
		r = read_more(c, err);
		if (r < 0) {
			log_warn("refused connection from %s: %s", c->peer, err);
			conn_drop(i);
		} else if (r > 0) {
			on_hello(i);
		}
	}
}

int admit_serve(const struct admit_config *cfg, const struct listener *ls, int nls)
{
	int cap = cfg->max_pending + cfg->queue_len, nfds;
	struct pollfd *p = calloc((size_t)cap + (size_t)nls + 1, sizeof(*p));
	pthread_t t;

	adm.cfg = cfg;
	adm.cap_conns = cap;
	adm.conns = calloc((size_t)cap, sizeof(*adm.conns));
	adm.sessions = calloc((size_t)cfg->max_sessions, sizeof(*adm.sessions));
	adm.jobs_tail[Q_SESSION] = &adm.jobs[Q_SESSION];
	adm.jobs_tail[Q_CONTROL] = &adm.jobs[Q_CONTROL];
	adm.controls = calloc((size_t)cfg->max_requests, sizeof(*adm.controls));
	adm.shaking = calloc((size_t)cfg->max_pending, sizeof(*adm.shaking));
	if (!p || !adm.conns || !adm.sessions || !adm.controls || !adm.shaking ||
	    pipe2(adm.wake, O_CLOEXEC | O_NONBLOCK))
		return -1;
	for (int i = 0; i < HANDOVER_THREADS + CONTROL_THREADS; i++)
		if (pthread_create(&t, NULL, handover_loop, (void *)(intptr_t)(i < HANDOVER_THREADS ? Q_SESSION : Q_CONTROL)) ||
		    pthread_detach(t))
			return -1;
	for (;;) {
		int timeout, n;

		pthread_mutex_lock(&adm.lock);
		dequeue();
		timeout = expire(wire_now_ns());
		n = adm.nconns;
		for (int i = 0; i < n; i++)
			p[i] = (struct pollfd){ .fd = adm.conns[i]->fd,
						.events = adm.conns[i]->state == C_HELLO ? POLLIN : POLLRDHUP };
		pthread_mutex_unlock(&adm.lock);
		for (int i = 0; i < nls; i++)
			p[n + i] = (struct pollfd){ .fd = ls[i].fd, .events = POLLIN };
		p[n + nls] = (struct pollfd){ .fd = adm.wake[0], .events = POLLIN };
		nfds = n + nls + 1;
		if (poll(p, (nfds_t)nfds, timeout) < 0 && errno != EINTR)
			return -1;
		if (p[n + nls].revents) {
			char buf[64];
			while (read(adm.wake[0], buf, sizeof(buf)) > 0)
				;
		}
		pthread_mutex_lock(&adm.lock);
		poll_conns(p, n);
		tls_take_ready();
		for (int i = 0; i < nls; i++)
			if (p[n + i].revents & POLLIN)
				accept_one(&ls[i]);
		pthread_mutex_unlock(&adm.lock);
	}
}

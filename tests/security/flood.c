/*
 * flood: a hostile tenant's connections, many at once, for the admission
 * tests of tests/security (sec-jam-*, sec-flood). Each KIND:N opens N
 * connections of that kind, interleaved with the other kinds, as fast as
 * the server takes them, and holds what stays open until SECONDS pass:
 *
 *   idle        connects and never says hello
 *   partial     sends half of a hello, never the rest
 *   reattach, checkpoint, release, callback
 *               a whole hello for a ticket that names no session
 *   migrate     an OP_MIGRATE hello (no images follow)
 *   ckpt-nofd   OP_CHECKPOINT for the paused session's ticket, and never
 *               the directory's descriptor that must follow it
 *
 * -p PID first pauses PID's session through its control socket (as the
 * tenant may: it is its own program) and keeps it paused to the end;
 * "flood: paused ticket=T" says so. -k TICKET names a session paused by
 * another. -t TOKEN_FILE proves that token (TCP tenants hold it).
 *
 * A connection the server's backlog has no room for is dialled again
 * until it gets in (or the time is up). When every connection has been
 * dialled once it prints "flood: opened", and at the
 * end one line per kind: how many the server answered (its messages),
 * closed within a second without an answer, closed later, left open
 * without an answer, and how many could not connect. Exits 0 unless it
 * could not start.
 *
 * usage: flood ADDRESS SECONDS [-t TOKEN_FILE] [-p PID | -k TICKET] KIND:N...
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "raw.h"

enum kind { K_IDLE, K_PARTIAL, K_REATTACH, K_CHECKPOINT, K_RELEASE, K_CALLBACK, K_MIGRATE, K_CKPT_NOFD, K_N };
static const char *const kind_names[K_N] = { "idle", "partial", "reattach", "checkpoint", "release", "callback",
					     "migrate", "ckpt-nofd" };

enum state { S_REDIAL, S_CONNECTING, S_CHALLENGE, S_REPLY, S_HOLD, S_DONE };

struct conn {
	int fd;
	enum kind kind;
	enum state state;
	uint64_t opened;                     /* ns */
	size_t got;
	uint8_t buf[4 + 1024];               /* the challenge, then the answer */
};

#define MESSAGES 4
struct tally {
	int wanted, no_connect, answered, closed_at_once, closed_later, open_unanswered;
	char msg[MESSAGES][120];
	int msg_n[MESSAGES];
};

static struct tally tally[K_N];
static struct wire_addr addr;
static const char *token, *ticket;

static void count_message(struct tally *t, const char *m)
{
	for (int i = 0; i < MESSAGES; i++) {
		if (!t->msg[i][0])
			snprintf(t->msg[i], sizeof(t->msg[i]), "%s", m);
		if (!strncmp(t->msg[i], m, sizeof(t->msg[i]) - 1)) {
			t->msg_n[i]++;
			return;
		}
	}
}

/* A non-blocking connection to the server; -1 if it cannot be had now. */
static int dial_nonblocking(void)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai = NULL;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (addr.kind == WIRE_UNIX) {
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", addr.path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS)
			close(fd), fd = -1;
		return fd;
	}
	if (getaddrinfo(addr.host, addr.port, &hints, &ai) || !ai)
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) && errno != EINPROGRESS)
		close(fd), fd = -1;
	freeaddrinfo(ai);
	return fd;
}

static void bogus_ticket(char *out)
{
	uint8_t r[CICADA_TICKET_LEN / 2];

	if (getrandom(r, sizeof(r), 0) != sizeof(r))
		memset(r, 0x42, sizeof(r));
	for (size_t i = 0; i < sizeof(r); i++)
		sprintf(out + 2 * i, "%02x", r[i]);
}

/* The challenge is in: the kind's move. */
static void act(struct conn *c)
{
	static const hello_op ops[K_N] = { [K_REATTACH] = OP_REATTACH, [K_CHECKPOINT] = OP_CHECKPOINT,
					   [K_RELEASE] = OP_RELEASE, [K_CALLBACK] = OP_CALLBACK,
					   [K_MIGRATE] = OP_MIGRATE, [K_CKPT_NOFD] = OP_CHECKPOINT };
	char bogus[CICADA_TICKET_LEN + 1];
	struct raw_hello h = { .op = ops[c->kind], .token = addr.kind == WIRE_TCP ? token : NULL,
			       .ticket = bogus, .snapshot = "cicada-gpu" };
	struct wire_buf b = { 0 };
	size_t len;

	if (c->kind == K_IDLE) {
		c->state = S_HOLD;
		return;
	}
	bogus_ticket(bogus);
	if (c->kind == K_CKPT_NOFD)
		h.ticket = ticket;
	if (c->kind == K_MIGRATE)
		h.ticket = "";
	raw_encode_hello(&b, &h, c->buf + 8);
	len = b.len - 4;
	*(uint32_t *)b.data = htonl(0x80000000u | (uint32_t)len);
	if (c->kind == K_PARTIAL)
		len = b.len / 2;
	else
		len = b.len;
	if (send(c->fd, b.data, len, MSG_NOSIGNAL) != (ssize_t)len)
		c->state = S_HOLD;                   /* (its end shows at the next poll) */
	else
		c->state = c->kind == K_PARTIAL ? S_HOLD : S_REPLY;
	c->got = 0;
	wire_buf_free(&b);
}

/* The answer is whole in c->buf: counted. */
static void answered(struct conn *c, size_t len)
{
	struct wire_buf b = { .data = (char *)c->buf + 4, .len = len, .cap = len };
	char err[WIRE_ERRLEN];
	hello_res r;

	memset(&r, 0, sizeof(r));
	tally[c->kind].answered++;
	if (wire_decode_reply(&b, 1, (xdrproc_t)xdr_hello_res, &r, err))
		count_message(&tally[c->kind], "(a malformed answer)");
	else
		count_message(&tally[c->kind], r.err ? r.message : "(accepted)");
	xdr_free((xdrproc_t)xdr_hello_res, (char *)&r);
	c->state = S_HOLD;
}

static void closed(struct conn *c)
{
	if (c->state != S_HOLD || c->kind == K_IDLE || c->kind == K_PARTIAL) {
		if (wire_now_ns() - c->opened < 1000000000u)
			tally[c->kind].closed_at_once++;
		else
			tally[c->kind].closed_later++;
	}
	close(c->fd);
	c->state = S_DONE;
}

/* What poll said of c. */
static void step(struct conn *c, short ev)
{
	size_t want;
	ssize_t n;
	int e = 0;
	socklen_t el = sizeof(e);

	if (c->state == S_CONNECTING) {
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &el) || e) {
			tally[c->kind].no_connect++;
			close(c->fd);
			c->state = S_DONE;
			return;
		}
		c->state = S_CHALLENGE;
		if (!(ev & POLLIN))
			return;
	}
	want = c->state == S_CHALLENGE ? 8 + WIRE_NONCE_LEN : c->state == S_REPLY ? sizeof(c->buf) : 1;
	n = recv(c->fd, c->buf + (c->state == S_HOLD ? 0 : c->got), want - (c->state == S_HOLD ? 0 : c->got),
		 MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		closed(c);
		return;
	}
	if (c->state == S_HOLD)
		return;                          /* (nothing more is expected) */
	c->got += (size_t)n;
	if (c->state == S_CHALLENGE && c->got == 8 + WIRE_NONCE_LEN)
		act(c);
	else if (c->state == S_REPLY && c->got >= 4) {
		size_t len = ntohl(*(uint32_t *)c->buf) & 0x7fffffffu;

		if (len > sizeof(c->buf) - 4)
			closed(c);
		else if (c->got >= 4 + len)
			answered(c, len);
	}
}

static int pause_session(int pid, char *out)
{
	char line[WIRE_CTL_LINE_MAX];
	struct wire_ctl_where w;
	int fd = wire_ctl_dial(pid);

	if (fd < 0 || wire_ctl_send(fd, WIRE_CTL_PAUSE) || wire_read_line(fd, line, sizeof(line)) ||
	    wire_ctl_parse_paused(line, &w)) {
		fprintf(stderr, "flood: cannot pause process %d\n", pid);
		return -1;
	}
	snprintf(out, CICADA_TICKET_LEN + 1, "%s", w.ticket);
	printf("flood: paused ticket=%s\n", out);
	fflush(stdout);
	return fd;                           /* held open: the pause lasts */
}

static int parse_kinds(int argc, char **argv, int *total)
{
	*total = 0;
	for (int i = 0; i < argc; i++) {
		char *colon = strchr(argv[i], ':');
		int k = 0;

		while (colon && k < K_N && strncmp(argv[i], kind_names[k], (size_t)(colon - argv[i])))
			k++;
		if (!colon || k == K_N || strlen(kind_names[k]) != (size_t)(colon - argv[i]) || atoi(colon + 1) <= 0)
			return fprintf(stderr, "flood: unknown kind %s\n", argv[i]), -1;
		tally[k].wanted += atoi(colon + 1);
		*total += atoi(colon + 1);
	}
	return 0;
}

/* The kinds in turn, so that every kind is spread over the flood. */
static enum kind next_kind(int *left)
{
	static int k;

	for (int tries = 0; tries < K_N; tries++) {
		int cur = k;

		k = (k + 1) % K_N;
		if (left[cur]) {
			left[cur]--;
			return (enum kind)cur;
		}
	}
	return K_N;
}

static void report(void)
{
	for (int k = 0; k < K_N; k++) {
		struct tally *t = &tally[k];
		char msgs[600] = "";

		if (!t->wanted)
			continue;
		for (int i = 0; i < MESSAGES && t->msg[i][0]; i++)
			snprintf(msgs + strlen(msgs), sizeof(msgs) - strlen(msgs), "%s%d '%s'", i ? ", " : " (",
				 t->msg_n[i], t->msg[i]);
		printf("flood: %s: %d connections: %d answered%s%s, %d closed at once, %d closed later, "
		       "%d open without an answer, %d could not connect\n", kind_names[k], t->wanted, t->answered,
		       msgs, msgs[0] ? ")" : "", t->closed_at_once, t->closed_later, t->open_unanswered, t->no_connect);
	}
}

int main(int argc, char **argv)
{
	char err[WIRE_ERRLEN], tok[CICADA_TOKEN_MAX + 1], paused[CICADA_TICKET_LEN + 1];
	int total, opened = 0, left[K_N], i = 3, ctl = -1;
	struct rlimit rl;
	struct conn *cs;
	struct pollfd *ps;
	uint64_t end;

	if (argc < 4 || wire_parse_addr(argv[1], &addr, err))
		return fprintf(stderr, "usage: flood ADDRESS SECONDS [-t TOKEN_FILE] [-p PID | -k TICKET] KIND:N...\n"), 2;
	for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (!strcmp(argv[i], "-t") && !(token = raw_token(argv[i + 1], tok, sizeof(tok))))
			return perror(argv[i + 1]), 2;
		if (!strcmp(argv[i], "-k"))
			ticket = argv[i + 1];
		if (!strcmp(argv[i], "-p") && (ctl = pause_session(atoi(argv[i + 1]), paused)) < 0)
			return 2;
		if (!strcmp(argv[i], "-p"))
			ticket = paused;
	}
	if (parse_kinds(argc - i, argv + i, &total) || (tally[K_CKPT_NOFD].wanted && !ticket))
		return fprintf(stderr, "flood: ckpt-nofd needs -p or -k\n"), 2;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	cs = calloc((size_t)total, sizeof(*cs));
	ps = calloc((size_t)total, sizeof(*ps));
	for (int k = 0; k < K_N; k++)
		left[k] = tally[k].wanted;
	end = wire_now_ns() + (uint64_t)(atof(argv[2]) * 1e9);
	for (opened = 0; opened < total; opened++) {
		struct conn *c = &cs[opened];

		c->kind = next_kind(left);
		c->opened = wire_now_ns();
		c->fd = dial_nonblocking();
		c->state = c->fd < 0 ? S_REDIAL : S_CONNECTING;
	}
	printf("flood: opened\n");
	fflush(stdout);
	while (wire_now_ns() < end) {
		int live = 0, redial = 0;

		for (int n = 0; n < opened; n++) {
			if (cs[n].state == S_REDIAL && (cs[n].fd = dial_nonblocking()) >= 0)
				cs[n].state = S_CONNECTING, cs[n].opened = wire_now_ns();
			redial += cs[n].state == S_REDIAL;
			ps[n].fd = cs[n].state == S_DONE || cs[n].state == S_REDIAL ? -1 : cs[n].fd;
			ps[n].events = cs[n].state == S_CONNECTING ? POLLOUT : POLLIN;
			ps[n].revents = 0;
			live += cs[n].state != S_DONE;
		}
		if (!live || poll(ps, (nfds_t)opened, redial ? 10 : 100) < 0)
			break;
		for (int n = 0; n < opened; n++)
			if (ps[n].revents)
				step(&cs[n], ps[n].revents);
	}
	for (int n = 0; n < opened; n++) {
		if (cs[n].state == S_REDIAL)
			tally[cs[n].kind].no_connect++;
		if (cs[n].state == S_DONE || cs[n].state == S_REDIAL)
			continue;
		if (cs[n].state != S_HOLD || cs[n].kind == K_IDLE || cs[n].kind == K_PARTIAL)
			tally[cs[n].kind].open_unanswered++;
		close(cs[n].fd);
	}
	report();
	if (ctl >= 0)
		close(ctl);
	return 0;
}

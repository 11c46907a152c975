/*
 * raw.c: dialling, hellos and their answers for the raw-protocol tools of
 * the hostile-tenant tests (raw.h says what each does).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "raw.h"

int raw_dial(const char *address, struct raw_conn *c, char *err)
{
	struct wire_addr addr;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	if (wire_parse_addr(address, &addr, err) || (c->fd = wire_dial(&addr, err)) < 0)
		return -1;
	c->tcp = addr.kind == WIRE_TCP;
	wire_stream_init(&c->st, c->fd);
	if (wire_recv_challenge(c->fd, c->nonce, 10000, err)) {
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	return 0;
}

int raw_encode_hello(struct wire_buf *b, const struct raw_hello *h, const uint8_t nonce[WIRE_NONCE_LEN])
{
	static uint8_t proof[WIRE_PROOF_LEN];
	hello_args a = { .proto_version = CICADA_PROTO_VERSION, .pid = (uint64_t)getpid(), .host = "sec-tests",
			 .op = h->op, .ticket = (char *)(h->ticket ? h->ticket : ""),
			 .snapshot = (char *)(h->snapshot ? h->snapshot : ""),
			 .parent = (char *)(h->parent ? h->parent : ""), .devices = "", .stream = h->stream,
			 .want_shm = h->want_shm, .shm_size = h->shm_size };

	a.token.token_val = (char *)proof;
	a.token.token_len = h->token ? (unsigned)wire_token_proof(h->token, strlen(h->token), nonce, proof) : 0;
	return wire_encode_call(b, 1, P_hello, (xdrproc_t)xdr_hello_args, &a);
}

int raw_send_hello(struct raw_conn *c, const struct raw_hello *h)
{
	struct wire_buf b = { 0 };
	int rc = raw_encode_hello(&b, h, c->nonce) || wire_send_record(&c->st, &b) ? -1 : 0;

	wire_buf_free(&b);
	return rc;
}

/* len bytes within the deadline (ns on wire_now_ns's clock): 0, -1, -2. */
static int recv_until(int fd, void *buf, size_t len, uint64_t end)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t got = 0;

	while (got < len) {
		uint64_t now = wire_now_ns();
		ssize_t n;

		if (now >= end)
			return -2;
		if (poll(&p, 1, (int)((end - now) / 1000000) + 1) == 0)
			return -2;
		n = recv(fd, (char *)buf + got, len - got, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

int raw_reply(struct raw_conn *c, hello_res *r, int timeout_ms)
{
	uint64_t end = wire_now_ns() + (uint64_t)timeout_ms * 1000000u;
	struct wire_buf b = { 0 };
	char err[WIRE_ERRLEN];
	uint32_t mark;
	int rc;

	memset(r, 0, sizeof(*r));
	if ((rc = recv_until(c->fd, &mark, 4, end)))
		return rc;
	mark = ntohl(mark) & 0x7fffffffu;
	if (mark > 65536 || wire_buf_reserve(&b, mark + 8))
		return -1;
	if (!(rc = recv_until(c->fd, b.data, mark, end))) {
		b.len = mark;
		rc = wire_decode_reply(&b, 1, (xdrproc_t)xdr_hello_res, r, err) ? -1 : 0;
	}
	wire_buf_free(&b);
	return rc;
}

const char *raw_token(const char *file, char *buf, size_t len)
{
	FILE *f = fopen(file, "r");
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		n--;
	buf[n] = 0;
	return buf;
}

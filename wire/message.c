/*
 * message.c: ONC RPC record marking (RFC 5531, section 11) and the call and
 * reply headers around the XDR-encoded arguments and results. Decoding is
 * defensive: everything here may come from a hostile peer.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire.h"

#define MARK_LAST 0x80000000u
#define RPC_VERSION 2
#define MSG_CALL 0
#define MSG_REPLY 1
#define ENCODE_ROOM (8u << 10)           /* a buffer's least room: small messages never resize */

int wire_buf_reserve(struct wire_buf *b, size_t cap)
{
	char *p;

	if (b->cap >= cap)
		return 0;
	p = realloc(b->data, cap);
	if (!p)
		return -1;
	b->data = p;
	b->cap = cap;
	return 0;
}

void wire_buf_free(struct wire_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

/* The buffer holds 4 bytes of record mark followed by the message. */
int wire_send_record(struct wire_stream *s, struct wire_buf *b)
{
	uint32_t mark = htonl(MARK_LAST | (uint32_t)(b->len - 4));

	memcpy(b->data, &mark, 4);
	return wire_write(s, b->data, b->len);
}

/* Reads one record (all its fragments) into b; b->len is its length. */
int wire_recv_record(struct wire_stream *s, struct wire_buf *b, size_t max)
{
	uint32_t mark, len;

	b->len = 0;
	do {
		if (wire_read(s, &mark, 4))
			return -1;
		mark = ntohl(mark);
		len = mark & ~MARK_LAST;
		if (len > max || b->len + len > max)
			return -2;
		if (wire_buf_reserve(b, b->len + len + 8))
			return -2;
		if (wire_read(s, b->data + b->len, len))
			return -1;
		b->len += len;
	} while (!(mark & MARK_LAST));
	return 0;
}

/* The message into b's room as it is; 0, or -1 when it does not fit. */
static int encode_into(struct wire_buf *b, uint32_t *words, int nwords, xdrproc_t proc, void *obj)
{
	XDR x;
	int ok = 1;

	if (b->cap < 4 + 4 * (size_t)nwords)
		return -1;
	xdrmem_create(&x, b->data + 4, b->cap - 4, XDR_ENCODE);
	for (int i = 0; i < nwords && ok; i++)
		ok = xdr_u_int(&x, &words[i]);
	if (ok && proc)
		ok = proc(&x, obj);
	b->len = 4 + xdr_getpos(&x);
	xdr_destroy(&x);
	return ok ? 0 : -1;
}

/* Most messages fit the buffer that the ones before them grew, so the
 * body is encoded once; only one that does not is sized, and encoded
 * again into a buffer grown to it. */
static int encode(struct wire_buf *b, uint32_t *words, int nwords, xdrproc_t proc, void *obj)
{
	size_t need;

	if (!wire_buf_reserve(b, ENCODE_ROOM) && !encode_into(b, words, nwords, proc, obj))
		return 0;
	need = 4 + 4 * (size_t)nwords + (proc ? xdr_sizeof(proc, obj) : 0);
	if (wire_buf_reserve(b, need))
		return -1;
	return encode_into(b, words, nwords, proc, obj);
}

int wire_encode_call(struct wire_buf *b, uint32_t xid, uint32_t proc, xdrproc_t xargs, void *args)
{
	uint32_t hdr[10] = { xid, MSG_CALL, RPC_VERSION, CICADA_PROG, CICADA_VERS, proc, 0, 0, 0, 0 };

	return encode(b, hdr, 10, xargs, args);
}

int wire_encode_reply(struct wire_buf *b, uint32_t xid, enum wire_accept stat, xdrproc_t xres, void *res)
{
	uint32_t hdr[8] = { xid, MSG_REPLY, 0, 0, 0, stat, CICADA_VERS, CICADA_VERS };

	if (stat == WIRE_PROG_MISMATCH)
		return encode(b, hdr, 8, NULL, NULL);
	return encode(b, hdr, 6, stat == WIRE_SUCCESS ? xres : NULL, res);
}

/* Skips an opaque_auth (flavor, body<400>). */
static int skip_auth(XDR *x)
{
	uint32_t flavor, len;
	char body[400];

	if (!xdr_u_int(x, &flavor) || !xdr_u_int(x, &len) || len > sizeof(body))
		return 0;
	return xdr_opaque(x, body, len);
}

/* On success *xdrs is positioned at the arguments; the caller destroys it. */
int wire_decode_call(const struct wire_buf *b, struct wire_call_hdr *hdr, XDR *xdrs, char *err)
{
	uint32_t w[5];

	xdrmem_create(xdrs, b->data, b->len, XDR_DECODE);
	if (!xdr_u_int(xdrs, &hdr->xid) || !xdr_u_int(xdrs, &w[0]) || !xdr_u_int(xdrs, &w[1]) ||
	    !xdr_u_int(xdrs, &w[2]) || !xdr_u_int(xdrs, &w[3]) || !xdr_u_int(xdrs, &hdr->proc) ||
	    !skip_auth(xdrs) || !skip_auth(xdrs)) {
		wire_fail(err, "truncated call header");
		goto bad;
	}
	if (w[0] != MSG_CALL || w[1] != RPC_VERSION) {
		wire_fail(err, "not an ONC RPC v2 call (type %u, rpcvers %u)", w[0], w[1]);
		goto bad;
	}
	if (w[2] != CICADA_PROG || w[3] != CICADA_VERS) {
		wire_fail(err, "wrong program %#x version %u", w[2], w[3]);
		return WIRE_PROG_MISMATCH;
	}
	return 0;
bad:
	xdr_destroy(xdrs);
	return -1;
}

/* Whether a received record is a call (a notice from the server) rather
 * than the reply the client waits for. */
int wire_record_is_call(const struct wire_buf *b)
{
	uint32_t type;

	if (b->len < 8)
		return 0;
	memcpy(&type, b->data + 4, 4);
	return ntohl(type) == MSG_CALL;
}

int wire_decode_reply(const struct wire_buf *b, uint32_t xid, xdrproc_t xres, void *res, char *err)
{
	uint32_t w[6];
	XDR x;
	int ok;

	xdrmem_create(&x, b->data, b->len, XDR_DECODE);
	ok = xdr_u_int(&x, &w[0]) && xdr_u_int(&x, &w[1]) && xdr_u_int(&x, &w[2]) &&
	     xdr_u_int(&x, &w[3]) && xdr_u_int(&x, &w[4]) && xdr_u_int(&x, &w[5]);
	if (!ok || w[0] != xid || w[1] != MSG_REPLY || w[2] != 0) {
		wire_fail(err, "malformed reply");
		ok = 0;
	} else if (w[5] != WIRE_SUCCESS) {
		wire_fail(err, "server refused the call (accept status %u)", w[5]);
		ok = 0;
	} else if (xres && !xres(&x, res)) {
		wire_fail(err, "malformed reply body");
		ok = 0;
	}
	xdr_destroy(&x);
	return ok ? 0 : -1;
}

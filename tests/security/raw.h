/*
 * raw.h: the few pieces a hostile raw-protocol client of the hostile-tenant
 * tests (tests/security) needs: dial a gpu-server and take its challenge,
 * say a hello of any op (proving a token over TCP), read the answer with
 * a deadline, and read a token file as the server does. Compiled into
 * each tool of tests/security (raw.c).
 */
#ifndef CICADA_SEC_RAW_H
#define CICADA_SEC_RAW_H

#include <stdint.h>
#include "wire.h"

struct raw_conn {
	int fd;
	int tcp;
	struct wire_stream st;
	uint8_t nonce[WIRE_NONCE_LEN];
};

/* What a hello says beyond its op; NULL strings are "". */
struct raw_hello {
	hello_op op;
	const char *token;               /* proven over TCP; NULL: none */
	const char *ticket, *snapshot, *parent;
	unsigned stream, want_shm;
	uint64_t shm_size;
};

/* Dials address and takes the server's challenge; 0, or -1 with err. */
int raw_dial(const char *address, struct raw_conn *c, char *err);
/* The hello h as a record (its mark included), for nonce. */
int raw_encode_hello(struct wire_buf *b, const struct raw_hello *h, const uint8_t nonce[WIRE_NONCE_LEN]);
int raw_send_hello(struct raw_conn *c, const struct raw_hello *h);
/* The answer to the hello within timeout_ms: 0 (r filled: free it with
 * xdr_free), -1 if the server closed, -2 past the deadline. */
int raw_reply(struct raw_conn *c, hello_res *r, int timeout_ms);
/* The token in file, trimmed as the server trims it; NULL if unreadable. */
const char *raw_token(const char *file, char *buf, size_t len);

#endif

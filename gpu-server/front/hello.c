/*
 * hello.c: the answer to a hello that no worker gives: the front door's
 * refusals (admit.c) and a migration's outcome (migrate_in.c), with the
 * pid it was given. Below both.
 */
#include <stdio.h>
#include "front.h"

void hello_reply(int fd, uint32_t xid, int err, uint64_t pid, const char *msg)
{
	struct wire_stream st;
	struct wire_buf out = { 0 };
	hello_res r = { .err = err, .proto_version = CICADA_PROTO_VERSION, .worker_pid = pid };
	char text[CICADA_NAME_MAX];

	snprintf(text, sizeof(text), "%s", msg);
	r.message = text;
	r.ticket = "";
	wire_stream_init(&st, fd);
	if (!wire_encode_reply(&out, xid, WIRE_SUCCESS, (xdrproc_t)xdr_hello_res, &r))
		wire_send_record(&st, &out);
	wire_buf_free(&out);
}

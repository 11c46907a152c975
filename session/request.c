/*
 * request.c: asks a gpu-server, on behalf of a process, to checkpoint its
 * paused session, to restore a snapshot into a new worker, or to end a
 * session. A local server (unix socket) gets CRIU's image directory as an
 * open descriptor and reads or writes the snapshot itself; a remote one
 * (TCP) sends or receives the snapshot over the connection.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "session.h"
#include "snapshot.h"

static int exchange(int fd, const struct gpu_session *s, hello_op op, int dirfd, int stream,
		    char *ticket_out, char *err)
{
	char token[CICADA_TOKEN_MAX], name[64], host[64] = "criu";
	uint8_t nonce[WIRE_NONCE_LEN], proof[WIRE_PROOF_LEN];
	hello_args h = { .proto_version = CICADA_PROTO_VERSION, .pid = (uint64_t)s->pid, .host = host,
			 .op = op, .ticket = (char *)s->ticket, .snapshot = name, .stream = (unsigned)stream,
			 .parent = (char *)s->parent };
	char devices[CICADA_NAME_MAX] = "";
	const char *gpus = s->gpus[0] ? s->gpus : getenv("CICADA_RESTORE_GPUS");
	hello_res r;
	struct wire_stream st;
	struct wire_buf buf = { 0 };
	int rc = -1;

	memset(&r, 0, sizeof(r));
	/* a restore onto these of the server's GPUs first (ordinals or UUIDs) */
	if (op == OP_RESTORE && gpus && *gpus)
		snprintf(devices, sizeof(devices), ">%s", gpus);
	h.devices = devices;
	snapshot_name(s->pid, name, sizeof(name));
	if (wire_recv_challenge(fd, nonce, 30000, err))
		return -1;
	h.token.token_val = (char *)proof;
	h.token.token_len = (unsigned)wire_token_proof(token, token_from_hex(s->token_hex, token, sizeof(token)), nonce,
						       proof);
	wire_stream_init(&st, fd);
	if (wire_encode_call(&buf, 1, P_hello, (xdrproc_t)xdr_hello_args, &h) || wire_send_record(&st, &buf) ||
	    (op != OP_RELEASE && !stream && wire_send_fd(fd, dirfd))) {
		wire_fail(err, "cannot send the request to %s", s->server);
		goto out;
	}
	if (op == OP_RESTORE && stream && snap_send_dir(dirfd, name, fd, err))
		goto out;
	if (wire_recv_record(&st, &buf, 65536) || wire_decode_reply(&buf, 1, (xdrproc_t)xdr_hello_res, &r, err)) {
		wire_fail(err, "gpu-server at %s closed the connection", s->server);
		goto out;
	}
	if (r.err) {
		wire_fail(err, "gpu-server at %s: %s", s->server, r.message);
		rc = op == OP_CHECKPOINT && !stream && r.stream_only ? 1 : -1;
		goto out;
	}
	if (op == OP_CHECKPOINT && stream && snap_recv_dir(fd, dirfd, name, err))
		goto out;
	if (ticket_out)
		snprintf(ticket_out, CICADA_TICKET_LEN + 1, "%s", r.ticket);
	rc = 0;
out:
	xdr_free((xdrproc_t)xdr_hello_res, (char *)&r);
	wire_buf_free(&buf);
	return rc;
}

int server_request(const struct gpu_session *s, hello_op op, int dirfd, char *ticket_out, char *err)
{
	struct wire_addr addr;
	int fd, rc;

	if (wire_parse_addr(s->server, &addr, err))
		return -1;
	if ((fd = wire_dial(&addr, err)) < 0)
		return -1;
	rc = exchange(fd, s, op, dirfd, addr.kind == WIRE_TCP, ticket_out, err);
	close(fd);
	/* the session's worker runs as its tenant and may not write CRIU's
	 * directory: the snapshot comes over the connection instead */
	if (rc > 0 && (fd = wire_dial(&addr, err)) >= 0) {
		rc = exchange(fd, s, op, dirfd, 1, ticket_out, err);
		close(fd);
	}
	return rc < 0 || rc > 0 ? -1 : 0;
}

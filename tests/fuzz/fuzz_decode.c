/*
 * fuzz_decode.c: libFuzzer target for everything the gpu-server decodes
 * from a client before it executes anything. The first input byte picks
 * the mode, the rest is the message:
 *   0  one record body, as worker_serve() hands it to worker_decode()
 *   1  a byte stream: record marking through wire_recv_record() on a
 *      socketpair (small record limit), each record then decoded
 *   2  a connection's first record: the hello the gpu-server parent and
 *      the worker decode (wire_decode_call, xdr_hello_args, token check)
 * Decoded arguments are re-encoded (must succeed) and freed, so leaks
 * and use-after-free in the free paths show up under ASan.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "gpu-server.h"

#define STREAM_MAX 16384                 /* record limit for mode 1 */
#define STREAM_RECORDS 64                /* records read per input */

static struct worker fuzz_worker;
static const char fuzz_token[] = "fuzz-token-0123456789";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	setenv("CICADA_LOG", "error", 0);
	log_init("fuzz");
	worker_index_procs();
	memset(&fuzz_worker, 0, sizeof(fuzz_worker));
	fuzz_worker.shm.fd = -1;
	fuzz_worker.scratch_in = malloc(CICADA_CHUNK_MAX);
	if (!fuzz_worker.scratch_in)
		abort();
	snprintf(fuzz_worker.peer, sizeof(fuzz_worker.peer), "fuzz");
	return 0;
}

/* A decoded call must encode again; anything else is a decoder bug. */
static void check_reencode(const struct wire_call_hdr *hdr, const struct proc_desc *d, void *args)
{
	struct wire_buf out = { 0 };

	if (wire_encode_call(&out, hdr->xid, hdr->proc, d->xargs, args)) {
		fprintf(stderr, "fuzz: %s decoded but does not encode again\n", d->name);
		abort();
	}
	wire_buf_free(&out);
}

/* One record body through worker_decode(), as the worker's dispatch does. */
static void decode_body(const struct wire_buf *in)
{
	union { char c[ARGS_MAX]; uint64_t align; } args;
	struct wire_call_hdr hdr;
	const struct proc_desc *d = NULL;

	if (worker_decode(&fuzz_worker, in, &hdr, &d, &args))
		return;
	check_reencode(&hdr, d, &args);
	worker_free_args(hdr.proc, d, &args);
}

static void fuzz_body(const uint8_t *data, size_t size)
{
	struct wire_buf in = { 0 };

	/* An exact-size copy so ASan sees any read past the record. */
	if (wire_buf_reserve(&in, size ? size : 1))
		return;
	memcpy(in.data, data, size);
	in.len = size;
	decode_body(&in);
	wire_buf_free(&in);
}

/* Queues the bytes on one end of a socketpair and closes that end for
 * writing; what does not fit in the socket buffer is dropped. */
static int make_stream(const uint8_t *data, size_t size, int sv[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return -1;
	while (size) {
		ssize_t n = send(sv[0], data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		data += n;
		size -= (size_t)n;
	}
	shutdown(sv[0], SHUT_WR);
	return 0;
}

static void fuzz_stream(const uint8_t *data, size_t size)
{
	struct wire_stream st;
	struct wire_buf in = { 0 };
	int sv[2];

	if (make_stream(data, size, sv))
		return;
	wire_stream_init(&st, sv[1]);
	for (int i = 0; i < STREAM_RECORDS; i++) {
		if (wire_recv_record(&st, &in, STREAM_MAX))
			break;
		if (in.len > STREAM_MAX)
			abort();
		decode_body(&in);
	}
	wire_buf_free(&in);
	close(sv[0]);
	close(sv[1]);
}

/* The gpu-server's read_hello() and the worker's session start. */
static void fuzz_hello(const uint8_t *data, size_t size)
{
	struct wire_buf in = { 0 };
	struct wire_call_hdr hdr;
	char err[WIRE_ERRLEN];
	hello_args h;
	XDR x;

	if (wire_buf_reserve(&in, size ? size : 1))
		return;
	memcpy(in.data, data, size);
	in.len = size;
	memset(&h, 0, sizeof(h));
	if (wire_decode_call(&in, &hdr, &x, err) == 0) {
		if (hdr.proc == P_hello && xdr_hello_args(&x, &h)) {
			static const uint8_t nonce[WIRE_NONCE_LEN] = { 1, 2, 3 };

			wire_proof_ok(fuzz_token, strlen(fuzz_token), nonce, h.token.token_val, h.token.token_len);
			if (h.host && strlen(h.host) > CICADA_NAME_MAX)
				abort();
		}
		xdr_destroy(&x);
	}
	xdr_free((xdrproc_t)xdr_hello_args, (char *)&h);
	wire_buf_free(&in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	switch (data[0] % 3) {
	case 0: fuzz_body(data + 1, size - 1); break;
	case 1: fuzz_stream(data + 1, size - 1); break;
	default: fuzz_hello(data + 1, size - 1); break;
	}
	return 0;
}

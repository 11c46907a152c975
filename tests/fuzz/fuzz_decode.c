/*
 * fuzz_decode.c: libFuzzer target for everything the gpu-server decodes
 * from a client before it executes anything. The first input byte picks
 * the mode, the rest is the message:
 *   0  one record body, as worker_serve() hands it to worker_decode()
 *   1  a byte stream: record marking through wire_recv_record() on a
 *      socketpair (small record limit), each record then decoded
 *   2  a connection's first record: the hello the gpu-server parent and
 *      the worker decode (wire_decode_call, xdr_hello_args, token check)
 *   3  a line of the control protocol (wire/control.c), through each of
 *      its parsers; what one takes must travel and parse the same again
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
static struct worker_calls fuzz_calls;
static const char fuzz_token[] = "fuzz-token-0123456789";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	setenv("CICADA_LOG", "error", 0);
	log_init("fuzz");
	worker_index_procs();
	memset(&fuzz_worker, 0, sizeof(fuzz_worker));
	fuzz_worker.calls = &fuzz_calls;
	fuzz_worker.calls->shm.fd = -1;
	fuzz_worker.calls->scratch_in = malloc(CICADA_CHUNK_MAX);
	if (!fuzz_worker.calls->scratch_in)
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

/* Mode 3's round trip: the line sent, read back and parsed again must
 * give what the first parse gave. */
static void control_again(int (*send_it)(int fd, const void *v), int (*parse)(const char *line, void *out),
			  const void *v, void *again, size_t len)
{
	char line[WIRE_CTL_LINE_MAX];
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return;
	if (!send_it(sv[0], v) && (wire_read_line(sv[1], line, sizeof(line)) || parse(line, again) ||
				    memcmp(v, again, len))) {
		fprintf(stderr, "fuzz: a control line parsed, but not again once sent: %s\n", line);
		abort();
	}
	close(sv[0]);
	close(sv[1]);
}

static int send_paused(int fd, const void *v) { return wire_ctl_send_paused(fd, v); }
static int send_resume(int fd, const void *v) { return wire_ctl_send_resume(fd, v); }
static int send_precopied(int fd, const void *v) { return wire_ctl_send_precopied(fd, v); }
static int parse_paused(const char *l, void *o) { return wire_ctl_parse_paused(l, o); }
static int parse_resume(const char *l, void *o) { return wire_ctl_parse_resume(l, o); }
static int parse_precopied(const char *l, void *o) { return wire_ctl_parse_precopied(l, o); }

static void fuzz_control(const uint8_t *data, size_t size)
{
	char line[WIRE_CTL_LINE_MAX], name[200], parent[600];
	struct wire_ctl_where w, again;
	uint64_t fig[3], fig2[3];

	if (size >= sizeof(line))
		size = sizeof(line) - 1;
	memcpy(line, data, size);
	line[size] = 0;
	memset(&w, 0, sizeof(w));
	memset(&again, 0, sizeof(again));
	if (!wire_ctl_parse_paused(line, &w))
		control_again(send_paused, parse_paused, &w, &again, sizeof(w));
	memset(&w, 0, sizeof(w));
	memset(&again, 0, sizeof(again));
	if (!wire_ctl_parse_resume(line, &w))
		control_again(send_resume, parse_resume, &w, &again, sizeof(w));
	if (!wire_ctl_parse_precopied(line, fig))
		control_again(send_precopied, parse_precopied, fig, fig2, sizeof(fig));
	wire_ctl_parse_precopy(line, name, sizeof(name), parent, sizeof(parent));
	(void)wire_ctl_reason(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	switch (data[0] % 4) {
	case 0: fuzz_body(data + 1, size - 1); break;
	case 1: fuzz_stream(data + 1, size - 1); break;
	case 2: fuzz_hello(data + 1, size - 1); break;
	default: fuzz_control(data + 1, size - 1); break;
	}
	return 0;
}

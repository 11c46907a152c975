/*
 * wire_abuse: sends a gpu-server what a broken or hostile client would,
 * and checks the server's answer: garbage before the hello, a wrong
 * protocol version, a wrong token, and after a valid hello an oversized,
 * truncated, unknown or malformed call. Each case must end with the
 * server dropping that connection (or refusing it with a reason), never
 * with a crash; the test then checks that other clients are still served.
 * The nvml case sends NVML queries no replacement library would: an
 * unknown function, a device out of range, an argument out of range and
 * a text at the limit must each get a clean NVML error on a connection
 * that goes on serving; a text over the limit is malformed (dropped).
 * The objects case sends texture, copy and host-function calls no
 * interposer would (wrong descriptor sizes, host memory in a 3D copy,
 * unknown arrays, a bad channel request): each must get a CUDA error on
 * a connection that goes on serving.
 *
 * The front-door cases: trickle sends a hello one byte a second and
 * reports when the server cut it (it must, at its hello deadline); hold
 * opens N connections that never finish their hello and reports how many
 * the server closed at once (past --max-pending) and how many at the
 * deadline; forge presents a wrong token with a host name holding a
 * newline and a forged log line, for the test to look for in the log;
 * reattach asks for the paused session of TICKET (over a unix socket
 * the server must also check who asks).
 *
 * usage: wire_abuse CASE ADDRESS [TOKEN]
 *        wire_abuse trickle ADDRESS TOKEN LIMIT_S
 *        wire_abuse hold ADDRESS N SECONDS
 *        wire_abuse reattach ADDRESS TICKET
 */
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cuda.h>
#include "wire.h"
#include "nvml-wire.h"

static int fd;
static struct wire_stream st;
static uint8_t nonce[WIRE_NONCE_LEN];        /* the server's challenge on fd */

/* A hello proving token (a wrong one, for the refusal cases). */
static int encode_hello(struct wire_buf *b, unsigned version, const char *token, const char *host)
{
	hello_args h = { .proto_version = version, .pid = (uint64_t)getpid(), .host = (char *)host,
			 .ticket = "", .snapshot = "", .parent = "", .devices = "" };
	static uint8_t proof[WIRE_PROOF_LEN];

	h.token.token_val = (char *)proof;
	h.token.token_len = token ? (unsigned)wire_token_proof(token, strlen(token), nonce, proof) : 0;
	return wire_encode_call(b, 1, P_hello, (xdrproc_t)xdr_hello_args, &h);
}

static int send_hello(unsigned version, const char *token)
{
	struct wire_buf b = { 0 };

	return encode_hello(&b, version, token, "wire_abuse") || wire_send_record(&st, &b);
}

static int read_hello_reply(hello_res *r)
{
	struct wire_buf b = { 0 };
	char err[WIRE_ERRLEN];

	memset(r, 0, sizeof(*r));
	return wire_recv_record(&st, &b, 65536) || wire_decode_reply(&b, 1, (xdrproc_t)xdr_hello_res, r, err);
}

/* The server must close the connection within 6 seconds. */
static int expect_closed(const char *what)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char buf[4096];

	while (poll(&p, 1, 6000) == 1) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0) {
			printf("wire_abuse: %s: connection dropped\n", what);
			return 0;
		}
	}
	printf("wire_abuse: %s: connection NOT dropped\n", what);
	return 1;
}

static int valid_session(const char *token)
{
	hello_res r;

	if (send_hello(CICADA_PROTO_VERSION, token) || read_hello_reply(&r) || r.err) {
		printf("wire_abuse: valid hello was refused\n");
		return -1;
	}
	return 0;
}

static int send_raw(const void *buf, size_t len)
{
	return wire_write(&st, buf, len);
}

/* One NVML query on the session; its NVML result, or -1 if the call
 * itself failed. */
static int nvml_call(uint32_t xid, unsigned func, unsigned device, uint64_t arg, const char *text, unsigned *ndata)
{
	nvml_args a = { .func = func, .device = device, .arg = arg, .text = (char *)text };
	nvml_res r;
	struct wire_buf b = { 0 };
	char err[WIRE_ERRLEN];
	int ret;

	memset(&r, 0, sizeof(r));
	if (wire_encode_call(&b, xid, P_nvml_query, (xdrproc_t)xdr_nvml_args, &a) || wire_send_record(&st, &b) ||
	    wire_recv_record(&st, &b, 65536) || wire_decode_reply(&b, xid, (xdrproc_t)xdr_nvml_res, &r, err) || r.err)
		ret = -1;
	else
		ret = r.ret;
	*ndata = r.data.data_len;
	xdr_free((xdrproc_t)xdr_nvml_res, (char *)&r);
	wire_buf_free(&b);
	return ret;
}

static int expect_nvml(const char *what, int got, int want, int or_want)
{
	printf("wire_abuse: nvml: %s: ret=%d (want %d)\n", what, got, want);
	return got != want && got != or_want;
}

/* A query whose text is longer than the protocol allows: encoded at the
 * limit, then its length word and bytes stretched. */
static void send_overlong_text(void)
{
	char text[CICADA_NAME_MAX + 1];
	nvml_args a = { .func = NVMLF_BY_UUID, .text = text };
	struct wire_buf b = { 0 };
	uint32_t len = htonl(CICADA_NAME_MAX + 64);

	memset(text, 'A', CICADA_NAME_MAX);
	text[CICADA_NAME_MAX] = '\0';
	wire_encode_call(&b, 9, P_nvml_query, (xdrproc_t)xdr_nvml_args, &a);
	memcpy(b.data + b.len - CICADA_NAME_MAX - 4, &len, 4);
	wire_buf_reserve(&b, b.len + 64);
	memset(b.data + b.len, 'A', 64);
	b.len += 64;
	wire_send_record(&st, &b);
	wire_buf_free(&b);
}

static int case_nvml(const char *token)
{
	char longest[CICADA_NAME_MAX + 1];
	unsigned n = 0;
	int bad = 0;

	if (valid_session(token))
		return 1;
	memset(longest, 'f', CICADA_NAME_MAX);
	longest[CICADA_NAME_MAX] = '\0';
	bad |= expect_nvml("unknown function", nvml_call(2, 9999, 0, 0, "", &n), NVML_ERROR_NOT_SUPPORTED, -2);
	bad |= expect_nvml("function 0", nvml_call(3, 0, 0, 0, "", &n), NVML_ERROR_NOT_SUPPORTED, -2);
	bad |= expect_nvml("device out of range", nvml_call(4, NVMLF_NAME, 1000, 0, "", &n),
			   NVML_ERROR_INVALID_ARGUMENT, -2);
	bad |= expect_nvml("argument out of range", nvml_call(5, NVMLF_MAX_CLOCK, 0, 1ull << 40, "", &n),
			   NVML_ERROR_INVALID_ARGUMENT, -2);
	bad |= expect_nvml("empty uuid", nvml_call(6, NVMLF_BY_UUID, 0, 0, "", &n), NVML_ERROR_INVALID_ARGUMENT, -2);
	/* the real NVML may call a malformed UUID invalid rather than unknown */
	bad |= expect_nvml("longest uuid", nvml_call(7, NVMLF_BY_UUID, 0, 0, longest, &n), NVML_ERROR_NOT_FOUND,
			   NVML_ERROR_INVALID_ARGUMENT);
	bad |= expect_nvml("still serving (device 0 name)", nvml_call(8, NVMLF_NAME, 0, 0, "", &n), NVML_SUCCESS, -2);
	if (bad || n < 2)
		return 1;
	send_overlong_text();
	return expect_closed("nvml text over the limit");
}

/* One call; its CUDA result (the first field of every result), or -1. */
static int any_call(uint32_t xid, unsigned proc, xdrproc_t xargs, void *args, xdrproc_t xres, void *res,
		    size_t res_size)
{
	struct wire_buf b = { 0 };
	char err[WIRE_ERRLEN];
	int rc = -1;

	memset(res, 0, res_size);
	if (!wire_encode_call(&b, xid, proc, xargs, args) && !wire_send_record(&st, &b) &&
	    !wire_recv_record(&st, &b, 65536) && !wire_decode_reply(&b, xid, xres, res, err))
		rc = *(int *)res;
	xdr_free(xres, res);
	wire_buf_free(&b);
	return rc;
}

static int expect_err(const char *what, int got, int want)
{
	printf("wire_abuse: objects: %s: error %d (want %d)\n", what, got, want);
	return got != want;
}

static int case_objects(const char *token)
{
	char res[sizeof(CUDA_RESOURCE_DESC)] = { 0 }, tex[sizeof(CUDA_TEXTURE_DESC)] = { 0 };
	CUDA_RESOURCE_DESC *rd = (CUDA_RESOURCE_DESC *)res;
	tex_object_args t = { .res = { 10, res }, .tex = { sizeof(tex), tex } };
	memcpy3d_args c = { .src = { .type = CU_MEMORYTYPE_HOST }, .dst = { .type = CU_MEMORYTYPE_DEVICE },
			    .width_bytes = 64, .height = 1, .depth = 1 };
	uint64_t seven = 7, v[8];
	scalars sc = { { 1, &seven } };
	scalar_res sr = { 0, { 0, v } };
	name_res nr;
	int bad = 0;

	if (valid_session(token))
		return 1;
	bad |= expect_err("texture descriptor of the wrong size",
			  any_call(2, P_tex_object_create, (xdrproc_t)xdr_tex_object_args, &t, (xdrproc_t)xdr_scalar_res,
				   &sr, sizeof(sr)), CUDA_ERROR_INVALID_VALUE);
	t.res.res_len = sizeof(res);
	rd->resType = CU_RESOURCE_TYPE_ARRAY;
	rd->res.array.hArray = (CUarray)(uintptr_t)0x7777;
	bad |= expect_err("texture of an unknown array",
			  any_call(3, P_surf_object_create, (xdrproc_t)xdr_tex_object_args, &t, (xdrproc_t)xdr_scalar_res,
				   &sr, sizeof(sr)), CUDA_ERROR_INVALID_HANDLE);
	bad |= expect_err("3D copy naming host memory",
			  any_call(4, P_memcpy_3d, (xdrproc_t)xdr_memcpy3d_args, &c, (xdrproc_t)xdr_scalar_res, &sr,
				   sizeof(sr)), CUDA_ERROR_INVALID_VALUE);
	c.src = (copy_side){ .type = CU_MEMORYTYPE_ARRAY, .array = 0x7777 };
	bad |= expect_err("3D copy from an unknown array",
			  any_call(5, P_memcpy_3d, (xdrproc_t)xdr_memcpy3d_args, &c, (xdrproc_t)xdr_scalar_res, &sr,
				   sizeof(sr)), CUDA_ERROR_INVALID_HANDLE);
	bad |= expect_err("host-function channel request 7",
			  any_call(6, P_host_func_channel, (xdrproc_t)xdr_scalars, &sc, (xdrproc_t)xdr_name_res, &nr,
				   sizeof(nr)), CUDA_ERROR_INVALID_VALUE);
	sc.v.v_len = 0;
	bad |= expect_err("still serving (driver version)",
			  any_call(7, P_cuDriverGetVersion, (xdrproc_t)xdr_scalars, &sc, (xdrproc_t)xdr_scalar_res, &sr,
				   sizeof(sr)), CUDA_SUCCESS);
	return bad;
}

static int case_after_hello(const char *which, const char *token)
{
	struct wire_buf b = { 0 };
	uint32_t mark;
	launch_args la;

	if (valid_session(token))
		return 1;
	if (!strcmp(which, "oversized")) {
		mark = htonl(0x80000000u | 0x7ffffff0u);
		send_raw(&mark, 4);
	} else if (!strcmp(which, "truncated")) {
		mark = htonl(0x80000000u | 100);
		send_raw(&mark, 4);
		send_raw("abcdefghij", 10);
		shutdown(fd, SHUT_WR);
	} else if (!strcmp(which, "badproc")) {
		wire_encode_call(&b, 2, 250, NULL, NULL);
		wire_send_record(&st, &b);
	} else if (!strcmp(which, "badargs")) {
		memset(&la, 0, sizeof(la));
		wire_encode_call(&b, 2, P_launch_kernel, (xdrproc_t)xdr_launch_args, &la);
		b.len -= 12;                          /* cut the arguments short */
		wire_send_record(&st, &b);
	} else {
		return 2;
	}
	return expect_closed(which);
}

static double now_s(void)
{
	return (double)wire_now_ns() / 1e9;
}

/* Waits up to seconds for the server to close fd; the time it took, or -1. */
static double wait_closed(int sock, double seconds)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };
	double t0 = now_s(), left;
	char buf[256];

	while ((left = seconds - (now_s() - t0)) > 0 && poll(&p, 1, (int)(left * 1000) + 1) >= 0) {
		if (p.revents && recv(sock, buf, sizeof(buf), MSG_DONTWAIT) <= 0)
			return now_s() - t0;
	}
	return -1;
}

/* The hello, one byte a second: the server must cut it by limit s. */
static int case_trickle(const char *token, double limit)
{
	struct wire_buf b = { 0 };
	double t0 = now_s(), took;

	encode_hello(&b, CICADA_PROTO_VERSION, token, "wire_abuse");
	for (size_t i = 0; i + 1 < b.len && now_s() - t0 < limit + 2; i++) {
		if (send(fd, b.data + i, 1, MSG_NOSIGNAL) != 1 || wait_closed(fd, 1.0) >= 0)
			break;
	}
	took = now_s() - t0;
	printf("wire_abuse: trickle: the server cut the hello after %.1f s (limit %.1f s)\n", took, limit);
	return took <= limit ? 0 : 1;
}

/* n connections that never finish their hello, held up to seconds. */
static int case_hold(const struct wire_addr *addr, int n, double seconds)
{
	int *fds = calloc((size_t)n, sizeof(int)), at_once = 0, later = 0, open = 0;
	char err[WIRE_ERRLEN];
	double t0 = now_s();

	for (int i = 0; i < n; i++) {
		uint8_t challenge[WIRE_NONCE_LEN];

		fds[i] = wire_dial(addr, err);
		if (fds[i] >= 0 && (wire_recv_challenge(fds[i], challenge, 5000, err) ||
				    send(fds[i], "\x80", 1, MSG_NOSIGNAL) != 1))
			close(fds[i]), fds[i] = -1;
	}
	usleep(500000);
	for (int i = 0; i < n; i++) {
		if (fds[i] >= 0 && wait_closed(fds[i], 0.01) < 0)
			continue;
		at_once++;
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
	for (int i = 0; i < n; i++) {
		if (fds[i] < 0)
			continue;
		if (wait_closed(fds[i], seconds - (now_s() - t0)) >= 0)
			later++;
		else
			open++;
		close(fds[i]);
	}
	printf("wire_abuse: hold: %d connections: %d closed at once, %d at the deadline, %d still open after %.0f s\n",
	       n, at_once, later, open, seconds);
	free(fds);
	return 0;
}

/* A wrong token, with a host name that tries to forge a log line. */
static int case_forge(void)
{
	struct wire_buf b = { 0 };
	hello_res r;

	if (encode_hello(&b, CICADA_PROTO_VERSION, "not-the-token-at-all",
			 "wire_abuse\ngpu-server[1]: info: FORGED line\r\x1b[2J") ||
	    wire_send_record(&st, &b) || read_hello_reply(&r)) {
		printf("wire_abuse: forge: no reply\n");
		return 1;
	}
	printf("wire_abuse: forge: refused=%d message=%s\n", r.err != 0, r.message);
	return r.err ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct wire_addr addr;
	char err[WIRE_ERRLEN];
	const char *token = argc > 3 ? argv[3] : NULL;
	hello_res r;

	if (argc < 3 || wire_parse_addr(argv[2], &addr, err) || (fd = wire_dial(&addr, err)) < 0) {
		fprintf(stderr, "usage: wire_abuse CASE ADDRESS [TOKEN] (%s)\n", argc < 3 ? "" : err);
		return 2;
	}
	wire_stream_init(&st, fd);
	if (wire_recv_challenge(fd, nonce, 10000, err)) {
		fprintf(stderr, "wire_abuse: %s\n", err);
		return 2;
	}
	if (!strcmp(argv[1], "trickle") && argc > 4)
		return case_trickle(token, atof(argv[4]));
	if (!strcmp(argv[1], "hold") && argc > 4)
		return close(fd), case_hold(&addr, atoi(argv[3]), atof(argv[4]));
	if (!strcmp(argv[1], "forge"))
		return case_forge();
	if (!strcmp(argv[1], "garbage")) {
		send_raw("GET / HTTP/1.0\r\n\r\n", 18);
		return expect_closed("garbage before hello");
	}
	if (!strcmp(argv[1], "version") || !strcmp(argv[1], "token")) {
		send_hello(!strcmp(argv[1], "version") ? 99 : CICADA_PROTO_VERSION, token);
		if (read_hello_reply(&r)) {
			printf("wire_abuse: %s: no reply\n", argv[1]);
			return 1;
		}
		printf("wire_abuse: %s: refused=%d message=%s\n", argv[1], r.err != 0, r.message);
		return r.err ? 0 : 1;
	}
	if (!strcmp(argv[1], "reattach") && argc > 3) {   /* TOKEN is the ticket here */
		struct wire_buf b = { 0 };
		hello_args h = { .proto_version = CICADA_PROTO_VERSION, .pid = (uint64_t)getpid(), .host = "wire_abuse",
				 .op = OP_REATTACH, .ticket = argv[3], .snapshot = "", .parent = "", .devices = "" };

		if (wire_encode_call(&b, 1, P_hello, (xdrproc_t)xdr_hello_args, &h) || wire_send_record(&st, &b) ||
		    read_hello_reply(&r)) {
			printf("wire_abuse: reattach: no reply\n");
			return 1;
		}
		printf("wire_abuse: reattach: refused=%d message=%s\n", r.err != 0, r.message);
		return r.err ? 0 : 1;
	}
	if (!strcmp(argv[1], "nvml"))
		return case_nvml(token);
	if (!strcmp(argv[1], "objects"))
		return case_objects(token);
	return case_after_hello(argv[1], token);
}

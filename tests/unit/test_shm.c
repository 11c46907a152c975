/*
 * test_shm.c: unit tests of the shared-memory ring (wire/shm.c): a
 * segment made in-process, a client stream and a server stream (the
 * server's side attached to it as a worker attaches), a writer and a
 * reader thread passing records of random sizes (some larger than the
 * pipe, so the ring wraps often) checked by checksums; and a hostile
 * peer: a header that lies at attach, a tail beyond the pipe, a head
 * beyond the tail, a header rewritten after attach.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>
#include "wire.h"

struct pair {
	struct shm_segment cli, srv;
	struct wire_stream c, s;                     /* the client's and the server's streams */
	int sv[2];
};

static int setup(void **state)
{
	struct pair *p = calloc(1, sizeof(*p));
	char err[WIRE_ERRLEN];

	if (!p || socketpair(AF_UNIX, SOCK_STREAM, 0, p->sv) || shm_segment_create(&p->cli, 4, 65536) ||
	    shm_segment_attach(&p->srv, dup(p->cli.fd), p->cli.size, err))
		return -1;
	wire_stream_init(&p->c, p->sv[0]);
	wire_stream_init(&p->s, p->sv[1]);
	wire_stream_use_shm(&p->c, &p->cli, 0);
	wire_stream_use_shm(&p->s, &p->srv, 1);
	*state = p;
	return 0;
}

static int teardown(void **state)
{
	struct pair *p = *state;

	shm_segment_detach(&p->srv);
	shm_segment_detach(&p->cli);
	close(p->sv[0]);
	close(p->sv[1]);
	free(p);
	return 0;
}

static uint64_t fnv(const char *b, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (n--)
		h = (h ^ (unsigned char)*b++) * 0x100000001b3ull;
	return h;
}

/* Record i: its size (some past the pipe), then its bytes from seed i. */
#define NREC 600
static size_t rec_size(unsigned i)
{
	unsigned r = (i * 2654435761u) >> 7;

	return i % 50 == 7 ? SHM_PIPE_SIZE + r % (2 * SHM_PIPE_SIZE) :   /* larger than the pipe */
	       i % 10 == 3 ? r % (300 << 10) : 1 + r % 3000;
}

/* A record: the mark, i, the payload's length, the payload, its FNV-1a. */
static void fill(struct wire_buf *b, unsigned i)
{
	size_t n = rec_size(i);
	uint32_t hdr[2] = { i, (uint32_t)n };
	uint64_t x = i * 0x9e3779b97f4a7c15ull + 1, sum;

	assert_int_equal(wire_buf_reserve(b, 4 + 8 + n + 8), 0);
	memcpy(b->data + 4, hdr, 8);
	for (size_t k = 0; k < n; k++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		b->data[12 + k] = (char)x;
	}
	sum = fnv(b->data + 12, n);
	memcpy(b->data + 12 + n, &sum, 8);
	b->len = 4 + 8 + n + 8;
}

static void *writer(void *arg)
{
	struct wire_stream *s = arg;
	struct wire_buf b = { 0 };
	intptr_t bad = 0;

	for (unsigned i = 0; i < NREC && !bad; i++) {
		fill(&b, i);
		bad = wire_send_record(s, &b) != 0;
	}
	wire_buf_free(&b);
	return (void *)bad;
}

/* Reads NREC records from s and checks each. */
static void read_all(struct wire_stream *s)
{
	struct wire_buf b = { 0 };
	uint64_t total = 0;

	for (unsigned i = 0; i < NREC; i++) {
		uint32_t hdr[2];
		uint64_t sum;

		assert_int_equal(wire_recv_record(s, &b, WIRE_MAX_RECORD), 0);
		assert_true(b.len >= 16);
		memcpy(hdr, b.data, 8);
		assert_int_equal(hdr[0], i);
		assert_int_equal(hdr[1], rec_size(i));
		assert_int_equal(b.len, 8 + hdr[1] + 8);
		memcpy(&sum, b.data + 8 + hdr[1], 8);
		assert_int_equal(sum, fnv(b.data + 8, hdr[1]));
		total += b.len + 4;
	}
	assert_true(total > 8ull * SHM_PIPE_SIZE);        /* the ring wrapped, many times */
	wire_buf_free(&b);
}

static void run_pair(struct wire_stream *from, struct wire_stream *to)
{
	pthread_t t;
	void *bad = (void *)1;

	assert_int_equal(pthread_create(&t, NULL, writer, from), 0);
	read_all(to);
	pthread_join(t, &bad);
	assert_null(bad);
}

static void client_to_server(void **state)
{
	struct pair *p = *state;

	run_pair(&p->c, &p->s);
	assert_int_equal(atomic_load(&p->cli.hdr->to_server.head), atomic_load(&p->cli.hdr->to_server.tail));
}

static void server_to_client_polling(void **state)
{
	struct pair *p = *state;

	p->c.poll_wait = 1;                          /* as a client waiting for a reply */
	p->c.spin_us = 0;
	p->s.spin_us = 0;                            /* the writer sleeps at once on a full pipe */
	run_pair(&p->s, &p->c);
}

/* A tail the peer set beyond the pipe (more than it can hold unread) is
 * refused, not read past the ring. */
static void tail_beyond_pipe(void **state)
{
	struct pair *p = *state;
	struct shm_pipe *to_server = &p->cli.hdr->to_server;
	const uint64_t tails[] = { SHM_PIPE_SIZE + 1, 4ull * SHM_PIPE_SIZE, UINT64_MAX, 1ull << 63 };
	char buf[64];

	for (unsigned i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
		wire_stream_use_shm(&p->s, &p->srv, 1);      /* from the start */
		atomic_store(&to_server->tail, atomic_load(&to_server->head) + tails[i]);
		assert_int_equal(wire_read(&p->s, buf, sizeof(buf)), -1);
		atomic_store(&to_server->tail, atomic_load(&to_server->head));
	}
	/* exactly a full pipe is fine */
	wire_stream_use_shm(&p->s, &p->srv, 1);
	atomic_store(&to_server->tail, atomic_load(&to_server->head) + SHM_PIPE_SIZE);
	assert_int_equal(wire_read(&p->s, buf, sizeof(buf)), 0);
}

/* A reader that says it read more than was written is refused by the
 * writer once it must look (the pipe full). */
static void head_beyond_tail(void **state)
{
	struct pair *p = *state;
	struct shm_pipe *to_client = &p->cli.hdr->to_client;
	char *buf = calloc(1, SHM_PIPE_SIZE);

	assert_non_null(buf);
	p->s.spin_us = 0;
	assert_int_equal(wire_write(&p->s, buf, SHM_PIPE_SIZE), 0);     /* full */
	atomic_store(&to_client->head, atomic_load(&to_client->tail) + 100);
	assert_int_equal(wire_write(&p->s, buf, 4096), -1);
	free(buf);
}

/* A header that lies is refused at attach: the segment is left alone. */
static void lying_header_refused(void **state)
{
	struct pair *p = *state;
	struct shm_header good = *p->cli.hdr, *h = p->cli.hdr;
	struct shm_segment seg;
	char err[WIRE_ERRLEN];
	int fd = dup(p->cli.fd);

	for (int i = 0; i < 13; i++) {
		*h = good;
		switch (i) {
		case 0: h->magic ^= 1; break;
		case 1: h->version++; break;
		case 2: h->size -= 4096; break;                  /* a shrunk geometry */
		case 3: h->to_server.size = SHM_PIPE_SIZE / 2; break;
		case 4: h->to_client.size = SHM_PIPE_SIZE * 2; break;
		case 5: h->to_server.data_offset = p->cli.size - SHM_PIPE_SIZE + 1; break;
		case 6: h->to_client.data_offset = 8; break;   /* over the header */
		case 7: h->nslots = SHM_MAX_SLOTS + 1; break;
		case 8: h->slot_size = 0; break;
		case 9: h->slot_size = SHM_MAX_SLOT_SIZE + 1; break;
		case 10: h->nslots = SHM_MAX_SLOTS; break;       /* slots past the end */
		case 11: h->staging_offset = p->cli.size + 4096; break;
		case 12: h->to_server.data_offset = UINT64_MAX - 10; break;
		}
		assert_int_equal(shm_segment_attach(&seg, fd, p->cli.size, err), -1);
		assert_null(seg.hdr);
	}
	*h = good;
	assert_int_equal(shm_segment_attach(&seg, fd, p->cli.size + 4096, err), -1);   /* size not its own */
	assert_int_equal(shm_segment_attach(&seg, fd, p->cli.size - 4096, err), -1);
	assert_int_equal(ftruncate(fd, 4096), -1);            /* sealed: cannot shrink */
	assert_int_equal(shm_segment_attach(&seg, fd, p->cli.size, err), 0);
	shm_segment_detach(&seg);
}

static void unsealed_refused(void **state)
{
	struct shm_segment seg;
	char err[WIRE_ERRLEN];
	int fd = memfd_create("unsealed", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 4096 + 2 * SHM_PIPE_SIZE), 0);
	assert_int_equal(shm_segment_attach(&seg, fd, 4096 + 2 * SHM_PIPE_SIZE, err), -1);
	assert_non_null(strstr(err, "shrink"));
	close(fd);
}

/* After attach the header may say anything: the server's side goes by
 * the geometry it checked (slots, the pipes' places). */
static void header_rewritten_after_attach(void **state)
{
	struct pair *p = *state;
	struct shm_header *h = p->cli.hdr;

	assert_non_null(shm_slot(&p->srv, 3, 65536));
	assert_null(shm_slot(&p->srv, 4, 1));
	assert_null(shm_slot(&p->srv, 0, 65537));
	h->nslots = SHM_MAX_SLOTS;
	h->slot_size = SHM_MAX_SLOT_SIZE;
	h->staging_offset = 1ull << 40;
	h->to_server.data_offset = 1ull << 40;
	h->to_client.data_offset = 1ull << 40;
	assert_null(shm_slot(&p->srv, 15, 1));
	assert_null(shm_slot(&p->srv, 0, 1 << 20));
	assert_ptr_equal(shm_slot(&p->srv, 1, 1), (char *)p->srv.hdr + 4096 + 2 * SHM_PIPE_SIZE + 65536);
	assert_null(shm_slot(&p->srv, UINT32_MAX, 1));
	run_pair(&p->c, &p->s);                      /* still intact */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(client_to_server), T(server_to_client_polling), T(tail_beyond_pipe), T(head_beyond_tail),
		T(lying_header_refused), T(unsealed_refused), T(header_rewritten_after_attach),
	};

	return cmocka_run_group_tests_name("shm", tests, NULL, NULL);
}

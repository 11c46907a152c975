/*
 * make_shm_seeds.c: writes the starting corpus for fuzz_shm: segments a
 * client makes (the header as shm_segment_create writes it, or altered
 * in one place), a few slot look-ups, and client scripts that send valid
 * call records (wire_encode_call) into the ring: whole, split into
 * fragments, across the ring's end, and with the header rewritten while
 * the worker reads. The layout is fuzz_shm.c's (its header comment).
 * Usage: make_shm_seeds DIR
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "wire.h"

/* fuzz_shm.c's script ops and the header fields its FIELD op sets */
enum { OP_FIELD, OP_DATA, OP_RECORD, OP_TAIL, OP_RAW, OP_CONSUME, OP_YIELD };
enum { F_MAGIC, F_VERSION, F_SIZE, F_STAGING, F_SLOT_SIZE, F_NSLOTS, F_TS_HEAD, F_TS_TAIL, F_TS_OFFSET,
       F_TS_SIZE, F_TS_SLEEPING, F_TS_SEQ, F_TC_HEAD, F_TC_TAIL };

static const char *seed_dir;
static struct wire_buf seed;             /* the seed being built */

static void put(const void *p, size_t len)
{
	if (wire_buf_reserve(&seed, seed.len + len))
		exit(1);
	memcpy(seed.data + seed.len, p, len);
	seed.len += len;
}

static void put_uint(uint64_t v, size_t width)
{
	put(&v, width);                      /* little-endian host, as fuzz_shm reads */
}

static void write_seed(const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", seed_dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(seed.data, 1, seed.len, f) != seed.len || fclose(f)) {
		perror(path);
		exit(1);
	}
	seed.len = 0;
}

/* The header a client makes with geometry byte g (fuzz_shm's). */
static void header_of(unsigned g, struct shm_header *h)
{
	struct shm_segment seg;

	if (shm_segment_create(&seg, (g & 7) % 5, 4096u << (g >> 4 & 3))) {
		perror("shm_segment_create");
		exit(1);
	}
	memcpy(h, seg.hdr, sizeof(*h));
	munmap(seg.hdr, seg.size);
	close(seg.fd);
}

static void put_segment(unsigned g, const struct shm_header *h)
{
	put_uint(g, 1);
	put(h, sizeof(*h));
}

static void put_probes(const uint64_t (*pr)[2], unsigned n)
{
	put_uint(n, 1);
	for (unsigned i = 0; i < n; i++) {
		put_uint(pr[i][0], 4);
		put_uint(pr[i][1], 8);
	}
}

/* A call record's body (no mark): proc with len bytes of arguments. */
static void call_body(struct wire_buf *b, uint32_t proc, size_t len)
{
	static uint32_t xid = 1;
	uint32_t words[64] = { 0 };
	struct wire_buf call = { 0 };

	if (wire_encode_call(&call, xid++, proc, NULL, NULL) || wire_buf_reserve(b, call.len - 4 + len))
		exit(1);
	memcpy(b->data, call.data + 4, call.len - 4);
	memcpy(b->data + call.len - 4, words, len < sizeof(words) ? len : sizeof(words));
	b->len = call.len - 4 + len;
	wire_buf_free(&call);
}

static void op_record(uint32_t proc, size_t args)
{
	struct wire_buf b = { 0 };

	call_body(&b, proc, args);
	put_uint(OP_RECORD, 1);
	put_uint(b.len, 2);
	put(b.data, b.len);
	wire_buf_free(&b);
}

/* One record as two fragments, through DATA ops with the marks inline. */
static void op_fragments(uint32_t proc, size_t args)
{
	struct wire_buf b = { 0 };
	size_t first;
	uint32_t m1, m2;

	call_body(&b, proc, args);
	first = b.len / 2;
	m1 = htonl((uint32_t)first);
	m2 = htonl(0x80000000u | (uint32_t)(b.len - first));
	put_uint(OP_DATA, 1);
	put_uint(4 + first, 2);
	put(&m1, 4);
	put(b.data, first);
	put_uint(OP_YIELD, 1);
	put_uint(OP_DATA, 1);
	put_uint(4 + b.len - first, 2);
	put(&m2, 4);
	put(b.data + first, b.len - first);
	wire_buf_free(&b);
}

static void op_field(unsigned sel, uint64_t v)
{
	put_uint(OP_FIELD, 1);
	put_uint(sel, 1);
	put_uint(v, 8);
}

static void seed_plain(void)
{
	struct shm_header h;

	header_of(0x02, &h);
	put_segment(0x02, &h);
	put_probes(NULL, 0);
	op_record(P_hello, 16);
	op_record(P_cuDeviceGetAttribute, 8);
	write_seed("shm-plain");
}

static void seed_slots(void)
{
	static const uint64_t pr[][2] = { { 0, 8192 }, { 3, 1 }, { 4, 1 }, { 1, 8193 }, { 2, 0 }, { ~0u, 1 } };
	struct shm_header h;

	header_of(0x14, &h);
	put_segment(0x14, &h);
	put_probes(pr, sizeof(pr) / sizeof(pr[0]));
	op_record(P_memcpy_shm_async, 40);
	put_uint(OP_YIELD, 1);
	op_field(F_NSLOTS, 16);
	op_field(F_STAGING, 1ull << 40);
	op_record(P_memcpy_shm_async, 40);
	op_field(F_SLOT_SIZE, 0xffffffffu);
	op_record(P_memcpy_shm_async, 40);
	write_seed("shm-slots");
}

/* head and tail near the ring's end: the first record wraps. */
static void seed_wrap(void)
{
	struct shm_header h;

	header_of(0x01, &h);
	h.to_server.head = h.to_server.tail = 3ull * SHM_PIPE_SIZE - 10;
	h.to_client.head = h.to_client.tail = SHM_PIPE_SIZE - 3;
	put_segment(0x01, &h);
	put_probes(NULL, 0);
	op_record(P_launch_kernel, 64);
	op_fragments(P_launch_kernel, 64);
	write_seed("shm-wrap");
}

static void seed_fragments(void)
{
	static const uint64_t pr[][2] = { { 0, 4096 } };
	struct shm_header h;

	header_of(0x11, &h);
	put_segment(0x11, &h);
	put_probes(pr, 1);
	op_fragments(P_memcpy_htod, 100);
	op_field(F_TS_OFFSET, 0);
	op_fragments(P_memcpy_htod, 100);
	write_seed("shm-fragments");
}

/* The client moves the tail past what it wrote, then far past it. */
static void seed_tail(void)
{
	struct shm_header h;

	header_of(0x03, &h);
	put_segment(0x03, &h);
	put_probes(NULL, 0);
	op_record(P_hello, 8);
	put_uint(OP_TAIL, 1);
	put_uint(SHM_PIPE_SIZE / 2, 4);
	put_uint(OP_YIELD, 1);
	op_field(F_TS_TAIL, 5ull * SHM_PIPE_SIZE);
	write_seed("shm-tail");
}

/* Staging over the pipes: a geometry header_ok lets through. */
static void seed_overlap(void)
{
	static const uint64_t pr[][2] = { { 0, 1u << 20 }, { 1, 1u << 20 } };
	struct shm_header h;

	header_of(0x00, &h);
	h.staging_offset = 4096;
	h.slot_size = 1u << 20;
	h.nslots = 2;
	h.to_client.data_offset = h.to_server.data_offset;
	put_segment(0x00, &h);
	put_probes(pr, 2);
	op_record(P_hello, 8);
	write_seed("shm-overlap");
}

/* The reply pipe all but full: the worker waits for room, then the
 * client reads, then it moves the head past the tail. */
static void seed_reply_full(void)
{
	struct shm_header h;

	header_of(0x01, &h);
	h.to_client.head = 0;
	h.to_client.tail = SHM_PIPE_SIZE - 20;
	put_segment(0x01, &h);
	put_probes(NULL, 0);
	op_record(P_hello, 8);
	put_uint(OP_YIELD, 1);
	put_uint(OP_CONSUME, 1);
	op_record(P_hello, 8);
	op_field(F_TC_TAIL, 0);
	op_field(F_TC_HEAD, 3ull * SHM_PIPE_SIZE);
	op_record(P_hello, 8);
	write_seed("shm-reply-full");
}

/* Headers the worker must refuse. */
static void seed_refused(void)
{
	struct shm_header h;

	header_of(0x02, &h);
	h.magic = 0;
	put_segment(0x02, &h);
	write_seed("shm-bad-magic");
	header_of(0x02, &h);
	h.to_server.data_offset = h.size;
	put_segment(0x02, &h);
	write_seed("shm-bad-pipe");
	header_of(0x0a, &h);
	put_segment(0x0a, &h);
	write_seed("shm-bad-size");
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: make_shm_seeds DIR\n");
		return 2;
	}
	seed_dir = argv[1];
	seed_plain();
	seed_slots();
	seed_wrap();
	seed_fragments();
	seed_tail();
	seed_overlap();
	seed_reply_full();
	seed_refused();
	wire_buf_free(&seed);
	return 0;
}

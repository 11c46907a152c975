/*
 * fuzz_shm.c: libFuzzer target for the shared-memory ring as a worker
 * reads it, with a hostile client writing into the segment at the same
 * time. Each input makes a segment as a local client does
 * (shm_segment_create), overwrites its header with bytes of the input
 * and hands the worker a dup of the descriptor, which attaches it as
 * gpu-server/front/session.c does (shm_segment_attach). If the worker takes
 * it, the worker's side reads records from the to_server pipe with
 * wire_recv_record and WIRE_MAX_RECORD (as worker_serve does), answers
 * each through the to_client pipe (wire_send_record) and looks up
 * staging slots with shm_slot, writing every byte it is handed (as
 * shm_copy does), while a client thread runs the rest of the input:
 * bytes and records into the to_server pipe, rewrites of the header's
 * geometry and of the pipes' counters, raw writes anywhere in the
 * segment. Every address the worker is handed (the pipes' data, the
 * staging area, a slot) must lie inside its mapping, else the target
 * aborts: the bytes beside a mapping are not ASan's to watch.
 *
 * Input:  [geometry 1] [header overlay, sizeof(struct shm_header)]
 *         [nprobes 1] [nprobes x (slot u32, size u64)] [client script]
 *   geometry: slots = (g & 7) % 5, slot size = 4 KiB << (g >> 4 & 3); bit 3:
 *   the worker is told a size one page more than the segment's.
 *   A short input overwrites a prefix of the header only (the rest of
 *   the input is then empty).
 * Script ops, one byte (op % OP_N) then little-endian arguments:
 *   FIELD  sel u8, value u64     a header field (fields[] below) set
 *   DATA   len u16, bytes        appended to the to_server pipe
 *   RECORD len u16, bytes        the same behind a last-fragment mark
 *   TAIL   delta u32             to_server's tail moved on, no data
 *   RAW    off u32, len u8, bytes  written anywhere in the segment
 *   CONSUME                      the replies read: to_client's head to its tail
 *   YIELD                        the client lets the worker run
 * Bounds: the worker reads at most RECORDS_MAX records. When its script
 * is done the client closes its end of the connection's socket, then
 * bumps and wakes the worker's futex words until the worker is done, so
 * a wait returns at once and finds its peer gone (pipe_wait: -1).
 * FUZZ_SHM_NO_FD_CHECK=1 turns off the check that a refused attach
 * leaves the descriptor to the caller (see close_refused);
 * FUZZ_SHM_TRACE=1 says on stderr what each input did.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "wire.h"
#include "hostarea.h"

#define SLOTS_MAX 4                      /* the segment a client makes here */
#define PROBES_MAX 16
#define RECORDS_MAX 32                   /* records the worker reads per input */
#define ECHO_MAX 65536                   /* the most of a record answered back */
#define MARK_LAST 0x80000000u
#define KICK_US 50                       /* the client's pause between wake-ups */

enum { OP_FIELD, OP_DATA, OP_RECORD, OP_TAIL, OP_RAW, OP_CONSUME, OP_YIELD, OP_N };

struct input {
	const uint8_t *p;
	size_t n;
};

struct probe {
	uint32_t slot;
	uint64_t size;
};

struct client {
	struct shm_segment *seg;             /* the client's own mapping and offsets */
	struct input script;
	int sock;                            /* its end of the socket; closed after the script */
	_Atomic int stop;                    /* set when the worker is done reading */
};

struct field {
	size_t off, width;
};

#define FIELD(m) { offsetof(struct shm_header, m), sizeof(((struct shm_header *)0)->m) }
static const struct field fields[] = {
	FIELD(magic), FIELD(version), FIELD(size), FIELD(staging_offset), FIELD(slot_size), FIELD(nslots),
	FIELD(to_server.head), FIELD(to_server.tail), FIELD(to_server.data_offset), FIELD(to_server.size),
	FIELD(to_server.reader_sleeping), FIELD(to_server.data_seq),
	FIELD(to_client.head), FIELD(to_client.tail), FIELD(to_client.data_offset), FIELD(to_client.size),
	FIELD(to_client.writer_sleeping), FIELD(to_client.space_seq),
	FIELD(slot_state[0]), FIELD(slot_state[SHM_MAX_SLOTS - 1]), FIELD(output_pending),
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static int fd_check = 1;
static int trace;                        /* FUZZ_SHM_TRACE=1: a line per step to stderr */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	setenv("CICADA_LOG", "error", 0);
	log_init("fuzz_shm");
	hostarea_enable();                   /* the worker's mappings, as worker.c has them */
	fd_check = !getenv("FUZZ_SHM_NO_FD_CHECK");
	trace = !!getenv("FUZZ_SHM_TRACE");
	return 0;
}

/* ---- reading the input ---- */

/* The next len bytes into out; zeros past the end of the input. */
static void take(struct input *in, void *out, size_t len)
{
	size_t n = in->n < len ? in->n : len;

	memcpy(out, in->p, n);
	memset((char *)out + n, 0, len - n);
	in->p += n;
	in->n -= n;
}

static uint64_t take_uint(struct input *in, size_t width)
{
	uint64_t v = 0;

	take(in, &v, width);                 /* little-endian host */
	return v;
}

/* Up to len bytes of the input, in place; *got says how many. */
static const uint8_t *take_bytes(struct input *in, size_t len, size_t *got)
{
	const uint8_t *p = in->p;

	*got = in->n < len ? in->n : len;
	in->p += *got;
	in->n -= *got;
	return p;
}

static unsigned take_probes(struct input *in, struct probe *pr)
{
	unsigned n = (unsigned)take_uint(in, 1) % (PROBES_MAX + 1);

	for (unsigned i = 0; i < n; i++) {
		pr[i].slot = (uint32_t)take_uint(in, 4);
		pr[i].size = take_uint(in, 8);
	}
	return n;
}

/* ---- checks on what the worker is handed ---- */

static void check_range(const struct shm_segment *seg, const char *p, uint64_t len, const char *what)
{
	const char *base = (const char *)seg->hdr;
	uint64_t off = (uint64_t)(p - base);

	if (p >= base && off <= seg->size && len <= seg->size - off)
		return;
	fprintf(stderr, "fuzz_shm: %s [%p, +%llu) lies outside the segment [%p, +%zu)\n", what, (void *)p,
		(unsigned long long)len, (void *)base, seg->size);
	abort();
}

/* The pipes' data as the worker's stream has them. */
static void check_stream(const struct wire_stream *st, const struct shm_segment *seg)
{
	check_range(seg, st->rx_data, SHM_PIPE_SIZE, "to_server pipe data");
	check_range(seg, st->tx_data, SHM_PIPE_SIZE, "to_client pipe data");
	check_range(seg, (const char *)st->rx, sizeof(*st->rx), "to_server pipe");
	check_range(seg, (const char *)st->tx, sizeof(*st->tx), "to_client pipe");
}

/* The staging area as the worker pins it (session.c: attach_shm). */
static void check_staging(struct shm_segment *seg)
{
	uint64_t len = (uint64_t)seg->nslots * seg->slot_size;
	char *p;

	if (!seg->nslots)
		return;
	p = shm_slot(seg, 0, 0);
	if (!p) {
		fprintf(stderr, "fuzz_shm: slot 0 of %u missing\n", seg->nslots);
		abort();
	}
	check_range(seg, p, len, "staging area");
	(void)*(volatile char *)p;
	(void)*(volatile char *)(p + len - 1);
}

/* A slot as shm_copy uses it: its bytes written, its state set. */
static void run_probe(struct shm_segment *seg, const struct probe *pr)
{
	char *p = shm_slot(seg, pr->slot, pr->size);

	if (trace)
		fprintf(stderr, "fuzz_shm: slot %u size %llu: %s\n", pr->slot, (unsigned long long)pr->size,
			p ? "given" : "refused");
	if (!p)
		return;
	check_range(seg, p, pr->size, "slot");
	memset(p, 0x5a, pr->size);
	shm_slot_set(seg, pr->slot, SLOT_READY);
}

static void run_probes(struct shm_segment *seg, const struct probe *pr, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		run_probe(seg, &pr[i]);
}

/* ---- the client's side ---- */

static void kick(_Atomic uint32_t *word)
{
	atomic_fetch_add(word, 1);
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, 1 << 30, NULL, NULL, 0);
}

/* Whatever the worker may be waiting on: data, or room for a reply. */
static void kick_worker(struct shm_header *h)
{
	kick(&h->to_server.data_seq);
	kick(&h->to_client.space_seq);
}

/* Bytes into the to_server pipe where the client made it, at its tail. */
static void pipe_put(struct client *c, const uint8_t *b, size_t len)
{
	struct shm_pipe *p = &c->seg->hdr->to_server;
	char *data = (char *)c->seg->hdr + c->seg->to_server_offset;
	uint64_t tail = atomic_load(&p->tail);

	for (size_t i = 0; i < len; i++)
		data[(tail + i) % SHM_PIPE_SIZE] = (char)b[i];
	atomic_store(&p->tail, tail + len);
	kick(&p->data_seq);
}

static void op_field(struct client *c)
{
	const struct field *f = &fields[take_uint(&c->script, 1) % NFIELDS];
	uint64_t v = take_uint(&c->script, 8);

	memcpy((char *)c->seg->hdr + f->off, &v, f->width);
	kick_worker(c->seg->hdr);
}

static void op_data(struct client *c, int marked)
{
	size_t want = take_uint(&c->script, 2), got;
	const uint8_t *b = take_bytes(&c->script, want, &got);
	uint32_t mark = htonl(MARK_LAST | (uint32_t)got);

	if (marked)
		pipe_put(c, (const uint8_t *)&mark, 4);
	pipe_put(c, b, got);
}

static void op_tail(struct client *c)
{
	struct shm_pipe *p = &c->seg->hdr->to_server;

	atomic_fetch_add(&p->tail, take_uint(&c->script, 4));
	kick(&p->data_seq);
}

static void op_raw(struct client *c)
{
	uint64_t off = take_uint(&c->script, 4);
	size_t want = take_uint(&c->script, 1), got;
	const uint8_t *b = take_bytes(&c->script, want, &got);

	off %= c->seg->size - got + 1;
	memcpy((char *)c->seg->hdr + off, b, got);
}

static void op_consume(struct client *c)
{
	struct shm_pipe *p = &c->seg->hdr->to_client;

	atomic_store(&p->head, atomic_load(&p->tail));
	kick(&p->space_seq);
}

static void run_op(struct client *c)
{
	switch (take_uint(&c->script, 1) % OP_N) {
	case OP_FIELD: op_field(c); break;
	case OP_DATA: op_data(c, 0); break;
	case OP_RECORD: op_data(c, 1); break;
	case OP_TAIL: op_tail(c); break;
	case OP_RAW: op_raw(c); break;
	case OP_CONSUME: op_consume(c); break;
	default: sched_yield(); break;
	}
}

/* The script, then the peer gone: every wait of the worker's ends. */
static void *client_main(void *arg)
{
	struct client *c = arg;
	struct shm_header *h = c->seg->hdr;

	while (c->script.n)
		run_op(c);
	close(c->sock);
	while (!atomic_load(&c->stop)) {
		kick_worker(h);
		usleep(KICK_US);
	}
	return NULL;
}

/* ---- the worker's side ---- */

/* A reply of the record's bytes (at most ECHO_MAX), as dispatch sends one. */
static int echo(struct wire_stream *st, const struct wire_buf *in, struct wire_buf *out)
{
	size_t n = in->len < ECHO_MAX ? in->len : ECHO_MAX;

	if (wire_buf_reserve(out, n + 4))
		return -1;
	memcpy(out->data + 4, in->data, n);
	out->len = n + 4;
	return wire_send_record(st, out);
}

/* worker_serve's loop: records until the peer goes or one is refused. */
static void read_records(struct wire_stream *st, struct shm_segment *seg, const struct probe *pr, unsigned npr)
{
	struct wire_buf in = { 0 }, out = { 0 };

	for (unsigned i = 0; i < RECORDS_MAX; i++) {
		int rc = wire_recv_record(st, &in, WIRE_MAX_RECORD);

		if (trace)
			fprintf(stderr, "fuzz_shm: record %u: rc %d, %zu bytes\n", i, rc, rc ? 0 : in.len);
		if (rc)
			break;
		if (in.len > WIRE_MAX_RECORD)
			abort();
		if (echo(st, &in, &out)) {
			if (trace)
				fprintf(stderr, "fuzz_shm: reply %u not sent\n", i);
			break;
		}
		if (npr)
			run_probe(seg, &pr[i % npr]);
	}
	wire_buf_free(&in);
	wire_buf_free(&out);
}

/* The worker serves an attached segment while the client runs its script. */
static void serve(struct input *in, struct shm_segment *seg, struct shm_segment *wseg)
{
	struct probe pr[PROBES_MAX];
	unsigned npr = take_probes(in, pr);
	struct client c = { .seg = seg, .script = *in };
	struct wire_stream st;
	pthread_t t;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return;
	c.sock = sv[0];
	wire_stream_init(&st, sv[1]);
	wire_stream_use_shm(&st, wseg, 1);
	check_stream(&st, wseg);
	check_staging(wseg);
	if (pthread_create(&t, NULL, client_main, &c)) {
		close(sv[0]);
		close(sv[1]);
		return;
	}
	read_records(&st, wseg, pr, npr);
	atomic_store(&c.stop, 1);
	pthread_join(t, NULL);
	run_probes(wseg, pr, npr);           /* after every rewrite of the header */
	close(sv[1]);
}

/* A refused segment's descriptor stays the caller's: the worker closes
 * it (session.c: attach_shm). If attach closed it already, that close
 * is a second one, of whatever descriptor has the number by then. */
static void close_refused(int fd, const char *err)
{
	if (fcntl(fd, F_GETFD) >= 0) {
		close(fd);
		return;
	}
	if (!fd_check)
		return;
	fprintf(stderr, "fuzz_shm: shm_segment_attach refused the segment (%s) and closed its descriptor, "
		"which its caller closes again\n", err);
	abort();
}

/* The client's segment, its geometry from the input's first byte. */
static int make_segment(struct input *in, struct shm_segment *seg, size_t *claimed)
{
	unsigned g = (unsigned)take_uint(in, 1);

	if (shm_segment_create(seg, (g & 7) % (SLOTS_MAX + 1), 4096u << (g >> 4 & 3)))
		return -1;
	*claimed = seg->size + (g & 8 ? 4096 : 0);
	return 0;
}

static void drop_segment(struct shm_segment *seg)
{
	munmap(seg->hdr, seg->size);
	close(seg->fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	struct shm_segment seg, wseg = { .fd = -1 };
	char err[WIRE_ERRLEN] = "";
	size_t claimed, got;
	const uint8_t *hdr;
	int fd;

	if (make_segment(&in, &seg, &claimed))
		return 0;
	hdr = take_bytes(&in, sizeof(struct shm_header), &got);
	memcpy(seg.hdr, hdr, got);
	fd = dup(seg.fd);
	if (fd < 0) {
		drop_segment(&seg);
		return 0;
	}
	if (shm_segment_attach(&wseg, fd, claimed, err)) {
		if (trace)
			fprintf(stderr, "fuzz_shm: attach refused: %s\n", err);
		close_refused(fd, err);
	} else {
		serve(&in, &seg, &wseg);
		shm_segment_detach(&wseg);
	}
	drop_segment(&seg);
	return 0;
}

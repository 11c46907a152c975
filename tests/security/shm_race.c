/*
 * shm_race: a hostile local client that tries to read its worker's memory
 * through the shared-memory segment it passed, for sec-shm-race.
 *
 * It makes its own segment (sealed against shrinking, as a worker now
 * demands), says hello with it and, once attached, prints "attached
 * worker=PID" and waits for TARGETS_FILE: offsets (hex, from the
 * segment's start in the worker) of what it wants to read, which the
 * test finds as root in the worker's memory (the snapshot key), standing
 * in for an attacker who knows the layout (workers run without ASLR).
 * For each target a second thread keeps rewriting the header's staging
 * geometry (staging_offset, slot_size, nslots) and the pipes' offsets to
 * point there, first steadily, then flapping between those and the true
 * values, while this thread stages a copy host to device through slot 0
 * and reads the device buffer back. Every byte read back goes to DUMP
 * (the test searches it for the secret); a read-back that is not the
 * pattern just staged is counted as foreign.
 *
 * Then the shrink attacks: the segment itself must not shrink (it is
 * sealed); a pinned region passed as a memfd that is not sealed (a worker
 * that maps it could be faulted by ftruncate) and a second connection
 * with an unsealed segment must each be refused; if one is taken, the
 * tool shrinks it and copies through it, to show what would become of
 * the worker. Last, the session must still answer a copy correctly.
 *
 * Prints one summary line; exits 0 when nothing foreign came back, the
 * segment could not shrink, both unsealed descriptors were refused and
 * the session still works.
 *
 * usage: shm_race unix:SOCKET SECONDS DUMP TARGETS_FILE
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "raw.h"

#define COPY 4096u                           /* bytes a copy moves */
#define NSLOTS 4u
#define SLOT_SIZE (64u << 10)
#define MAX_TARGETS 16
#define REGION_SIZE (64u << 10)

static struct raw_conn c;
static struct shm_segment seg;
static uint32_t xid = 1;
static _Atomic uint64_t target;
static uint8_t prev[COPY];                       /* the device buffer as last read back */
static atomic_int stop, flap;

/* A segment laid out as the interposer lays one out; sealed or not. */
static int make_segment(struct shm_segment *s, int seal)
{
	size_t hdr = 4096, size = hdr + 2 * (size_t)SHM_PIPE_SIZE + (size_t)NSLOTS * SLOT_SIZE;
	struct shm_header *h;

	memset(s, 0, sizeof(*s));
	s->fd = memfd_create("cicada-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (s->fd < 0 || ftruncate(s->fd, (off_t)size) || (seal && shm_fd_seal(s->fd)))
		return -1;
	h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (h == MAP_FAILED)
		return -1;
	h->magic = SHM_MAGIC;
	h->version = SHM_VERSION;
	h->size = size;
	h->to_server.data_offset = s->to_server_offset = hdr;
	h->to_client.data_offset = s->to_client_offset = hdr + SHM_PIPE_SIZE;
	h->to_server.size = h->to_client.size = SHM_PIPE_SIZE;
	h->staging_offset = s->staging_offset = hdr + 2 * (size_t)SHM_PIPE_SIZE;
	h->slot_size = s->slot_size = SLOT_SIZE;
	h->nslots = s->nslots = NSLOTS;
	s->hdr = h;
	s->size = size;
	return 0;
}

/* Says hello with segment s on a new connection; 1 attached, 0 refused
 * (why in msg), -1 no answer. */
static int attach(const char *address, struct raw_conn *rc, struct shm_segment *s, char *msg, size_t len,
		  uint64_t *worker)
{
	struct raw_hello h = { .op = OP_CONNECT, .want_shm = 1, .shm_size = s->size };
	char err[WIRE_ERRLEN];
	hello_res r;
	int ok;

	if (raw_dial(address, rc, err)) {
		snprintf(msg, len, "%s", err);
		return -1;
	}
	if (!raw_send_hello(rc, &h))
		wire_send_fd(rc->fd, s->fd);
	if (raw_reply(rc, &r, 30000)) {
		snprintf(msg, len, "no answer to the hello");
		return -1;
	}
	ok = !r.err && r.shm_ok;
	snprintf(msg, len, "%s", r.err ? r.message : r.shm_ok ? "attached" : "not attached (no shared memory)");
	*worker = r.worker_pid;
	xdr_free((xdrproc_t)xdr_hello_res, (char *)&r);
	if (ok)
		wire_stream_use_shm(&rc->st, s, 0);
	return ok;
}

/* One call on the session; the CUDA result (the reply's first word), or
 * -1 if the session is gone. res NULL: no reply (a pipelined call). */
static int call(unsigned proc, xdrproc_t xargs, void *args, xdrproc_t xres, void *res, size_t res_size)
{
	struct wire_buf b = { 0 };
	char err[WIRE_ERRLEN];
	uint32_t id = ++xid;
	int rc = -1;

	if (res)
		memset(res, 0, res_size);
	if (!wire_encode_call(&b, id, proc, xargs, args) && !wire_send_record(&c.st, &b))
		rc = 0;
	if (!rc && res)
		rc = wire_recv_record(&c.st, &b, 1 << 20) || wire_decode_reply(&b, id, xres, res, err) ? -1 : *(int *)res;
	wire_buf_free(&b);
	return rc;
}

static int scalar_call(unsigned proc, uint64_t in, uint64_t *out)
{
	scalars a = { { 1, &in } };
	uint64_t v[CICADA_SCALARS_MAX];
	scalar_res r = { 0, { 0, v } };
	int rc;

	if (!out)
		return call(proc, (xdrproc_t)xdr_scalars, &a, NULL, NULL, 0);
	rc = call(proc, (xdrproc_t)xdr_scalars, &a, (xdrproc_t)xdr_scalar_res, &r, sizeof(r));
	if (!rc && r.v.v_len >= 1)
		*out = r.v.v_val[0];
	xdr_free((xdrproc_t)xdr_scalar_res, (char *)&r);
	return rc;
}

/* The device buffer the copies go through; 0 on failure. */
static uint64_t device_buffer(void)
{
	uint64_t ctx = 0, d = 0;

	if (scalar_call(P_cuDevicePrimaryCtxRetain, 0, &ctx) || scalar_call(P_cuCtxSetCurrent, ctx, NULL) ||
	    scalar_call(P_cuMemAlloc_v2, COPY, &d))
		return 0;
	return d;
}

/* The header's geometry and pipe offsets: aimed at t, or true. */
static void set_header(uint64_t t, int hostile)
{
	volatile struct shm_header *h = seg.hdr;

	h->staging_offset = hostile ? t : seg.staging_offset;
	h->slot_size = hostile ? 1u << 30 : seg.slot_size;
	h->nslots = hostile ? SHM_MAX_SLOTS : seg.nslots;
	h->to_server.data_offset = hostile ? t : seg.to_server_offset;
	h->to_client.data_offset = hostile ? t : seg.to_client_offset;
}

/* The other thread: the header aimed at the target, steadily or
 * flapping with the true values. */
static void *rewrite(void *arg)
{
	while (!atomic_load(&stop)) {
		set_header(atomic_load(&target), 1);
		if (atomic_load(&flap))
			set_header(0, 0);
	}
	return NULL;
}

static void fill(uint8_t *p, unsigned round)
{
	for (unsigned j = 0; j < COPY; j++)
		p[j] = (uint8_t)(round * 131u + j * 7u + 0x5a);
}

struct tally {
	unsigned copies, refused, foreign;
};

/* Stages the pattern of round through slot 0 (the true one, which only
 * this thread writes), then reads the device buffer back; -1 if the
 * session died. */
static int staged_round(uint64_t d, unsigned round, FILE *dump, struct tally *t)
{
	uint8_t want[COPY], *slot = (uint8_t *)seg.hdr + seg.staging_offset;
	shm_copy_args a = { .device = d, .region = 0, .size = COPY, .to_device = 1, .slot = 0 };
	dtoh_args back = { .src = d, .size = COPY };
	uint64_t v[CICADA_SCALARS_MAX];
	scalar_res sr = { 0, { 0, v } };
	bytes_res br;
	int rc, err;

	fill(want, round);
	memcpy(slot, want, COPY);
	atomic_store(&seg.hdr->slot_state[0], SLOT_BUSY);
	if (call(P_memcpy_shm, (xdrproc_t)xdr_shm_copy_args, &a, (xdrproc_t)xdr_scalar_res, &sr, sizeof(sr)) < 0)
		return -1;
	xdr_free((xdrproc_t)xdr_scalar_res, (char *)&sr);
	err = atomic_load(&seg.hdr->slot_err[0]) || sr.err;
	atomic_store(&seg.hdr->slot_state[0], SLOT_FREE);
	rc = call(P_memcpy_dtoh, (xdrproc_t)xdr_dtoh_args, &back, (xdrproc_t)xdr_bytes_res, &br, sizeof(br));
	if (rc < 0)
		return -1;
	t->copies++;
	if (!rc && br.data.data_len == COPY) {
		fwrite(br.data.data_val, 1, COPY, dump);
		if (memcmp(br.data.data_val, want, COPY)) {
			if (err && !memcmp(br.data.data_val, prev, COPY))
				t->refused++;                /* refused: the buffer holds what it held */
			else
				t->foreign++;
		}
		memcpy(prev, br.data.data_val, COPY);
	}
	xdr_free((xdrproc_t)xdr_bytes_res, (char *)&br);
	return 0;
}

/* n targets in turn for seconds in all, half of each target's time
 * with the header aimed steadily, half flapping; 0, or -1 if the session
 * died. */
static int race(uint64_t d, const uint64_t *targets, int n, double seconds, FILE *dump, struct tally *t)
{
	unsigned round = 1;
	pthread_t th;
	int died = 0;

	atomic_store(&target, targets[0]);
	pthread_create(&th, NULL, rewrite, NULL);
	for (int i = 0; i < n && !died; i++) {
		uint64_t start = wire_now_ns(), slice = (uint64_t)(seconds / n * 1e9);

		atomic_store(&target, targets[i]);
		for (int phase = 0; phase < 2 && !died; phase++) {
			atomic_store(&flap, phase);
			while (wire_now_ns() < start + slice * (uint64_t)(phase + 1) / 2 && !died)
				died = staged_round(d, round++, dump, t) < 0;
		}
	}
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	set_header(0, 0);
	return died ? -1 : 0;
}

/* One more staged copy comes back right (the header true again). */
static int session_works(uint64_t d, unsigned round)
{
	struct tally last = { 0 };
	FILE *null = fopen("/dev/null", "w");
	int ok = null && staged_round(d, round, null, &last) == 0 && last.copies == 1 && !last.foreign && !last.refused;

	if (null)
		fclose(null);
	return ok;
}

/* The offsets the test wrote (waits up to 20 s for the file). */
static int read_targets(const char *file, uint64_t *t)
{
	struct stat st;
	FILE *f = NULL;
	int n = 0;

	for (int i = 0; i < 400 && (stat(file, &st) || !st.st_size); i++)
		usleep(50000);
	if (!(f = fopen(file, "r")))
		return 0;
	while (n < MAX_TARGETS && fscanf(f, "%llx", (unsigned long long *)&t[n]) == 1)
		n++;
	fclose(f);
	return n;
}

/* A pinned region whose memfd is not sealed: refused (1), or taken and
 * then shrunk under the worker, with a copy through it (0). */
static int unsealed_region(uint64_t d, char *what, size_t len)
{
	host_region_args a = { .region = 1, .size = REGION_SIZE };
	host_region_res r;
	shm_copy_args cp = { .device = d, .region = 1, .size = COPY, .to_device = 1, .slot = -1 };
	uint64_t v[CICADA_SCALARS_MAX];
	scalar_res sr = { 0, { 0, v } };
	int fd = memfd_create("cicada-pinned", MFD_CLOEXEC), rc;

	if (fd < 0 || ftruncate(fd, REGION_SIZE) || wire_send_fd(c.fd, fd)) {
		snprintf(what, len, "cannot pass a region");
		return 0;
	}
	rc = call(P_host_region_map, (xdrproc_t)xdr_host_region_args, &a, (xdrproc_t)xdr_host_region_res, &r,
		  sizeof(r));
	if (rc) {
		snprintf(what, len, rc < 0 ? "the session died" : "refused (error %d)", rc);
		close(fd);
		return rc > 0;
	}
	rc = ftruncate(fd, 0) ? -2 :
	     call(P_memcpy_shm, (xdrproc_t)xdr_shm_copy_args, &cp, (xdrproc_t)xdr_scalar_res, &sr, sizeof(sr));
	snprintf(what, len, "TAKEN; shrunk under the worker, a copy through it %s",
		 rc == -1 ? "killed the worker" : "still answered");
	close(fd);
	return 0;
}

/* A second connection whose segment is not sealed: refused (1), or
 * attached, then its staging area cut off and a copy staged (0). */
static int unsealed_segment(const char *address, char *what, size_t len)
{
	struct shm_segment s;
	struct raw_conn rc;
	uint64_t worker;
	char msg[WIRE_ERRLEN];
	int a;

	if (make_segment(&s, 0)) {
		snprintf(what, len, "cannot make a segment");
		return 0;
	}
	a = attach(address, &rc, &s, msg, sizeof(msg), &worker);
	if (a <= 0) {
		snprintf(what, len, "refused (%s)", msg);
		close(rc.fd);
		return a == 0;
	}
	if (ftruncate(s.fd, (off_t)s.staging_offset))
		snprintf(what, len, "TAKEN (and it could not be shrunk)");
	else
		snprintf(what, len, "TAKEN, then shrunk under worker %llu", (unsigned long long)worker);
	close(rc.fd);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t targets[MAX_TARGETS], worker = 0, d;
	char msg[WIRE_ERRLEN], region[200], second[600];
	struct tally t = { 0 };
	FILE *dump;
	double seconds;
	int n, died = 0, region_ok, segment_ok, alive, sealed;

	if (argc != 5)
		return fprintf(stderr, "usage: shm_race unix:SOCKET SECONDS DUMP TARGETS_FILE\n"), 2;
	seconds = atof(argv[2]);
	if (!(dump = fopen(argv[3], "w")))
		return perror(argv[3]), 2;
	if (make_segment(&seg, 1) || attach(argv[1], &c, &seg, msg, sizeof(msg), &worker) != 1) {
		printf("shm_race: the sealed segment was not attached: %s\n", msg);
		return 1;
	}
	if (!(d = device_buffer())) {
		printf("shm_race: no device buffer\n");
		return 1;
	}
	printf("shm_race: attached worker=%llu\n", (unsigned long long)worker);
	fflush(stdout);
	n = read_targets(argv[4], targets);
	died = n ? race(d, targets, n, seconds, dump, &t) < 0 : 0;
	fclose(dump);
	/* the segment the worker maps cannot be shrunk under it */
	sealed = ftruncate(seg.fd, (off_t)seg.staging_offset) && errno == EPERM;
	region_ok = !died && unsealed_region(d, region, sizeof(region));
	alive = !died && session_works(d, 1u << 30);
	segment_ok = unsealed_segment(argv[1], second, sizeof(second));
	printf("shm_race: %u copies through a hostile header (%d targets), %u brought back bytes other than the "
	       "client's own, %u were refused; the sealed segment %s; unsealed pinned region: %s; unsealed segment: %s; "
	       "the session %s\n", t.copies, n, t.foreign, t.refused, sealed ? "cannot shrink" : "SHRANK",
	       died ? "not tried" : region, second, died ? "DIED (the worker was lost)" : alive ? "still works" :
	       "no longer works");
	return n && t.copies && !t.foreign && sealed && region_ok && segment_ok && alive ? 0 : 1;
}

/*
 * shm.c: the shared-memory data path for local clients. One memfd segment
 * per connection holds two byte pipes (client to server and back), which
 * carry the same ONC RPC records as a socket would, and a staging area of
 * slots for pageable copies. Waiting spins briefly, then sleeps on a futex;
 * a sleeper wakes every 50 ms to check that its peer's socket is still open.
 * A stream in poll_wait mode (a client waiting for a reply, as the driver
 * spins waiting for the GPU) keeps polling instead, yielding the CPU
 * between polls: a sleeping thread on a virtual machine can take a
 * millisecond to wake. Socket reads spin the same way (MSG_DONTWAIT).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "wire.h"

#define SLEEP_CHECK_NS 50000000L

static void futex_wait(_Atomic uint32_t *addr, uint32_t seen)
{
	struct timespec ts = { 0, SLEEP_CHECK_NS };

	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, seen, &ts, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr)
{
	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, 1 << 30, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
	__builtin_ia32_pause();
}

int wire_peer_alive(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };

	if (poll(&p, 1, 0) < 0)
		return errno == EINTR;
	return !(p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* A segment's size is fixed once made: the worker maps it, and a client
 * that could shrink it would fault the worker at its next touch. */
int shm_fd_seal(int fd)
{
	return fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL);
}

int shm_fd_sealed(int fd)
{
	int seals = fcntl(fd, F_GET_SEALS);

	return seals >= 0 && (seals & F_SEAL_SHRINK);
}

int shm_segment_create(struct shm_segment *seg, uint32_t nslots, uint32_t slot_size)
{
	size_t hdr = 4096, size = hdr + 2 * (size_t)SHM_PIPE_SIZE + (size_t)nslots * slot_size;
	struct shm_header *h;

	if (nslots > SHM_MAX_SLOTS)
		return -1;
	seg->fd = memfd_create("cicada-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (seg->fd < 0 || ftruncate(seg->fd, size) || shm_fd_seal(seg->fd))
		goto fail;
	h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, seg->fd, 0);
	if (h == MAP_FAILED)
		goto fail;
	h->magic = SHM_MAGIC;
	h->version = SHM_VERSION;
	h->size = size;
	h->to_server.data_offset = hdr;
	h->to_server.size = SHM_PIPE_SIZE;
	h->to_client.data_offset = hdr + SHM_PIPE_SIZE;
	h->to_client.size = SHM_PIPE_SIZE;
	h->staging_offset = hdr + 2 * (size_t)SHM_PIPE_SIZE;
	seg->to_server_offset = hdr;
	seg->to_client_offset = hdr + SHM_PIPE_SIZE;
	h->slot_size = slot_size;
	h->nslots = nslots;
	seg->hdr = h;
	seg->size = size;
	seg->staging_offset = h->staging_offset;
	seg->slot_size = slot_size;
	seg->nslots = nslots;
	return 0;
fail:
	if (seg->fd >= 0)
		close(seg->fd);
	seg->fd = -1;
	return -1;
}

/* Checks a header copied out of the client's segment; the client may
 * change the segment's own copy at any time after. */
static int header_ok(const struct shm_header *h, size_t size)
{
	return h->magic == SHM_MAGIC && h->version == SHM_VERSION && h->size == size &&
	       h->nslots <= SHM_MAX_SLOTS && h->slot_size && h->slot_size <= SHM_MAX_SLOT_SIZE &&
	       h->to_server.size == SHM_PIPE_SIZE && h->to_client.size == SHM_PIPE_SIZE &&
	       h->to_server.data_offset >= sizeof(*h) && h->to_client.data_offset >= sizeof(*h) &&
	       h->to_server.data_offset <= size - SHM_PIPE_SIZE && h->to_client.data_offset <= size - SHM_PIPE_SIZE &&
	       h->staging_offset >= sizeof(*h) && h->staging_offset <= size &&
	       (uint64_t)h->nslots * h->slot_size <= size - h->staging_offset;
}

static void *plain_map(size_t size, int prot, int flags, int fd, off_t off)
{
	return mmap(NULL, size, prot, flags, fd, off);
}

static void plain_unmap(void *p, size_t size)
{
	if (p && p != MAP_FAILED)
		munmap(p, size);
}

/* The server side's mapping of segments (shm_set_mapper). */
static struct {
	void *(*map)(size_t size, int prot, int flags, int fd, off_t off);
	void (*unmap)(void *p, size_t size);
} mapper = { plain_map, plain_unmap };

void shm_set_mapper(void *(*map)(size_t size, int prot, int flags, int fd, off_t off),
		    void (*unmap)(void *p, size_t size))
{
	mapper.map = map ? map : plain_map;
	mapper.unmap = unmap ? unmap : plain_unmap;
}

int shm_segment_attach(struct shm_segment *seg, int fd, size_t size, char *err)
{
	struct shm_header copy, *h;
	off_t real = lseek(fd, 0, SEEK_END);

	if (real < 4096 || (size_t)real != size || size < 2 * (size_t)SHM_PIPE_SIZE) {
		wire_fail(err, "shared memory segment has size %lld, expected %zu", (long long)real, size);
		return -1;
	}
	if (!shm_fd_sealed(fd)) {
		wire_fail(err, "shared memory segment can shrink (no F_SEAL_SHRINK)");
		return -1;
	}
	h = mapper.map(size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED) {
		wire_fail(err, "cannot map shared memory: %s", strerror(errno));
		return -1;
	}
	seg->hdr = h;
	seg->size = size;
	seg->fd = fd;
	/* The client writes the header: copied once, checked, and only the
	 * copy is used from here on (the pipes' places and the slots'). */
	memcpy(&copy, h, sizeof(copy));
	if (!header_ok(&copy, size)) {
		wire_fail(err, "shared memory segment header is invalid");
		mapper.unmap(h, size);           /* fd stays the caller's, as on every refusal */
		seg->hdr = NULL;
		seg->fd = -1;
		return -1;
	}
	seg->staging_offset = copy.staging_offset;
	seg->slot_size = copy.slot_size;
	seg->nslots = copy.nslots;
	seg->to_server_offset = copy.to_server.data_offset;
	seg->to_client_offset = copy.to_client.data_offset;
	return 0;
}

void shm_segment_detach(struct shm_segment *seg)
{
	if (seg->hdr)
		mapper.unmap(seg->hdr, seg->size);
	if (seg->fd >= 0)
		close(seg->fd);
	seg->hdr = NULL;
	seg->fd = -1;
}

char *shm_slot(struct shm_segment *seg, unsigned slot, uint64_t size)
{
	if (slot >= seg->nslots || size > seg->slot_size)
		return NULL;
	return (char *)seg->hdr + seg->staging_offset + (size_t)slot * seg->slot_size;
}

int shm_slot_wait(struct shm_segment *seg, unsigned slot, uint32_t state, int peer_fd, int poll)
{
	_Atomic uint32_t *word = &seg->hdr->slot_state[slot];
	uint64_t start = wire_now_ns(), checked = start;
	uint32_t now;

	while ((now = atomic_load(word)) != state) {
		uint64_t t = wire_now_ns();

		if (t - start < 200000) {
			cpu_relax();
			continue;
		}
		if (poll && t - checked < SLEEP_CHECK_NS) {
			sched_yield();
			continue;
		}
		checked = t;
		if (!wire_peer_alive(peer_fd))
			return -1;
		if (!poll)
			futex_wait(word, now);
	}
	return 0;
}

void shm_slot_set(struct shm_segment *seg, unsigned slot, uint32_t state)
{
	atomic_store(&seg->hdr->slot_state[slot], state);
	futex_wake(&seg->hdr->slot_state[slot]);
}

void wire_stream_init(struct wire_stream *s, int fd)
{
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->spin_us = 100;
}

void wire_stream_use_shm(struct wire_stream *s, struct shm_segment *seg, int server_side)
{
	struct shm_header *h = seg->hdr;
	uint64_t to_server = seg->to_server_offset, to_client = seg->to_client_offset;

	s->shm = seg;
	s->tx = server_side ? &h->to_client : &h->to_server;
	s->rx = server_side ? &h->to_server : &h->to_client;
	/* the pipes' data where the segment was made or checked, never where
	 * its header says now */
	s->tx_data = (char *)h + (server_side ? to_client : to_server);
	s->rx_data = (char *)h + (server_side ? to_server : to_client);
	s->rx_head = s->rx_tail = atomic_load(&s->rx->head);
	s->tx_head = atomic_load(&s->tx->head);
}

/* Waits until cond() holds, spinning first; -1 if the peer went away. */
static int pipe_wait(struct wire_stream *s, _Atomic uint32_t *sleeping, _Atomic uint32_t *seq,
		     int (*cond)(struct shm_pipe *, size_t), struct shm_pipe *p, size_t want)
{
	uint64_t start, checked, spin = (uint64_t)s->spin_us * 1000;

	if (cond(p, want))
		return 0;
	start = checked = wire_now_ns();
	while (!cond(p, want)) {
		uint64_t now = wire_now_ns();

		if (now - start < spin) {
			cpu_relax();
			continue;
		}
		if (s->poll_wait) {
			if (now - checked > SLEEP_CHECK_NS) {
				if (!wire_peer_alive(s->fd))
					return -1;
				checked = now;
			}
			sched_yield();
			continue;
		}
		uint32_t seen = atomic_load(seq);
		atomic_store(sleeping, 1);
		if (!cond(p, want))
			futex_wait(seq, seen);
		atomic_store(sleeping, 0);
		if (!cond(p, want) && !wire_peer_alive(s->fd))
			return -1;
	}
	return 0;
}

/* The pipe's size is the protocol's constant, never the peer's word. */
static int has_space(struct shm_pipe *p, size_t want)
{
	return SHM_PIPE_SIZE - (atomic_load(&p->tail) - atomic_load(&p->head)) >= want;
}

static int has_data(struct shm_pipe *p, size_t want)
{
	return atomic_load(&p->tail) - atomic_load(&p->head) >= want;
}

/* The writer publishes its tail at once (the reader waits for it), and
 * reads the reader's head only when the head it saw leaves too little
 * room: each read of a line the peer writes is a cache miss. */
static int shm_write(struct wire_stream *s, const char *buf, size_t len)
{
	struct shm_pipe *p = s->tx;

	while (len) {
		size_t n = len < SHM_PIPE_SIZE / 2 ? len : SHM_PIPE_SIZE / 2;
		uint64_t tail = atomic_load_explicit(&p->tail, memory_order_relaxed);

		if (SHM_PIPE_SIZE - (tail - s->tx_head) < n) {
			if (pipe_wait(s, &p->writer_sleeping, &p->space_seq, has_space, p, n))
				return -1;
			s->tx_head = atomic_load(&p->head);
			if (tail - s->tx_head > SHM_PIPE_SIZE)
				return -1;
		}
		size_t off = tail % SHM_PIPE_SIZE, first = SHM_PIPE_SIZE - off < n ? SHM_PIPE_SIZE - off : n;
		memcpy(s->tx_data + off, buf, first);
		memcpy(s->tx_data, buf + first, n - first);
		atomic_store(&p->tail, tail + n);
		if (atomic_load(&p->reader_sleeping)) {
			atomic_fetch_add(&p->data_seq, 1);
			futex_wake(&p->data_seq);
		}
		buf += n;
		len -= n;
	}
	return 0;
}

/* Tells the writer how far the reader has read. */
static void publish_head(struct wire_stream *s)
{
	struct shm_pipe *p = s->rx;

	atomic_store(&p->head, s->rx_head);
	if (atomic_load(&p->writer_sleeping)) {
		atomic_fetch_add(&p->space_seq, 1);
		futex_wake(&p->space_seq);
	}
}

/* The reader reads the writer's tail only when what it saw is used up,
 * and publishes its head before it waits and when it returns (a store to
 * a line the writer seldom reads stays in the reader's cache). */
static int shm_read(struct wire_stream *s, char *buf, size_t len)
{
	struct shm_pipe *p = s->rx;

	while (len) {
		if (s->rx_tail == s->rx_head) {
			s->rx_tail = atomic_load(&p->tail);
			if (s->rx_tail == s->rx_head) {
				publish_head(s);
				if (pipe_wait(s, &p->reader_sleeping, &p->data_seq, has_data, p, 1))
					return -1;
				s->rx_tail = atomic_load(&p->tail);
			}
			/* The peer may be hostile: never trust it beyond the pipe. */
			if (s->rx_tail - s->rx_head > SHM_PIPE_SIZE)
				return -1;
		}
		uint64_t avail = s->rx_tail - s->rx_head;
		size_t n = len < avail ? len : avail;
		size_t off = s->rx_head % SHM_PIPE_SIZE, first = SHM_PIPE_SIZE - off < n ? SHM_PIPE_SIZE - off : n;
		memcpy(buf, s->rx_data + off, first);
		memcpy(buf + first, s->rx_data, n - first);
		s->rx_head += n;
		buf += n;
		len -= n;
	}
	publish_head(s);
	return 0;
}

int wire_write(struct wire_stream *s, const void *buf, size_t len)
{
	const char *p = buf;

	if (s->shm)
		return shm_write(s, p, len);
	while (len) {
		ssize_t n = send(s->fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

int wire_read(struct wire_stream *s, void *buf, size_t len)
{
	int flags = s->spin_us || s->poll_wait ? MSG_DONTWAIT : 0;
	uint64_t start = 0;
	char *p = buf;

	if (s->shm)
		return shm_read(s, p, len);
	while (len) {
		ssize_t n = recv(s->fd, p, len, flags);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && flags && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			uint64_t now = wire_now_ns();

			if (!start)
				start = now;
			if (now - start < (uint64_t)s->spin_us * 1000)
				cpu_relax();
			else if (s->poll_wait)
				sched_yield();
			else
				flags = 0;
			continue;
		}
		if (n <= 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

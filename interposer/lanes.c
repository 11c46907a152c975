/*
 * lanes.c: bulk lanes for a client without shared memory (TCP). One TCP
 * stream is bound by the one core that copies its bytes; a copy of
 * LANES_MIN bytes or more goes over CICADA_LANES extra connections to the
 * worker instead (default 4, 0 turns them off), each with a thread here,
 * chunk k on lane k % lanes (gpu-server/calls/lanes.c has the other end). The
 * bytes go straight from and into the application's memory. The lanes
 * open at the first large copy (as the host-function channel opens), and
 * close when the session pauses; a lane that breaks loses the session,
 * as a broken connection does.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include "interposer.h"

#define LANES_DEFAULT 4
#define LANES_MIN (8u << 20)
#define LANE_CHUNK (4u << 20)

_Static_assert(LANE_CHUNK >= LANE_CHUNK_MIN && LANE_CHUNK <= LANE_CHUNK_MAX, "lane chunk");

struct lane {
	int fd;
	unsigned id, seen;
	pthread_t thread;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t go, done;
	unsigned n, generation, running;
	int tried, stop, broke;
	/* the current copy */
	char *host;
	uint64_t size;
	int to_device;
	struct lane lane[LANE_MAX];
} L = { .lock = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER };

/* One lane's share of the copy: -1 if the lane broke. */
static int lane_move(struct lane *l, char *host, uint64_t size, int to_device, unsigned nlanes)
{
	for (uint64_t k = l->id; k * LANE_CHUNK < size; k += nlanes) {
		uint64_t off = k * LANE_CHUNK, len = size - off < LANE_CHUNK ? size - off : LANE_CHUNK;
		struct lane_frame f = { htonl(LANE_MAGIC), htonl((uint32_t)len), htobe64(off) };

		if (to_device) {
			if (wire_send_all(l->fd, &f, sizeof(f)) || wire_send_all(l->fd, host + off, len))
				return -1;
		} else if (wire_recv_all(l->fd, &f, sizeof(f)) || ntohl(f.magic) != LANE_MAGIC ||
			   ntohl(f.len) != len || be64toh(f.offset) != off || wire_recv_all(l->fd, host + off, len)) {
			return -1;
		}
	}
	return 0;
}

static void *lane_main(void *arg)
{
	struct lane *l = arg;

	for (;;) {
		char *host;
		uint64_t size;
		int to_device, broke;
		unsigned n;

		pthread_mutex_lock(&L.lock);
		while (L.generation == l->seen && !L.stop)
			pthread_cond_wait(&L.go, &L.lock);
		if (L.stop) {
			pthread_mutex_unlock(&L.lock);
			return NULL;
		}
		l->seen = L.generation;
		host = L.host, size = L.size, to_device = L.to_device, n = L.n;
		pthread_mutex_unlock(&L.lock);
		broke = lane_move(l, host, size, to_device, n);
		pthread_mutex_lock(&L.lock);
		L.broke |= broke;
		if (--L.running == 0)
			pthread_cond_signal(&L.done);
		pthread_mutex_unlock(&L.lock);
	}
}

static unsigned lanes_wanted(void)
{
	const char *e = getenv("CICADA_LANES");
	long n = e && *e ? strtol(e, NULL, 10) : LANES_DEFAULT;

	return n < 0 ? 0 : n > LANE_MAX ? LANE_MAX : (unsigned)n;
}

/* Opens the lanes once per connection; 0 if there are none to use. The
 * caller holds the client lock. */
static unsigned lanes_open(void)
{
	char err[WIRE_ERRLEN] = "";
	unsigned want = lanes_wanted();

	if (L.n || L.tried)
		return L.n;
	L.tried = 1;
	if (!want || client_shm())
		return 0;
	L.stop = 0;
	while (L.n < want) {
		struct lane *l = &L.lane[L.n];
		int fd = client_open_channel(P_lane_open, err);

		if (fd < 0)
			break;
		*l = (struct lane){ .fd = fd, .id = L.n, .seen = L.generation };
		if (pthread_create(&l->thread, NULL, lane_main, l)) {
			close(fd);
			break;
		}
		L.n++;
	}
	if (L.n < want)
		log_info("bulk lanes: %u of %u opened%s%s", L.n, want, err[0] ? ": " : "", err);
	else
		log_info("bulk lanes: %u open", L.n);
	return L.n;
}

/* The copy over the lanes, or LANES_UNUSED if it does not take them. The
 * caller holds the client lock. */
CUresult lanes_copy(char *host, CUdeviceptr dev, size_t n, CUstream stream, int async, int to_device)
{
	lane_copy_args a = { .device = dev, .size = n, .stream = handle_id(stream), .async = async,
			     .to_device = to_device, .chunk = LANE_CHUNK };
	scalar_res r = { 0 };
	uint32_t xid;
	CUresult rc;
	int broke;

	if (n < LANES_MIN || !lanes_open())
		return LANES_UNUSED;
	a.lanes = L.n;
	if ((rc = client_send_locked(P_memcpy_lanes, (xdrproc_t)xdr_lane_copy_args, &a, 1, &xid)))
		return rc;
	pthread_mutex_lock(&L.lock);
	L.host = host, L.size = n, L.to_device = to_device, L.broke = 0;
	L.running = L.n;
	L.generation++;
	pthread_cond_broadcast(&L.go);
	while (L.running)
		pthread_cond_wait(&L.done, &L.lock);
	broke = L.broke;
	pthread_mutex_unlock(&L.lock);
	if (broke) {
		for (unsigned i = 0; i < L.n; i++)      /* the worker's side must not wait on them */
			shutdown(L.lane[i].fd, SHUT_RDWR);
		return client_lost("a bulk lane broke");
	}
	rc = client_reply_locked(P_memcpy_lanes, xid, (xdrproc_t)xdr_scalar_res, &r);
	xdr_free((xdrproc_t)xdr_scalar_res, (char *)&r);
	return rc;
}

/* A pause (or a lost connection): the threads stop, the lanes close, and
 * the next large copy opens new ones. */
static void lanes_close(void)
{
	pthread_mutex_lock(&L.lock);
	L.stop = 1;
	pthread_cond_broadcast(&L.go);
	pthread_mutex_unlock(&L.lock);
	for (unsigned i = 0; i < L.n; i++) {
		shutdown(L.lane[i].fd, SHUT_RDWR);
		pthread_join(L.lane[i].thread, NULL);
		close(L.lane[i].fd);
	}
	L.n = 0;
	L.tried = 0;
}

static const struct client_hooks lanes_hooks = { .pause = lanes_close };

__attribute__((constructor)) static void lanes_init(void)
{
	client_add_hooks(&lanes_hooks);
}

/*
 * lanes.c: a remote client's bulk lanes. One TCP stream is bound by the
 * one core that copies its bytes, so a client without shared memory opens
 * a few more connections to its worker (lane_open, the way the
 * host-function channel opens) and moves each large copy over all of them
 * at once: chunk k on lane k % lanes, each behind a lane_frame header.
 *
 * Each lane has a thread and two pinned buffers. Towards the device, the
 * thread receives a chunk into one buffer and copies it to the device on
 * the application's stream while the next arrives in the other; from the
 * device, it copies a chunk into a buffer and sends it. The worker's own
 * thread waits until every lane is done, so the copy keeps its place
 * among the application's calls. A copy that fails on the device still
 * moves its bytes (received and dropped, or sent as they are), so both
 * ends stay in step; a malformed frame shuts the lane, and the client
 * loses its session.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include "calls.h"

struct lane {
	struct lanes *all;
	int fd;
	unsigned id, seen;
	pthread_t thread;
	char *buf[2];
};

struct job {
	CUcontext ctx;
	CUstream stream;
	CUdeviceptr device;
	uint64_t size;
	uint32_t chunk, nlanes;
	int to_device;
	CUresult err;                        /* set before the lanes start: bytes only */
};

struct lanes {
	pthread_mutex_t lock;
	pthread_cond_t go, done;
	unsigned n, generation, running;
	int stop;
	struct job job;
	CUresult err;
	struct lane lane[LANE_MAX];
};

static uint64_t chunk_len(const struct job *j, uint64_t k)
{
	uint64_t off = k * j->chunk;

	return j->size - off < j->chunk ? j->size - off : j->chunk;
}

/* Towards the device: -1 if the lane broke (I/O or a malformed frame). */
static int lane_in(struct lane *l, const struct job *j, CUresult *err)
{
	unsigned b = 0, issued = 0;

	for (uint64_t k = l->id; k * j->chunk < j->size; k += j->nlanes, b ^= 1) {
		uint64_t off = k * j->chunk, len = chunk_len(j, k);
		struct lane_frame f;

		if (issued == 2 && !*err)
			*err = cuStreamSynchronize(j->stream);     /* this buffer's last copy is done */
		issued = issued == 2 ? 0 : issued;
		if (wire_recv_all(l->fd, &f, sizeof(f)) || ntohl(f.magic) != LANE_MAGIC || ntohl(f.len) != len ||
		    be64toh(f.offset) != off || wire_recv_all(l->fd, l->buf[b], len))
			return -1;
		if (!*err)
			*err = cuMemcpyHtoDAsync(j->device + off, l->buf[b], len, j->stream);
		issued++;
	}
	if (issued && !*err)
		*err = cuStreamSynchronize(j->stream);
	return 0;
}

/* From the device. */
static int lane_out(struct lane *l, const struct job *j, CUresult *err)
{
	for (uint64_t k = l->id; k * j->chunk < j->size; k += j->nlanes) {
		uint64_t off = k * j->chunk, len = chunk_len(j, k);
		struct lane_frame f = { htonl(LANE_MAGIC), htonl((uint32_t)len), htobe64(off) };

		if (!*err)
			*err = cuMemcpyDtoHAsync(l->buf[0], j->device + off, len, j->stream);
		if (!*err)
			*err = cuStreamSynchronize(j->stream);
		if (wire_send_all(l->fd, &f, sizeof(f)) || wire_send_all(l->fd, l->buf[0], len))
			return -1;
	}
	return 0;
}

static void *lane_main(void *arg)
{
	struct lane *l = arg;
	struct lanes *ls = l->all;

	for (;;) {
		struct job j;
		CUresult err;
		int broke = 0;

		pthread_mutex_lock(&ls->lock);
		while (ls->generation == l->seen && !ls->stop)
			pthread_cond_wait(&ls->go, &ls->lock);
		if (ls->stop) {
			pthread_mutex_unlock(&ls->lock);
			return NULL;
		}
		l->seen = ls->generation;
		j = ls->job;
		pthread_mutex_unlock(&ls->lock);
		err = j.err;
		if (l->id < j.nlanes) {
			if (!err)
				err = cuCtxSetCurrent(j.ctx);
			broke = j.to_device ? lane_in(l, &j, &err) : lane_out(l, &j, &err);
		}
		if (broke) {
			log_warn("bulk lane %u broke: shutting it", l->id);
			shutdown(l->fd, SHUT_RDWR);
			err = CUDA_ERROR_OPERATING_SYSTEM;
		}
		pthread_mutex_lock(&ls->lock);
		if (err && !ls->err)
			ls->err = err;
		if (--ls->running == 0)
			pthread_cond_signal(&ls->done);
		pthread_mutex_unlock(&ls->lock);
	}
}

static struct lanes *lanes_new(void)
{
	struct lanes *ls = calloc(1, sizeof(*ls));

	if (!ls)
		return NULL;
	pthread_mutex_init(&ls->lock, NULL);
	pthread_cond_init(&ls->go, NULL);
	pthread_cond_init(&ls->done, NULL);
	return ls;
}

/* A new lane on fd, with its buffers and thread. */
static CUresult lane_add(struct worker *w, int fd)
{
	struct lanes *ls = w->calls->lanes;
	struct lane *l;
	CUcontext cur = NULL;

	if (!ls && !(ls = w->calls->lanes = lanes_new()))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (ls->n == LANE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	l = &ls->lane[ls->n];
	*l = (struct lane){ .all = ls, .fd = fd, .id = ls->n, .seen = ls->generation };
	cuCtxGetCurrent(&cur);
	l->buf[0] = worker_pinned(w, LANE_CHUNK_MAX);
	l->buf[1] = l->buf[0] ? worker_pinned(w, LANE_CHUNK_MAX) : NULL;
	cuCtxSetCurrent(cur);
	if (!l->buf[1]) {
		if (l->buf[0])
			worker_pinned_free(l->buf[0], LANE_CHUNK_MAX);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (hostarea_thread(&l->thread, lane_main, l)) {
		worker_pinned_free(l->buf[0], LANE_CHUNK_MAX);
		worker_pinned_free(l->buf[1], LANE_CHUNK_MAX);
		return CUDA_ERROR_OPERATING_SYSTEM;
	}
	ls->n++;
	return CUDA_SUCCESS;
}

/* A bulk lane: the worker's channel hook (session.c) says how it opens. */
CUresult hand_lane_open(struct worker *w, void *args, void *res)
{
	CUresult err;
	int fd;

	if (!w->calls->channel_call)
		return CUDA_ERROR_NOT_SUPPORTED;       /* no session (cannot happen) */
	if ((err = w->calls->channel_call(w, args, res, &fd)) || fd < 0)
		return err;
	if ((err = lane_add(w, fd))) {
		close(fd);
		return err;
	}
	log_info("client %s: bulk lane %u open", w->peer, w->calls->lanes->n - 1);
	return CUDA_SUCCESS;
}

CUresult hand_memcpy_lanes(struct worker *w, void *args, void *res)
{
	lane_copy_args *a = args;
	struct lanes *ls = w->calls->lanes;
	struct job j = { .device = a->device, .size = a->size, .chunk = a->chunk, .nlanes = a->lanes,
			 .to_device = !!a->to_device };
	CUresult err;

	/* A request the lanes cannot carry: the client's lanes may already be
	 * moving its bytes, so they are shut (its session is lost) rather than
	 * left to wait for a peer that never reads or writes. */
	if (!ls || !a->lanes || a->lanes > ls->n || a->chunk < LANE_CHUNK_MIN || a->chunk > LANE_CHUNK_MAX ||
	    a->size > LANE_COPY_MAX) {
		log_warn("client %s: a lane copy it cannot have been sent (%u lanes, chunk %u); its lanes are shut",
			 w->peer, a->lanes, a->chunk);
		for (unsigned i = 0; ls && i < ls->n; i++)
			shutdown(ls->lane[i].fd, SHUT_RDWR);
		return CUDA_ERROR_INVALID_VALUE;
	}
	j.err = handle_get(w, H_STREAM, a->async ? a->stream : 0, (void **)&j.stream);
	cuCtxGetCurrent(&j.ctx);
	pthread_mutex_lock(&ls->lock);
	ls->job = j;
	ls->err = CUDA_SUCCESS;
	ls->running = ls->n;
	ls->generation++;
	pthread_cond_broadcast(&ls->go);
	while (ls->running)
		pthread_cond_wait(&ls->done, &ls->lock);
	err = ls->err;
	pthread_mutex_unlock(&ls->lock);
	return err;
}

/* A pause, or the session's end: the lanes' threads stop, their
 * connections close, their buffers go. */
void lanes_close(struct worker *w)
{
	struct lanes *ls = w->calls->lanes;

	if (!ls)
		return;
	pthread_mutex_lock(&ls->lock);
	ls->stop = 1;
	pthread_cond_broadcast(&ls->go);
	pthread_mutex_unlock(&ls->lock);
	for (unsigned i = 0; i < ls->n; i++) {
		struct lane *l = &ls->lane[i];

		shutdown(l->fd, SHUT_RDWR);
		hostarea_join(l->thread, NULL);
		close(l->fd);
		worker_pinned_free(l->buf[0], LANE_CHUNK_MAX);
		worker_pinned_free(l->buf[1], LANE_CHUNK_MAX);
	}
	free(ls);
	w->calls->lanes = NULL;
}

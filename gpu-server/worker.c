/*
 * worker.c: one worker process per client. It initialises CUDA before any
 * client arrives, waits for the gpu-server to hand it an authenticated
 * connection, then executes the client's calls in order until the client
 * goes away. Pipelined calls get no reply; their first error is kept and
 * returned by the next call that synchronises with the device.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "gpu-server.h"

#define MAX_PROC 256

static const struct proc_desc *proc_index[MAX_PROC];

void worker_index_procs(void)
{
	for (const struct proc_desc *d = server_procs; d->name; d++)
		if (d->proc < MAX_PROC)
			proc_index[d->proc] = d;
}

/* CUDA initialisation, paid before a client connects. */
static int worker_prepare(struct worker *w)
{
	CUdevice dev;
	CUcontext ctx;
	CUresult err;

	if ((err = cuInit(0)) || (err = cuDeviceGet(&dev, 0)) ||
	    (err = cuDevicePrimaryCtxRetain(&ctx, dev)) || (err = cuCtxSetCurrent(ctx)) ||
	    (err = cuMemAllocHost(&w->scratch_in, CICADA_CHUNK_MAX)) ||
	    (err = cuMemAllocHost(&w->scratch_out, CICADA_CHUNK_MAX))) {
		const char *name = "?";
		cuGetErrorName(err, &name);
		log_error("worker cannot initialise CUDA: %s", name);
		return -1;
	}
	primary_note_warm(dev);
	return 0;
}

static void set_pending(struct worker *w, CUresult err)
{
	if (err != CUDA_SUCCESS && w->pending == CUDA_SUCCESS)
		w->pending = err;
}

static CUresult run_scalar(struct worker *w, const struct proc_desc *d, scalars *a, scalar_res *r, uint64_t *out)
{
	if (a->v.v_len != d->nin)
		return CUDA_ERROR_INVALID_VALUE;
	r->v.v_val = out;
	r->v.v_len = d->nout;
	return d->scalar(w, a->v.v_val, out);
}

/* Points inline host-to-device data at pinned scratch before decoding. */
static void prepare_args(struct worker *w, unsigned proc, void *args)
{
	if (proc == P_memcpy_htod || proc == P_memcpy_htod_async)
		((htod_args *)args)->data.data_val = w->scratch_in;
}

static void release_args(unsigned proc, void *args)
{
	if (proc == P_memcpy_htod || proc == P_memcpy_htod_async)
		((htod_args *)args)->data.data_val = NULL;
}

static void release_res(unsigned proc, void *res)
{
	if (proc == P_memcpy_dtoh)
		((bytes_res *)res)->data.data_val = NULL;
}

static int send_reply(struct worker *w, struct wire_buf *out, uint32_t xid, enum wire_accept stat,
		      xdrproc_t xres, void *res)
{
	if (wire_encode_reply(out, xid, stat, xres, res) || wire_send_record(&w->stream, out))
		return -1;
	return 0;
}

/* Decodes one call record; on success the caller executes and frees it.
 * Returns 0, or -1 (malformed: drop the connection), or WIRE_PROG_MISMATCH. */
int worker_decode(struct worker *w, const struct wire_buf *in, struct wire_call_hdr *hdr,
		  const struct proc_desc **desc, void *args)
{
	const struct proc_desc *d;
	char err[WIRE_ERRLEN];
	XDR x;
	int st = wire_decode_call(in, hdr, &x, err);

	if (st == WIRE_PROG_MISMATCH) {
		log_warn("client %s: %s; dropping it", w->peer, err);
		xdr_destroy(&x);
		return WIRE_PROG_MISMATCH;
	}
	if (st) {
		log_warn("client %s: malformed message (%s); dropping it", w->peer, err);
		return -1;
	}
	d = hdr->proc < MAX_PROC ? proc_index[hdr->proc] : NULL;
	if (!d || d->args_size > ARGS_MAX) {
		log_warn("client %s: unknown procedure %u; dropping it", w->peer, hdr->proc);
		xdr_destroy(&x);
		return -1;
	}
	memset(args, 0, ARGS_MAX);
	prepare_args(w, hdr->proc, args);
	if (!d->xargs(&x, args) || xdr_getpos(&x) != in->len) {
		log_warn("client %s: malformed arguments for %s; dropping it", w->peer, d->name);
		worker_free_args(hdr->proc, d, args);
		xdr_destroy(&x);
		return -1;
	}
	xdr_destroy(&x);
	*desc = d;
	return 0;
}

void worker_free_args(unsigned proc, const struct proc_desc *d, void *args)
{
	release_args(proc, args);
	xdr_free(d->xargs, (char *)args);
}

/* Executes one call record; -1 drops the connection. */
static int dispatch(struct worker *w, struct wire_buf *in, struct wire_buf *out)
{
	union { char c[ARGS_MAX]; uint64_t align; } args, res;
	uint64_t scalar_out[CICADA_SCALARS_MAX];
	struct wire_call_hdr hdr;
	const struct proc_desc *d;
	CUresult rc;
	int st = worker_decode(w, in, &hdr, &d, &args);

	if (st == WIRE_PROG_MISMATCH)
		send_reply(w, out, hdr.xid, WIRE_PROG_MISMATCH, NULL, NULL);
	if (st)
		return -1;
	memset(&res, 0, sizeof(res));
	log_debug("%s", d->name);
	if (d->scalar)
		rc = run_scalar(w, d, (scalars *)&args, (scalar_res *)&res, scalar_out);
	else
		rc = d->hand(w, &args, &res);
	worker_free_args(hdr.proc, d, &args);
	if (d->flags & PROC_ASYNC) {
		set_pending(w, rc);
		return w->exiting ? -1 : 0;
	}
	if (rc == CUDA_SUCCESS && (d->flags & PROC_SYNCPOINT) && w->pending) {
		rc = w->pending;
		w->pending = CUDA_SUCCESS;
	}
	*(int *)&res = rc;
	st = send_reply(w, out, hdr.xid, WIRE_SUCCESS, d->xres, &res);
	if (d->scalar) {
		((scalar_res *)&res)->v.v_val = NULL;
	} else {
		release_res(hdr.proc, &res);
		xdr_free(d->xres, (char *)&res);
	}
	return st;
}

int worker_serve(struct worker *w)
{
	struct wire_buf in = { 0 }, out = { 0 };
	int rc;

	for (;;) {
		rc = wire_recv_record(&w->stream, &in, WIRE_MAX_RECORD);
		if (rc == -1) {
			log_info("client %s disconnected", w->peer);
			break;
		}
		if (rc == -2) {
			log_warn("client %s: oversized message; dropping it", w->peer);
			break;
		}
		if (dispatch(w, &in, &out))
			break;
	}
	wire_buf_free(&in);
	wire_buf_free(&out);
	return 0;
}

/* Receives the client socket and its hello record from the gpu-server. */
static int receive_client(int control_fd, struct wire_buf *hello)
{
	uint32_t len;
	int fd = wire_recv_fd(control_fd);

	if (fd < 0)
		return -1;
	if (read(control_fd, &len, 4) != 4 || len > 65536 || wire_buf_reserve(hello, len + 8)) {
		close(fd);
		return -1;
	}
	for (size_t got = 0; got < len;) {
		ssize_t n = read(control_fd, hello->data + got, len - got);
		if (n <= 0) {
			close(fd);
			return -1;
		}
		got += n;
	}
	hello->len = len;
	return fd;
}

int worker_start_session(struct worker *w, struct wire_buf *hello);

int worker_main(int control_fd, const char *cache_dir)
{
	static struct worker w;
	struct wire_buf hello = { 0 };
	char ready = 'R';
	int fd;

	worker_index_procs();
	w.cache_dir = cache_dir;
	w.shm.fd = -1;
	if (worker_prepare(&w))
		return 1;
	if (write(control_fd, &ready, 1) != 1)
		return 1;
	fd = receive_client(control_fd, &hello);
	close(control_fd);
	if (fd < 0)
		return 1;
	w.sock = fd;
	wire_stream_init(&w.stream, fd);
	if (worker_start_session(&w, &hello) == 0)
		worker_serve(&w);
	wire_buf_free(&hello);
	return 0;
}

/*
 * session.c: the start of a client session in its worker: the protocol
 * version check, the shared-memory segment for local clients, and the
 * hello reply. The token was already checked by the gpu-server.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "gpu-server.h"

static int attach_shm(struct worker *w, const hello_args *h, char *err)
{
	int fd = wire_recv_fd(w->sock);

	if (fd < 0) {
		snprintf(err, WIRE_ERRLEN, "no shared memory segment received");
		return -1;
	}
	if (shm_segment_attach(&w->shm, fd, h->shm_size, err)) {
		close(fd);
		return -1;
	}
	if (cuMemHostRegister((char *)w->shm.hdr + w->shm.hdr->staging_offset,
			      (size_t)w->shm.hdr->nslots * w->shm.hdr->slot_size, CU_MEMHOSTREGISTER_PORTABLE)) {
		snprintf(err, WIRE_ERRLEN, "cannot pin the staging area");
		shm_segment_detach(&w->shm);
		return -1;
	}
	return 0;
}

int worker_start_session(struct worker *w, struct wire_buf *hello)
{
	struct wire_call_hdr hdr;
	struct wire_buf out = { 0 };
	hello_args h;
	hello_res r;
	char err[WIRE_ERRLEN] = "";
	XDR x;
	int rc = -1;

	memset(&h, 0, sizeof(h));
	memset(&r, 0, sizeof(r));
	if (wire_decode_call(hello, &hdr, &x, err))
		return -1;
	if (hdr.proc != P_hello || !xdr_hello_args(&x, &h)) {
		log_warn("client: malformed hello");
		xdr_destroy(&x);
		xdr_free((xdrproc_t)xdr_hello_args, (char *)&h);
		return -1;
	}
	xdr_destroy(&x);
	snprintf(w->peer, sizeof(w->peer), "%s/%llu", h.host, (unsigned long long)h.pid);
	r.proto_version = CICADA_PROTO_VERSION;
	r.worker_pid = (uint64_t)getpid();
	r.message = err;
	if (h.proto_version != CICADA_PROTO_VERSION) {
		snprintf(err, sizeof(err), "protocol version %u is not supported (server speaks %u)",
			 h.proto_version, CICADA_PROTO_VERSION);
		r.err = CUDA_ERROR_NOT_SUPPORTED;
	} else if (h.want_shm && attach_shm(w, &h, err)) {
		r.err = CUDA_ERROR_OPERATING_SYSTEM;
	} else {
		r.shm_ok = h.want_shm;
		rc = 0;
	}
	if (rc)
		log_warn("client %s refused: %s", w->peer, err);
	else
		log_info("client %s connected%s", w->peer, r.shm_ok ? " (shared memory)" : "");
	if (wire_encode_reply(&out, hdr.xid, WIRE_SUCCESS, (xdrproc_t)xdr_hello_res, &r) ||
	    wire_send_record(&w->stream, &out))
		rc = -1;
	wire_buf_free(&out);
	xdr_free((xdrproc_t)xdr_hello_args, (char *)&h);
	if (rc == 0 && r.shm_ok)
		wire_stream_use_shm(&w->stream, &w->shm, 1);
	return rc;
}

CUresult hand_hello(struct worker *w, void *args, void *res)
{
	return CUDA_ERROR_INVALID_VALUE;     /* only once, at the start */
}

CUresult hand_goodbye(struct worker *w, void *args, void *res)
{
	w->exiting = 1;
	return CUDA_SUCCESS;
}

/*
 * output.c: device printf output goes to the application, not the server.
 * The driver prints a kernel's printf buffer on the stdout of the process
 * that calls it, at the synchronisation points CUDA defines. A worker's
 * stdout is a memory file; before each reply to a synchronous call the
 * worker sends what was printed since the last one as CICADA_NOTICE_OUTPUT
 * notices, which the client writes to its own stdout before it returns.
 * So the output arrives in order, at the same points as natively. A
 * synchronous copy through shared-memory slots has no reply: the worker
 * raises output_pending in the segment and the client asks for the output
 * (output_flush, whose reply carries it) before the copy returns.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "gpu-server.h"

#define OUTPUT_PIECE (64u << 10)

/* Makes fd 1 a memory file (before CUDA starts, so the driver prints there). */
int output_capture(void)
{
	int fd = memfd_create("cicada-device-output", MFD_CLOEXEC);

	if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) {
		log_error("cannot capture device output: %s", strerror(errno));
		return -1;
	}
	close(fd);
	setvbuf(stdout, NULL, _IONBF, 0);
	return 0;
}

static int send_piece(struct worker *w, struct wire_buf *out, char *data, size_t len)
{
	notice_output n = { { (u_int)len, data } };

	if (wire_encode_call(out, 0, CICADA_NOTICE_OUTPUT, (xdrproc_t)xdr_notice_output, &n) ||
	    wire_send_record(&w->stream, out))
		return -1;
	return 0;
}

/* Sends the output printed since the last call; -1 if the client is gone. */
int output_forward(struct worker *w, struct wire_buf *out)
{
	off_t end, at = 0;
	char *buf;
	ssize_t n;

	fflush(stdout);
	end = lseek(STDOUT_FILENO, 0, SEEK_CUR);
	if (end <= 0)
		return 0;
	if (!(buf = malloc(OUTPUT_PIECE)))
		return 0;
	while (at < end && (n = pread(STDOUT_FILENO, buf, OUTPUT_PIECE, at)) > 0) {
		if (send_piece(w, out, buf, (size_t)n)) {
			free(buf);
			return -1;
		}
		at += n;
	}
	free(buf);
	if (ftruncate(STDOUT_FILENO, 0) == 0)
		lseek(STDOUT_FILENO, 0, SEEK_SET);
	return 0;
}

/* Whether device output waits to be sent. */
int output_waiting(void)
{
	return lseek(STDOUT_FILENO, 0, SEEK_CUR) > 0;
}

/* The reply of this call carries the output (see worker.c dispatch). */
CUresult hand_output_flush(struct worker *w, void *args, void *res)
{
	return CUDA_SUCCESS;
}

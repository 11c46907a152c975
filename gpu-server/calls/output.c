/*
 * output.c: device output goes to the application, not the server. The
 * driver prints a kernel's printf buffer on the stdout of the process
 * that calls it, at the synchronisation points CUDA defines, and the
 * message of a failed device assert on its stderr. A worker's stdout and
 * stderr are memory files (its own log lines go to the server's stderr,
 * kept aside); before each reply to a synchronous call the worker sends
 * what was written since the last one as CICADA_NOTICE_OUTPUT and
 * CICADA_NOTICE_ERROR_OUTPUT notices, which the client writes to its own
 * stdout and stderr before it returns. So the output arrives in order, at
 * the same points as natively. A synchronous copy through shared-memory
 * slots has no reply: the worker raises output_pending in the segment
 * and the client asks for the output (output_flush, whose reply carries
 * it) before the copy returns.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "calls.h"

#define OUTPUT_PIECE (64u << 10)

static int capture(int target, const char *name)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	if (fd < 0 || dup2(fd, target) < 0) {
		log_error("cannot capture device output: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* Makes fds 1 and 2 memory files (before CUDA starts, so the driver
 * prints there); log lines go on to where stderr went. */
int output_capture(void)
{
	int log_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);

	if (log_fd < 0 || capture(STDOUT_FILENO, "cicada-device-output"))
		return -1;
	log_set_fd(log_fd);
	if (capture(STDERR_FILENO, "cicada-device-errors")) {
		log_set_fd(-1);
		return -1;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	setvbuf(stderr, NULL, _IONBF, 0);
	return 0;
}

static int send_piece(struct worker *w, struct wire_buf *out, unsigned notice, char *data, size_t len)
{
	notice_output n = { { (u_int)len, data } };

	if (wire_encode_call(out, 0, notice, (xdrproc_t)xdr_notice_output, &n) ||
	    wire_send_record(&w->calls->stream, out))
		return -1;
	return 0;
}

/* Sends what fd holds as notices, and empties it. */
static int forward(struct worker *w, struct wire_buf *out, int fd, unsigned notice, char *buf)
{
	off_t end = lseek(fd, 0, SEEK_CUR), at = 0;
	ssize_t n;

	if (end <= 0)
		return 0;
	while (at < end && (n = pread(fd, buf, OUTPUT_PIECE, at)) > 0) {
		if (send_piece(w, out, notice, buf, (size_t)n))
			return -1;
		at += n;
	}
	if (ftruncate(fd, 0) == 0)
		lseek(fd, 0, SEEK_SET);
	return 0;
}

/* Sends the output written since the last call; -1 if the client is gone. */
int output_forward(struct worker *w, struct wire_buf *out)
{
	char *buf;
	int rc;

	fflush(stdout);
	fflush(stderr);
	if (!output_waiting() || !(buf = malloc(OUTPUT_PIECE)))
		return 0;
	rc = forward(w, out, STDOUT_FILENO, CICADA_NOTICE_OUTPUT, buf) ||
	     forward(w, out, STDERR_FILENO, CICADA_NOTICE_ERROR_OUTPUT, buf) ? -1 : 0;
	free(buf);
	return rc;
}

/* Whether device output waits to be sent. */
int output_waiting(void)
{
	return lseek(STDOUT_FILENO, 0, SEEK_CUR) > 0 || lseek(STDERR_FILENO, 0, SEEK_CUR) > 0;
}

/* The reply of this call carries the output (see worker.c dispatch). */
CUresult hand_output_flush(struct worker *w, void *args, void *res)
{
	return CUDA_SUCCESS;
}

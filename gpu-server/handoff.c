/*
 * handoff.c: connections handed between a gpu-server's processes over unix
 * sockets: from the server to a new worker (pool.c), or to a paused
 * worker's session socket, <run_dir>/<ticket>.sock, for the connections
 * that name its ticket; a migration's preloading worker receives its
 * restore the same way. A handed connection is its descriptor, then what
 * the worker needs to know of it (handoff_send says what).
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "gpu-server.h"

int ticket_valid(const char *t)
{
	size_t n = strspn(t, "0123456789abcdef");

	return n == CICADA_TICKET_LEN && !t[n];
}

void handoff_path(const char *run_dir, const char *ticket, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%s.sock", run_dir, ticket);
}

/* A handed connection: the descriptor, then a u32 that is 0 for a local
 * or plain TCP one, or 1 + the length of the client host a TLS relay
 * serves (that many bytes follow), then a u32 count and as many u32 GPU
 * ordinals the session is given (none: all), then the hello's length and
 * bytes. */
int handoff_send(int sock, int fd, const struct handoff *h, const struct wire_buf *hello)
{
	uint32_t len = (uint32_t)hello->len, n = h->ngpus;
	uint32_t rlen = h->remote ? 1 + (uint32_t)strnlen(h->remote, REMOTE_HOST_MAX - 1) : 0;

	return !wire_send_fd(sock, fd) && write(sock, &rlen, 4) == 4 &&
	       (!rlen || write(sock, h->remote, rlen - 1) == (ssize_t)(rlen - 1)) && write(sock, &n, 4) == 4 &&
	       (!n || write(sock, h->gpus, 4 * n) == (ssize_t)(4 * n)) && write(sock, &len, 4) == 4 &&
	       write(sock, hello->data, len) == (ssize_t)len ? 0 : -1;
}

/* Receives a handed connection: its fd, or -1; h (if not NULL) gets the
 * GPUs it was given. */
int handoff_receive(int from, struct wire_buf *hello, struct handoff *h)
{
	char host[REMOTE_HOST_MAX] = "";
	uint32_t len, rlen, n, gpus[CICADA_MAX_GPUS];
	int fd = wire_recv_fd(from);

	if (fd < 0)
		return -1;
	if (wire_recv_all(from, &rlen, 4) || rlen > REMOTE_HOST_MAX || (rlen > 1 && wire_recv_all(from, host, rlen - 1)) ||
	    wire_recv_all(from, &n, 4) || n > CICADA_MAX_GPUS || (n && wire_recv_all(from, gpus, 4 * n)) ||
	    wire_recv_all(from, &len, 4) || len > 65536 || wire_buf_reserve(hello, len + 8) ||
	    wire_recv_all(from, hello->data, len) || peer_mark_remote(fd, rlen ? host : NULL)) {
		close(fd);
		return -1;
	}
	hello->len = len;
	if (h) {
		h->ngpus = n;
		memcpy(h->gpus, gpus, 4 * n);
	}
	return fd;
}

/* The gpu-server's side: passes a connection to the detached worker. */
int handoff_pass(const char *run_dir, const char *ticket, int fd, const char *remote, const struct wire_buf *hello)
{
	struct handoff h = { .remote = remote };
	struct sockaddr_un sa;
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = -1;

	handoff_path(run_dir, ticket, &sa);

	if (s >= 0 && !connect(s, (struct sockaddr *)&sa, sizeof(sa)))
		rc = handoff_send(s, fd, &h, hello);
	if (s >= 0)
		close(s);
	return rc;
}

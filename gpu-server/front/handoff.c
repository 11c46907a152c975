/*
 * handoff.c: connections handed between a gpu-server's processes over unix
 * sockets: from the server to a new worker (pool.c), or to a paused
 * worker's session socket for the connections that name its ticket; a
 * migration's preloading worker receives its restore the same way. A
 * handed connection is its descriptor, then what the worker needs to
 * know of it (handoff_send says what).
 *
 * A session socket is abstract (no file: a worker that runs as its
 * tenant could not make one in the server's run directory), named by the
 * run directory and the ticket; its worker takes connections from the
 * server's user alone. The server never waits on a worker beyond
 * HANDOFF_TIMEOUT_MS: a worker whose backlog is full, or that does not
 * read, is busy, and the request is refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <xxhash.h>
#include "front.h"

int ticket_valid(const char *t)
{
	size_t n = strspn(t, "0123456789abcdef");

	return n == CICADA_TICKET_LEN && !t[n];
}

unsigned handoff_path(const char *run_dir, const char *ticket, struct sockaddr_un *sa)
{
	return run_socket_addr(run_dir, ticket, sa);
}

/* Whether conn's peer is the gpu-server (root or the server's user):
 * anyone else who found a session socket is refused at once. */
int handoff_from_server(int conn)
{
	struct ucred cred;

	return !peer_cred(conn, &cred) && peer_is_server(cred.uid);
}

/* Connects to a session socket without waiting: a full backlog is a busy
 * worker. Returns the socket, or -1. */
static int dial_session(const char *run_dir, const char *ticket)
{
	struct sockaddr_un sa;
	unsigned len = handoff_path(run_dir, ticket, &sa);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (s < 0)
		return -1;
	if (connect(s, (struct sockaddr *)&sa, len) ||
	    fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK) || wire_set_timeouts(s, HANDOFF_TIMEOUT_MS)) {
		close(s);
		return -1;
	}
	return s;
}

/* A handed connection: the descriptor, then a u32 that is 0 for a local
 * or plain TCP one, or 1 + the length of the client host a TLS relay
 * serves (that many bytes follow), then a u32 count and as many u32 GPU
 * ordinals the session is given (none: all), the SM groups it has on each
 * GPU of the node (CICADA_MAX_GPUS u64s, 0: all), the --token-dir token
 * the client proved (64 bytes, NUL-padded), its verified TLS name
 * (WIRE_TLS_NAME_MAX bytes, NUL-padded), then the hello's length and
 * bytes. */
int handoff_send(int sock, int fd, const struct handoff *h, const struct wire_buf *hello)
{
	uint32_t len = (uint32_t)hello->len, n = h->ngpus;
	uint32_t rlen = h->remote ? 1 + (uint32_t)strnlen(h->remote, REMOTE_HOST_MAX - 1) : 0;

	return !wire_send_fd(sock, fd) && write(sock, &rlen, 4) == 4 &&
	       (!rlen || write(sock, h->remote, rlen - 1) == (ssize_t)(rlen - 1)) && write(sock, &n, 4) == 4 &&
	       (!n || write(sock, h->gpus, 4 * n) == (ssize_t)(4 * n)) &&
	       write(sock, h->sm_mask, sizeof(h->sm_mask)) == (ssize_t)sizeof(h->sm_mask) &&
	       write(sock, h->token, sizeof(h->token)) == (ssize_t)sizeof(h->token) &&
	       write(sock, h->tls_name, sizeof(h->tls_name)) == (ssize_t)sizeof(h->tls_name) && write(sock, &len, 4) == 4 &&
	       write(sock, hello->data, len) == (ssize_t)len ? 0 : -1;
}

/* Receives a handed connection: its fd, or -1; h (if not NULL) gets the
 * GPUs it was given. */
int handoff_receive(int from, struct wire_buf *hello, struct handoff *h)
{
	char host[REMOTE_HOST_MAX] = "";
	uint32_t len, rlen, n, gpus[CICADA_MAX_GPUS];
	uint64_t sm_mask[CICADA_MAX_GPUS];
	char token[sizeof(h->token)], tls_name[sizeof(h->tls_name)];
	int fd = wire_recv_fd(from);

	if (fd < 0)
		return -1;
	if (wire_recv_all(from, &rlen, 4) || rlen > REMOTE_HOST_MAX || (rlen > 1 && wire_recv_all(from, host, rlen - 1)) ||
	    wire_recv_all(from, &n, 4) || n > CICADA_MAX_GPUS || (n && wire_recv_all(from, gpus, 4 * n)) ||
	    wire_recv_all(from, sm_mask, sizeof(sm_mask)) || wire_recv_all(from, token, sizeof(token)) ||
	    wire_recv_all(from, tls_name, sizeof(tls_name)) ||
	    wire_recv_all(from, &len, 4) || len > 65536 || wire_buf_reserve(hello, len + 8) ||
	    wire_recv_all(from, hello->data, len) || peer_mark_remote(fd, rlen ? host : NULL)) {
		close(fd);
		return -1;
	}
	hello->len = len;
	if (h) {
		h->ngpus = n;
		memcpy(h->gpus, gpus, 4 * n);
		memcpy(h->sm_mask, sm_mask, sizeof(sm_mask));
		token[sizeof(token) - 1] = 0;
		memcpy(h->token, token, sizeof(token));
		tls_name[sizeof(tls_name) - 1] = 0;
		memcpy(h->tls_name, tls_name, sizeof(tls_name));
	}
	return fd;
}

/* A worker's side of its session socket: the next connection, if the
 * server made it. Returns the handed fd, -1 on failure, or -2 for a
 * connection of anyone else (closed; the caller waits on). */
int handoff_accept(int lfd, struct wire_buf *hello)
{
	int conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), fd;

	if (conn < 0)
		return errno == EINTR || errno == ECONNABORTED ? -2 : -1;
	if (!handoff_from_server(conn) || wire_set_timeouts(conn, HANDOFF_TIMEOUT_MS)) {
		log_warn("a stranger connected to the session socket; refused");
		close(conn);
		return -2;
	}
	fd = handoff_receive(conn, hello, NULL);
	close(conn);
	return fd;
}

/* The gpu-server's side: passes a connection to the detached worker,
 * whose pid goes into *worker (if set). */
int handoff_pass(const char *run_dir, const char *ticket, int fd, const char *remote, const struct wire_buf *hello,
		 pid_t *worker)
{
	struct handoff h = { .remote = remote };
	int s = dial_session(run_dir, ticket), rc;
	struct ucred cred;

	if (s < 0)
		return -1;
	if (worker)
		*worker = peer_cred(s, &cred) ? 0 : cred.pid;
	rc = handoff_send(s, fd, &h, hello);
	close(s);
	return rc;
}

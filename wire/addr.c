/*
 * addr.c: parsing addresses ("unix:/path", "tcp:host:port", and
 * "tls:host:port", TCP with TLS: tls.c) and sizes ("8G"), listening,
 * dialing, and passing file descriptors over unix sockets.
 */
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include "wire.h"

int wire_parse_addr(const char *text, struct wire_addr *addr, char *err)
{
	memset(addr, 0, sizeof(*addr));
	if (!strncmp(text, "unix:", 5)) {
		if (strlen(text + 5) == 0 || strlen(text + 5) >= sizeof(addr->path))
			goto bad;
		addr->kind = WIRE_UNIX;
		strcpy(addr->path, text + 5);
		return 0;
	}
	if (!strncmp(text, "tcp:", 4) || !strncmp(text, "tls:", 4)) {
		const char *colon = strrchr(text + 4, ':');
		size_t hlen;

		if (!colon || colon == text + 4 || !colon[1] || strlen(colon + 1) >= sizeof(addr->port))
			goto bad;
		hlen = (size_t)(colon - (text + 4));
		if (hlen >= sizeof(addr->host))
			goto bad;
		addr->kind = WIRE_TCP;
		addr->tls = text[1] == 'l';
		memcpy(addr->host, text + 4, hlen);
		if (addr->host[0] == '[' && addr->host[hlen - 1] == ']') {
			memmove(addr->host, addr->host + 1, hlen - 2);
			addr->host[hlen - 2] = 0;
		}
		strcpy(addr->port, colon + 1);
		return 0;
	}
bad:
	wire_fail(err, "bad address '%s' (expected unix:/path, tcp:host:port or tls:host:port)", text);
	return -1;
}

void wire_format_addr(const struct wire_addr *addr, char *out, size_t len)
{
	if (addr->kind == WIRE_UNIX)
		snprintf(out, len, "unix:%s", addr->path);
	else
		snprintf(out, len, "%s:%s:%s", addr->tls ? "tls" : "tcp", addr->host, addr->port);
}

static void tune_tcp(int fd)
{
	int one = 1, idle = 2, intvl = 1, cnt = 3;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

static int unix_sockaddr(const struct wire_addr *addr, struct sockaddr_un *sun)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	strcpy(sun->sun_path, addr->path);
	return 0;
}

static int listen_unix(const struct wire_addr *addr, char *err)
{
	struct sockaddr_un sun;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), rc;
	mode_t old;

	if (fd < 0)
		goto fail;
	unix_sockaddr(addr, &sun);
	unlink(addr->path);
	/* Created 0660 (owner and group), never with looser bits for a moment;
	 * umask is the process's: listeners are made before any thread. */
	old = umask(0117);
	rc = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
	umask(old);
	if (rc || listen(fd, 128))
		goto fail;
	return fd;
fail:
	wire_fail(err, "cannot listen on unix:%s: %s", addr->path, strerror(errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

static int tcp_resolve(const struct wire_addr *addr, int passive, struct addrinfo **res, char *err)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = passive ? AI_PASSIVE : 0 };
	int rc = getaddrinfo(addr->host, addr->port, &hints, res);

	if (rc) {
		wire_fail(err, "cannot resolve tcp:%s:%s: %s", addr->host, addr->port, gai_strerror(rc));
		return -1;
	}
	return 0;
}

static int listen_tcp(const struct wire_addr *addr, char *err)
{
	struct addrinfo *res, *ai;
	int fd = -1, one = 1, saved = 0;

	if (tcp_resolve(addr, 1, &res, err))
		return -1;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		tune_tcp(fd);                /* accepted connections inherit it */
		if (!bind(fd, ai->ai_addr, ai->ai_addrlen) && !listen(fd, 128))
			break;
		saved = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		wire_fail(err, "cannot listen on tcp:%s:%s: %s", addr->host, addr->port,
			 strerror(saved ? saved : errno));
	return fd;
}

int wire_parse_size(const char *text, uint64_t *out)
{
	char *end;
	unsigned long long v = strtoull(text, &end, 10);
	int shift = 0;

	if (end == text || *text == '-')
		return -1;
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	case 'T': shift = 40; end++; break;
	default: break;
	}
	if (*end || !v || v > (~0ull >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

int wire_listen(const struct wire_addr *addr, char *err)
{
	return addr->kind == WIRE_UNIX ? listen_unix(addr, err) : listen_tcp(addr, err);
}

static int dial_unix(const struct wire_addr *addr, char *err)
{
	struct sockaddr_un sun;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	unix_sockaddr(addr, &sun);
	if (fd >= 0 && !connect(fd, (struct sockaddr *)&sun, sizeof(sun)))
		return fd;
	wire_fail(err, "cannot connect to unix:%s: %s", addr->path, strerror(errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

static int dial_tcp(const struct wire_addr *addr, char *err)
{
	struct addrinfo *res, *ai;
	int fd = -1, saved = 0;

	if (tcp_resolve(addr, 0, &res, err))
		return -1;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0)
			continue;
		if (!connect(fd, ai->ai_addr, ai->ai_addrlen))
			break;
		saved = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		wire_fail(err, "cannot connect to tcp:%s:%s: %s", addr->host, addr->port,
			 strerror(saved ? saved : errno));
		return -1;
	}
	tune_tcp(fd);
	return fd;
}

/* A tls: address gives the inner end of a TLS relay (tls.c). */
int wire_dial(const struct wire_addr *addr, char *err)
{
	int fd;

	if (addr->kind == WIRE_UNIX)
		return dial_unix(addr, err);
	fd = dial_tcp(addr, err);
	return fd >= 0 && addr->tls ? wire_tls_client(fd, addr->host, err) : fd;
}

int wire_send_fd(int sock, int fd)
{
	return wire_send_fd_tagged(sock, fd, 'F');
}

int wire_recv_fd(int sock)
{
	char tag;

	return wire_recv_fd_tagged(sock, &tag);
}

/* As wire_recv_fd, waiting at most timeout_ms for it: a peer that never
 * sends its descriptor cannot hold the receiver. */
int wire_recv_fd_within(int sock, int timeout_ms)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };
	int n;

	while ((n = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	if (n <= 0 || !(p.revents & POLLIN))
		return -1;
	return wire_recv_fd(sock);
}

/* Bounds every later blocking send and receive on fd to timeout_ms each. */
int wire_set_timeouts(int fd, int timeout_ms)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };

	return setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	       setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) ? -1 : 0;
}

int wire_send_fd_tagged(int sock, int fd, char tag)
{
	char byte = tag, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	memset(ctl, 0, sizeof(ctl));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

int wire_recv_fd_tagged(int sock, char *tag)
{
	char byte, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c;
	int fd;

	if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
		return -1;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	*tag = byte;
	return fd;
}

/* Sends or receives exactly len bytes on a blocking socket (no SIGPIPE);
 * -1 if the peer went away or the socket failed. */
static int move_all(int fd, char *p, size_t len, int out)
{
	while (len) {
		ssize_t n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int wire_send_all(int fd, const void *buf, size_t len)
{
	return move_all(fd, (char *)buf, len, 1);
}

int wire_recv_all(int fd, void *buf, size_t len)
{
	return move_all(fd, buf, len, 0);
}

/* Reads one text line (without its newline) from a socket; -1 at its end. */
int wire_read_line(int fd, char *buf, size_t len)
{
	size_t n = 0;

	while (n + 1 < len) {
		ssize_t r = read(fd, buf + n, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = 0;
	return 0;
}

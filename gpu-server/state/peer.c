/*
 * peer.c: who is at the other end of a socket: a unix peer's
 * credentials, the mark of connections handed over as remote (a TLS
 * relay's), whether a uid is the server's own, and the abstract
 * addresses of workers' sockets. Below every part that asks.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <xxhash.h>
#include "state.h"

static uid_t server_uid = (uid_t)-1;     /* who started us: root or the server's user */

/* Notes who started the process (privsep_init, before anything may drop). */
void peer_set_server(uid_t uid)
{
	server_uid = uid;
}

/* Whether uid is root or the server's user (as the process started, not
 * as it may run now). */
int peer_is_server(uid_t uid)
{
	return uid == 0 || uid == server_uid;
}

/* Descriptors handed over as remote (a TLS relay's inner end, whose
 * credentials are the server's own): they have no local peer, and their
 * client is the host the relay serves. A number handed again without
 * the mark loses it; a stale mark only refuses. */
#define REMOTE_MAX 64
static struct { int fd; char host[REMOTE_HOST_MAX]; } remote[REMOTE_MAX];
static unsigned nremote;

static int remote_index(int fd)
{
	for (unsigned i = 0; i < nremote; i++)
		if (remote[i].fd == fd)
			return (int)i;
	return -1;
}

/* Marks fd remote (host: its client) or local (host NULL); -1 if it
 * cannot be marked (the caller must not use the connection then). */
int peer_mark_remote(int fd, const char *host)
{
	int i = remote_index(fd);

	if (!host) {
		if (i >= 0)
			remote[i] = remote[--nremote];
		return 0;
	}
	if (i < 0 && nremote == REMOTE_MAX)
		return -1;
	if (i < 0)
		i = (int)nremote++;
	remote[i].fd = fd;
	snprintf(remote[i].host, sizeof(remote[i].host), "%s", host);
	return 0;
}

/* The client host of a remote-marked fd, or NULL. */
const char *peer_remote_host(int fd)
{
	int i = remote_index(fd);

	return i < 0 ? NULL : remote[i].host;
}

/* The credentials of fd's peer, if fd is a unix socket's (a process on
 * this node; TCP sockets answer with no pid); -1 otherwise. */
int peer_cred(int fd, struct ucred *out)
{
	socklen_t len = sizeof(*out);

	if (remote_index(fd) >= 0)
		return -1;
	return !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, out, &len) && len == sizeof(*out) && out->pid ? 0 : -1;
}

/* Whether fd's peer is a unix one running as root or as the server's user. */
int peer_privileged(int fd)
{
	struct ucred cred;

	return !peer_cred(fd, &cred) && peer_is_server(cred.uid);
}

/* The abstract address of a worker's socket named leaf (a ticket, an
 * IPC owner): no file, so a worker that runs as its tenant can make it.
 * The run directory enters as a hash, so that two servers on a node
 * never share a name and a long directory never cuts the leaf short. */
unsigned run_socket_addr(const char *run_dir, const char *leaf, struct sockaddr_un *sa)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "cicada.%016llx.%.64s",
		     (unsigned long long)XXH3_64bits(run_dir, strlen(run_dir)), leaf);
	return (unsigned)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

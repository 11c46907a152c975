/*
 * ctl_find.c: finds a process's control socket and proves it is the
 * process's own before anyone talks to it. "\0cicada-ctl.<pid>" is only
 * a hint: any local user may bind an abstract name first (and would then
 * be sent pause requests and the checkpoint's directory), and a process
 * in a pid namespace names itself by its pid there. So the listener's
 * credentials (SO_PEERCRED: the process that listened, as our namespace
 * sees it, and its user, since a dead process's pid may be another's
 * now) must be the process asked for; else its own listening sockets
 * are searched, its descriptors against /proc/PID/net/unix, for one
 * named "cicada-ctl.<its pid>[.tag]". A connect never waits on a full
 * backlog, and the connection has deadlines. A process closes its
 * socket while paused and listens again just after criu lets it run:
 * session_ctl_wait gives one that runs Cicada a moment for it. Abstract
 * names belong to a network namespace: a process in a namespace of its
 * own (a container) is dialled from a socket made in there. Also: a line
 * of /proc/PID/status, and the pid a process has in its own pid
 * namespace.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "session.h"

#define SO_ACCEPTCON_FLAG 0x10000       /* /proc/net/unix: a listening socket */
#define MAX_FDS_SEEN 4096
#define CTL_IO_TIMEOUT_MS 600000         /* a pause waits for the device's work */

/* Whether the listener at fd's other end is pid, as its user: the pid
 * alone could be a dead process's that a new one (pid reuse) took. */
static int listener_is(int fd, int pid, uid_t uid)
{
	struct ucred c;
	socklen_t len = sizeof(c);

	return !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) && (int)c.pid == pid && c.uid == uid;
}

static int unix_socket(void)
{
	return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
}

/* A unix socket made in pid's network namespace, where it looks up
 * abstract names: made in ours when that is pid's, or when we may not
 * enter pid's (a user's own tools; the name is then not found). Only
 * this thread enters, and it comes back before the socket is used. */
static int socket_in_netns(int pid)
{
	char path[64];
	struct stat mine, theirs;
	int ns, back, fd = -1;

	snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
	if (stat(path, &theirs) || stat("/proc/thread-self/ns/net", &mine) ||
	    (theirs.st_dev == mine.st_dev && theirs.st_ino == mine.st_ino))
		return unix_socket();
	ns = open(path, O_RDONLY | O_CLOEXEC);
	back = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (ns >= 0 && back >= 0 && !setns(ns, CLONE_NEWNET)) {
		fd = unix_socket();
		if (setns(back, CLONE_NEWNET) && fd >= 0) {
			close(fd);           /* never talk from the wrong namespace */
			fd = -1;
		}
	} else {
		fd = unix_socket();
	}
	if (ns >= 0)
		close(ns);
	if (back >= 0)
		close(back);
	return fd;
}

/* Connects to abstract name (without its '@') in pid's network
 * namespace, never waiting for a full backlog; the socket, with
 * deadlines, if pid listens there as uid, else -1. */
static int dial_checked(const char *name, int pid, uid_t uid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(name);
	int fd;

	if (n + 1 >= sizeof(sa.sun_path))
		return -1;
	memcpy(sa.sun_path + 1, name, n);
	fd = socket_in_netns(pid);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) ||
	    !listener_is(fd, pid, uid) || fcntl(fd, F_SETFL, 0) || wire_set_timeouts(fd, CTL_IO_TIMEOUT_MS)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The socket inodes among pid's descriptors (at most max); their count. */
static int socket_inodes(int pid, unsigned long *ino, int max)
{
	char path[32], link[64];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	if (!(d = opendir(path)))
		return 0;
	while (n < max && (e = readdir(d))) {
		char full[320];
		ssize_t len;
		snprintf(full, sizeof(full), "%s/%s", path, e->d_name);
		len = readlink(full, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = 0;
		if (sscanf(link, "socket:[%lu]", &ino[n]) == 1)
			n++;
	}
	closedir(d);
	return n;
}

static int among(unsigned long v, const unsigned long *set, int n)
{
	for (int i = 0; i < n; i++)
		if (set[i] == v)
			return 1;
	return 0;
}

/* Whether name ("@cicada-ctl.<pid>" or "@cicada-ctl.<pid>.<tag>") is
 * the name a process of pid vpid would listen at: a child's inherited
 * copy of its parent's socket is not the child's. */
static int name_of(const char *name, int vpid)
{
	size_t n = strlen(WIRE_CTL_PREFIX) + 1;
	char *end;
	long v;

	if (strncmp(name, "@" WIRE_CTL_PREFIX, n))
		return 0;
	v = strtol(name + n, &end, 10);
	return end != name + n && v == vpid && (*end == 0 || *end == '.');
}

/* Searches pid's own listening sockets for its control socket. */
static int search(int pid, uid_t uid)
{
	unsigned long *ino = malloc(MAX_FDS_SEEN * sizeof(*ino));
	char path[32], line[512], name[256];
	int n = ino ? socket_inodes(pid, ino, MAX_FDS_SEEN) : 0, vpid = session_ns_pid(pid), fd = -1;
	FILE *f = NULL;

	snprintf(path, sizeof(path), "/proc/%d/net/unix", pid);
	if (n && (f = fopen(path, "r"))) {
		while (fd < 0 && fgets(line, sizeof(line), f)) {
			unsigned flags;
			unsigned long inode;
			if (sscanf(line, "%*s %*x %*x %x %*x %*x %lu %255s", &flags, &inode, name) == 3 &&
			    (flags & SO_ACCEPTCON_FLAG) && name_of(name, vpid) && among(inode, ino, n))
				fd = dial_checked(name + 1, pid, uid);
		}
		fclose(f);
	}
	free(ino);
	return fd;
}

static int dial_once(int pid, uid_t uid)
{
	char name[64];
	int fd;

	snprintf(name, sizeof(name), "%s%d", WIRE_CTL_PREFIX, pid);
	fd = dial_checked(name, pid, uid);
	return fd >= 0 ? fd : search(pid, uid);
}

/* Whether pid runs Cicada's client library. */
static int maps_cicada(int pid)
{
	char path[32], line[512];
	int found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	if (!(f = fopen(path, "r")))
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, "/libcicada.so") != NULL;
	fclose(f);
	return found;
}

int session_ctl_wait(int pid, int ms)
{
	int fd = session_ctl_dial(pid);

	for (int waited = 0; fd < 0 && waited < ms && maps_cicada(pid); waited += 20) {
		usleep(20000);
		fd = session_ctl_dial(pid);
	}
	if (fd >= 0)
		close(fd);
	return fd >= 0 ? 0 : -1;
}

int session_ctl_dial(int pid)
{
	char path[32];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", pid);
	return stat(path, &st) ? -1 : dial_once(pid, st.st_uid);
}

int session_proc_status(int pid, const char *key, char *value, size_t len)
{
	char path[64], line[512];
	size_t n = strlen(key);
	int found = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (found && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':') {
			line[strcspn(line, "\n")] = 0;
			snprintf(value, len, "%s", line + n + 1 + strspn(line + n + 1, " \t"));
			found = 0;
		}
	fclose(f);
	return found;
}

int session_ns_pid(int pid)
{
	char value[256], *last;

	if (session_proc_status(pid, "NSpid", value, sizeof(value)))
		return pid;
	last = strrchr(value, '\t');
	last = last ? last + 1 : value;
	return atoi(last) > 0 ? atoi(last) : pid;
}

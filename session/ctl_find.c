/*
 * ctl_find.c: finds a process's control socket and proves it is the
 * process's own before anyone talks to it. "\0cicada-ctl.<pid>" is only
 * a hint: any local user may bind an abstract name first (and would then
 * be sent pause requests and the checkpoint's directory), and a process
 * in a pid namespace names itself by its pid there. So the listener's
 * credentials (SO_PEERCRED: the process that listened, as our namespace
 * sees it) must be the process asked for; else its own listening sockets
 * are searched, its descriptors against /proc/PID/net/unix, for one named
 * "cicada-ctl.*". Also: the pid a process has in its own pid namespace.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "session.h"

#define SO_ACCEPTCON_FLAG 0x10000       /* /proc/net/unix: a listening socket */
#define MAX_FDS_SEEN 4096

/* The pid of the process that listens at fd's other end, or -1. */
static int listener_pid(int fd)
{
	struct ucred c;
	socklen_t len = sizeof(c);

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) ? -1 : (int)c.pid;
}

/* Connects to abstract name (without its '@'); the socket if pid listens
 * there, else -1. */
static int dial_checked(const char *name, int pid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(name);
	int fd;

	if (n + 1 >= sizeof(sa.sun_path))
		return -1;
	memcpy(sa.sun_path + 1, name, n);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) ||
	    listener_pid(fd) != pid) {
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

/* Searches pid's own listening sockets for a control socket. */
static int search(int pid)
{
	static unsigned long ino[MAX_FDS_SEEN];
	char path[64], line[512], name[256];
	int n = socket_inodes(pid, ino, MAX_FDS_SEEN), fd = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/net/unix", pid);
	if (!n || !(f = fopen(path, "r")))
		return -1;
	while (fd < 0 && fgets(line, sizeof(line), f)) {
		unsigned flags;
		unsigned long inode;
		if (sscanf(line, "%*s %*x %*x %x %*x %*x %lu %255s", &flags, &inode, name) != 3)
			continue;
		if ((flags & SO_ACCEPTCON_FLAG) && !strncmp(name, "@" WIRE_CTL_PREFIX, strlen(WIRE_CTL_PREFIX) + 1) &&
		    among(inode, ino, n))
			fd = dial_checked(name + 1, pid);
	}
	fclose(f);
	return fd;
}

int session_ctl_dial(int pid)
{
	char name[64];
	int fd;

	snprintf(name, sizeof(name), "%s%d", WIRE_CTL_PREFIX, pid);
	fd = dial_checked(name, pid);
	return fd >= 0 ? fd : search(pid);
}

int session_ns_pid(int pid)
{
	char path[64], line[512];
	int ns = pid;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (!(f = fopen(path, "r")))
		return pid;
	while (fgets(line, sizeof(line), f)) {
		char *last;
		if (strncmp(line, "NSpid:", 6))
			continue;
		line[strcspn(line, "\n")] = 0;
		last = strrchr(line, '\t');
		if (!last)
			last = strrchr(line, ' ');
		if (last && atoi(last + 1) > 0)
			ns = atoi(last + 1);
		break;
	}
	fclose(f);
	return ns;
}

/*
 * watch.c: what becomes of the paused sessions after a dump that a
 * container engine asked criu for (runc and crun run `criu swrk`, and
 * `criu service` serves others: the options come over RPC, where the
 * plugin cannot read --leave-running). A process that criu kills must
 * end its session; one left running resumes its own as soon as criu
 * lets it run. So a small process, detached from criu and from its
 * caller's pipes, waits up to WATCH_S seconds for each dumped process to
 * end, and releases the session of each one that did.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cicada-criu.h"

#define WATCH_S 10

/* Whether criu runs as an RPC service: its command is swrk or service,
 * or its title (which criu sets over its command line) says --rpc. */
int criu_over_rpc(void)
{
	char buf[8192];
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buf + i) + 1)
		if (!strcmp(buf + i, "swrk") || !strcmp(buf + i, "service") || strstr(buf + i, " --rpc"))
			return 1;
	return 0;
}

/* The watcher: releases the session of each process whose pidfd says it
 * ended, until none is left or the time is up. */
static void watch(struct gpu_session *s, int *pidfd, int n)
{
	struct pollfd p[n];
	char err[WIRE_ERRLEN];
	int left = n;

	for (int i = 0; i < n; i++)
		p[i] = (struct pollfd){ .fd = pidfd[i], .events = POLLIN };
	for (int waited = 0; left && waited < WATCH_S * 10; waited++) {
		if (poll(p, (nfds_t)n, 100) <= 0)
			continue;
		for (int i = 0; i < n; i++)
			if (p[i].fd >= 0 && p[i].revents) {
				if (server_request(&s[i], OP_RELEASE, -1, NULL, err))
					log_error("ending session of process %d: %s", s[i].pid, err);
				p[i].fd = -1;
				left--;
			}
	}
}

/* The first child, while criu still holds the dumped processes (none
 * can have ended, so no pid names another): drops every descriptor of
 * criu's and its caller's but the pipe `said` (moved to 3), takes a
 * pidfd of each process, leaves the watching to a grandchild, and says
 * so on the pipe. */
static void hand_over(struct gpu_session *s, int n, int said)
{
	int null = open("/dev/null", O_RDWR), pidfd[n];

	setsid();
	if (dup2(said, 3) != 3 || syscall(SYS_close_range, 4U, ~0U, 0U))
		return;
	for (int fd = 0; null >= 0 && fd < 3; fd++)
		dup2(null, fd);
	if (null > 2)
		close(null);
	for (int i = 0; i < n; i++)
		if ((pidfd[i] = (int)syscall(SYS_pidfd_open, s[i].pid, 0U)) < 0)
			return;
	switch (fork()) {
	case -1:
		return;
	case 0:
		close(3);
		watch(s, pidfd, n);
		_exit(0);
	}
	(void)!write(3, "", 1);
}

/* 0 once a detached watcher has the sessions of the n dumped processes;
 * -1 if there can be none (an old kernel: the caller ends them now). */
int watch_sessions(struct gpu_session *s, int n)
{
	int p[2], status;
	char c;
	pid_t child;

	if (pipe2(p, O_CLOEXEC))
		return -1;
	child = fork();
	if (child == 0) {
		hand_over(s, n, p[1]);
		_exit(0);
	}
	close(p[1]);
	status = child > 0 && read(p[0], &c, 1) == 1 ? 0 : -1;
	close(p[0]);
	if (child > 0)
		waitpid(child, NULL, 0);           /* (criu may have reaped it) */
	return status;
}

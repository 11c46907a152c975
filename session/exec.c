/*
 * exec.c: runs a command (criu, gpu-migrate) for the tools that drive
 * them, gpu-template and cicadactl: its fd 3 a descriptor given, if any,
 * and a deadline, past which it is killed.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "session.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The child: keep_fd as fd 3, then argv[0]. */
static void exec_child(char *const argv[], int keep_fd)
{
	if (keep_fd >= 0 && (dup2(keep_fd, 3) < 0 || fcntl(3, F_SETFD, 0) < 0))
		_exit(127);
	execv(argv[0], argv);
	fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

int session_exec(char *const argv[], int keep_fd, int timeout_s, int *status, char *err)
{
	double end = now_s() + timeout_s;
	pid_t pid = fork();
	int st = 0;

	if (pid < 0)
		return wire_fail(err, "cannot fork: %s", strerror(errno));
	if (pid == 0)
		exec_child(argv, keep_fd);
	for (;;) {
		pid_t got = waitpid(pid, &st, WNOHANG);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return wire_fail(err, "cannot wait for %s: %s", argv[0], strerror(errno));
		if (got == pid)
			break;
		if (now_s() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return wire_fail(err, "%s did not finish within %d s", argv[0], timeout_s);
		}
		usleep(5000);
	}
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return 0;
}

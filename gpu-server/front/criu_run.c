/*
 * criu_run.c: criu started for a migration coming in (migrate_in.c):
 * `criu restore` of its images, and `criu page-server`, which takes the
 * process's pages over a connection of their own while the source
 * dumps. criu runs in a grandchild: a runner child of the server starts
 * it, reports its pid and then how it ended on a pipe, and is reaped by
 * the pool's reaper (criu never is). The server ends criu by closing its
 * end of the pipe: the runner, which has not reaped criu yet (so its pid
 * is still criu's), kills it. None of the server's listeners or
 * connections stay open in criu, but for one connection it may keep, as
 * its fd 3 (--ps-socket 3).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "front.h"

/* In the runner: waits for criu to end, or for the server to close its
 * end of the report pipe (then kills criu first); criu's wait status. */
static int runner_wait(pid_t criu, int report)
{
	int pidfd = (int)syscall(SYS_pidfd_open, criu, 0), status = -1;
	struct pollfd p[2] = { { .fd = pidfd, .events = POLLIN }, { .fd = report, .events = 0 } };

	while (pidfd >= 0 && poll(p, 2, -1) >= 0 && !(p[0].revents & POLLIN)) {
		if (p[1].revents & (POLLERR | POLLHUP)) {
			kill(criu, SIGKILL);          /* (not reaped yet: still criu's pid) */
			break;
		}
	}
	return waitpid(criu, &status, 0) == criu ? status : -1;
}

/* In the runner child: criu with argv and env, its status on fd. */
static void runner(const char *criu, char *const argv[], char **env, int fd, int keep)
{
	int32_t v[2] = { -1, -1 };
	int null, report = fcntl(fd, F_DUPFD_CLOEXEC, 64);

	if (report < 0)
		_exit(1);
	if (keep >= 0 && (keep == 3 ? fcntl(3, F_SETFD, 0) : dup2(keep, 3) != 3))
		_exit(1);                         /* (fd 3 then outlives exec) */
	close_range(keep >= 0 ? 4 : 3, (unsigned)report - 1, 0);
	close_range((unsigned)report + 1, ~0u, 0);
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	v[0] = fork();
	if (v[0] == 0) {
		if (null >= 0)
			dup2(null, 0), dup2(null, 1), dup2(null, 2);
		setsid();
		execve(criu, argv, env);
		_exit(127);
	}
	signal(SIGPIPE, SIG_IGN);
	if (v[0] > 0 && write(report, &v[0], 4) != 4)
		kill(v[0], SIGKILL);              /* (the server gave up on it already) */
	if (v[0] > 0) {
		v[1] = runner_wait(v[0], report);
		if (write(report, &v[1], 4) != 4)
			_exit(1);
	}
	_exit(0);
}

/* Reads 4 bytes from fd within ms; 0 or -1. */
static int read_int(int fd, int32_t *v, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n;

	while ((n = poll(&p, 1, ms)) < 0 && errno == EINTR)
		;
	return n == 1 && read(fd, v, 4) == 4 ? 0 : -1;
}

int criu_run_start(const char *criu, char *const argv[], char **env, int keep, struct criu_run *run, char *err)
{
	int p[2];
	pid_t child;

	run->criu = -1;
	run->report = -1;
	if (pipe2(p, O_CLOEXEC))
		return wire_fail(err, "cannot start criu: %s", strerror(errno));
	if ((child = fork()) == 0) {
		close(p[0]);
		runner(criu, argv, env, p[1], keep);
	}
	close(p[1]);
	if (child < 0 || read_int(p[0], &run->criu, 5000) || run->criu <= 0) {
		close(p[0]);                      /* (a runner that did start criu ends it) */
		return wire_fail(err, "cannot start criu");
	}
	run->report = p[0];
	return 0;
}

/* criu's wait status, within ms; -1 if it ran past them (still running). */
int criu_run_wait(struct criu_run *run, int ms, int *status)
{
	int32_t v = -1;

	if (run->report < 0 || read_int(run->report, &v, ms))
		return -1;
	close(run->report);
	run->report = -1;
	*status = v;
	return 0;
}

/* Ends criu if it still runs (its runner kills it once the pipe is
 * closed), and forgets it. */
void criu_run_end(struct criu_run *run)
{
	if (run->report < 0)
		return;
	close(run->report);
	run->report = -1;
}

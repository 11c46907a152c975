/*
 * guard.c: while a whole-application move holds the source process
 * stopped (criu dump --leave-stopped), a small guard process watches
 * gpu-migrate through a pipe. If gpu-migrate dies before it disarms the
 * guard (success, or a failure it handled itself), the guard sends the
 * source SIGCONT: the application goes on where it was, and its GPU
 * session resumes on the source.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "migrate.h"

static int guard_fd = -1;

int guard_start(int pid, char *err)
{
	int p[2];
	pid_t g;
	char c;

	if (pipe2(p, O_CLOEXEC)) {
		snprintf(err, WIRE_ERRLEN, "cannot start the guard: %s", strerror(errno));
		return -1;
	}
	g = fork();
	if (g < 0) {
		close(p[0]);
		close(p[1]);
		snprintf(err, WIRE_ERRLEN, "cannot start the guard: %s", strerror(errno));
		return -1;
	}
	if (g == 0) {
		for (int fd = 3; fd < 4096; fd++)
			if (fd != p[0])
				close(fd);
		setsid();                    /* outlives a kill of gpu-migrate's group */
		if (fork() > 0)
			_exit(0);
		if (read(p[0], &c, 1) != 1)
			kill(getpgid(pid) == pid ? -pid : pid, SIGCONT);
		_exit(0);
	}
	close(p[0]);
	waitpid(g, NULL, 0);                 /* the guard itself runs on, reparented */
	guard_fd = p[1];
	return 0;
}

void guard_disarm(void)
{
	ssize_t n;

	if (guard_fd < 0)
		return;
	n = write(guard_fd, "d", 1);       /* fails only if the guard is gone */
	(void)n;
	close(guard_fd);
	guard_fd = -1;
}

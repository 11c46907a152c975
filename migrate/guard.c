/*
 * guard.c: while a whole-application move holds the source process
 * stopped (criu dump --leave-stopped), a small guard process watches
 * gpu-migrate through a pipe. If gpu-migrate dies before it disarms the
 * guard (success, or a failure it handled itself), the guard waits until
 * no criu holds the process any more and sends its tree SIGCONT: the
 * application goes on where it was, and its GPU session resumes on the
 * source; then it removes gpu-migrate's staging directory, so that no
 * image stays behind. A --gpu-only move stops no process (pid 0): its
 * guard only removes the staging directory (the process's session
 * resumes on its own once gpu-migrate's control connection closes).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "migrate.h"

static int guard_fd = -1;

/* The process's state letter and whether something traces it (criu). */
static int proc_state(int pid, char *state, int *traced)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (!(f = fopen(path, "r")))
		return -1;
	*state = '?';
	*traced = 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "State:", 6))
			sscanf(line + 6, " %c", state);
		if (!strncmp(line, "TracerPid:", 10))
			*traced = atoi(line + 10) != 0;
	}
	fclose(f);
	return 0;
}

/* Waits (at most ten minutes) until no criu holds pid, then resumes it. */
static void resume_when_free(int pid)
{
	char state;
	int traced;

	for (int i = 0; i < 3000 && !proc_state(pid, &state, &traced); i++) {
		if (!traced && state != 'T' && state != 't' && i > 0)
			return;
		if (!traced)
			wire_signal_tree(pid, SIGCONT);
		usleep(200000);
	}
}

int guard_start(int pid, struct staging *st, char *err)
{
	int p[2];
	pid_t g;
	char c;

	if (pipe2(p, O_CLOEXEC)) {
		wire_fail(err, "cannot start the guard: %s", strerror(errno));
		return -1;
	}
	g = fork();
	if (g < 0) {
		close(p[0]);
		close(p[1]);
		wire_fail(err, "cannot start the guard: %s", strerror(errno));
		return -1;
	}
	if (g == 0) {
		for (int fd = 3; fd < 4096; fd++)
			if (fd != p[0])
				close(fd);
		setsid();                    /* outlives a kill of gpu-migrate's group */
		if (fork() > 0)
			_exit(0);
		if (read(p[0], &c, 1) != 1) {
			if (pid > 0)
				resume_when_free(pid);
			st->fd = -1;         /* (closed above) */
			staging_remove(st);
		}
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

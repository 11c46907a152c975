/*
 * reaper PIDFILE CMD [ARG...]: runs CMD, in a session of its own (as criu
 * wants the root of a tree it dumps), as the subreaper of everything it
 * starts, for the checkpoint tests. It writes CMD's pid to PIDFILE and
 * reaps CMD and every process of CMD's tree that is orphaned, until none
 * is left; it exits with CMD's status (128 + its signal if killed). A
 * test that dumps CMD's tree with criu and restores it needs every pid of
 * that tree free again, and an init that reaps no orphans (as on some
 * VMs) would keep them as zombies.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int status, code = 1;
	pid_t cmd, pid;
	FILE *f;

	if (argc < 3) {
		fprintf(stderr, "usage: reaper PIDFILE CMD [ARG...]\n");
		return 2;
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) || (cmd = fork()) < 0) {
		perror("reaper");
		return 1;
	}
	if (cmd == 0) {
		setsid();
		execvp(argv[2], argv + 2);
		perror("reaper: exec");
		_exit(127);
	}
	if (!(f = fopen(argv[1], "w")) || fprintf(f, "%d\n", (int)cmd) < 0 || fclose(f)) {
		perror("reaper: pid file");
		return 1;
	}
	while ((pid = wait(&status)) > 0 || errno == EINTR)
		if (pid == cmd)
			code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	return code;
}

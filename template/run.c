/*
 * run.c: gpu-template run [--log FILE] -- CMD [ARG...]. Starts a small
 * init as the first process of a new pid namespace, its own session
 * leader, as criu needs to restore copies of it side by side (each into
 * a namespace of its own). The init starts CMD with stdin /dev/null and
 * stdout and stderr appended to FILE (else /dev/null), passes SIGTERM,
 * SIGINT and SIGHUP on to it (the first process of a namespace gets no
 * signal it does not handle), reaps the namespace's orphans, and exits
 * as CMD does. Prints the init's pid: what save and kill take.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "template.h"

static volatile pid_t child;

static void pass_on(int sig)
{
	if (child > 0)
		kill(child, sig);
}

/* stdin /dev/null; stdout and stderr to log (appended) or /dev/null. */
static int stdio_to(const char *log)
{
	int in = open("/dev/null", O_RDONLY), out = log[0] ? open(log, O_WRONLY | O_CREAT | O_APPEND, 0644) :
							   open("/dev/null", O_WRONLY);

	if (in < 0 || out < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
		return -1;
	close(in);
	close(out);
	return 0;
}

/* The init: pid 1 of the new namespace. Never returns. */
static void init_main(char **argv)
{
	struct sigaction sa = { .sa_handler = pass_on };
	int st;

	sigemptyset(&sa.sa_mask);
	signal(SIGCHLD, SIG_DFL);
	close_range(3, ~0u, 0);              /* the caller's other descriptors stay with it */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	child = fork();
	if (child == 0) {
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		execvp(argv[0], argv);
		fprintf(stderr, "gpu-template: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	if (child < 0)
		_exit(1);
	for (;;) {
		pid_t p = waitpid(-1, &st, 0);
		if (p < 0 && errno == EINTR)
			continue;
		if (p < 0)
			_exit(1);
		if (p == child)
			_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	}
}

int template_run(const struct template_opts *o, char **argv)
{
	pid_t init;

	if (unshare(CLONE_NEWPID)) {
		fprintf(stderr, "gpu-template: cannot make a pid namespace: %s%s\n", strerror(errno),
			errno == EPERM ? " (it needs root)" : "");
		return 1;
	}
	init = fork();
	if (init < 0) {
		fprintf(stderr, "gpu-template: cannot fork: %s\n", strerror(errno));
		return 1;
	}
	if (init == 0) {
		if (setsid() < 0 || stdio_to(o->log)) {
			fprintf(stderr, "gpu-template: cannot set up the template's init: %s\n", strerror(errno));
			_exit(1);
		}
		init_main(argv);
	}
	printf("%d\n", (int)init);
	return 0;
}

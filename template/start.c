/*
 * start.c: gpu-template start DIR [--log FILE]. criu restores one more
 * copy of the template in DIR, detached, into a pid namespace of its own
 * (so copies run side by side), its GPU state into a new worker of the
 * gpu-server the template used, or CICADA_RESTORE_SERVER's. The file the
 * template wrote its output to is replaced, for this copy, by FILE
 * (appended; else /dev/null: criu --inherit-fd). criu's log and pid file
 * go to a directory of this copy's own, kept only if the start fails.
 * Prints "started a copy as pid N in S s".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "template.h"

/* Removes the copy's work directory (its two files). */
static void work_remove(const char *work)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/restore.log", work);
	unlink(path);
	snprintf(path, sizeof(path), "%s/pid", work);
	unlink(path);
	rmdir(work);
}

static int read_pid(const char *work)
{
	char path[600];
	int pid = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/pid", work);
	if ((f = fopen(path, "r"))) {
		if (fscanf(f, "%d", &pid) != 1)
			pid = -1;
		fclose(f);
	}
	return pid;
}

int template_start(const struct template_opts *o, const char *dir)
{
	char err[1024], key[512], work[] = "/tmp/gpu-template.XXXXXX", log[600], inherit[600];
	char *argv[] = { "criu", "restore", "-D", (char *)dir, "-L", (char *)o->plugins, "-d", "-W", work,
			 "-o", "restore.log", "--pidfile", "pid", NULL, NULL, NULL };
	struct timespec t0, t1;
	int out = -1, pid;

	if (template_file_read(dir, key, sizeof(key), err, sizeof(err)))
		goto fail;
	if (o->log[0] && !key[0]) {
		snprintf(err, sizeof(err), "the template wrote its output nowhere (run without --log): --log has no place");
		goto fail;
	}
	if (!mkdtemp(work)) {
		snprintf(err, sizeof(err), "cannot make a work directory: %s", strerror(errno));
		goto fail;
	}
	snprintf(log, sizeof(log), "%s/restore.log", work);
	if (key[0]) {
		out = o->log[0] ? open(o->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) :
				  open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (out < 0) {
			snprintf(err, sizeof(err), "cannot open %s: %s", o->log[0] ? o->log : "/dev/null", strerror(errno));
			goto fail;
		}
		snprintf(inherit, sizeof(inherit), "fd[3]:%s", key);
		argv[13] = "--inherit-fd";
		argv[14] = inherit;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (template_criu(o, argv, out, log, err, sizeof(err)))
		goto fail;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	pid = read_pid(work);
	if (pid <= 0) {
		snprintf(err, sizeof(err), "criu restored the copy but left no pid (%s)", work);
		goto fail;
	}
	work_remove(work);
	if (out >= 0)
		close(out);
	printf("gpu-template: started a copy as pid %d in %.2f s\n", pid,
	       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
fail:
	if (out >= 0)
		close(out);
	fprintf(stderr, "gpu-template: %s\n", err);
	return 1;
}

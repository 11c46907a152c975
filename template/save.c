/*
 * save.c: gpu-template save PID DIR [--leave-running]. PID is the init
 * that gpu-template run started (or its command, whose parent that init
 * is). criu dumps the namespace into DIR with Cicada's plugin, GPU state
 * and all, and template.txt notes the file the template's output went to
 * (each copy gets its own there). Without --leave-running the template
 * ends; with it, it goes on (and holds its GPU memory).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "session.h"
#include "template.h"

/* pid's parent, or -1. */
static int parent_of(int pid)
{
	char value[32];

	return session_proc_status(pid, "PPid", value, sizeof(value)) ? -1 : atoi(value);
}

/* The first process of a pid namespace other than ours. */
static int is_ns_init(int pid)
{
	return pid > 1 && session_ns_pid(pid) == 1;
}

/* The init to dump for pid, or -1 with err. */
static int template_init(int pid, char *err, size_t len)
{
	if (kill(pid, 0) && errno == ESRCH) {
		snprintf(err, len, "no process %d", pid);
		return -1;
	}
	if (is_ns_init(pid))
		return pid;
	if (is_ns_init(parent_of(pid)))
		return parent_of(pid);
	snprintf(err, len, "process %d is not the first process of a pid namespace, nor its child: "
		 "start the template with gpu-template run", pid);
	return -1;
}

/* criu's name for the file at pid's fd 1 (its path without the leading
 * '/'), or "" if it is no regular file. */
static void log_key(int pid, char *key, size_t len)
{
	char path[64], target[PATH_MAX];
	struct stat st;
	ssize_t n;

	key[0] = 0;
	snprintf(path, sizeof(path), "/proc/%d/fd/1", pid);
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 1 || stat(path, &st) || !S_ISREG(st.st_mode))
		return;
	target[n] = 0;
	if (target[0] == '/' && !strchr(target, ' ') && strlen(target + 1) < len)
		memcpy(key, target + 1, strlen(target + 1) + 1);
}

/* Whether dir is an empty directory. */
static int dir_empty(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int empty = d != NULL;

	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			empty = 0;
	if (d)
		closedir(d);
	return empty;
}

int template_save(const struct template_opts *o, int pid, const char *dir)
{
	char err[1024], key[512], tpid[16], log[600];
	char *argv[] = { "criu", "dump", "-t", tpid, "-D", (char *)dir, "-L", (char *)o->plugins, "-o", "dump.log",
			 o->leave_running ? "--leave-running" : NULL, NULL };
	struct timespec t0, t1;
	int init = template_init(pid, err, sizeof(err));

	if (init < 0)
		goto fail;
	snprintf(tpid, sizeof(tpid), "%d", init);
	snprintf(log, sizeof(log), "%s/dump.log", dir);
	log_key(init, key, sizeof(key));
	if (mkdir(dir, 0700) && errno != EEXIST) {
		snprintf(err, sizeof(err), "cannot make %s: %s", dir, strerror(errno));
		goto fail;
	}
	if (!dir_empty(dir)) {
		snprintf(err, sizeof(err), "%s is not empty: a template goes into a new directory", dir);
		goto fail;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (template_criu(o, argv, -1, log, err, sizeof(err)) || template_file_write(dir, key, err, sizeof(err)))
		goto fail;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("gpu-template: process %d saved as a template in %s (%.2f s)%s\n", init, dir,
	       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, o->leave_running ? "; it goes on" : "");
	return 0;
fail:
	fprintf(stderr, "gpu-template: %s\n", err);
	return 1;
}

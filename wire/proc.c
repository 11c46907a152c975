/*
 * proc.c: a process tree, as criu dumps and restores it: wire_signal_tree
 * signals a process and all its descendants, whatever their process
 * groups or sessions, children first. gpu-migrate resumes a source tree
 * with it; the migration target starts or ends a restored one.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire.h"

static void signal_children(int pid, int sig, int depth)
{
	char path[64], line[4096], *save;
	FILE *f;
	DIR *d;
	struct dirent *e;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	if (depth > 64 || !(d = opendir(path)))
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/children", pid, e->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		if (fgets(line, sizeof(line), f))
			for (char *t = strtok_r(line, " \n", &save); t; t = strtok_r(NULL, " \n", &save))
				signal_children(atoi(t), sig, depth + 1);
		fclose(f);
	}
	closedir(d);
	kill(pid, sig);
}

void wire_signal_tree(int pid, int sig)
{
	if (pid > 0)
		signal_children(pid, sig, 0);
}

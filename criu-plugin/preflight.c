/*
 * preflight.c: what criu 4.1 cannot dump, said in one line before any GPU
 * session is paused, instead of criu's own words deep in its log. For now
 * that is an io_uring: libuv's event loop makes one whatever
 * UV_USE_IO_URING says, PyTorch's stores run on libuv unless USE_LIBUV=0,
 * and torchrun's agent (PyTorch 2.11) holds one whatever its options say.
 */
#include <stdio.h>
#include <string.h>
#include "cicada-criu.h"

static void task_name(int pid, char *name, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	snprintf(name, len, "?");
	if (!(f = fopen(path, "re")))
		return;
	if (fgets(name, (int)len, f))
		name[strcspn(name, "\n")] = 0;
	fclose(f);
}

/* 0 if nothing in process pid's mappings stops criu; else -1, err saying
 * what. (A process that cannot be read is left to criu.) */
int task_dumpable(int pid, char *err)
{
	char path[64], line[512], name[32];
	FILE *f;
	int uring = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	if (!(f = fopen(path, "re")))
		return 0;
	while (!uring && fgets(line, sizeof(line), f))
		uring = strstr(line, "anon_inode:[io_uring]") != NULL;
	fclose(f);
	if (!uring)
		return 0;
	task_name(pid, name, sizeof(name));
	return wire_fail(err, "process %d (%s) holds an io_uring, which criu cannot dump (libuv's event loop makes "
			 "one, and torchrun's agent holds one: start the ranks without torchrun, as srun or mpirun "
			 "do, with USE_LIBUV=0)", pid, name);
}

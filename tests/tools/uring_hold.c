/*
 * uring_hold CMD [ARG...]: runs CMD while holding an io_uring with its
 * rings mapped, as libuv's event loop (under PyTorch's store, in
 * torchrun's agent) does, for the test of a dump that must be refused in
 * one line (cr-uring). Exits with CMD's status; 3, saying so, where this
 * kernel gives no io_uring (then there is nothing to test).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif

/* (the kernel's io_uring_params, without its header) */
struct uring_params {
	unsigned sq_entries, cq_entries, flags, sq_thread_cpu, sq_thread_idle, features, wq_fd, resv[3];
	unsigned sq_off[10];
	unsigned cq_off[10];
};

int main(int argc, char **argv)
{
	struct uring_params p;
	int fd, status;
	pid_t cmd;

	if (argc < 2) {
		fprintf(stderr, "usage: uring_hold CMD [ARG...]\n");
		return 2;
	}
	memset(&p, 0, sizeof(p));
	fd = (int)syscall(__NR_io_uring_setup, 4, &p);
	if (fd < 0 || mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0) == MAP_FAILED) {
		fprintf(stderr, "uring_hold: no io_uring here (%s)\n", strerror(errno));
		return 3;
	}
	if ((cmd = fork()) < 0) {
		perror("uring_hold: fork");
		return 1;
	}
	if (cmd == 0) {
		close(fd);
		execvp(argv[1], argv + 1);
		perror("uring_hold: exec");
		_exit(127);
	}
	while (waitpid(cmd, &status, 0) < 0)
		if (errno != EINTR) {
			perror("uring_hold: waitpid");
			return 1;
		}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

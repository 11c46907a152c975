/*
 * ctl_squat: a hostile tenant's squat on the control sockets of processes
 * not yet started, for sec-ctl-squat. Binds "\0cicada-ctl.N" for the
 * COUNT pids after FIRST (the names the next processes would take), then
 * for SECONDS answers whoever asks one of them anything with "IDLE" (so
 * that, believed, the process would be checkpointed without its GPU
 * state) after writing "asked N: <line>" to OUT. With "full" after the
 * arguments it also fills each socket's backlog (a connection of its
 * own), so that a dial that waits for room waits for ever. Prints
 * "squatting A..B" when ready.
 */
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_SQUAT 2000

static int bind_name(int pid, int full)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "cicada-ctl.%d", pid);
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0), self;

	if (fd >= 0 && (bind(fd, (struct sockaddr *)&sa, len) || listen(fd, full ? 0 : 4))) {
		close(fd);
		return -1;
	}
	if (full && ((self = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0)) < 0 ||
		     connect(self, (struct sockaddr *)&sa, len)))
		perror("ctl_squat: filling a backlog");  /* (self stays open: it fills it) */
	return fd;
}

static void answer(int lfd, int pid, FILE *out)
{
	char line[256];
	int fd = accept(lfd, NULL, NULL);
	ssize_t n;

	if (fd < 0)
		return;
	n = read(fd, line, sizeof(line) - 1);
	line[n > 0 ? n : 0] = 0;
	line[strcspn(line, "\n")] = 0;
	if (n > 0) {                         /* (a dial alone tells it nothing) */
		fprintf(out, "asked %d: %s\n", pid, line);
		fflush(out);
		if (write(fd, "IDLE\n", 5) != 5)
			perror("ctl_squat: write");
	}
	close(fd);
}

int main(int argc, char **argv)
{
	static struct pollfd p[MAX_SQUAT];
	static int pids[MAX_SQUAT];
	int first, count, n = 0;
	time_t end;
	FILE *out;

	if (argc < 5 || argc > 6 || (count = atoi(argv[2])) <= 0 || count > MAX_SQUAT ||
	    (argc == 6 && strcmp(argv[5], "full"))) {
		fprintf(stderr, "usage: ctl_squat FIRST COUNT OUT SECONDS [full] (COUNT <= %d)\n", MAX_SQUAT);
		return 2;
	}
	first = atoi(argv[1]);
	end = time(NULL) + atoi(argv[4]);
	if (!(out = fopen(argv[3], "a")))
		return 1;
	for (int i = 0; i < count; i++) {
		int fd = bind_name(first + i, argc == 6);
		if (fd >= 0) {
			p[n] = (struct pollfd){ .fd = fd, .events = POLLIN };
			pids[n++] = first + i;
		}
	}
	printf("squatting %d..%d (%d names)\n", first, first + count - 1, n);
	fflush(stdout);
	while (time(NULL) < end) {
		if (argc == 6) {                 /* full: never takes a connection */
			sleep(1);
			continue;
		}
		if (poll(p, (nfds_t)n, 200) > 0)
			for (int i = 0; i < n; i++)
				if (p[i].revents & POLLIN)
					answer(p[i].fd, pids[i], out);
	}
	return 0;
}

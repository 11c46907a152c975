/*
 * tcp_hold CMD [ARG...]: runs CMD while holding an established TCP
 * connection over loopback, as NCCL's and torchrun's processes do, for
 * the checkpoint test of such a process tree (cr-tcp-held). A thread
 * sends a numbered byte across the connection every 20 ms and reads it
 * back at the other end (5 s at most); when CMD ends, one more must
 * cross. It then says on stderr "tcp_hold: N round trips, the connection
 * held" (or that it broke) and exits with CMD's status, 1 if the
 * connection broke.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int ends[2];
static atomic_int stop, broken;
static unsigned long trips;             /* the thread's, then main's once joined */

/* One numbered byte across: 0, or -1 if the connection broke. */
static int round_trip(void)
{
	unsigned char out = (unsigned char)trips, in = 0;

	if (send(ends[0], &out, 1, MSG_NOSIGNAL) != 1 || recv(ends[1], &in, 1, 0) != 1 || in != out)
		return -1;
	trips++;
	return 0;
}

static void *pinger(void *arg)
{
	const struct timespec pause = { 0, 20 * 1000 * 1000 };

	(void)arg;
	while (!atomic_load(&stop)) {
		if (round_trip()) {
			atomic_store(&broken, 1);
			break;
		}
		nanosleep(&pause, NULL);
	}
	return NULL;
}

/* ends[0] connected to ends[1] over 127.0.0.1; a read waits 5 s at most. */
static int connect_pair(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval limit = { 5, 0 };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	if (l < 0 || bind(l, (struct sockaddr *)&a, len) || listen(l, 1) || getsockname(l, (struct sockaddr *)&a, &len))
		return -1;
	ends[0] = socket(AF_INET, SOCK_STREAM, 0);
	if (ends[0] < 0 || connect(ends[0], (struct sockaddr *)&a, len) || (ends[1] = accept(l, NULL, NULL)) < 0)
		return -1;
	close(l);
	return setsockopt(ends[1], SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
}

int main(int argc, char **argv)
{
	pthread_t t;
	pid_t cmd;
	int status, code;

	if (argc < 2) {
		fprintf(stderr, "usage: tcp_hold CMD [ARG...]\n");
		return 2;
	}
	if (connect_pair()) {
		perror("tcp_hold: loopback connection");
		return 1;
	}
	if ((cmd = fork()) < 0) {
		perror("tcp_hold: fork");
		return 1;
	}
	if (cmd == 0) {
		close(ends[0]);
		close(ends[1]);
		execvp(argv[1], argv + 1);
		perror("tcp_hold: exec");
		_exit(127);
	}
	if (pthread_create(&t, NULL, pinger, NULL)) {
		fprintf(stderr, "tcp_hold: cannot start its thread\n");
		return 1;
	}
	while (waitpid(cmd, &status, 0) < 0)
		if (errno != EINTR) {
			perror("tcp_hold: waitpid");
			return 1;
		}
	code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	if (atomic_load(&broken) || round_trip()) {
		fprintf(stderr, "tcp_hold: the connection broke after %lu round trips\n", trips);
		return 1;
	}
	fprintf(stderr, "tcp_hold: %lu round trips, the connection held\n", trips);
	return code;
}

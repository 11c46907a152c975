/*
 * linkspeed: what the TCP loopback link itself carries, for make bench to
 * set Cicada's TCP copies against in the same run.
 *
 *   linkspeed STREAMS MIB    -> metric link_tcp_<STREAMS>s_gbs VALUE GB/s
 *   linkspeed rtt            -> metric link_tcp_rtt_us VALUE us
 *
 * STREAMS connections over 127.0.0.1 carry MIB MiB in all, from as many
 * sending threads to as many receiving ones, 4 MiB writes. rtt: the
 * median of 20000 round trips of 64 bytes between two polling threads (a
 * request and its reply, with TCP_NODELAY): what the kernel's loopback
 * costs a synchronous call, to set Cicada's own share against.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (4u << 20)

struct flow {
	int fd;
	size_t bytes;
};

static void *sender(void *arg)
{
	struct flow *f = arg;
	char *buf = calloc(1, CHUNK);

	for (size_t left = f->bytes; buf && left;) {
		ssize_t n = send(f->fd, buf, left < CHUNK ? left : CHUNK, MSG_NOSIGNAL);
		if (n <= 0)
			break;
		left -= (size_t)n;
	}
	free(buf);
	shutdown(f->fd, SHUT_WR);
	return NULL;
}

static void *receiver(void *arg)
{
	struct flow *f = arg;
	char *buf = malloc(CHUNK);
	ssize_t n;

	while (buf && (n = recv(f->fd, buf, CHUNK, 0)) > 0)
		f->bytes += (size_t)n;
	free(buf);
	return NULL;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

#define RTT_ROUNDS 20000

/* Reads n bytes polling, as Cicada's client and worker wait: the
 * kernel's share of a round trip, without a sleeping thread's wake-up. */
static int recv_polling(int fd, char *b, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = recv(fd, b + got, n - got, MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
			return -1;
		if (r > 0)
			got += (size_t)r;
	}
	return 0;
}

static void *echo(void *arg)
{
	int fd = *(int *)arg;
	char b[64];

	for (int i = 0; i < RTT_ROUNDS; i++)
		if (recv_polling(fd, b, sizeof(b)) || send(fd, b, sizeof(b), 0) != sizeof(b))
			break;
	return NULL;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int rtt(int ls, struct sockaddr_in *a)
{
	static double t[RTT_ROUNDS];
	int c = socket(AF_INET, SOCK_STREAM, 0), s, one = 1;
	pthread_t th;
	char b[64] = { 0 };

	if (connect(c, (struct sockaddr *)a, sizeof(*a)) || (s = accept(ls, NULL, NULL)) < 0)
		return perror("rtt"), 1;
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	pthread_create(&th, NULL, echo, &s);
	for (int i = 0; i < RTT_ROUNDS; i++) {
		double t0 = now();
		if (send(c, b, sizeof(b), 0) != sizeof(b) || recv_polling(c, b, sizeof(b)))
			return perror("rtt"), 1;
		t[i] = now() - t0;
	}
	pthread_join(th, NULL);
	qsort(t, RTT_ROUNDS, sizeof(t[0]), by_value);
	printf("metric link_tcp_rtt_us %.4g us\n", t[RTT_ROUNDS / 2] * 1e6);
	return 0;
}

int main(int argc, char **argv)
{
	int want_rtt = argc > 1 && !strcmp(argv[1], "rtt");
	int streams = argc > 1 && !want_rtt ? atoi(argv[1]) : 1, ls = socket(AF_INET, SOCK_STREAM, 0);
	size_t mib = argc > 2 ? strtoul(argv[2], NULL, 10) : 1024, got = 0;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	struct flow snd[64], rcv[64];
	pthread_t ts[64], tr[64];
	double t0;

	if (streams < 1 || streams > 64 || ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(ls, 64) || getsockname(ls, (struct sockaddr *)&a, &len)) {
		fprintf(stderr, "usage: linkspeed STREAMS(1-64) MIB | linkspeed rtt\n");
		return 2;
	}
	if (want_rtt)
		return rtt(ls, &a);
	for (int i = 0; i < streams; i++) {
		snd[i].fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(snd[i].fd, (struct sockaddr *)&a, sizeof(a)))
			return perror("connect"), 1;
		rcv[i] = (struct flow){ accept(ls, NULL, NULL), 0 };
		snd[i].bytes = (mib << 20) / (size_t)streams;
	}
	t0 = now();
	for (int i = 0; i < streams; i++) {
		pthread_create(&tr[i], NULL, receiver, &rcv[i]);
		pthread_create(&ts[i], NULL, sender, &snd[i]);
	}
	for (int i = 0; i < streams; i++) {
		pthread_join(ts[i], NULL);
		pthread_join(tr[i], NULL);
		got += rcv[i].bytes;
	}
	printf("metric link_tcp_%ds_gbs %.4g GB/s\n", streams, got / (now() - t0) / 1e9);
	return 0;
}

/*
 * stats.c: how the interposer's calls crossed the wire, for tuning.
 * With CICADA_STATS=1, the process writes at exit, on stderr, one line per
 * procedure it called: how many calls, how many of them waited for a
 * reply, and the time spent waiting (the round trips an application
 * pays), then how many times each driver function was called. Wire
 * counts happen under the client lock; off, it all costs one test.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "interposer.h"

#define STATS_PROCS 1024

int stats_on;
static uint64_t sent[STATS_PROCS], waited[STATS_PROCS], wait_ns[STATS_PROCS];
static _Atomic uint64_t driver_calls[STATS_PROCS];
static const char *driver_names[STATS_PROCS];

uint64_t stats_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void stats_sent(unsigned proc)
{
	sent[proc % STATS_PROCS]++;
}

void stats_waited(unsigned proc, uint64_t ns)
{
	waited[proc % STATS_PROCS]++;
	wait_ns[proc % STATS_PROCS] += ns;
}

void stats_driver_call(unsigned i, const char *name)
{
	driver_calls[i % STATS_PROCS]++;
	driver_names[i % STATS_PROCS] = name;
}

static int by_calls(const void *a, const void *b)
{
	uint64_t x = driver_calls[*(const unsigned *)a], y = driver_calls[*(const unsigned *)b];

	return x < y ? 1 : x > y ? -1 : 0;
}

static void stats_print_driver(void)
{
	unsigned order[STATS_PROCS], n = 0;

	for (unsigned i = 0; i < STATS_PROCS; i++)
		if (driver_calls[i])
			order[n++] = i;
	qsort(order, n, sizeof(*order), by_calls);
	for (unsigned k = 0; k < n; k++)
		fprintf(stderr, "cicada stats: driver %-40s %10llu calls\n", driver_names[order[k]],
			(unsigned long long)driver_calls[order[k]]);
}

static int by_wait(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	if (wait_ns[x] != wait_ns[y])
		return wait_ns[x] < wait_ns[y] ? 1 : -1;
	return sent[x] < sent[y] ? 1 : sent[x] > sent[y] ? -1 : 0;
}

static void stats_print(void)
{
	unsigned order[STATS_PROCS], n = 0;
	uint64_t calls = 0, replies = 0, ns = 0;

	for (unsigned p = 0; p < STATS_PROCS; p++)
		if (sent[p]) {
			order[n++] = p;
			calls += sent[p];
			replies += waited[p];
			ns += wait_ns[p];
		}
	qsort(order, n, sizeof(*order), by_wait);
	fprintf(stderr, "cicada stats: %llu calls, %llu waited for a reply, %.3f ms waiting\n",
		(unsigned long long)calls, (unsigned long long)replies, ns / 1e6);
	for (unsigned i = 0; i < n; i++) {
		unsigned p = order[i];

		fprintf(stderr, "cicada stats: %-40s %10llu calls %10llu waited %10.3f ms %8.2f us/wait\n",
			rpc_name(p), (unsigned long long)sent[p], (unsigned long long)waited[p],
			wait_ns[p] / 1e6, waited[p] ? wait_ns[p] / 1e3 / waited[p] : 0.0);
	}
	stats_print_driver();
}

__attribute__((constructor)) static void stats_init(void)
{
	const char *e = getenv("CICADA_STATS");

	stats_on = e && *e && strcmp(e, "0");
	if (stats_on)
		atexit(stats_print);
}

/*
 * stats.c: how the interposer's calls crossed the wire, for tuning.
 * With CICADA_STATS=1, the process writes at exit, on stderr, one line per
 * procedure it called: how many calls, how many of them waited for a
 * reply, and the time spent waiting (the round trips an application
 * pays); then each driver function the program called, how often and
 * the wall time spent inside it (inclusive: the interposer's own work,
 * the waits, and any driver call it makes itself); then the process's
 * wall and CPU time against the time inside the driver, so the time a
 * program spends in its own code (or in a library's fallback path) shows
 * as what is left; then the worker's side (gpu-server/calls/profile.c):
 * its time waiting for this process, decoding, running each procedure
 * and replying, which the worker keeps from when the session starts (or
 * restarts after a move) when asked. Wire counts happen under the client
 * lock; off, it all costs one test. docs/profiling.md says how to read it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include "interposer.h"

#define STATS_PROCS 1024

int stats_on;
static uint64_t sent[STATS_PROCS], waited[STATS_PROCS], wait_ns[STATS_PROCS];
static _Atomic uint64_t driver_calls[STATS_PROCS], driver_ns[STATS_PROCS];
static uint64_t started_ns;
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

void stats_driver_call(unsigned i, const char *name, uint64_t ns)
{
	driver_calls[i % STATS_PROCS]++;
	driver_ns[i % STATS_PROCS] += ns;
	driver_names[i % STATS_PROCS] = name;
}

static int by_time(const void *a, const void *b)
{
	uint64_t x = driver_ns[*(const unsigned *)a], y = driver_ns[*(const unsigned *)b];

	return x < y ? 1 : x > y ? -1 : 0;
}

static double cpu_seconds(void)
{
	struct rusage u;

	if (getrusage(RUSAGE_SELF, &u))
		return 0;
	return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* Driver functions by time spent in them, then where the process's time went. */
static void stats_print_driver(void)
{
	unsigned order[STATS_PROCS], n = 0;
	uint64_t calls = 0, ns = 0;

	for (unsigned i = 0; i < STATS_PROCS; i++)
		if (driver_calls[i]) {
			order[n++] = i;
			calls += driver_calls[i];
			ns += driver_ns[i];
		}
	qsort(order, n, sizeof(*order), by_time);
	for (unsigned k = 0; k < n; k++) {
		unsigned i = order[k];

		fprintf(stderr, "cicada stats: driver %-40s %10llu calls %10.3f ms %8.2f us/call\n", driver_names[i],
			(unsigned long long)driver_calls[i], driver_ns[i] / 1e6, driver_ns[i] / 1e3 / driver_calls[i]);
	}
	fprintf(stderr, "cicada stats: process %.3f s wall, %.3f s CPU; %llu driver calls took %.3f s "
		"(summed over threads, nested calls counted twice)\n", (stats_now() - started_ns) / 1e9,
		cpu_seconds(), (unsigned long long)calls, ns / 1e9);
}

static int by_wait(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	if (wait_ns[x] != wait_ns[y])
		return wait_ns[x] < wait_ns[y] ? 1 : -1;
	return sent[x] < sent[y] ? 1 : sent[x] > sent[y] ? -1 : 0;
}

static int worker_asked;                    /* the session's worker keeps timings */

/* (hooks: the session started, or resumed on another worker) */
static void worker_ask(void)
{
	uint64_t op = 1;
	scalars a = { { 1, &op } };
	scalar_res r = { 0 };

	if (!stats_on)
		return;
	worker_asked = !rpc_worker_stats_locked(&a, &r);
	xdr_free((xdrproc_t)xdr_scalar_res, (char *)&r);
}

static int worker_ask_again(int regions_lost)
{
	(void)regions_lost;
	worker_ask();
	return 0;
}

/* Page k of the worker's timings into out; its length, or -1. */
static int worker_page(uint64_t k, uint64_t *out)
{
	uint64_t in[2] = { 2, k };
	scalars a = { { 2, in } };
	scalar_res r = { 0 };
	int n = -1;

	if (!rpc_worker_stats_locked(&a, &r)) {
		n = (int)r.v.v_len;
		memcpy(out, r.v.v_val, n * sizeof(uint64_t));
	}
	xdr_free((xdrproc_t)xdr_scalar_res, (char *)&r);
	return n;
}

/* The worker's side: where its time went, then its busiest procedures. */
static void stats_print_worker(void)
{
	static const char *parts[] = { "waiting for this process", "decoding", "bookkeeping", "running calls",
				       "freeing and replying" };
	uint64_t v[CICADA_SCALARS_MAX];
	int n;

	if (!worker_asked || client_trylock())
		return;
	n = worker_page(0, v);
	if (n == 8) {
		fprintf(stderr, "cicada stats: worker %llu records in %.3f s:", (unsigned long long)v[1], v[0] / 1e9);
		for (unsigned i = 0; i < 5; i++)
			fprintf(stderr, "%s %s %.3f ms", i ? "," : "", parts[i], v[2 + i] / 1e6);
		fprintf(stderr, "\n");
	}
	for (uint64_t k = 1; n > 0 && k <= 4; k++) {
		if ((n = worker_page(k, v)) <= 0)
			break;
		for (int i = 0; i + 2 < n; i += 3)
			fprintf(stderr, "cicada stats: worker %-33s %10llu calls %10.3f ms %8.2f us/call\n",
				rpc_name((unsigned)v[i]), (unsigned long long)v[i + 1], v[i + 2] / 1e6,
				v[i + 2] / 1e3 / v[i + 1]);
	}
	client_unlock();
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
	stats_print_worker();
}

static const struct client_hooks stats_hooks = { .connected = worker_ask, .resume = worker_ask_again };

__attribute__((constructor)) static void stats_init(void)
{
	const char *e = getenv("CICADA_STATS");

	stats_on = e && *e && strcmp(e, "0");
	started_ns = stats_now();
	if (stats_on) {
		client_add_hooks(&stats_hooks);
		atexit(stats_print);
	}
}

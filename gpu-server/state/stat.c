/*
 * stat.c: a worker's figures for the operator (cicadactl list), in one
 * page the server maps too (--stat-fd, made by front/pool.c). The
 * worker writes who its session is and what it holds; the server writes
 * only quota_asked (cicadactl resize), which the worker takes at its
 * next allocation, and paused (cicadactl pause), which holds the
 * session's next call until it is cleared. The server trusts none of
 * it beyond showing it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "state.h"

void stat_open(struct worker *w)
{
	const char *v = getenv("CICADA_STAT_FD");
	int fd = v ? atoi(v) : -1;
	void *p;

	unsetenv("CICADA_STAT_FD");
	if (fd < 0)
		return;
	p = mmap(NULL, sizeof(struct session_stat), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p != MAP_FAILED)
		w->stat = p;
}

void stat_session(struct worker *w, uint64_t client_pid, uint32_t uid, const char *tenant)
{
	struct session_stat *st = w->stat;
	int n = 0;

	if (!st)
		return;
	st->client_pid = client_pid;
	st->uid = uid;
	snprintf(st->tenant, sizeof(st->tenant), "%s", tenant);
	st->gpus[0] = 0;
	for (int i = 0; i < w->ngpus && n < (int)sizeof(st->gpus) - 4; i++)
		n += snprintf(st->gpus + n, sizeof(st->gpus) - (size_t)n, "%s%d", i ? "," : "", (int)w->gpu[i]);
	st->quota = w->quota;
	st->charged = w->charged;
	memcpy(st->sm_mask, w->sm_mask, sizeof(st->sm_mask));
	__atomic_store_n(&st->started, 1, __ATOMIC_RELEASE);
}

void stat_memory(struct worker *w)
{
	if (w->stat) {
		w->stat->quota = w->quota;
		w->stat->charged = w->charged;
	}
}

/* A quota the operator asked for since the last look: 1 with it in
 * *bytes (0: none), else 0. */
int stat_quota_asked(struct worker *w, uint64_t *bytes)
{
	uint64_t asked;

	if (!w->stat || !(asked = __atomic_exchange_n(&w->stat->quota_asked, 0, __ATOMIC_ACQ_REL)))
		return 0;
	*bytes = asked == STAT_NO_QUOTA ? 0 : asked;
	return 1;
}

/* Holds the session while the operator has paused it (its calls wait;
 * work already on the GPU runs on). */
void stat_wait_resumed(struct worker *w)
{
	if (!w->stat || !__atomic_load_n(&w->stat->paused, __ATOMIC_ACQUIRE))
		return;
	log_info("client %s: paused by the operator", w->peer);
	while (__atomic_load_n(&w->stat->paused, __ATOMIC_ACQUIRE))
		usleep(2000);
	log_info("client %s: resumed by the operator", w->peer);
}

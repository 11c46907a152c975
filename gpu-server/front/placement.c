/*
 * placement.c: which of the node's GPUs a new session gets. The server
 * serves every GPU of the node, or the subset --gpus names. A client that
 * asks for a number of GPUs (CICADA_GPUS=N), or any client when the server
 * runs with --gpus-per-client N, gets the N least loaded of them (load: the
 * sessions running there, one that sees them all counted on its GPU 0;
 * ties go to the first listed); otherwise it gets them all. The pool asks
 * here when it hands a connection over, and tells when the worker ends.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "front.h"

#define MAX_HELD 4096

struct held {
	pid_t pid;
	uint32_t gpus[CICADA_MAX_GPUS];
	unsigned n;
	int all;                             /* it sees them all (its load is on the first) */
};

static struct {
	uint32_t list[CICADA_MAX_GPUS];      /* --gpus, in its order */
	unsigned nlist;
	unsigned per_client;                 /* --gpus-per-client; 0: all */
	unsigned load[CICADA_MAX_GPUS * 4];  /* by real ordinal */
	struct held held[MAX_HELD];
	unsigned nheld;
	pthread_mutex_t lock;
} pl = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* --gpus LIST ("0,2"): the GPUs this server serves, by the driver's ordinal. */
int placement_set_gpus(const char *list, char *err)
{
	char buf[256], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", list);
	pl.nlist = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *end;
		long v = strtol(t, &end, 10);

		if (end == t || *end || v < 0 || v >= (long)(sizeof(pl.load) / sizeof(pl.load[0])))
			return wire_fail(err, "--gpus: '%s' is not a GPU index", t);
		for (unsigned i = 0; i < pl.nlist; i++)
			if (pl.list[i] == (uint32_t)v)
				return wire_fail(err, "--gpus: GPU %ld is listed twice", v);
		if (pl.nlist == CICADA_MAX_GPUS)
			return wire_fail(err, "--gpus: more than %d GPUs", CICADA_MAX_GPUS);
		pl.list[pl.nlist++] = (uint32_t)v;
	}
	return pl.nlist ? 0 : wire_fail(err, "--gpus: no GPU named");
}

void placement_set_per_client(unsigned n)
{
	pl.per_client = n;
}

/* The server's GPUs, of a node with nreal. */
static unsigned server_gpus(unsigned nreal, uint32_t *out)
{
	unsigned n = 0;

	if (!pl.nlist) {
		for (unsigned i = 0; i < nreal && i < CICADA_MAX_GPUS; i++)
			out[n++] = i;
		return n;
	}
	for (unsigned i = 0; i < pl.nlist; i++)
		if (pl.list[i] < nreal)
			out[n++] = pl.list[i];
	return n;
}

/* Worker pid's session loads gpus (lock held); placement_release ends it. */
static void note_held(pid_t pid, const uint32_t *gpus, unsigned n, int all)
{
	if (pl.nheld == MAX_HELD)
		return;                      /* not counted: it could never be taken back */
	for (unsigned i = 0; i < n; i++)
		pl.load[gpus[i]]++;
	pl.held[pl.nheld] = (struct held){ .pid = pid, .n = n, .all = all };
	memcpy(pl.held[pl.nheld++].gpus, gpus, n * sizeof(*gpus));
}

/* The GPUs for the session of worker pid, which asked for want (0: the
 * server's default), on a node with nreal: into out, in the server's
 * order. Returns how many (0: every GPU of the node), or -1 when --gpus
 * names none that the node has. */
int placement_choose(pid_t pid, unsigned want, unsigned nreal, uint32_t *out)
{
	uint32_t all[CICADA_MAX_GPUS];
	unsigned nall, n = 0;
	int picked[CICADA_MAX_GPUS] = { 0 };

	pthread_mutex_lock(&pl.lock);
	nall = server_gpus(nreal, all);
	if (!nall && pl.nlist) {
		pthread_mutex_unlock(&pl.lock);
		log_error("--gpus names no GPU of this node (it has %u)", nreal);
		return -1;
	}
	if (!want)
		want = pl.per_client;
	if (!want) {
		/* all of them: its load is on its GPU 0, where it works unless it chooses */
		note_held(pid, all, nall ? 1 : 0, 1);
		pthread_mutex_unlock(&pl.lock);
		if (!pl.nlist)
			return 0;            /* every GPU of the node */
		memcpy(out, all, nall * sizeof(*out));
		return (int)nall;
	}
	if (want > nall)
		want = nall;
	while (n < want) {
		int best = -1;

		for (unsigned i = 0; i < nall; i++)
			if (!picked[i] && (best < 0 || pl.load[all[i]] < pl.load[all[best]]))
				best = (int)i;
		picked[best] = 1;
		n++;
	}
	n = 0;
	for (unsigned i = 0; i < nall; i++)
		if (picked[i])
			out[n++] = all[i];
	note_held(pid, out, n, 0);
	pthread_mutex_unlock(&pl.lock);
	return (int)n;
}

/* Worker pid ended: its GPUs carry one session less. */
void placement_release(pid_t pid)
{
	pthread_mutex_lock(&pl.lock);
	for (unsigned i = 0; i < pl.nheld; i++) {
		if (pl.held[i].pid != pid)
			continue;
		for (unsigned k = 0; k < pl.held[i].n; k++)
			pl.load[pl.held[i].gpus[k]] -= pl.load[pl.held[i].gpus[k]] > 0;
		pl.held[i] = pl.held[--pl.nheld];
		break;
	}
	pthread_mutex_unlock(&pl.lock);
}

/* The GPUs worker pid's session was given, into gpus; their count (0:
 * every GPU of the node, or a session not known here). */
unsigned placement_gpus(pid_t pid, uint32_t *gpus)
{
	unsigned n = 0;

	pthread_mutex_lock(&pl.lock);
	for (unsigned i = 0; i < pl.nheld; i++)
		if (pl.held[i].pid == pid && !pl.held[i].all) {
			n = pl.held[i].n;
			memcpy(gpus, pl.held[i].gpus, n * sizeof(*gpus));
			break;
		}
	pthread_mutex_unlock(&pl.lock);
	return n;
}

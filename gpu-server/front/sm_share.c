/*
 * sm_share.c: which SMs of its GPUs a session gets (--sm-share). The
 * policy gives a tenant a number of SMs, or a percentage of a GPU
 * (tenant_policy.c's rules; no rule: the whole GPU, shared in time as
 * before). A GPU's SMs come in groups (green.c: 8 SMs on an H100 or
 * H200, learnt from the first worker that starts), and a session holds
 * whole groups on each GPU it is given, none of them another session's:
 * a session for which too few are free is refused at admission, in one
 * line, unless the server runs with --overcommit, where it takes the
 * groups fewest sessions hold and shares them in time. The masks go to
 * the worker with its connection (handoff.c); cicadactl resize --sms
 * takes or gives back groups while the session runs (state/green.c).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "front.h"

#define HELD_MAX 4096
#define SM_PERCENT (1ull << 40)          /* a value of P% is SM_PERCENT | P */

struct sm_held {
	pid_t pid;
	uint64_t want;                       /* the policy's value, for new GPUs */
	uint64_t mask[CICADA_MAX_GPUS];
};

static struct {
	char policy[4096];
	int overcommit;
	unsigned total[CICADA_MAX_GPUS], unit[CICADA_MAX_GPUS];
	int known;
	unsigned users[CICADA_MAX_GPUS][GREEN_GROUPS_MAX];   /* sessions on each group */
	struct sm_held held[HELD_MAX];
	unsigned nheld;
	pthread_mutex_t lock;
} sm = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* "N" SMs (1 to 65535) or "P%" (1 to 100). */
static int parse_share(const char *text, uint64_t *v)
{
	char *end;
	unsigned long n = strtoul(text, &end, 10);

	if (end == text || *text == '-' || !n)
		return -1;
	if (*end == '%' && !end[1] && n <= 100)
		return *v = SM_PERCENT | n, 0;
	if (*end || n > 65535)
		return -1;
	*v = n;
	return 0;
}

int sm_share_set_policy(const char *policy, char *err)
{
	if (tenant_policy_check(policy, "--sm-share", parse_share, err))
		return -1;
	snprintf(sm.policy, sizeof(sm.policy), "%s", policy);
	return 0;
}

void sm_share_set_overcommit(int on)
{
	sm.overcommit = on;
}

/* A fresh worker's word on the node's GPUs (it has served nobody yet). */
void sm_share_learn(const struct session_stat *st, unsigned nreal)
{
	pthread_mutex_lock(&sm.lock);
	for (unsigned d = 0; !sm.known && st && d < nreal && d < CICADA_MAX_GPUS; d++) {
		sm.total[d] = st->sm_total[d];
		sm.unit[d] = st->sm_unit[d];
	}
	sm.known = 1;
	pthread_mutex_unlock(&sm.lock);
}

static unsigned groups_of(unsigned d)
{
	unsigned n = sm.unit[d] ? sm.total[d] / sm.unit[d] : 0;

	return n < GREEN_GROUPS_MAX ? n : GREEN_GROUPS_MAX;
}

/* The groups a value asks for on GPU d (0: the GPU cannot be shared). */
static unsigned groups_for(uint64_t want, unsigned d)
{
	unsigned n = groups_of(d), sms, k;

	if (!n)
		return 0;
	sms = want & SM_PERCENT ? (unsigned)((sm.total[d] * (want & 0xff) + 99) / 100) : (unsigned)want;
	k = (sms + sm.unit[d] - 1) / sm.unit[d];
	return k < 1 ? 1 : k > n ? n : k;
}

/* k groups of GPU d for a session (lock held): free ones first, then, with
 * --overcommit, those fewest hold. 0 if there is no room. */
static uint64_t pick(unsigned d, unsigned k)
{
	uint64_t mask = 0;
	unsigned n = groups_of(d);

	for (unsigned load = 0; k && (load == 0 || sm.overcommit); load++) {
		for (unsigned g = 0; g < n && k; g++)
			if (sm.users[d][g] == load && !(mask >> g & 1)) {
				mask |= 1ull << g;
				k--;
			}
		if (load > HELD_MAX)
			break;
	}
	return k ? 0 : mask;
}

static void hold(unsigned d, uint64_t mask, int sign)
{
	for (unsigned g = 0; g < GREEN_GROUPS_MAX; g++)
		if (mask >> g & 1)
			sm.users[d][g] = (unsigned)((int)sm.users[d][g] + sign);
}

/* The masks on gpus (n of them; 0: every GPU of the node) for a session of
 * tenant (remote, uid, gid) in worker pid, into masks (by real ordinal).
 * 0, or -1 with why when there is no room. */
int sm_share_take(pid_t pid, int remote, unsigned uid, unsigned gid, const uint32_t *gpus, unsigned n,
		  unsigned nreal, uint64_t *masks, char *why, size_t len)
{
	uint64_t want = 0;
	struct sm_held h = { .pid = pid };

	memset(masks, 0, CICADA_MAX_GPUS * sizeof(*masks));
	if (!sm.policy[0] || !tenant_policy_value(sm.policy, parse_share, remote, uid, gid, &want))
		return 0;
	pthread_mutex_lock(&sm.lock);
	for (unsigned i = 0; i < (n ? n : nreal) && i < CICADA_MAX_GPUS; i++) {
		unsigned d = n ? gpus[i] : i, k;

		if (d >= CICADA_MAX_GPUS || !(k = groups_for(want, d)))
			continue;
		if (!(h.mask[d] = pick(d, k))) {
			snprintf(why, len, "no room: the session's share (%u SMs) is more than GPU %u has free "
				 "(--sm-share; --overcommit shares SMs in time)", k * sm.unit[d], d);
			for (unsigned e = 0; e < CICADA_MAX_GPUS; e++)
				h.mask[e] = 0;
			pthread_mutex_unlock(&sm.lock);
			return -1;
		}
	}
	for (unsigned d = 0; d < CICADA_MAX_GPUS; d++)
		hold(d, h.mask[d], 1);
	h.want = want;
	if (sm.nheld < HELD_MAX)
		sm.held[sm.nheld++] = h;
	memcpy(masks, h.mask, sizeof(h.mask));
	pthread_mutex_unlock(&sm.lock);
	return 0;
}

static struct sm_held *held_of(pid_t pid)
{
	for (unsigned i = 0; i < sm.nheld; i++)
		if (sm.held[i].pid == pid)
			return &sm.held[i];
	return NULL;
}

/* Worker pid ended: its groups are free. */
void sm_share_release(pid_t pid)
{
	struct sm_held *h;

	pthread_mutex_lock(&sm.lock);
	if ((h = held_of(pid))) {
		for (unsigned d = 0; d < CICADA_MAX_GPUS; d++)
			hold(d, h->mask[d], -1);
		*h = sm.held[--sm.nheld];
	}
	pthread_mutex_unlock(&sm.lock);
}

/* Whether the worker's list of its GPUs ("0,2") names GPU d. */
static int lists(const char *gpus, unsigned d)
{
	char buf[sizeof(((struct session_stat *)0)->gpus)], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", gpus);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
		if (strtoul(t, NULL, 10) == d)
			return 1;
	return 0;
}

/* cicadactl resize --sms: session pid's GPUs get sms SMs each (0: the
 * whole GPU, shared in time), into masks. 0, or -1 with err. */
int sm_share_resize(pid_t pid, const struct session_stat *st, unsigned sms, uint64_t *masks, char *err)
{
	struct sm_held *h, fresh = { .pid = pid };
	uint64_t mask[CICADA_MAX_GPUS];
	int rc = 0;

	pthread_mutex_lock(&sm.lock);
	if (!(h = held_of(pid))) {
		if (sm.nheld == HELD_MAX) {
			pthread_mutex_unlock(&sm.lock);
			return wire_fail(err, "too many sessions");
		}
		h = &sm.held[sm.nheld++];
		*h = fresh;
		for (unsigned d = 0; d < CICADA_MAX_GPUS; d++)     /* (whole GPUs until now) */
			h->mask[d] = 0;
	}
	for (unsigned d = 0; d < CICADA_MAX_GPUS; d++)
		hold(d, h->mask[d], -1);
	for (unsigned d = 0; d < CICADA_MAX_GPUS && !rc; d++) {
		unsigned k = sms ? groups_for(sms, d) : 0;
		int used = h->mask[d] || lists(st->gpus, d);

		mask[d] = 0;
		if (!k || !used)
			continue;
		if (!(mask[d] = pick(d, k)))
			rc = wire_fail(err, "no room: GPU %u has fewer than %u SMs free (--overcommit shares them in time)",
				       d, k * sm.unit[d]);
	}
	if (!rc)
		memcpy(h->mask, mask, sizeof(mask));
	for (unsigned d = 0; d < CICADA_MAX_GPUS; d++)
		hold(d, h->mask[d], 1);
	memcpy(masks, h->mask, sizeof(h->mask));
	pthread_mutex_unlock(&sm.lock);
	return rc;
}

/* The SMs of mask on GPU d (0: all of them). */
unsigned sm_share_count(unsigned d, uint64_t mask)
{
	unsigned n;

	if (d >= CICADA_MAX_GPUS || !mask)
		return 0;
	pthread_mutex_lock(&sm.lock);
	n = (unsigned)__builtin_popcountll(mask) * sm.unit[d];
	if (n > sm.total[d])
		n = sm.total[d];
	pthread_mutex_unlock(&sm.lock);
	return n;
}

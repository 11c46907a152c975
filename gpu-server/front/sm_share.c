/*
 * sm_share.c: which SMs of its GPUs a session gets (--sm-share). The
 * policy gives a tenant a number of SMs, or a percentage of a GPU
 * (tenant_policy.c's rules, read once at start; no rule: the whole GPU,
 * shared in time as before). A GPU's SMs come in groups (state/green.c:
 * 8 SMs on an H100 or H200, learnt from the first worker that starts),
 * and a session holds whole groups on each GPU it is given, none of them
 * another session's: a session for which too few are free is refused at
 * admission, in one line, unless the server runs with --overcommit,
 * where it takes the groups fewest sessions hold. The masks go to the
 * worker with its connection (handoff.c).
 *
 * cicadactl resize --sms gives a running session new groups: the server
 * holds its old and new ones until the worker, between two of its calls,
 * answers the request's number with the groups it then has (settle);
 * only then are the others free. A worker that lowers its own share
 * (CICADA_SM_LIMIT) lets groups go the same way. A session the operator
 * or the server itself connects (a restore, a migration coming in) takes
 * its owner's share once its worker says who that is.
 */
#include <errno.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "front.h"

#define HELD_MAX 4096
#define SM_PERCENT (1ull << 40)          /* a value of P% is SM_PERCENT | P */

struct sm_held {
	pid_t pid;
	int by_owner;                        /* its share waits for its owner (settle) */
	uint32_t seq;                        /* the last request asked of its worker */
	uint64_t mask[CICADA_MAX_GPUS];      /* held: old and new while a request is open */
};

static struct {
	struct tenant_rules rules;
	int set, overcommit;
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
	if (tenant_rules_parse(policy, "--sm-share", parse_share, &sm.rules, err))
		return -1;
	sm.set = 1;
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

/* The groups a value asks for on GPU d (0: the GPU cannot be shared). A
 * percentage is of the groups, rounded down, so that shares that add up
 * to 100% fit. */
static unsigned groups_for(uint64_t want, unsigned d)
{
	unsigned n = groups_of(d), k;

	if (!n)
		return 0;
	if (want & SM_PERCENT)
		k = (unsigned)(n * (want & 0xff) / 100);
	else
		k = (unsigned)((want + sm.unit[d] - 1) / sm.unit[d]);
	return k < 1 ? 1 : k > n ? n : k;
}

/* k groups of GPU d for a session (lock held): free ones first, then, with
 * --overcommit, those fewest hold. 0 if there is no room. */
static uint64_t pick(unsigned d, unsigned k)
{
	uint64_t mask = 0;
	unsigned n = groups_of(d);

	for (unsigned load = 0; k && (load == 0 || sm.overcommit) && load <= HELD_MAX; load++)
		for (unsigned g = 0; g < n && k; g++)
			if (sm.users[d][g] == load && !(mask >> g & 1)) {
				mask |= 1ull << g;
				k--;
			}
	return k ? 0 : mask;
}

static void hold(const uint64_t *mask, int sign)
{
	for (unsigned d = 0; d < CICADA_MAX_GPUS; d++)
		for (unsigned g = 0; g < GREEN_GROUPS_MAX; g++)
			if (mask[d] >> g & 1)
				sm.users[d][g] = (unsigned)((int)sm.users[d][g] + sign);
}

/* Groups for want on each GPU of gpus (n; 0: all nreal), into masks (lock
 * held). 0, or -1 with why. */
static int pick_all(uint64_t want, const uint32_t *gpus, unsigned n, unsigned nreal, uint64_t *masks, char *why,
		    size_t len)
{
	memset(masks, 0, CICADA_MAX_GPUS * sizeof(*masks));
	for (unsigned i = 0; i < (n ? n : nreal) && i < CICADA_MAX_GPUS; i++) {
		unsigned d = n ? gpus[i] : i, k;

		if (d >= CICADA_MAX_GPUS || !(k = groups_for(want, d)))
			continue;
		if (!(masks[d] = pick(d, k))) {
			snprintf(why, len, "no room: the session's share (%u SMs) is more than GPU %u has free "
				 "(--sm-share; --overcommit shares SMs in time)", k * sm.unit[d], d);
			memset(masks, 0, CICADA_MAX_GPUS * sizeof(*masks));
			return -1;
		}
	}
	return 0;
}

static struct sm_held *held_of(pid_t pid)
{
	for (unsigned i = 0; i < sm.nheld; i++)
		if (sm.held[i].pid == pid)
			return &sm.held[i];
	return NULL;
}

static void drop(struct sm_held *h)
{
	hold(h->mask, -1);
	*h = sm.held[--sm.nheld];
}

/* The masks on gpus (n of them; 0: every GPU of the node) for a session of
 * tenant (token, tls_name, remote, uid, gid) in worker pid, into masks (by real ordinal);
 * privileged: the operator or the server connects it (its owner's share
 * comes later). 0, or -1 with why when there is no room. */
int sm_share_take(pid_t pid, const char *token, const char *tls_name, int remote, unsigned uid, unsigned gid,
		  int privileged, const uint32_t *gpus, unsigned n, unsigned nreal, uint64_t *masks, char *why, size_t len)
{
	uint64_t want = 0;
	struct sm_held *h;

	memset(masks, 0, CICADA_MAX_GPUS * sizeof(*masks));
	if (!sm.set)
		return 0;
	pthread_mutex_lock(&sm.lock);
	if (sm.nheld == HELD_MAX) {
		pthread_mutex_unlock(&sm.lock);
		snprintf(why, len, "no room: too many sessions with SM shares");
		return -1;
	}
	if (!privileged && tenant_rules_find(&sm.rules, token, tls_name, remote, uid, gid, &want) &&
	    pick_all(want, gpus, n, nreal, masks, why, len)) {
		pthread_mutex_unlock(&sm.lock);
		return -1;
	}
	h = &sm.held[sm.nheld++];
	*h = (struct sm_held){ .pid = pid, .by_owner = privileged };
	memcpy(h->mask, masks, sizeof(h->mask));
	hold(h->mask, 1);
	if (kill(pid, 0) && errno == ESRCH)
		drop(h);                     /* (reaped already: never released otherwise) */
	pthread_mutex_unlock(&sm.lock);
	return 0;
}

/* Before a worker is taken for a new session of tenant (token, tls_name,
 * remote, uid, gid): -1 with why when no GPU of the node has room for its share
 * (a refusal then ends no pre-initialised worker); 0 when one may, or
 * when that is not known yet (sm_share_take decides). */
int sm_share_room(const char *token, const char *tls_name, int remote, unsigned uid, unsigned gid, char *why,
		  size_t len)
{
	uint64_t want = 0;
	int room = 0, shared = 0;

	if (!sm.set || sm.overcommit || !tenant_rules_find(&sm.rules, token, tls_name, remote, uid, gid, &want))
		return 0;
	pthread_mutex_lock(&sm.lock);
	for (unsigned d = 0; sm.known && d < CICADA_MAX_GPUS && !room; d++) {
		unsigned k = groups_for(want, d);

		shared |= k > 0;
		room = k && pick(d, k);
	}
	if (sm.known && shared && !room)
		snprintf(why, len, "no room: no GPU here has the session's share free (--sm-share; --overcommit shares "
			 "SMs in time)");
	pthread_mutex_unlock(&sm.lock);
	return sm.known && shared && !room ? -1 : 0;
}

/* Worker pid ended: its groups are free. */
void sm_share_release(pid_t pid)
{
	struct sm_held *h;

	pthread_mutex_lock(&sm.lock);
	if ((h = held_of(pid)))
		drop(h);
	pthread_mutex_unlock(&sm.lock);
}

/* A request for new groups (lock held): old and new held until the
 * worker answers; the request goes on st. */
static void ask(struct sm_held *h, struct session_stat *st, const uint64_t *masks)
{
	uint64_t both[CICADA_MAX_GPUS];

	for (unsigned d = 0; d < CICADA_MAX_GPUS; d++) {
		both[d] = h->mask[d] | masks[d];
		__atomic_store_n(&st->sm_asked[d], masks[d], __ATOMIC_RELEASE);
	}
	hold(h->mask, -1);
	memcpy(h->mask, both, sizeof(both));
	hold(h->mask, 1);
	h->seq = __atomic_load_n(&st->sm_ask_seq, __ATOMIC_ACQUIRE) + 1;
	__atomic_store_n(&st->sm_ask_seq, h->seq, __ATOMIC_RELEASE);
}

/* The GPUs session pid was given (placement.c), into gpus; their count
 * (0: every GPU of the node). */
static unsigned gpus_of(pid_t pid, uint32_t *gpus)
{
	return placement_gpus(pid, gpus);
}

/* cicadactl resize --sms: session pid's GPUs get sms SMs each (0: the
 * whole GPU, shared in time), asked of its worker through st. 0, or -1
 * with err. */
int sm_share_resize(pid_t pid, struct session_stat *st, unsigned sms, unsigned nreal, char *err)
{
	uint64_t masks[CICADA_MAX_GPUS] = { 0 };
	uint32_t gpus[CICADA_MAX_GPUS];
	unsigned n = gpus_of(pid, gpus);
	char why[WIRE_ERRLEN];
	struct sm_held *h;
	int rc = 0;

	pthread_mutex_lock(&sm.lock);
	if (!(h = held_of(pid))) {
		if (sm.nheld == HELD_MAX) {
			pthread_mutex_unlock(&sm.lock);
			return wire_fail(err, "too many sessions with SM shares");
		}
		h = &sm.held[sm.nheld++];
		*h = (struct sm_held){ .pid = pid };
	}
	hold(h->mask, -1);                   /* (its own groups count as free to it) */
	if (sms)
		rc = pick_all(sms, gpus, n, nreal, masks, why, sizeof(why));
	hold(h->mask, 1);
	if (rc)
		rc = wire_fail(err, "%s", why);
	else
		ask(h, st, masks);
	h->by_owner = 0;
	pthread_mutex_unlock(&sm.lock);
	return rc;
}

/* What worker pid's page says now (pool.c, often): a request answered
 * lets the groups it no longer has go (the worker's word can only give
 * groups back), and a session waiting for its owner gets the owner's
 * share, asked of its worker. */
void sm_share_settle(pid_t pid, struct session_stat *st, unsigned nreal)
{
	uint64_t want, masks[CICADA_MAX_GPUS];
	uint32_t gpus[CICADA_MAX_GPUS], uid;
	char why[WIRE_ERRLEN];
	struct sm_held *h;
	struct passwd pw, *found = NULL;
	char buf[1024];
	unsigned n;

	pthread_mutex_lock(&sm.lock);
	if (!(h = held_of(pid)) || !__atomic_load_n(&st->started, __ATOMIC_ACQUIRE)) {
		pthread_mutex_unlock(&sm.lock);
		return;
	}
	if (__atomic_load_n(&st->sm_ack, __ATOMIC_ACQUIRE) == h->seq) {
		hold(h->mask, -1);
		for (unsigned d = 0; d < CICADA_MAX_GPUS; d++) {
			uint64_t has = __atomic_load_n(&st->sm_mask[d], __ATOMIC_ACQUIRE) & h->mask[d];
			if (has)
				h->mask[d] = has;
		}
		hold(h->mask, 1);
	}
	if (h->by_owner) {
		uid = __atomic_load_n(&st->uid, __ATOMIC_ACQUIRE);
		if (uid != (uint32_t)-1)
			getpwuid_r(uid, &pw, buf, sizeof(buf), &found);
		h->by_owner = 0;
		n = gpus_of(pid, gpus);
		if (tenant_rules_find(&sm.rules, NULL, NULL, uid == (uint32_t)-1, uid,
				      found ? (unsigned)found->pw_gid : (unsigned)-1, &want)) {
			hold(h->mask, -1);
			int rc = pick_all(want, gpus, n, nreal, masks, why, sizeof(why));
			hold(h->mask, 1);
			if (rc)
				log_warn("session %d: its owner's share does not fit (%s); it keeps the whole GPU", (int)pid,
					 why);
			else
				ask(h, st, masks);
		}
	}
	pthread_mutex_unlock(&sm.lock);
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

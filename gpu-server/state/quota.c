/*
 * quota.c: a session's device memory quota. The server's --memory-quota
 * policy (CICADA_MEMORY_QUOTA in every worker's environment) gives each
 * tenant a number of bytes: by uid or user name, else by primary group,
 * else "remote" for TCP tenants, else "default"; none: no quota. Every
 * physical allocation the worker makes for its client is charged: the
 * arena's chunks (cuMemAlloc, pitch, stream-ordered pools and what the
 * libraries allocate through them) and the application's own VMM
 * allocations (cuMemCreate). Past the quota the client gets
 * CUDA_ERROR_OUT_OF_MEMORY, as on a full GPU, and the log one line (at
 * most one a second); cuMemGetInfo answers the quota as the total. A
 * restore is charged as it maps, so a snapshot larger than its owner's
 * quota is refused. A program may ask for less (CICADA_MEMORY_LIMIT,
 * quota_lower), never more.
 *
 *   policy := rule[,rule...]
 *   rule   := uid:N=SIZE | user:NAME=SIZE | gid:N=SIZE | group:NAME=SIZE
 *           | remote=SIZE | default=SIZE        (SIZE: bytes, or K M G T)
 */
#include <ctype.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "state.h"

#define RULE_MAX 64

enum rule_kind { R_UID, R_GID, R_REMOTE, R_DEFAULT };

struct rule {
	enum rule_kind kind;
	unsigned id;
	uint64_t bytes;
};

/* A name or number of a user (group when gid) into its id. */
static int id_of(const char *s, int by_name, int gid, unsigned *id)
{
	char *end;

	if (!by_name) {
		unsigned long v = strtoul(s, &end, 10);
		if (end == s || *end || *s == '-' || v > 0xfffffffful)
			return -1;
		*id = (unsigned)v;
		return 0;
	}
	if (gid) {
		struct group *g = getgrnam(s);
		return g ? (*id = g->gr_gid, 0) : -1;
	}
	struct passwd *p = getpwnam(s);
	return p ? (*id = p->pw_uid, 0) : -1;
}

/* One rule "KEY=SIZE" (its text in r, NUL-terminated). */
static int parse_rule(char *text, struct rule *r, char *err)
{
	char *eq = strchr(text, '='), *key = text;
	static const struct { const char *prefix; enum rule_kind kind; int by_name; } keys[] = {
		{ "uid:", R_UID, 0 }, { "user:", R_UID, 1 }, { "gid:", R_GID, 0 }, { "group:", R_GID, 1 },
	};

	if (!eq || wire_parse_size(eq + 1, &r->bytes))
		return wire_fail(err, "--memory-quota: '%.80s' is not KEY=SIZE with a size above 0", text);
	*eq = 0;
	if (!strcmp(key, "remote") || !strcmp(key, "default")) {
		r->kind = key[0] == 'r' ? R_REMOTE : R_DEFAULT;
		return 0;
	}
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		size_t n = strlen(keys[i].prefix);
		if (strncmp(key, keys[i].prefix, n))
			continue;
		r->kind = keys[i].kind;
		if (!id_of(key + n, keys[i].by_name, r->kind == R_GID, &r->id))
			return 0;
		if (!keys[i].by_name)
			return wire_fail(err, "--memory-quota: '%.80s' is not a number", key + n);
		return wire_fail(err, "--memory-quota: no %s '%.80s'", r->kind == R_GID ? "group" : "user", key + n);
	}
	return wire_fail(err, "--memory-quota: unknown key '%.80s' (uid:, user:, gid:, group:, remote, default)", key);
}

/* The rules of policy (at most RULE_MAX); their count, or -1 with err. */
static int parse_policy(const char *policy, struct rule *rules, char *err)
{
	char copy[4096], *save = NULL, *tok;
	int n = 0;

	if (strlen(policy) >= sizeof(copy))
		return wire_fail(err, "--memory-quota: the policy is too long");
	snprintf(copy, sizeof(copy), "%s", policy);
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == RULE_MAX)
			return wire_fail(err, "--memory-quota: more than %d rules", RULE_MAX);
		if (parse_rule(tok, &rules[n], err))
			return -1;
		n++;
	}
	return n;
}

int quota_policy_check(const char *policy, char *err)
{
	struct rule rules[RULE_MAX];

	return parse_policy(policy, rules, err) < 0 ? -1 : 0;
}

/* The first rule of kind (and id) in rules, else NULL. */
static const struct rule *find(const struct rule *rules, int n, enum rule_kind kind, unsigned id)
{
	for (int i = 0; i < n; i++)
		if (rules[i].kind == kind && (kind >= R_REMOTE || rules[i].id == id))
			return &rules[i];
	return NULL;
}

uint64_t quota_for(const char *policy, int remote, unsigned uid, unsigned gid)
{
	struct rule rules[RULE_MAX];
	const struct rule *r = NULL;
	char err[WIRE_ERRLEN];
	int n = policy && policy[0] ? parse_policy(policy, rules, err) : 0;

	if (n <= 0)
		return 0;
	if (!remote && !(r = find(rules, n, R_UID, uid)))
		r = find(rules, n, R_GID, gid);
	if (!r && remote)
		r = find(rules, n, R_REMOTE, 0);
	if (!r)
		r = find(rules, n, R_DEFAULT, 0);
	return r ? r->bytes : 0;
}

void quota_set(struct worker *w, uint64_t bytes)
{
	w->quota = bytes;
	stat_memory(w);
	if (bytes)
		log_info("this session's device memory quota: %llu MiB", (unsigned long long)(bytes >> 20));
}

/* A quota the operator set since (cicadactl resize) takes effect. */
static void take_asked(struct worker *w)
{
	uint64_t asked;

	if (!stat_quota_asked(w, &asked))
		return;
	w->quota = asked;
	stat_memory(w);
	log_info("client %s: the operator set the quota to %llu MiB (0: none)", w->peer,
		 (unsigned long long)(asked >> 20));
}

void quota_lower(struct worker *w, uint64_t bytes)
{
	if (!bytes || (w->quota && bytes >= w->quota))
		return;
	w->quota = bytes;
	stat_memory(w);
	log_info("client %s: asked for a quota of %llu MiB", w->peer, (unsigned long long)(bytes >> 20));
}

CUresult quota_charge(struct worker *w, uint64_t bytes, const char *what)
{
	static time_t said;

	take_asked(w);
	if (!w->quota || (w->charged <= w->quota && bytes <= w->quota - w->charged)) {
		w->charged += bytes;
		stat_memory(w);
		return CUDA_SUCCESS;
	}
	if (time(NULL) != said) {
		said = time(NULL);
		log_warn("client %s: %s of %llu bytes refused: the quota is %llu bytes, %llu in use", w->peer, what,
			 (unsigned long long)bytes, (unsigned long long)w->quota, (unsigned long long)w->charged);
	}
	return CUDA_ERROR_OUT_OF_MEMORY;
}

void quota_release(struct worker *w, uint64_t bytes)
{
	w->charged = bytes < w->charged ? w->charged - bytes : 0;
	stat_memory(w);
}

/* NVML's memory figures for a session with a quota: the quota is the
 * total, what it holds is used. */
void quota_nvml(const struct worker *w, uint64_t *total, uint64_t *free_b, uint64_t *used)
{
	if (!w->quota)
		return;
	if (w->quota < *total)
		*total = w->quota;
	*used = w->charged < *total ? w->charged : *total;
	if (*free_b > *total - *used)
		*free_b = *total - *used;
}

void quota_mem_info(struct worker *w, size_t *free_b, size_t *total)
{
	uint64_t left;

	take_asked(w);
	if (!w->quota)
		return;
	left = w->charged < w->quota ? w->quota - w->charged : 0;
	*total = w->quota < *total ? (size_t)w->quota : *total;
	*free_b = left < *free_b ? (size_t)left : *free_b;
}

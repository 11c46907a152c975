/*
 * tenant_policy.c: what a server option gives each tenant, by rules:
 * by the --token-dir token its session proved (a batch job's), else by
 * its TLS client name (its certificate's CN, verified against
 * --tls-client-ca; TCP and unix peers have none), else by uid or user
 * name, else by primary group (unix peers), else "remote" for TCP and
 * TLS tenants, else "default"; no rule: nothing. --memory-quota
 * (quota.c) and --sm-share (front/sm_share.c) are such options; each has
 * its own kind of value, parsed by the caller's function.
 *
 *   policy := rule[,rule...]
 *   rule   := token:NAME=V | tls:NAME=V | uid:N=V | user:NAME=V | gid:N=V | group:NAME=V
 *           | remote=V | default=V
 */
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "state.h"

#define RULE_MAX TENANT_RULES_MAX

enum rule_kind { R_TOKEN, R_TLS, R_UID, R_GID, R_REMOTE, R_DEFAULT };   /* (struct tenant_rule's kind) */


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

/* One rule "KEY=VALUE" (its text in r, NUL-terminated). */
static int parse_rule(char *text, const char *opt, policy_value_fn value, struct tenant_rule *r, char *err)
{
	char *eq = strchr(text, '='), *key = text;
	static const struct { const char *prefix; enum rule_kind kind; int by_name; } keys[] = {
		{ "uid:", R_UID, 0 }, { "user:", R_UID, 1 }, { "gid:", R_GID, 0 }, { "group:", R_GID, 1 },
	};

	if (!eq || value(eq + 1, &r->value))
		return wire_fail(err, "%s: '%.80s' is not KEY=VALUE with a value it takes", opt, text);
	*eq = 0;
	if (!strcmp(key, "remote") || !strcmp(key, "default")) {
		r->kind = key[0] == 'r' ? R_REMOTE : R_DEFAULT;
		return 0;
	}
	if (!strncmp(key, "token:", 6)) {        /* (a file name of --token-dir) */
		r->kind = R_TOKEN;
		if (!key[6] || strlen(key + 6) >= sizeof(r->name) || strchr(key + 6, '/'))
			return wire_fail(err, "%s: '%.80s' is not a token's name", opt, key + 6);
		snprintf(r->name, sizeof(r->name), "%s", key + 6);
		return 0;
	}
	if (!strncmp(key, "tls:", 4)) {          /* (a client certificate's CN) */
		r->kind = R_TLS;
		if (strlen(key + 4) >= sizeof(r->name) || !wire_tls_name_ok(key + 4))
			return wire_fail(err, "%s: '%.80s' is not a TLS client's name (printable, at most 63 bytes, "
					 "no space, '/', ',' or '=')", opt, key + 4);
		snprintf(r->name, sizeof(r->name), "%s", key + 4);
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
			return wire_fail(err, "%s: '%.80s' is not a number", opt, key + n);
		return wire_fail(err, "%s: no %s '%.80s'", opt, r->kind == R_GID ? "group" : "user", key + n);
	}
	return wire_fail(err, "%s: unknown key '%.80s' (token:, tls:, uid:, user:, gid:, group:, remote, default)", opt,
			 key);
}

/* The rules of policy (at most RULE_MAX); their count, or -1 with err. */
static int parse_policy(const char *policy, const char *opt, policy_value_fn value, struct tenant_rule *rules, char *err)
{
	char copy[4096], *save = NULL, *tok;
	int n = 0;

	if (strlen(policy) >= sizeof(copy))
		return wire_fail(err, "%s: the policy is too long", opt);
	snprintf(copy, sizeof(copy), "%s", policy);
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == RULE_MAX)
			return wire_fail(err, "%s: more than %d rules", opt, RULE_MAX);
		if (parse_rule(tok, opt, value, &rules[n], err))
			return -1;
		n++;
	}
	return n;
}

int tenant_policy_check(const char *policy, const char *opt, policy_value_fn value, char *err)
{
	struct tenant_rule rules[RULE_MAX];

	return parse_policy(policy, opt, value, rules, err) < 0 ? -1 : 0;
}

/* The first rule of kind (and id) in rules, else NULL. */
static const struct tenant_rule *find(const struct tenant_rule *rules, int n, enum rule_kind kind, unsigned id)
{
	for (int i = 0; i < n; i++)
		if (rules[i].kind == (int)kind && (kind >= R_REMOTE || rules[i].id == id))
			return &rules[i];
	return NULL;
}

/* policy's rules into rs, names looked up once: 0, or -1 with err. */
int tenant_rules_parse(const char *policy, const char *opt, policy_value_fn value, struct tenant_rules *rs,
		       char *err)
{
	int n = policy && policy[0] ? parse_policy(policy, opt, value, rs->rule, err) : 0;

	rs->n = n < 0 ? 0 : n;
	return n < 0 ? -1 : 0;
}

/* The first rule of kind (R_TOKEN, R_TLS) for name (none: NULL or ""). */
static const struct tenant_rule *find_name(const struct tenant_rules *rs, enum rule_kind kind, const char *name)
{
	for (int i = 0; name && *name && i < rs->n; i++)
		if (rs->rule[i].kind == (int)kind && !strcmp(rs->rule[i].name, name))
			return &rs->rule[i];
	return NULL;
}

/* The value rs gives a tenant (token: the --token-dir token its session
 * proved, or NULL; tls_name: its verified TLS client name, or NULL):
 * 1 with it in *out, or 0 (no rule). */
int tenant_rules_find(const struct tenant_rules *rs, const char *token, const char *tls_name, int remote,
		      unsigned uid, unsigned gid, uint64_t *out)
{
	const struct tenant_rule *r = find_name(rs, R_TOKEN, token);

	if (!r)
		r = find_name(rs, R_TLS, tls_name);
	if (!r && !remote && !(r = find(rs->rule, rs->n, R_UID, uid)))
		r = find(rs->rule, rs->n, R_GID, gid);
	if (!r && remote)
		r = find(rs->rule, rs->n, R_REMOTE, 0);
	if (!r)
		r = find(rs->rule, rs->n, R_DEFAULT, 0);
	if (!r)
		return 0;
	*out = r->value;
	return 1;
}

/* The value policy gives a tenant: 1 with it in *out, 0 (no rule), or -1
 * when the policy no longer reads (a user or group it names is gone): the
 * caller refuses rather than give everything. */
int tenant_policy_value(const char *policy, policy_value_fn value, const char *token, const char *tls_name,
			int remote, unsigned uid, unsigned gid, uint64_t *out)
{
	struct tenant_rules rs;
	char err[WIRE_ERRLEN];

	if (tenant_rules_parse(policy, "policy", value, &rs, err)) {
		log_error("%s", err);
		return -1;
	}
	return tenant_rules_find(&rs, token, tls_name, remote, uid, gid, out);
}

/*
 * quota.c: a session's device memory quota. The server's --memory-quota
 * policy (CICADA_MEMORY_QUOTA in every worker's environment) gives each
 * tenant a number of bytes: by --token-dir token, else by verified TLS
 * name, else by uid or user name, else by primary group, else "remote"
 * for TCP tenants, else "default"; none: no quota. Every
 * physical allocation the worker makes for its client is charged: the
 * arena's chunks (cuMemAlloc, pitch, stream-ordered pools and what the
 * libraries allocate through them) and the application's own VMM
 * allocations (cuMemCreate). Past the quota the client gets
 * CUDA_ERROR_OUT_OF_MEMORY, as on a full GPU, and the log one line (at
 * most one a second); cuMemGetInfo answers the quota as the total. A
 * restore is charged as it maps, so a snapshot larger than its owner's
 * quota is refused. A program may ask for less (CICADA_MEMORY_LIMIT,
 * quota_lower), never more.
 * The policy's rules are tenant_policy.c's, with sizes (bytes, or K, M,
 * G or T) for values.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "state.h"

static int parse_size(const char *text, uint64_t *v)
{
	return wire_parse_size(text, v);
}

int quota_policy_check(const char *policy, char *err)
{
	return tenant_policy_check(policy, "--memory-quota", parse_size, err);
}

uint64_t quota_for(const char *policy, const char *token, const char *tls_name, int remote, unsigned uid,
		   unsigned gid)
{
	uint64_t bytes = 0;
	int rc = tenant_policy_value(policy, parse_size, token, tls_name, remote, uid, gid, &bytes);

	return rc < 0 ? 1 : rc ? bytes : 0;   /* (a policy that no longer reads: nothing fits) */
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

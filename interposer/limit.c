/*
 * limit.c: a program's own caps: on its device memory, CICADA_MEMORY_LIMIT
 * (bytes, or with K, M, G, T), and on its SMs, CICADA_SM_LIMIT (a number
 * of SMs of each GPU). A tenant may ask its session for less than the
 * server's --memory-quota and --sm-share give it, never more: the worker
 * takes the lower (session_quota, session_sms). Asked for when the
 * session starts and again when it reattaches after a move, where the
 * new worker starts from its owner's quota.
 */
#include <stdlib.h>
#include "interposer.h"

/* The limit asked for, or 0 (none, or not a size: said once). */
static uint64_t limit_bytes(void)
{
	const char *e = getenv("CICADA_MEMORY_LIMIT");
	uint64_t v;

	if (!e || !*e)
		return 0;
	if (wire_parse_size(e, &v)) {
		log_warn("CICADA_MEMORY_LIMIT=%s is not a size (bytes, or with K, M, G, T): no limit asked for", e);
		return 0;
	}
	return v;
}

/* CICADA_SM_LIMIT: SMs asked for, or 0 (none, or not a number: said once). */
static uint64_t limit_sms(void)
{
	const char *e = getenv("CICADA_SM_LIMIT");
	char *end;
	unsigned long v;

	if (!e || !*e)
		return 0;
	v = strtoul(e, &end, 10);
	if (end == e || *end || *e == '-' || !v || v > 65535) {
		log_warn("CICADA_SM_LIMIT=%s is not a number of SMs: no limit asked for", e);
		return 0;
	}
	return v;
}

static void ask_sms(void)
{
	uint64_t sms = limit_sms();
	scalars a = { { 1, &sms } };
	scalar_res r = { 0 };

	if (!sms)
		return;
	if (rpc_session_sms_locked(&a, &r))
		log_warn("the worker did not take CICADA_SM_LIMIT");
	xdr_free((xdrproc_t)xdr_scalar_res, (char *)&r);
}

/* Asks the worker (client lock held). */
static void ask(void)
{
	uint64_t bytes = limit_bytes();
	scalars a = { { 1, &bytes } };
	scalar_res r = { 0 };

	ask_sms();
	if (!bytes)
		return;
	if (rpc_session_quota_locked(&a, &r))
		log_warn("the worker did not take CICADA_MEMORY_LIMIT");
	else if (r.v.v_len && r.v.v_val[0] > bytes)
		log_warn("the worker kept a quota of %llu bytes", (unsigned long long)r.v.v_val[0]);
	xdr_free((xdrproc_t)xdr_scalar_res, (char *)&r);
}

static int ask_again(int regions_lost)
{
	(void)regions_lost;
	ask();
	return 0;
}

static const struct client_hooks limit_hooks = { .connected = ask, .resume = ask_again };

__attribute__((constructor)) static void limit_hook(void)
{
	client_add_hooks(&limit_hooks);
}

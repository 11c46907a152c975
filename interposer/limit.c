/*
 * limit.c: a program's own cap on its device memory, CICADA_MEMORY_LIMIT
 * (bytes, or with K, M, G, T). A tenant may ask its session for less
 * than the server's --memory-quota gives it, never more: the worker
 * takes the lower of the two (session_quota). Asked for when the
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

/* Asks the worker (client lock held). */
static void ask(void)
{
	uint64_t bytes = limit_bytes();
	scalars a = { { 1, &bytes } };
	scalar_res r = { 0 };

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

/*
 * own_region: a hostile remote tenant asks its worker to map and pin
 * memory of the worker's own (host_region_map with CICADA_REGION_OWN,
 * which a --gpu-only move uses to carry pinned memory), COUNT regions of
 * MIB MiB each, over a raw TCP session. Prints "region N: ERR" per
 * region (0: mapped). With --max-staged the worker must refuse past it.
 *   own_region tcp:HOST:PORT TOKEN_FILE MIB COUNT
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "raw.h"

static int map_one(struct raw_conn *c, unsigned region, uint64_t size)
{
	host_region_args a = { .region = region, .size = size, .flags = CICADA_REGION_OWN, .at = 0 };
	host_region_res r;
	struct wire_buf b = { 0 };
	char err[WIRE_ERRLEN];
	int rc = -1;

	memset(&r, 0, sizeof(r));
	if (!wire_encode_call(&b, region, P_host_region_map, (xdrproc_t)xdr_host_region_args, &a) &&
	    !wire_send_record(&c->st, &b) && !wire_recv_record(&c->st, &b, 1 << 20) &&
	    !wire_decode_reply(&b, region, (xdrproc_t)xdr_host_region_res, &r, err))
		rc = r.err;
	wire_buf_free(&b);
	return rc;
}

int main(int argc, char **argv)
{
	struct raw_hello h = { .op = OP_CONNECT };
	char err[WIRE_ERRLEN], tok[256];
	struct raw_conn c;
	hello_res hr;

	if (argc != 5)
		return fprintf(stderr, "usage: own_region tcp:HOST:PORT TOKEN_FILE MIB COUNT\n"), 2;
	h.token = raw_token(argv[2], tok, sizeof(tok));
	memset(&hr, 0, sizeof(hr));
	if (raw_dial(argv[1], &c, err) || raw_send_hello(&c, &h) || raw_reply(&c, &hr, 20000) || hr.err)
		return fprintf(stderr, "own_region: no session: %s\n", err), 1;
	for (int i = 1; i <= atoi(argv[4]); i++)
		printf("region %d: %d\n", i, map_one(&c, (unsigned)i, (uint64_t)atoi(argv[3]) << 20));
	return 0;
}

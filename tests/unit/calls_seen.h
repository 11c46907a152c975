/* calls_seen.h: what a generated client stub did, as calls_client_stub.c
 * notes it for test_calls.c. */
#ifndef CALLS_SEEN_H
#define CALLS_SEEN_H
enum { SEEN_SCALAR = 1, SEEN_CACHED, SEEN_CACHED_CODE, SEEN_CALL, SEEN_CALL_LOCKED };
struct calls_seen {
	unsigned proc;
	int how, async;                      /* SEEN_*; async: no reply asked for */
	int calls, flush, flush_code;        /* counts */
};
struct calls_seen *calls_seen(void);
#endif

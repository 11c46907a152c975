/*
 * test_calls.c: the tables wire/gen-calls.py generated, checked against
 * wire/calls.tbl read at run time (UNIT_CALLS_TBL, else from the
 * repository root): no procedure number reused; the server's table
 * (server_procs) has each procedure once, by its number and name, with
 * its flags (async, syncpoint, record, creates) and its kind (hand or
 * generated); the client's stubs, loaded from libcalls_client.so
 * (UNIT_CLIENT_LIB) with hooks that note what they do, send the right
 * number the right way (cached, cached as code, pipelined or not) and
 * flush the client's kept answers as the table says; rpc_name agrees.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "gpu-server.h"
#include "calls_seen.h"

#define MAXCALLS 1024

struct entry {
	unsigned proc;
	char name[64], flags[128], sig[1024];
	int hand, async, syncpoint, record, cache, code, flush, flush_code, creates, from_header;
};

static struct entry tbl[MAXCALLS];
static unsigned ntbl;
static void *client;

static int has_flag(const char *flags, const char *f)
{
	char buf[128], *save, *t;

	snprintf(buf, sizeof(buf), "%s", flags);
	for (t = strtok_r(buf, "+", &save); t; t = strtok_r(NULL, "+", &save))
		if (!strcmp(t, f))
			return 1;
	return 0;
}

/* Whether a signature's parameters output a handle ("CUstream *phStream"). */
static int outputs_handle(const char *sig)
{
	static const char *handles[] = { "CUcontext", "CUmodule", "CUfunction", "CUlibrary", "CUkernel", "CUstream",
					 "CUevent", "CUgraph", "CUgraphExec", "CUgraphNode", "CUarray", "CUlinkState" };
	char buf[1024], *save, *p, type[64];

	snprintf(buf, sizeof(buf), "%s", sig);
	for (p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (!strchr(p, '*') || sscanf(p, " %63[A-Za-z0-9_]", type) != 1 || !strcmp(type, "const"))
			continue;
		for (size_t i = 0; i < sizeof(handles) / sizeof(handles[0]); i++)
			if (!strcmp(type, handles[i]) && strchr(p, '*') == strrchr(p, '*'))
				return 1;
	}
	return 0;
}

static int read_table(void **state)
{
	const char *path = getenv("UNIT_CALLS_TBL") ? getenv("UNIT_CALLS_TBL") : "wire/calls.tbl";
	const char *lib = getenv("UNIT_CLIENT_LIB") ? getenv("UNIT_CLIENT_LIB") : "build/tests/unit/libcalls_client.so";
	FILE *f = fopen(path, "r");
	char line[2048];

	if (!f) {
		fprintf(stderr, "test_calls: cannot open %s (run from the repository root)\n", path);
		return -1;
	}
	while (fgets(line, sizeof(line), f) && ntbl < MAXCALLS) {
		struct entry *e = &tbl[ntbl];
		int n = 0;

		*strchrnul(line, '#') = 0;
		*strchrnul(line, '\n') = 0;
		if (sscanf(line, "%u %63s %127s %n", &e->proc, e->name, e->flags, &n) < 3)
			continue;
		snprintf(e->sig, sizeof(e->sig), "%s", line + n);
		e->hand = has_flag(e->flags, "hand");
		e->async = e->hand ? strstr(e->sig, "-> void") != NULL : !strncmp(e->flags, "async", 5);
		e->syncpoint = has_flag(e->flags, "syncpoint");
		e->record = has_flag(e->flags, "record");
		e->code = has_flag(e->flags, "cache-code");
		e->cache = has_flag(e->flags, "cache") || e->code;
		e->flush = has_flag(e->flags, "flush");
		e->flush_code = has_flag(e->flags, "flush-code");
		e->from_header = e->sig[0] == '@';
		e->creates = has_flag(e->flags, "creates") || (!e->hand && !e->from_header && outputs_handle(e->sig));
		ntbl++;
	}
	fclose(f);
	worker_index_procs();
	if (!(client = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND))) {
		fprintf(stderr, "test_calls: %s\n", dlerror());
		return -1;
	}
	return ntbl > 100 ? 0 : -1;
}

static void numbers_unique(void **state)
{
	for (unsigned i = 0; i < ntbl; i++)
		for (unsigned j = 0; j < i; j++) {
			if (tbl[i].proc == tbl[j].proc || !strcmp(tbl[i].name, tbl[j].name))
				fail_msg("%s and %s share %u or a name", tbl[i].name, tbl[j].name, tbl[i].proc);
		}
}

static void server_table(void **state)
{
	unsigned n = 0;

	for (const struct proc_desc *d = server_procs; d->name; d++)
		n++;
	assert_int_equal(n, ntbl);
	for (unsigned i = 0; i < ntbl; i++) {
		const struct entry *e = &tbl[i];
		const struct proc_desc *d = worker_proc(e->proc);
		unsigned want = (e->async ? PROC_ASYNC : 0) | (e->syncpoint ? PROC_SYNCPOINT : 0) |
				(e->record ? PROC_RECORD : 0) | (e->creates ? PROC_CREATES : 0);

		if (!d)
			fail_msg("%s (%u) is not in server_procs", e->name, e->proc);
		assert_int_equal(d->proc, e->proc);
		assert_string_equal(d->name, e->name);
		if (e->from_header)                        /* creates: cuda.h's to say */
			want |= d->flags & PROC_CREATES;
		if (d->flags != want)
			fail_msg("%s: flags %#x, calls.tbl says %#x (%s)", e->name, d->flags, want, e->flags);
		assert_true(e->hand ? d->hand && !d->scalar && d->parent_arg == -1 : d->scalar && !d->hand);
		assert_true(e->async ? !d->xres && !d->res_size : d->xres && d->res_size);
	}
}

typedef CUresult (*stub_fn)(void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *,
			    void *, void *, void *, void *, void *);

/* Calls the client's stub NAME with every argument pointing at zeroed
 * memory (inputs and outputs alike), as much as any prototype takes. */
static struct calls_seen call_stub(const char *name)
{
	static uint64_t mem[4096];
	struct calls_seen *seen = ((struct calls_seen * (*)(void))dlsym(client, "calls_seen"))();
	char sym[128];
	stub_fn f;
	void *m = mem;

	snprintf(sym, sizeof(sym), "rpc_%s", name);
	if (!(f = (stub_fn)dlsym(client, sym)))
		fail_msg("the client has no %s", sym);
	memset(seen, 0, sizeof(*seen));
	memset(mem, 0, sizeof(mem));
	assert_int_equal(f(m, m, m, m, m, m, m, m, m, m, m, m, m, m, m, m), CUDA_SUCCESS);
	return *seen;
}

static void client_stubs(void **state)
{
	const char *(*rpc_name)(unsigned) = (const char *(*)(unsigned))dlsym(client, "rpc_name");

	assert_non_null(rpc_name);
	for (unsigned i = 0; i < ntbl; i++) {
		const struct entry *e = &tbl[i];
		struct calls_seen s = call_stub(e->name);
		int how = e->hand ? SEEN_CALL : e->code ? SEEN_CACHED_CODE : e->cache ? SEEN_CACHED : SEEN_SCALAR;

		assert_string_equal(rpc_name(e->proc), e->name);
		if (s.calls != 1 || s.proc != e->proc || s.how != how)
			fail_msg("rpc_%s: %d calls, of proc %u, way %d; calls.tbl says %u, way %d", e->name, s.calls,
				 s.proc, s.how, e->proc, how);
		if ((how == SEEN_SCALAR || how == SEEN_CALL) && s.async != e->async)
			fail_msg("rpc_%s: %s, calls.tbl says %s", e->name, s.async ? "async" : "sync",
				 e->async ? "async" : "sync");
		if (!e->hand && (s.flush != e->flush || s.flush_code != e->flush_code))
			fail_msg("rpc_%s: flushes %d, code %d; calls.tbl says %d, %d", e->name, s.flush, s.flush_code,
				 e->flush, e->flush_code);
	}
	assert_string_equal(rpc_name(9999), "unknown procedure");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(numbers_unique), cmocka_unit_test(server_table), cmocka_unit_test(client_stubs),
	};

	return cmocka_run_group_tests_name("calls", tests, read_table, NULL);
}

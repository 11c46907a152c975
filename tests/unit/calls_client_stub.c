/*
 * calls_client_stub.c: the interposer's entry points that the generated
 * client stubs (build/gen/client_calls.c) call, as hooks that note what
 * each stub did; built with them into libcalls_client.so, which
 * test_calls.c loads to check each stub against calls.tbl.
 */
#include "interposer.h"
#include "calls_seen.h"

static struct calls_seen seen;

struct calls_seen *calls_seen(void)
{
	return &seen;
}

static CUresult note(unsigned proc, int how, int async, unsigned nout, uint64_t *out)
{
	seen.proc = proc;
	seen.how = how;
	seen.async = async;
	seen.calls++;
	if (out)
		memset(out, 0, nout * sizeof(*out));
	return CUDA_SUCCESS;
}

CUresult client_scalar_call(unsigned proc, int async, const uint64_t *in, unsigned nin, uint64_t *out, unsigned nout)
{
	return note(proc, SEEN_SCALAR, async, nout, out);
}

CUresult client_cached_call(unsigned proc, const uint64_t *in, unsigned nin, uint64_t *out, unsigned nout)
{
	return note(proc, SEEN_CACHED, 0, nout, out);
}

CUresult client_cached_code_call(unsigned proc, const uint64_t *in, unsigned nin, uint64_t *out, unsigned nout)
{
	return note(proc, SEEN_CACHED_CODE, 0, nout, out);
}

CUresult client_call(unsigned proc, xdrproc_t xargs, void *args, xdrproc_t xres, void *res)
{
	return note(proc, SEEN_CALL, !xres, 0, NULL);
}

CUresult client_call_locked(unsigned proc, xdrproc_t xargs, void *args, xdrproc_t xres, void *res)
{
	return note(proc, SEEN_CALL_LOCKED, !xres, 0, NULL);
}

void answers_flush(void)
{
	seen.flush++;
}

void answers_flush_code(void)
{
	seen.flush_code++;
}

CUresult launch_config_pack(const CUlaunchConfig *c, uint64_t *v)
{
	return CUDA_SUCCESS;
}

/*
 * sweep: calls every function the CUDA driver exports, through whatever
 * libcuda.so.1 the program finds (Cicada's, in the tests), first with NULL
 * and zero arguments and then with invalid ones, and checks that each
 * returns an error code or success and never crashes. A crash names the
 * function (a signal handler writes it) and exits 1. Then a small piece
 * of real work must still succeed: the session and the server serve on.
 *
 * SWEEP_VERBOSE=1 prints each call's result; SWEEP_SYNC=1 synchronises
 * after each call, to name the call after which a session was lost.
 *
 * Prints one line per pass ("sweep: pass N: F functions, E errors,
 * S successes") and "sweep: no crash"; exit 0. A name the library does
 * not export is a failure too.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sweep.h"

static const char *volatile current = "(none)";
static volatile int current_pass;

static void on_crash(int sig)
{
	char msg[256];
	int n = snprintf(msg, sizeof(msg), "sweep: CRASH (signal %d) in %s, pass %d\n", sig, current, current_pass);

	if (write(2, msg, (size_t)n) < 0)
		_exit(1);
	_exit(1);
}

/* A context current on this thread, as a program would have. */
static void setup(void)
{
	CUdevice dev;
	CUcontext ctx;

	cuInit(0);
	if (!cuDeviceGet(&dev, 0) && !cuDevicePrimaryCtxRetain(&ctx, dev))
		cuCtxSetCurrent(ctx);
}

/* Real work afterwards: allocate, copy there and back, compare. */
static int still_serves(void)
{
	unsigned in[64], out[64];
	CUdeviceptr d;

	for (int i = 0; i < 64; i++)
		in[i] = (unsigned)i * 2654435761u;
	setup();
	if (cuMemAlloc(&d, sizeof(in)) || cuMemcpyHtoD(d, in, sizeof(in)) || cuMemcpyDtoH(out, d, sizeof(out)) ||
	    cuMemFree(d))
		return 0;
	return !memcmp(in, out, sizeof(in));
}

/* Whether the session is gone: a call that always reaches the server. */
static int lost(void)
{
	size_t bytes;

	cuCtxSynchronize();
	return cuDeviceTotalMem(&bytes, 0) == CUDA_ERROR_DEVICE_UNAVAILABLE;
}

static int run_pass(void *lib, int pass)
{
	int n = 0, errors = 0, ok = 0, missing = 0;

	setup();
	for (const struct sweep_fn *f = sweep_fns; f->name; f++) {
		void *fn = dlsym(lib, f->name);
		CUresult rc;

		if (!fn) {
			printf("sweep: %s is not exported\n", f->name);
			missing++;
			continue;
		}
		current = f->name;
		current_pass = pass;
		rc = f->call(fn, pass);
		n++;
		rc ? errors++ : ok++;
		if (getenv("SWEEP_VERBOSE"))
			fprintf(stderr, "sweep: %s -> %d\n", f->name, (int)rc);
		if (getenv("SWEEP_SYNC") && lost()) {
			printf("sweep: the session was lost after %s (pass %d)\n", f->name, pass);
			return missing + 1;
		}
	}
	printf("sweep: pass %d (%s): %d functions, %d errors, %d successes\n", pass,
	       pass == 1 ? "NULL and zero arguments" : "invalid arguments", n, errors, ok);
	return missing;
}

int main(void)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	int missing;

	if (!lib) {
		fprintf(stderr, "sweep: cannot load libcuda.so.1: %s\n", dlerror());
		return 1;
	}
	signal(SIGSEGV, on_crash);
	signal(SIGBUS, on_crash);
	signal(SIGFPE, on_crash);
	signal(SIGILL, on_crash);
	signal(SIGABRT, on_crash);
	signal(SIGPIPE, SIG_IGN);
	missing = run_pass(lib, 1) + run_pass(lib, 2);
	current = "(the work after the sweep)";
	if (!still_serves()) {
		printf("sweep: real work failed after the sweep\n");
		return 1;
	}
	printf("sweep: no crash; real work still succeeds\n");
	return missing ? 1 : 0;
}

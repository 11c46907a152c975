/*
 * init: how long a process takes to become able to use the GPU: cuInit,
 * primary context retain + set current, and the first cuMemAlloc.
 * init_s counts from main(); init_since_exec_s from the kernel's record
 * of the process start (/proc/self/stat, clock-tick resolution), which
 * also covers loader work and library constructors before main().
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* Process start as CLOCK_BOOTTIME seconds, or -1 if unknown. */
static double process_start_s(void)
{
	unsigned long long ticks;
	char buf[1024], *p;
	size_t len;
	FILE *f;
	int field;

	f = fopen("/proc/self/stat", "r");
	if (!f)
		return -1;
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = 0;
	p = strrchr(buf, ')');		/* comm may hold spaces */
	if (!p)
		return -1;
	/* Field 3 (state) follows ") "; starttime is field 22, 20 spaces on. */
	for (field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p + 1, "%llu", &ticks) != 1)
		return -1;
	return (double)ticks / sysconf(_SC_CLK_TCK);
}

static double boottime_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int bench_init(int argc, char **argv)
{
	double t0 = now_s(), t_init, t_ctx, t_alloc, started, boot;
	CUcontext ctx;
	CUdeviceptr d;
	CUdevice dev;

	(void)argc;
	(void)argv;
	CHECK(cuInit(0));
	t_init = now_s();
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	t_ctx = now_s();
	CHECK(cuMemAlloc(&d, 1 << 20));
	t_alloc = now_s();
	boot = boottime_s();
	started = process_start_s();

	metric("init_cuinit_s", t_init - t0, "s");
	metric("init_ctx_s", t_ctx - t_init, "s");
	metric("init_first_alloc_s", t_alloc - t_ctx, "s");
	metric("init_s", t_alloc - t0, "s");
	if (started >= 0)
		metric("init_since_exec_s", boot - started, "s");
	CHECK(cuMemFree(d));
	return 0;
}

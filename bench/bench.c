/*
 * cicada-bench entry point: picks the subcommand, and holds the helpers
 * the subcommands share (timing, messages, context and kernel setup).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
} cmds[] = {
	{ "latency", bench_latency, "4-byte H2D/D2H copy latency (pageable)" },
	{ "launch", bench_launch, "empty kernel launch rate" },
	{ "bandwidth", bench_bandwidth, "[MiB] pageable and pinned copy bandwidth" },
	{ "init", bench_init, "time to cuInit, context and first cuMemAlloc" },
	{ "peer", bench_peer, "[MiB] copy bandwidth between GPU 0 and GPU 1" },
};
#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

void bench_die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "cicada-bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(1);
}

void bench_cu_fail(const char *file, int line, const char *call, CUresult r)
{
	const char *name = NULL;

	if (cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
		name = "unrecognized CUresult";
	bench_die("%s:%d %s failed: %s", file, line, call, name);
}

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void metric(const char *name, double value, const char *unit)
{
	printf("metric %s %.6g %s\n", name, value, unit);
	fflush(stdout);
}

/* cuInit, device 0, its primary context made current. */
CUdevice bench_open(void)
{
	CUcontext ctx;
	CUdevice dev;

	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	return dev;
}

/* Reads $CICADA_KERNELS/<name> (default build/tests/kernels) whole. */
void *bench_load_kernel(const char *name)
{
	const char *dir = getenv("CICADA_KERNELS");
	char path[4096];
	char *buf;
	long len;
	FILE *f;

	if (!dir || !*dir)
		dir = "build/tests/kernels";
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "rb");
	if (!f || fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET))
		bench_die("cannot read %s", path);
	buf = malloc(len + 1);
	if (!buf || fread(buf, 1, len, f) != (size_t)len)
		bench_die("cannot read %s", path);
	buf[len] = 0;
	fclose(f);
	return buf;
}

static void __attribute__((noreturn)) usage(void)
{
	fprintf(stderr, "usage: cicada-bench <command> [args]\n");
	for (size_t i = 0; i < NCMDS; i++)
		fprintf(stderr, "  %-10s %s\n", cmds[i].name, cmds[i].help);
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	for (size_t i = 0; i < NCMDS; i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].run(argc - 1, argv + 1);
	usage();
}

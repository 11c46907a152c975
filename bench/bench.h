/*
 * cicada-bench: driver-API micro-benchmarks run the same way natively
 * and through the interposer. Each subcommand prints lines
 * "metric <name> <value> <unit>" on stdout; anything else goes to stderr.
 */
#ifndef CICADA_BENCH_H
#define CICADA_BENCH_H

#include <cuda.h>

#define CHECK(call)							\
	do {								\
		CUresult r_ = (call);					\
		if (r_ != CUDA_SUCCESS)					\
			bench_cu_fail(__FILE__, __LINE__, #call, r_);	\
	} while (0)

void bench_cu_fail(const char *file, int line, const char *call, CUresult r)
	__attribute__((noreturn));
void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
double now_s(void);
void metric(const char *name, double value, const char *unit);
CUdevice bench_open(void);
void *bench_load_kernel(const char *name);

int bench_latency(int argc, char **argv);
int bench_launch(int argc, char **argv);
int bench_bandwidth(int argc, char **argv);
int bench_peer(int argc, char **argv);
int bench_init(int argc, char **argv);

#endif

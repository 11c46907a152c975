/*
 * latency: mean time of a 4-byte cuMemcpyHtoD and cuMemcpyDtoH from
 * pageable memory; one synchronous round trip each through the
 * interposer, so this is the per-call cost of the transport.
 */
#include <stdint.h>
#include <stdlib.h>

#include "bench.h"

#define WARMUP 200
#define ITERS 20000

int bench_latency(int argc, char **argv)
{
	uint32_t word = 0x12345678;
	int iters = argc > 1 ? atoi(argv[1]) : ITERS;
	CUdeviceptr d;
	double t0, t1;

	if (iters <= 0)
		bench_die("latency: bad iteration count");
	bench_open();
	CHECK(cuMemAlloc(&d, 4));

	for (int i = 0; i < WARMUP; i++)
		CHECK(cuMemcpyHtoD(d, &word, 4));
	t0 = now_s();
	for (int i = 0; i < iters; i++)
		CHECK(cuMemcpyHtoD(d, &word, 4));
	t1 = now_s();
	metric("h2d_4b_us", (t1 - t0) * 1e6 / iters, "us");

	for (int i = 0; i < WARMUP; i++)
		CHECK(cuMemcpyDtoH(&word, d, 4));
	t0 = now_s();
	for (int i = 0; i < iters; i++)
		CHECK(cuMemcpyDtoH(&word, d, 4));
	t1 = now_s();
	metric("d2h_4b_us", (t1 - t0) * 1e6 / iters, "us");

	CHECK(cuMemFree(d));
	return 0;
}

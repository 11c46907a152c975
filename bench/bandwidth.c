/*
 * bandwidth [MiB]: synchronous H2D and D2H copy bandwidth for pageable
 * (malloc'd, touched) and pinned (cuMemAllocHost) buffers. Each figure
 * is the best of 5 timed copies after one warm-up copy, in GB/s
 * (1e9 bytes per second).
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define REPS 5

static double best_gbs(int h2d, void *host, CUdeviceptr d, size_t bytes)
{
	double best = 0;

	for (int i = 0; i <= REPS; i++) {
		double t0 = now_s(), t;

		if (h2d)
			CHECK(cuMemcpyHtoD(d, host, bytes));
		else
			CHECK(cuMemcpyDtoH(host, d, bytes));
		t = now_s() - t0;
		if (i > 0 && t > 0 && bytes / t / 1e9 > best)
			best = bytes / t / 1e9;
	}
	return best;
}

int bench_bandwidth(int argc, char **argv)
{
	long mib = argc > 1 ? atol(argv[1]) : 256;
	size_t bytes;
	void *page, *pinned;
	CUdeviceptr d;

	if (mib <= 0)
		bench_die("bandwidth: bad size in MiB");
	bytes = (size_t)mib << 20;
	bench_open();
	CHECK(cuMemAlloc(&d, bytes));
	CHECK(cuMemsetD8(d, 0, bytes));

	page = malloc(bytes);
	if (!page)
		bench_die("bandwidth: cannot allocate %ld MiB", mib);
	memset(page, 1, bytes);
	metric("pageable_h2d_gbs", best_gbs(1, page, d, bytes), "GB/s");
	metric("pageable_d2h_gbs", best_gbs(0, page, d, bytes), "GB/s");
	free(page);

	CHECK(cuMemAllocHost(&pinned, bytes));
	memset(pinned, 1, bytes);
	metric("pinned_h2d_gbs", best_gbs(1, pinned, d, bytes), "GB/s");
	metric("pinned_d2h_gbs", best_gbs(0, pinned, d, bytes), "GB/s");
	CHECK(cuMemFreeHost(pinned));

	CHECK(cuMemFree(d));
	return 0;
}

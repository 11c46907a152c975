/*
 * launch: rate of asynchronous launches of the empty kernel from
 * kernels_a.cubin on the default stream, one cuCtxSynchronize at the end.
 */
#include <stdlib.h>

#include "bench.h"

#define WARMUP 1000
#define LAUNCHES 100000

int bench_launch(int argc, char **argv)
{
	int launches = argc > 1 ? atoi(argv[1]) : LAUNCHES;
	CUfunction fn;
	CUmodule mod;
	double t0, t1;
	void *image;

	if (launches <= 0)
		bench_die("launch: bad launch count");
	bench_open();
	image = bench_load_kernel("kernels_a.cubin");
	CHECK(cuModuleLoadData(&mod, image));
	CHECK(cuModuleGetFunction(&fn, mod, "empty"));

	for (int i = 0; i < WARMUP; i++)
		CHECK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
	CHECK(cuCtxSynchronize());

	t0 = now_s();
	for (int i = 0; i < launches; i++)
		CHECK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
	CHECK(cuCtxSynchronize());
	t1 = now_s();

	metric("launch_us", (t1 - t0) * 1e6 / launches, "us");
	metric("launches_per_s", launches / (t1 - t0), "1/s");
	CHECK(cuModuleUnload(mod));
	free(image);
	return 0;
}

/*
 * peer [MiB]: copy bandwidth between GPU 0 and GPU 1 (cuMemcpyPeer, both
 * ways), the best of 5 timed copies after a warm-up, in GB/s. With one
 * GPU it prints peer_gpus 1 and nothing else.
 */
#include <stdlib.h>

#include "bench.h"

#define REPS 5

static double best_gbs(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t bytes)
{
	double best = 0;

	for (int i = 0; i <= REPS; i++) {
		double t0 = now_s(), t;

		CHECK(cuMemcpyPeer(dst, dctx, src, sctx, bytes));
		CHECK(cuCtxSynchronize());
		t = now_s() - t0;
		if (i > 0 && t > 0 && bytes / t / 1e9 > best)
			best = bytes / t / 1e9;
	}
	return best;
}

int bench_peer(int argc, char **argv)
{
	long mib = argc > 1 ? atol(argv[1]) : 256;
	CUcontext ctx[2];
	CUdeviceptr d[2];
	CUdevice dev;
	int n = 0, can = 0;

	if (mib <= 0)
		bench_die("peer: bad size in MiB");
	bench_open();
	CHECK(cuDeviceGetCount(&n));
	metric("peer_gpus", n, "GPUs");
	if (n < 2)
		return 0;
	for (int i = 0; i < 2; i++) {
		CHECK(cuDeviceGet(&dev, i));
		CHECK(cuDevicePrimaryCtxRetain(&ctx[i], dev));
		CHECK(cuCtxSetCurrent(ctx[i]));
		CHECK(cuMemAlloc(&d[i], (size_t)mib << 20));
		CHECK(cuMemsetD8(d[i], (unsigned char)i, (size_t)mib << 20));
	}
	CHECK(cuDeviceCanAccessPeer(&can, 0, 1));
	if (can) {
		CHECK(cuCtxEnablePeerAccess(ctx[0], 0));     /* from GPU 1's context, current */
		CHECK(cuCtxSetCurrent(ctx[0]));
		CHECK(cuCtxEnablePeerAccess(ctx[1], 0));
	}
	metric("peer_0to1_gbs", best_gbs(d[1], ctx[1], d[0], ctx[0], (size_t)mib << 20), "GB/s");
	metric("peer_1to0_gbs", best_gbs(d[0], ctx[0], d[1], ctx[1], (size_t)mib << 20), "GB/s");
	return 0;
}

/*
 * streams_events: stream priorities, a cross-stream dependency through
 * cuEventRecord + cuStreamWaitEvent (checked by the data it protects),
 * event synchronize/query/elapsed time, the error for elapsed time on
 * a timing-disabled event, stream query and synchronize.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

int main(void)
{
	int n = 1 << 22, least, greatest, prio, rounds = 50;
	size_t bytes = (size_t)n * sizeof(unsigned);
	CUevent start_ev, stop_ev, dep_ev, nt_a, nt_b;
	CUfunction fill, inc;
	CUstream s_lo, s_hi;
	CUdeviceptr p, q;
	unsigned v = 5, *h;
	CUcontext ctx;
	CUmodule mod;
	CUdevice dev;
	CUresult r;
	void *image;
	float ms = -1;
	int bad;

	start("streams_events");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	image = load_kernel("kernels_b.cubin", NULL);
	CHECK(cuModuleLoadData(&mod, image));
	CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
	CHECK(cuModuleGetFunction(&inc, mod, "inc_u32"));

	/* Priorities: lower numbers are higher priority. */
	CHECK(cuCtxGetStreamPriorityRange(&least, &greatest));
	if (greatest > least)
		fail("priority range least=%d greatest=%d", least, greatest);
	printf("streams_events: priority range OK\n");
	CHECK(cuStreamCreateWithPriority(&s_lo, CU_STREAM_NON_BLOCKING, least));
	CHECK(cuStreamCreateWithPriority(&s_hi, CU_STREAM_NON_BLOCKING, greatest));
	CHECK(cuStreamGetPriority(s_lo, &prio));
	if (prio != least)
		fail("low stream priority %d, want %d", prio, least);
	CHECK(cuStreamGetPriority(s_hi, &prio));
	if (prio != greatest)
		fail("high stream priority %d, want %d", prio, greatest);
	printf("streams_events: stream priorities OK\n");

	CHECK(cuEventCreate(&start_ev, CU_EVENT_DEFAULT));
	CHECK(cuEventCreate(&stop_ev, CU_EVENT_DEFAULT));
	CHECK(cuEventCreate(&dep_ev, CU_EVENT_DISABLE_TIMING));
	CHECK(cuMemAlloc(&p, bytes));
	CHECK(cuMemAlloc(&q, bytes));

	/*
	 * s_lo: p = 5, then +1 `rounds` times. s_hi waits for that through
	 * dep_ev, copies p to q and adds 1. Without the wait, q would copy
	 * a partial p.
	 */
	void *fargs[] = { &p, &v, &n };
	void *pargs[] = { &p, &n };
	void *qargs[] = { &q, &n };
	CHECK(cuEventRecord(start_ev, s_lo));
	CHECK(cuLaunchKernel(fill, GRID(n), 1, 1, BLOCK, 1, 1, 0, s_lo, fargs, NULL));
	for (int i = 0; i < rounds; i++)
		CHECK(cuLaunchKernel(inc, GRID(n), 1, 1, BLOCK, 1, 1, 0, s_lo, pargs, NULL));
	CHECK(cuEventRecord(dep_ev, s_lo));
	CHECK(cuEventRecord(stop_ev, s_lo));
	CHECK(cuStreamWaitEvent(s_hi, dep_ev, 0));
	CHECK(cuMemcpyDtoDAsync(q, p, bytes, s_hi));
	CHECK(cuLaunchKernel(inc, GRID(n), 1, 1, BLOCK, 1, 1, 0, s_hi, qargs, NULL));

	r = cuStreamQuery(s_hi);
	if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
		CHECK(r);
	CHECK(cuStreamSynchronize(s_hi));
	CHECK(cuStreamQuery(s_hi));
	CHECK(cuEventSynchronize(stop_ev));
	CHECK(cuEventQuery(stop_ev));
	printf("streams_events: event query after sync OK\n");

	h = xmalloc(bytes);
	CHECK(cuMemcpyDtoH(h, q, bytes));
	bad = 0;
	for (int i = 0; i < n; i++)
		if (h[i] != v + rounds + 1)
			bad++;
	printf("streams_events: dependent stream n=%d mismatches=%d\n", n, bad);
	if (bad)
		fail("cuStreamWaitEvent did not order the streams");
	CHECK(cuMemcpyDtoH(h, p, bytes));
	bad = 0;
	for (int i = 0; i < n; i++)
		if (h[i] != v + rounds)
			bad++;
	printf("streams_events: source stream n=%d mismatches=%d\n", n, bad);
	if (bad)
		fail("source stream result wrong");

	CHECK(cuEventElapsedTime(&ms, start_ev, stop_ev));
	if (!(ms >= 0))
		fail("elapsed time negative");
	printf("streams_events: elapsed_ok\n");

	/* Elapsed time needs timing on both events. */
	CHECK(cuEventCreate(&nt_a, CU_EVENT_DISABLE_TIMING));
	CHECK(cuEventCreate(&nt_b, CU_EVENT_DISABLE_TIMING));
	CHECK(cuEventRecord(nt_a, s_hi));
	CHECK(cuEventRecord(nt_b, s_hi));
	CHECK(cuEventSynchronize(nt_b));
	r = cuEventElapsedTime(&ms, nt_a, nt_b);
	if (r != CUDA_ERROR_INVALID_HANDLE)
		fail("elapsed time on timing-disabled events returned %s, want CUDA_ERROR_INVALID_HANDLE",
		     errname(r));
	printf("streams_events: disabled-timing elapsed -> CUDA_ERROR_INVALID_HANDLE\n");

	CHECK(cuStreamSynchronize(s_lo));
	CHECK(cuStreamQuery(s_lo));
	CHECK(cuEventDestroy(start_ev));
	CHECK(cuEventDestroy(stop_ev));
	CHECK(cuEventDestroy(dep_ev));
	CHECK(cuEventDestroy(nt_a));
	CHECK(cuEventDestroy(nt_b));
	CHECK(cuStreamDestroy(s_lo));
	CHECK(cuStreamDestroy(s_hi));
	CHECK(cuMemFree(p));
	CHECK(cuMemFree(q));
	CHECK(cuModuleUnload(mod));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	free(h);
	free(image);
	printf("streams_events: PASS\n");
	return 0;
}

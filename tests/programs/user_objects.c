/*
 * user_objects: user objects as NCCL gives them to the graphs that capture
 * its collectives: an object released by its owner; one moved to a graph,
 * which an executable graph instantiated from it keeps alive after the
 * graph is gone; one shared by a graph and its clone; one retained into
 * a graph capturing a kernel launch (the graph cuStreamGetCaptureInfo
 * names), launched, then destroyed; and the arguments the driver refuses. Each
 * destructor counts; output identical to a native run.
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "common.h"

static int destroyed[4];

static void CUDA_CB gone(void *p)
{
	__atomic_add_fetch(&destroyed[(intptr_t)p], 1, __ATOMIC_SEQ_CST);
}

/* Destructors run on a thread of the driver's: the count once it is want
 * (or 2 s have passed), read again 100 ms later, so that one run too
 * early or too often shows. */
static int count(int i, int want)
{
	struct timespec ms = { 0, 1000000 }, settle = { 0, 100000000 };

	for (int t = 0; t < 2000 && __atomic_load_n(&destroyed[i], __ATOMIC_SEQ_CST) != want; t++)
		nanosleep(&ms, NULL);
	nanosleep(&settle, NULL);
	return __atomic_load_n(&destroyed[i], __ATOMIC_SEQ_CST);
}

static CUgraph memset_graph(CUdeviceptr buf)
{
	CUDA_MEMSET_NODE_PARAMS p = { buf, 256, 0x5a, 1, 256, 1 };
	CUgraphNode node;
	CUcontext ctx;
	CUgraph g;

	CHECK(cuCtxGetCurrent(&ctx));
	CHECK(cuGraphCreate(&g, 0));
	CHECK(cuGraphAddMemsetNode(&node, g, NULL, 0, &p, ctx));
	return g;
}

int main(void)
{
	CUuserObject o[4], bad;
	CUcontext ctx;
	CUdevice dev;
	CUdeviceptr buf;
	CUgraph g, clone;
	CUgraphExec e;
	CUstream s;
	CUstreamCaptureStatus st;
	CUmodule mod;
	CUfunction fn;
	CUdeviceptr a, b, c;
	int n = 64;
	void *args[] = { &a, &b, &c, &n };

	start("user_objects");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuMemAlloc(&buf, 1024));
	CHECK(cuMemsetD8(buf, 0, 1024));
	a = buf, b = buf + 256, c = buf + 512;
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	for (intptr_t i = 0; i < 4; i++)
		CHECK(cuUserObjectCreate(&o[i], (void *)i, gone, i == 2 ? 2 : 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));

	CHECK(cuUserObjectRetain(o[0], 2));
	CHECK(cuUserObjectRelease(o[0], 2));
	printf("released all but one: destroyed %d\n", count(0, 0));
	CHECK(cuUserObjectRelease(o[0], 1));
	printf("released the last: destroyed %d\n", count(0, 1));

	g = memset_graph(buf);
	CHECK(cuGraphRetainUserObject(g, o[1], 1, CU_GRAPH_USER_OBJECT_MOVE));
	CHECK(cuGraphInstantiate(&e, g, 0));
	CHECK(cuGraphDestroy(g));
	printf("moved to a graph, the graph destroyed, its executable not: destroyed %d\n", count(1, 0));
	CHECK(cuGraphLaunch(e, s));
	CHECK(cuStreamSynchronize(s));
	CHECK(cuGraphExecDestroy(e));
	printf("the executable destroyed: destroyed %d\n", count(1, 1));

	g = memset_graph(buf);
	CHECK(cuGraphRetainUserObject(g, o[2], 1, 0));
	CHECK(cuGraphClone(&clone, g));
	CHECK(cuUserObjectRelease(o[2], 2));
	CHECK(cuGraphDestroy(g));
	printf("held by a graph and its clone, the owner and the graph gone: destroyed %d\n", count(2, 0));
	CHECK(cuGraphReleaseUserObject(clone, o[2], 1));
	printf("the clone let go: destroyed %d\n", count(2, 1));
	CHECK(cuGraphDestroy(clone));

	CHECK(cuModuleLoadData(&mod, load_kernel("kernels_a.cubin", NULL)));
	CHECK(cuModuleGetFunction(&fn, mod, "vec_add"));
	CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CHECK(cuLaunchKernel(fn, 1, 1, 1, 64, 1, 1, 0, s, args, NULL));
	CHECK(cuStreamGetCaptureInfo(s, &st, NULL, &g, NULL, NULL, NULL));
	CHECK(cuGraphRetainUserObject(g, o[3], 1, CU_GRAPH_USER_OBJECT_MOVE));
	CHECK(cuStreamEndCapture(s, &g));
	CHECK(cuGraphInstantiate(&e, g, 0));
	CHECK(cuGraphDestroy(g));
	CHECK(cuGraphLaunch(e, s));
	CHECK(cuStreamSynchronize(s));
	printf("retained into a capture, launched: destroyed %d\n", count(3, 0));
	CHECK(cuGraphExecDestroy(e));
	printf("its executable destroyed: destroyed %d\n", count(3, 1));

	g = memset_graph(buf);
	CHECK(cuUserObjectCreate(&bad, NULL, gone, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
	printf("retain 0: %s\n", errname(cuUserObjectRetain(bad, 0)));
	printf("release 0: %s\n", errname(cuUserObjectRelease(bad, 0)));
	printf("graph retain, unknown flag: %s\n", errname(cuGraphRetainUserObject(g, bad, 1, 2)));
	printf("graph retain 0: %s\n", errname(cuGraphRetainUserObject(g, bad, 0, 0)));
	printf("create without NO_DESTRUCTOR_SYNC: %s\n", errname(cuUserObjectCreate(&o[0], NULL, gone, 1, 0)));
	CHECK(cuGraphDestroy(g));
	CHECK(cuModuleUnload(mod));
	CHECK(cuStreamDestroy(s));
	CHECK(cuMemFree(buf));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	printf("done\n");
	return 0;
}

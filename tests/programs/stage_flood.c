/*
 * stage_flood: a tenant that adds graph copy nodes of its pageable memory,
 * 16 MiB each, until the gpu-server refuses one (a remote client's are
 * staged in memory the worker pins). Prints "staged N" and the error of
 * the refused one, "refused ERR" (or "never refused" after 64 nodes).
 * With a worker bounded by --max-staged the refusal must come, as an
 * out-of-memory error, and the server must serve others after it.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

#define NODE (16u << 20)
#define NODES 64

int main(void)
{
	CUDA_MEMCPY3D c = { 0 };
	CUgraphNode node;
	CUdeviceptr d;
	CUcontext ctx;
	CUdevice dev;
	CUresult err = CUDA_SUCCESS;
	CUgraph g;
	char *host = xmalloc(NODE);
	int n = 0;

	start("stage_flood");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuMemAlloc(&d, NODE));
	CHECK(cuGraphCreate(&g, 0));
	c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = host;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = d;
	c.WidthInBytes = NODE, c.Height = 1, c.Depth = 1;
	for (; n < NODES && !(err = cuGraphAddMemcpyNode(&node, g, NULL, 0, &c, ctx)); n++)
		;
	printf("staged %d\n", n);
	if (err)
		printf("refused %d\n", (int)err);
	else
		printf("never refused\n");
	CHECK(cuGraphDestroy(g));
	CHECK(cuMemFree(d));
	return 0;
}

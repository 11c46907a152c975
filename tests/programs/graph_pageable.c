/*
 * graph_pageable: graph copy nodes whose host side is the program's
 * pageable memory (malloc), which natively the node reads or writes when
 * it runs. A graph copies its input in, steps it with kernels, records an
 * event and copies it out (a pitched copy, whose gaps must stay as they
 * were), launched several times with new input each time; then the copy
 * in is pointed at other buffers in the executable and in the graph (and
 * the executable updated from it), and a clone runs; then the same
 * through stream capture. Every result is printed, so a run through
 * Cicada must print what a native run prints.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define N 4096                               /* words: 16 rows of 256 */
#define ROW 256
#define ROWS (N / ROW)
#define PITCH (ROW + 16)                     /* the output's rows, in words */

static unsigned sum(const unsigned *p, size_t n)
{
	unsigned s = 0;

	for (size_t i = 0; i < n; i++)
		s = s * 31 + p[i];
	return s;
}

/* The output's rows are the input plus 2; its gaps keep their marker. */
static const char *check(const unsigned *in, const unsigned *out)
{
	for (int r = 0; r < ROWS; r++)
		for (int c = 0; c < PITCH; c++) {
			unsigned v = out[r * PITCH + c];
			if (c < ROW ? v != in[r * ROW + c] + 2 : v != 0xdeadbeef)
				return c < ROW ? "WRONG" : "GAP WRITTEN";
		}
	return "right";
}

static void input(unsigned *in, unsigned seed)
{
	for (int i = 0; i < N; i++)
		in[i] = i * seed + 11;
}

static unsigned *output(void)
{
	unsigned *p = xmalloc(ROWS * PITCH * sizeof(*p));

	for (int i = 0; i < ROWS * PITCH; i++)
		p[i] = 0xdeadbeef;
	return p;
}

static CUDA_MEMCPY3D copy_in(const unsigned *in, CUdeviceptr d)
{
	CUDA_MEMCPY3D c = { 0 };

	c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = in;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = d;
	c.WidthInBytes = N * 4, c.Height = 1, c.Depth = 1;
	return c;
}

static CUDA_MEMCPY3D copy_out(CUdeviceptr d, unsigned *out)
{
	CUDA_MEMCPY3D c = { 0 };

	c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = d, c.srcPitch = ROW * 4;
	c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = out, c.dstPitch = PITCH * 4;
	c.WidthInBytes = ROW * 4, c.Height = ROWS, c.Depth = 1;
	return c;
}

static CUgraphNode kernel(CUgraph g, CUgraphNode dep, CUfunction f, void **args)
{
	CUDA_KERNEL_NODE_PARAMS k = { 0 };
	CUgraphNode node;

	k.func = f;
	k.gridDimX = GRID(N), k.gridDimY = 1, k.gridDimZ = 1;
	k.blockDimX = BLOCK, k.blockDimY = 1, k.blockDimZ = 1;
	k.kernelParams = args;
	CHECK(cuGraphAddKernelNode(&node, g, &dep, 1, &k));
	return node;
}

static void launch(CUgraphExec x, CUstream s, CUevent ev, const char *what, unsigned *in, unsigned seed,
		   const unsigned *out)
{
	input(in, seed);
	CHECK(cuGraphLaunch(x, s));
	CHECK(cuStreamSynchronize(s));
	printf("graph_pageable: %s, input %u: output %s, checksum %08x, event done %s\n", what, seed,
	       check(in, out), sum(out, ROWS * PITCH), cuEventQuery(ev) == CUDA_SUCCESS ? "yes" : "no");
}

int main(void)
{
	int n = N;
	CUfunction inc;
	CUdeviceptr d;
	CUcontext ctx;
	CUmodule mod;
	CUdevice dev;
	CUstream s;
	CUevent ev;
	CUgraph g, clone, cap;
	CUgraphExec x, cx, kx;
	CUgraphNode in_node, k1, k2, er, out_node, found;
	CUgraphNodeType type;
	CUgraphExecUpdateResultInfo info;
	CUresult captured;
	unsigned *in = xmalloc(N * 4), *in2 = xmalloc(N * 4), *in3 = xmalloc(N * 4), *out = output(), *out2 = output();
	void *args[] = { &d, &n };

	start("graph_pageable");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuModuleLoadData(&mod, load_kernel("kernels_b.cubin", NULL)));
	CHECK(cuModuleGetFunction(&inc, mod, "inc_u32"));
	CHECK(cuMemAlloc(&d, N * 4));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));

	/* in (pageable) -> d, inc, inc, event, d -> out (pageable, pitched) */
	CHECK(cuGraphCreate(&g, 0));
	CUDA_MEMCPY3D ci = copy_in(in, d), co = copy_out(d, out), got;
	CHECK(cuGraphAddMemcpyNode(&in_node, g, NULL, 0, &ci, ctx));
	k1 = kernel(g, in_node, inc, args);
	k2 = kernel(g, k1, inc, args);
	CHECK(cuGraphAddEventRecordNode(&er, g, &k2, 1, ev));
	CHECK(cuGraphAddMemcpyNode(&out_node, g, &er, 1, &co, ctx));
	CHECK(cuGraphNodeGetType(in_node, &type));
	printf("graph_pageable: the copy nodes have type %d", (int)type);
	CHECK(cuGraphNodeGetType(out_node, &type));
	printf(" and %d\n", (int)type);
	CHECK(cuGraphMemcpyNodeGetParams(in_node, &got));
	printf("graph_pageable: copy in reads the program's buffer: %s, %zu bytes\n",
	       got.srcHost == in && got.srcMemoryType == CU_MEMORYTYPE_HOST && got.dstDevice == d ? "yes" : "no",
	       got.WidthInBytes);
	CHECK(cuGraphMemcpyNodeGetParams(out_node, &got));
	printf("graph_pageable: copy out writes the program's buffer: %s, pitch %zu, %zu rows\n",
	       got.dstHost == out && got.dstMemoryType == CU_MEMORYTYPE_HOST ? "yes" : "no", got.dstPitch, got.Height);
	size_t count;
	CHECK(cuGraphGetNodes(g, NULL, &count));
	printf("graph_pageable: %zu nodes\n", count);

	CHECK(cuGraphInstantiate(&x, g, 0));
	for (unsigned i = 1; i <= 3; i++)
		launch(x, s, ev, "launch", in, i, out);

	/* The executable's copy in now reads in2; the graph's still in. The
	 * driver changes only one-dimensional copies in an executable. */
	ci = copy_in(in2, d);
	CHECK(cuGraphExecMemcpyNodeSetParams(x, in_node, &ci, ctx));
	input(in, 99);
	launch(x, s, ev, "exec set to in2", in2, 4, out);
	CHECK(cuGraphMemcpyNodeGetParams(in_node, &got));
	printf("graph_pageable: the graph's node still names in: %s\n", got.srcHost == in ? "yes" : "no");

	/* The graph's copy in reads in3; the executable takes it by an update. */
	ci = copy_in(in3, d);
	CHECK(cuGraphMemcpyNodeSetParams(in_node, &ci));
	CHECK(cuGraphExecUpdate(x, g, &info));
	printf("graph_pageable: update result %d\n", (int)info.result);
	for (unsigned i = 5; i <= 6; i++)
		launch(x, s, ev, "updated", in3, i, out);
	CHECK(cuGraphMemcpyNodeGetParams(in_node, &got));
	printf("graph_pageable: the graph's node now reads in3: %s\n", got.srcHost == in3 ? "yes" : "no");

	/* A clone copies the same memory. */
	CHECK(cuGraphClone(&clone, g));
	CHECK(cuGraphNodeFindInClone(&found, out_node, clone));
	CHECK(cuGraphNodeGetType(found, &type));
	CHECK(cuGraphMemcpyNodeGetParams(found, &got));
	printf("graph_pageable: the clone's copy out: type %d, writes out: %s\n", (int)type,
	       got.dstHost == out ? "yes" : "no");
	CHECK(cuGraphInstantiate(&cx, clone, 0));
	launch(cx, s, ev, "clone", in3, 7, out);

	/* Stream capture: pageable copies on a capturing stream (whatever
	 * the driver says of them is printed). */
	CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	printf("graph_pageable: captured copy in: %d\n", (int)cuMemcpyHtoDAsync(d, in, N * 4, s));
	printf("graph_pageable: captured kernel: %d\n",
	       (int)cuLaunchKernel(inc, GRID(N), 1, 1, BLOCK, 1, 1, 0, s, args, NULL));
	printf("graph_pageable: captured kernel: %d\n",
	       (int)cuLaunchKernel(inc, GRID(N), 1, 1, BLOCK, 1, 1, 0, s, args, NULL));
	printf("graph_pageable: captured copy out: %d\n", (int)cuMemcpyDtoHAsync(out2, d, N * 4, s));
	captured = cuStreamEndCapture(s, &cap);
	printf("graph_pageable: end of capture: %d\n", (int)captured);
	if (!captured)
		captured = cuGraphInstantiate(&kx, cap, 0);
	for (unsigned i = 8; i <= 10 && !captured; i++) {
		int right = 1;
		input(in, i);
		CHECK(cuGraphLaunch(kx, s));
		CHECK(cuStreamSynchronize(s));
		for (int j = 0; j < N; j++)
			right &= out2[j] == in[j] + 2;
		printf("graph_pageable: captured, input %u: output %s, checksum %08x\n", i, right ? "right" : "WRONG",
		       sum(out2, N));
	}
	if (!captured) {
		CHECK(cuGraphExecDestroy(kx));
		CHECK(cuGraphDestroy(cap));
	}
	CHECK(cuGraphExecDestroy(cx));
	CHECK(cuGraphExecDestroy(x));
	CHECK(cuGraphDestroy(clone));
	CHECK(cuGraphDestroy(g));
	printf("graph_pageable: done\n");
	return 0;
}

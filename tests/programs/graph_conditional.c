/*
 * graph_conditional: conditional graph nodes (CUDA 12.3 and later) whose
 * condition a kernel sets (cudaGraphSetConditional in device code): an
 * if/else node, a while loop counted down by its own body, and a switch;
 * the driver makes their body graphs, which get nodes like any graph.
 * Every result is printed, so a run through Cicada must print what a
 * native run prints.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

static CUfunction fill, inc, cond_set, countdown;
static int n = 1024;

static unsigned first(CUdeviceptr p)
{
	unsigned v = 0;

	CHECK(cuMemcpyDtoH(&v, p, sizeof(v)));
	return v;
}

static CUgraphNode kernel(CUgraph g, CUgraphNode *dep, CUfunction f, void **args, unsigned threads)
{
	CUDA_KERNEL_NODE_PARAMS k = { 0 };
	CUgraphNode node;

	k.func = f;
	k.gridDimX = GRID(threads), k.gridDimY = 1, k.gridDimZ = 1;
	k.blockDimX = threads < BLOCK ? threads : BLOCK, k.blockDimY = 1, k.blockDimZ = 1;
	k.kernelParams = args;
	CHECK(cuGraphAddKernelNode(&node, g, dep, dep ? 1 : 0, &k));
	return node;
}

static CUgraphNode conditional(CUgraph g, CUgraphNode dep, CUgraphConditionalHandle h, CUgraphConditionalNodeType type,
			       unsigned size, CUcontext ctx, CUgraph **bodies)
{
	CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_CONDITIONAL };
	CUgraphNode node;

	p.conditional.handle = h;
	p.conditional.type = type;
	p.conditional.size = size;
	p.conditional.ctx = ctx;
	CHECK(cuGraphAddNode(&node, g, &dep, NULL, 1, &p));
	*bodies = p.conditional.phGraph_out;
	return node;
}

int main(void)
{
	CUdeviceptr a, b, counter;
	CUcontext ctx;
	CUmodule mb, mg;
	CUdevice dev;
	CUstream s;
	CUgraph g, *bodies;
	CUgraphExec x;
	CUgraphConditionalHandle h_if, h_while, h_switch;
	CUgraphNode set_if, cn, set_switch, ms;
	CUgraphNodeType type;
	unsigned one_hundred = 100, flag = 1, pick = 2, seven = 7, fives = 5;
	size_t count;
	void *set_if_args[] = { &h_if, &flag }, *inc_a[] = { &a, &n }, *fill_a[] = { &a, &one_hundred, &n };
	void *inc_b[] = { &b, &n }, *down[] = { &counter, &h_while };
	void *set_switch_args[] = { &h_switch, &pick }, *fill_b7[] = { &b, &seven, &n };

	start("graph_conditional");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuModuleLoadData(&mb, load_kernel("kernels_b.cubin", NULL)));
	CHECK(cuModuleLoadData(&mg, load_kernel("kernels_graph.cubin", NULL)));
	CHECK(cuModuleGetFunction(&fill, mb, "fill_u32"));
	CHECK(cuModuleGetFunction(&inc, mb, "inc_u32"));
	CHECK(cuModuleGetFunction(&cond_set, mg, "cond_set"));
	CHECK(cuModuleGetFunction(&countdown, mg, "cond_countdown"));
	CHECK(cuMemAlloc(&a, n * 4));
	CHECK(cuMemAlloc(&b, n * 4));
	CHECK(cuMemAlloc(&counter, 4));
	CHECK(cuMemsetD32(a, 0, n));
	CHECK(cuMemsetD32(b, 0, n));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(cuGraphCreate(&g, 0));

	/* if (flag) a += 1 else a = 100 */
	CHECK(cuGraphConditionalHandleCreate(&h_if, g, ctx, 0, 0));
	set_if = kernel(g, NULL, cond_set, set_if_args, 1);
	cn = conditional(g, set_if, h_if, CU_GRAPH_COND_TYPE_IF, 2, ctx, &bodies);
	kernel(bodies[0], NULL, inc, inc_a, n);
	kernel(bodies[1], NULL, fill, fill_a, n);
	CHECK(cuGraphNodeGetType(cn, &type));
	CHECK(cuGraphGetNodes(bodies[0], NULL, &count));
	printf("graph_conditional: if/else node type %d, its body has %zu node\n", (int)type, count);

	/* counter = 5; while (counter) { b += 1; counter -= 1 }: the handle
	 * starts at 1 at every launch */
	CHECK(cuGraphConditionalHandleCreate(&h_while, g, ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
	CUDA_MEMSET_NODE_PARAMS m = { .dst = counter, .value = fives, .elementSize = 4, .width = 1, .height = 1 };
	CHECK(cuGraphAddMemsetNode(&ms, g, &cn, 1, &m, ctx));
	cn = conditional(g, ms, h_while, CU_GRAPH_COND_TYPE_WHILE, 1, ctx, &bodies);
	CUgraphNode ib = kernel(bodies[0], NULL, inc, inc_b, n);
	kernel(bodies[0], &ib, countdown, down, 1);

	/* switch (pick) { 0: a += 1; 1: a = 100; 2: b = 7 } */
	CHECK(cuGraphConditionalHandleCreate(&h_switch, g, ctx, 0, 0));
	set_switch = kernel(g, &cn, cond_set, set_switch_args, 1);
	cn = conditional(g, set_switch, h_switch, CU_GRAPH_COND_TYPE_SWITCH, 3, ctx, &bodies);
	kernel(bodies[0], NULL, inc, inc_a, n);
	kernel(bodies[1], NULL, fill, fill_a, n);
	kernel(bodies[2], NULL, fill, fill_b7, n);
	CUgraphNode after = kernel(g, &cn, inc, inc_b, n);
	(void)after;

	CHECK(cuGraphGetNodes(g, NULL, &count));
	printf("graph_conditional: %zu nodes in the graph\n", count);
	CHECK(cuGraphInstantiate(&x, g, 0));
	CHECK(cuGraphLaunch(x, s));
	CHECK(cuStreamSynchronize(s));
	printf("graph_conditional: flag 1, pick 2: a[0] %u b[0] %u counter %u\n", first(a), first(b), first(counter));

	CHECK(cuGraphLaunch(x, s));
	CHECK(cuStreamSynchronize(s));
	printf("graph_conditional: again: a[0] %u b[0] %u counter %u\n", first(a), first(b), first(counter));

	/* flag 0 takes the else body; pick 0 the first case (a += 1) */
	CUDA_KERNEL_NODE_PARAMS k = { 0 };
	flag = 0, pick = 0;
	k.func = cond_set, k.gridDimX = k.gridDimY = k.gridDimZ = 1, k.blockDimX = k.blockDimY = k.blockDimZ = 1;
	k.kernelParams = set_if_args;
	CHECK(cuGraphExecKernelNodeSetParams(x, set_if, &k));
	k.kernelParams = set_switch_args;
	CHECK(cuGraphExecKernelNodeSetParams(x, set_switch, &k));
	CHECK(cuGraphLaunch(x, s));
	CHECK(cuStreamSynchronize(s));
	printf("graph_conditional: flag 0, pick 0: a[0] %u b[0] %u counter %u\n", first(a), first(b), first(counter));

	/* pick 5: no case */
	pick = 5;
	CHECK(cuGraphExecKernelNodeSetParams(x, set_switch, &k));
	CHECK(cuGraphLaunch(x, s));
	CHECK(cuStreamSynchronize(s));
	printf("graph_conditional: flag 0, pick 5: a[0] %u b[0] %u counter %u\n", first(a), first(b), first(counter));

	CHECK(cuGraphExecDestroy(x));
	CHECK(cuGraphDestroy(g));
	printf("graph_conditional: done\n");
	return 0;
}

/*
 * graph_nodes: a graph built node by node, as the driver API offers it:
 * memset, kernel, host, copy, child graph, empty, event record, memory
 * alloc and free nodes with their edges; the lists of nodes, roots,
 * edges and dependencies; reading and setting parameters in the graph
 * and in an executable; executable update, clone and the debug dump;
 * stream capture's dependencies, and a host function captured into a
 * graph (it runs at every launch). Every result is printed, so a run
 * through Cicada must print what a native run prints.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static int host_runs;

static void CUDA_CB on_host(void *data)
{
	host_runs += *(int *)data;
}

static unsigned first(CUdeviceptr p)
{
	unsigned v = 0;

	CHECK(cuMemcpyDtoH(&v, p, sizeof(v)));
	return v;
}

static CUgraphNode kernel_node(CUgraph g, const CUgraphNode *deps, size_t n, CUfunction f, void **args, int n_elems)
{
	CUDA_KERNEL_NODE_PARAMS k = { 0 };
	CUgraphNode node;

	k.func = f;
	k.gridDimX = GRID(n_elems), k.gridDimY = 1, k.gridDimZ = 1;
	k.blockDimX = BLOCK, k.blockDimY = 1, k.blockDimZ = 1;
	k.kernelParams = args;
	CHECK(cuGraphAddKernelNode(&node, g, deps, n, &k));
	return node;
}

int main(void)
{
	int n = 1 << 16, one = 1;
	size_t bytes = (size_t)n * 4, count;
	CUfunction fill, inc;
	CUdeviceptr a, b;
	CUcontext ctx;
	CUmodule mod;
	CUdevice dev;
	CUstream s;
	CUevent ev;
	CUgraph g, child, clone, cap;
	CUgraphExec x;
	CUgraphNode ms, kn, hn, cp, ch, em, er, al, fr, nodes[16], from[16], to[16], found;
	CUgraphNodeType type;
	unsigned v = 9;
	void *fill_args[] = { &a, &v, &n }, *inc_args[] = { &a, &n }, *inc_b[] = { &b, &n };

	start("graph_nodes");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuModuleLoadData(&mod, load_kernel("kernels_b.cubin", NULL)));
	CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
	CHECK(cuModuleGetFunction(&inc, mod, "inc_u32"));
	CHECK(cuMemAlloc(&a, bytes));
	CHECK(cuMemAlloc(&b, bytes));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));

	/* memset(a, 7) -> inc(a) -> host -> copy a to b -> child { inc(b) }, and
	 * an empty node joining them with an event record after it. */
	CHECK(cuGraphCreate(&g, 0));
	CUDA_MEMSET_NODE_PARAMS m = { .dst = a, .pitch = 0, .value = 7, .elementSize = 4, .width = (size_t)n, .height = 1 };
	CHECK(cuGraphAddMemsetNode(&ms, g, NULL, 0, &m, ctx));
	kn = kernel_node(g, &ms, 1, inc, inc_args, n);
	CUDA_HOST_NODE_PARAMS h = { on_host, &one };
	CHECK(cuGraphAddHostNode(&hn, g, &kn, 1, &h));
	CUDA_MEMCPY3D c = { 0 };
	c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = a;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = b;
	c.WidthInBytes = bytes, c.Height = 1, c.Depth = 1;
	CHECK(cuGraphAddMemcpyNode(&cp, g, &hn, 1, &c, ctx));
	CHECK(cuGraphCreate(&child, 0));
	kernel_node(child, NULL, 0, inc, inc_b, n);
	CHECK(cuGraphAddChildGraphNode(&ch, g, &cp, 1, child));
	CUgraphNode join[2] = { ch, hn };
	CHECK(cuGraphAddEmptyNode(&em, g, join, 2));
	CHECK(cuGraphAddEventRecordNode(&er, g, &em, 1, ev));
	CHECK(cuGraphGetNodes(g, NULL, &count));
	printf("graph_nodes: %zu nodes\n", count);
	count = 16;
	CHECK(cuGraphGetNodes(g, nodes, &count));
	for (size_t i = 0; i < count; i++) {
		CHECK(cuGraphNodeGetType(nodes[i], &type));
		printf("graph_nodes: node %zu type %d\n", i, (int)type);
	}
	count = 16;
	CHECK(cuGraphGetRootNodes(g, nodes, &count));
	printf("graph_nodes: %zu root, the memset: %s\n", count, count == 1 && nodes[0] == ms ? "yes" : "no");
	count = 16;
	CHECK(cuGraphGetEdges(g, from, to, NULL, &count));
	printf("graph_nodes: %zu edges\n", count);
	count = 16;
	CHECK(cuGraphNodeGetDependencies(em, nodes, NULL, &count));
	printf("graph_nodes: the empty node has %zu dependencies\n", count);
	count = 16;
	CHECK(cuGraphNodeGetDependentNodes(hn, nodes, NULL, &count));
	printf("graph_nodes: the host node has %zu dependents\n", count);

	CUDA_KERNEL_NODE_PARAMS kp;
	CHECK(cuGraphKernelNodeGetParams(kn, &kp));
	printf("graph_nodes: kernel node grid %u block %u n %d function same %s\n", kp.gridDimX, kp.blockDimX,
	       *(int *)kp.kernelParams[1], kp.func == inc ? "yes" : "no");
	CUDA_MEMSET_NODE_PARAMS mp;
	CHECK(cuGraphMemsetNodeGetParams(ms, &mp));
	printf("graph_nodes: memset node value %u width %zu\n", mp.value, mp.width);
	CUDA_HOST_NODE_PARAMS hp;
	CHECK(cuGraphHostNodeGetParams(hn, &hp));
	printf("graph_nodes: host node function same %s\n", hp.fn == on_host && hp.userData == &one ? "yes" : "no");
	CUevent got;
	CHECK(cuGraphEventRecordNodeGetEvent(er, &got));
	printf("graph_nodes: event node event same %s\n", got == ev ? "yes" : "no");
	CUgraphNode bad;
	printf("graph_nodes: a kernel node's memset params: %d\n", (int)cuGraphMemsetNodeGetParams(kn, &mp));
	printf("graph_nodes: a node that depends on itself: %d\n", (int)cuGraphAddDependencies(g, &kn, &kn, NULL, 1));
	(void)bad;

	CHECK(cuGraphInstantiate(&x, g, 0));
	for (int i = 0; i < 3; i++)
		CHECK(cuGraphLaunch(x, s));
	CHECK(cuStreamSynchronize(s));
	printf("graph_nodes: after 3 launches a[0] %u b[0] %u host ran %d times\n", first(a), first(b), host_runs);

	/* Set the memset to 20 in the executable only, then in the graph and
	 * update the executable from it. */
	m.value = 20;
	CHECK(cuGraphExecMemsetNodeSetParams(x, ms, &m, ctx));
	CHECK(cuGraphLaunch(x, s));
	CHECK(cuStreamSynchronize(s));
	printf("graph_nodes: exec memset 20: a[0] %u b[0] %u\n", first(a), first(b));
	m.value = 100;
	CHECK(cuGraphMemsetNodeSetParams(ms, &m));
	kp.kernelParams = inc_args;
	CHECK(cuGraphKernelNodeSetParams(kn, &kp));
	CUgraphExecUpdateResultInfo info;
	CHECK(cuGraphExecUpdate(x, g, &info));
	CHECK(cuGraphLaunch(x, s));
	CHECK(cuStreamSynchronize(s));
	printf("graph_nodes: updated (memset 100): a[0] %u b[0] %u result %d\n", first(a), first(b), (int)info.result);
	CHECK(cuGraphNodeSetEnabled(x, kn, 0));
	CHECK(cuGraphLaunch(x, s));
	CHECK(cuStreamSynchronize(s));
	printf("graph_nodes: kernel node disabled: a[0] %u b[0] %u host ran %d times\n", first(a), first(b), host_runs);

	/* Graph memory: alloc, fill, copy out, free, in a graph of its own. */
	CUgraph mg;
	CUgraphExec mx;
	CUDA_MEM_ALLOC_NODE_PARAMS ap = { 0 };
	CUdeviceptr freed, gm;
	void *fill_gm[] = { &gm, &v, &n };
	CHECK(cuGraphCreate(&mg, 0));
	ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	ap.bytesize = bytes;
	CHECK(cuGraphAddMemAllocNode(&al, mg, NULL, 0, &ap));
	gm = ap.dptr;
	CUgraphNode fk = kernel_node(mg, &al, 1, fill, fill_gm, n), gc;
	c.srcDevice = gm, c.dstDevice = b;
	CHECK(cuGraphAddMemcpyNode(&gc, mg, &fk, 1, &c, ctx));
	CHECK(cuGraphAddMemFreeNode(&fr, mg, &gc, 1, gm));
	CHECK(cuGraphMemFreeNodeGetParams(fr, &freed));
	printf("graph_nodes: free node frees the alloc node's memory %s\n", freed == ap.dptr ? "yes" : "no");
	CHECK(cuGraphInstantiate(&mx, mg, 0));
	CHECK(cuGraphLaunch(mx, s));
	CHECK(cuStreamSynchronize(s));
	printf("graph_nodes: graph memory filled with 9 and copied out: b[0] %u\n", first(b));
	CHECK(cuGraphExecDestroy(mx));
	CHECK(cuGraphDestroy(mg));

	CHECK(cuGraphClone(&clone, g));
	CHECK(cuGraphNodeFindInClone(&found, kn, clone));
	CHECK(cuGraphNodeGetType(found, &type));
	printf("graph_nodes: the kernel node's clone has type %d\n", (int)type);
	CHECK(cuGraphDestroyNode(em));
	CHECK(cuGraphGetNodes(g, NULL, &count));
	printf("graph_nodes: %zu nodes after destroying one\n", count);
	CHECK(cuGraphDebugDotPrint(g, "graph_nodes.dot", 0));
	FILE *f = fopen("graph_nodes.dot", "r");
	char line[64] = "";
	printf("graph_nodes: dot file starts with digraph: %s\n", f && fgets(line, sizeof(line), f) &&
	       !strncmp(line, "digraph", 7) ? "yes" : "no");
	if (f)
		fclose(f);
	remove("graph_nodes.dot");

	/* Capture: the dependency set, a host function captured (runs at
	 * every launch). */
	CUstreamCaptureStatus st;
	const CUgraphNode *deps;
	host_runs = 0;
	CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CHECK(cuLaunchKernel(fill, GRID(n), 1, 1, BLOCK, 1, 1, 0, s, fill_args, NULL));
	CHECK(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &count));
	CHECK(cuGraphNodeGetType(deps[0], &type));
	printf("graph_nodes: capture: %zu dependency, a kernel: %s\n", count, type == CU_GRAPH_NODE_TYPE_KERNEL ? "yes" : "no");
	CHECK(cuLaunchKernel(inc, GRID(n), 1, 1, BLOCK, 1, 1, 0, s, inc_args, NULL));
	CHECK(cuLaunchHostFunc(s, on_host, &one));
	CHECK(cuStreamEndCapture(s, &cap));
	CHECK(cuGraphGetNodes(cap, NULL, &count));
	printf("graph_nodes: captured %zu nodes\n", count);
	CUgraphExec cx;
	CHECK(cuGraphInstantiate(&cx, cap, 0));
	CHECK(cuGraphLaunch(cx, s));
	CHECK(cuGraphLaunch(cx, s));
	CHECK(cuStreamSynchronize(s));
	printf("graph_nodes: captured graph twice: a[0] %u host ran %d times\n", first(a), host_runs);

	CHECK(cuGraphExecDestroy(cx));
	CHECK(cuGraphExecDestroy(x));
	CHECK(cuGraphDestroy(cap));
	CHECK(cuGraphDestroy(clone));
	CHECK(cuGraphDestroy(child));
	CHECK(cuGraphDestroy(g));
	printf("graph_nodes: done\n");
	return 0;
}

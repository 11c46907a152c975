/*
 * ipc_pair [events|hold]: two processes share device memory through CUDA IPC,
 * as the processes of a job do. The parent fills a buffer, makes an IPC
 * handle of it and starts a child (this program again) with the handle;
 * the child opens it, checks every value, adds one to each with a kernel
 * and closes it; the parent then sees the child's writes. With "events"
 * an interprocess event, recorded by the child after its kernel, is what
 * the parent waits on. A damaged handle must be refused. With "hold" (a
 * test checkpoints both processes meanwhile and restores them) the child
 * opens the buffer and the event, says "child: holding" and sleeps 20 s;
 * then it opens a second buffer's handle, which the parent made before
 * the hold, and goes on with both. The holding child leads a session of
 * its own, so that criu may dump it alone. With "hold-graph" it also
 * holds a CUDA graph that records the parent's event (which checkpoints
 * do not cover) until the hold ends.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define N (2u << 20)                          /* u32: 8 MiB */

static CUfunction fill, inc;

static void context(void)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;

	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuModuleLoadData(&mod, load_kernel("kernels_b.cubin", NULL)));
	CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
	CHECK(cuModuleGetFunction(&inc, mod, "inc_u32"));
}

static void hex(const void *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", ((const unsigned char *)p)[i]);
}

static void unhex(const char *s, void *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned v;

		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			fail("bad handle text");
		((unsigned char *)p)[i] = (unsigned char)v;
	}
}

/* Every value of the buffer is want. */
static int all(CUdeviceptr d, unsigned want)
{
	unsigned *h = xmalloc(N * 4);
	int ok = 1;

	CHECK(cuMemcpyDtoH(h, d, N * 4));
	for (unsigned i = 0; i < N && ok; i++)
		ok = h[i] == want;
	free(h);
	return ok;
}

/* The second buffer's handle, opened after the hold: 9 in each value,
 * and one added. */
static void second(const char *text)
{
	CUipcMemHandle h;
	CUdeviceptr d2;
	int n = (int)N;
	void *args[] = { &d2, &n };

	unhex(text, &h, sizeof(h));
	CHECK(cuIpcOpenMemHandle(&d2, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
	printf("child: every value of the second buffer is the parent's: %s\n", all(d2, 9) ? "yes" : "NO");
	CHECK(cuLaunchKernel(inc, (N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	CHECK(cuCtxSynchronize());
	CHECK(cuIpcCloseMemHandle(d2));
}

static int child(const char *mem_text, const char *ev_text, const char *mem2_text, int graph)
{
	CUgraph g = NULL;
	CUgraphNode node;
	CUipcMemHandle h, bad;
	CUipcEventHandle eh;
	CUdeviceptr d;
	CUevent ev = NULL;
	int n = (int)N;
	void *args[] = { &d, &n };

	start("ipc_pair child");
	if (mem2_text)
		setsid();                    /* a session of its own: a test dumps it alone */
	context();
	if (ev_text) {                       /* (before the memory, as PyTorch does) */
		unhex(ev_text, &eh, sizeof(eh));
		CHECK(cuIpcOpenEventHandle(&ev, eh));
	}
	unhex(mem_text, &h, sizeof(h));
	bad = h;
	for (size_t i = 0; i < sizeof(bad.reserved); i++)
		bad.reserved[i] ^= (char)0x5a;
	printf("child: a damaged handle is %s\n", cuIpcOpenMemHandle(&d, bad, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) ?
	       "refused" : "ACCEPTED");
	CHECK(cuIpcOpenMemHandle(&d, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
	printf("child: every value is the parent's: %s\n", all(d, 7) ? "yes" : "NO");
	if (graph) {
		CHECK(cuGraphCreate(&g, 0));
		CHECK(cuGraphAddEventRecordNode(&node, g, NULL, 0, ev));
	}
	if (mem2_text) {
		printf("child: holding\n");
		fflush(stdout);
		sleep(20);
		second(mem2_text);
	}
	if (g)
		CHECK(cuGraphDestroy(g));
	CHECK(cuLaunchKernel(inc, (N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	if (ev) {
		CHECK(cuEventRecord(ev, NULL));
		CHECK(cuEventSynchronize(ev));
	}
	CHECK(cuCtxSynchronize());
	CHECK(cuIpcCloseMemHandle(d));
	printf("child: added one to each, closed the handle\n");
	return 0;
}

int main(int argc, char **argv)
{
	int hold = argc > 1 && !strncmp(argv[1], "hold", 4), events = hold || (argc > 1 && !strcmp(argv[1], "events"));
	int graph = argc > 1 && !strcmp(argv[1], "hold-graph");
	int n = (int)N, status;
	char mem_text[2 * sizeof(CUipcMemHandle) + 1], ev_text[2 * sizeof(CUipcEventHandle) + 1];
	char mem2_text[2 * sizeof(CUipcMemHandle) + 1];
	unsigned v = 7, v2 = 9;
	CUipcMemHandle h;
	CUipcEventHandle eh;
	CUdeviceptr d, d2 = 0;
	CUevent ev = NULL;
	pid_t pid;
	void *args[] = { &d, &v, &n }, *args2[] = { &d2, &v2, &n };

	if (argc > 2 && !strcmp(argv[1], "--child"))
		return child(argv[2], argc > 3 ? argv[3] : NULL, argc > 4 ? argv[4] : NULL, argc > 5);
	start("ipc_pair");
	context();
	CHECK(cuMemAlloc(&d, N * 4));
	CHECK(cuLaunchKernel(fill, (N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	if (hold) {
		CHECK(cuMemAlloc(&d2, N * 4));
		CHECK(cuLaunchKernel(fill, (N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args2, NULL));
		CHECK(cuIpcGetMemHandle(&h, d2));
		hex(&h, sizeof(h), mem2_text);
	}
	CHECK(cuCtxSynchronize());
	CHECK(cuIpcGetMemHandle(&h, d));
	hex(&h, sizeof(h), mem_text);
	if (events) {
		CHECK(cuEventCreate(&ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
		CHECK(cuIpcGetEventHandle(&eh, ev));
		hex(&eh, sizeof(eh), ev_text);
	}
	printf("parent: %u values of 7, handed to a child%s\n", N, events ? " with an interprocess event" : "");
	fflush(stdout);
	if ((pid = fork()) == 0) {
		execl("/proc/self/exe", argv[0], "--child", mem_text, events ? ev_text : (char *)NULL,
		      hold ? mem2_text : (char *)NULL, graph ? "graph" : (char *)NULL, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		fail("the child failed");
	if (ev)
		CHECK(cuEventSynchronize(ev));
	printf("parent: sees the child's writes: %s\n", all(d, 8) ? "yes" : "NO");
	if (hold)
		printf("parent: sees the child's writes to the second buffer: %s\n", all(d2, 10) ? "yes" : "NO");
	CHECK(cuMemFree(d));
	if (hold)
		CHECK(cuMemFree(d2));
	printf("done\n");
	return 0;
}

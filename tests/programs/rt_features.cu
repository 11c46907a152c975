/*
 * rt_features.cu: the CUDA runtime features an unmodified program uses,
 * each checked by the program itself and printed as facts that do not
 * change from run to run (so a run through Cicada must print exactly what
 * a native run prints): stream priorities, events and timing, host
 * functions and stream callbacks, a CUDA graph made by stream capture,
 * the stream-ordered allocator, a cooperative launch, unified addressing
 * queries, several host threads at once, and device printf between two
 * lines of the program's own.
 */
#include <cooperative_groups.h>
#include <cstring>
#include <pthread.h>
#include <unistd.h>
#include "rt_common.h"

#define EXPECT(cond, what)                                                            \
	do {                                                                          \
		if (!(cond)) {                                                        \
			printf("FAIL %s\n", what);                                    \
			failures++;                                                   \
		}                                                                     \
	} while (0)

extern "C" {
__global__ void rt_add(int *p, int n, int v)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] += v;
}

__global__ void rt_hello(int v)
{
	printf("device printf: value %d\n", v);
	printf("device printf: twice %d\n", 2 * v);
}

/* Each block writes its part, the grid waits, then reads its neighbour's. */
__global__ void rt_coop(int *a, int *b, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		a[i] = i * 3;
	cooperative_groups::this_grid().sync();
	if (i < n)
		b[i] = a[(i + blockDim.x) % n];
}
}

static const int N = 4096;

static int check_all(const int *h, int n, int want)
{
	for (int i = 0; i < n; i++)
		if (h[i] != want)
			return 0;
	return 1;
}

static void priorities(void)
{
	int least = 0, greatest = 0, got = 1;
	cudaStream_t s;

	CHECK_RT(cudaDeviceGetStreamPriorityRange(&least, &greatest));
	CHECK_RT(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest));
	CHECK_RT(cudaStreamGetPriority(s, &got));
	printf("priorities: least %d greatest %d, stream got %d\n", least, greatest, got);
	EXPECT(got == greatest, "stream priority");
	CHECK_RT(cudaStreamDestroy(s));
}

static void events(int *d)
{
	cudaEvent_t a, b;
	float ms = -1;

	CHECK_RT(cudaEventCreate(&a));
	CHECK_RT(cudaEventCreate(&b));
	CHECK_RT(cudaEventRecord(a, 0));
	for (int i = 0; i < 50; i++)
		rt_add<<<N / 256, 256>>>(d, N, 1);
	CHECK_RT(cudaEventRecord(b, 0));
	CHECK_RT(cudaEventSynchronize(b));
	CHECK_RT(cudaEventQuery(b));
	CHECK_RT(cudaEventElapsedTime(&ms, a, b));
	printf("events: elapsed time %s\n", ms >= 0 && ms < 10000 ? "measured" : "wrong");
	EXPECT(ms >= 0, "event timing");
	CHECK_RT(cudaEventDestroy(a));
	CHECK_RT(cudaEventDestroy(b));
}

/* --- host functions: they run in stream order, and the stream waits --- */
static int seen_by_host_func = -1, callback_status = -1;
static volatile int flag;

static void CUDART_CB read_pinned(void *p)
{
	seen_by_host_func = *(int *)p;
	usleep(50000);                       /* the stream must wait for this */
	*(int *)p = 7;
}

static void CUDART_CB after_stream(cudaStream_t s, cudaError_t status, void *p)
{
	callback_status = (int)status;
	*(int *)p += 1;
}

static void CUDART_CB raise_flag(void *p)
{
	flag = 1;
}

static void host_functions(int *d)
{
	int *pinned, spins = 0;
	cudaStream_t s;

	CHECK_RT(cudaStreamCreate(&s));
	CHECK_RT(cudaMallocHost(&pinned, sizeof(int)));
	CHECK_RT(cudaMemsetAsync(d, 0, N * sizeof(int), s));
	rt_add<<<N / 256, 256, 0, s>>>(d, N, 41);
	CHECK_RT(cudaMemcpyAsync(pinned, d, sizeof(int), cudaMemcpyDeviceToHost, s));
	CHECK_RT(cudaLaunchHostFunc(s, read_pinned, pinned));
	CHECK_RT(cudaStreamAddCallback(s, after_stream, pinned, 0));
	CHECK_RT(cudaStreamSynchronize(s));
	printf("host function saw %d, callback status %d, pinned now %d\n", seen_by_host_func, callback_status,
	       *pinned);
	EXPECT(seen_by_host_func == 41 && *pinned == 8, "host function order");
	/* The application waits on the host, making no CUDA call at all. */
	rt_add<<<N / 256, 256, 0, s>>>(d, N, 1);
	CHECK_RT(cudaLaunchHostFunc(s, raise_flag, NULL));
	while (!flag && spins++ < 10000)
		usleep(1000);
	printf("host function raised the flag while the program spun: %s\n", flag ? "yes" : "no");
	EXPECT(flag, "host function without a synchronising call");
	CHECK_RT(cudaStreamSynchronize(s));
	CHECK_RT(cudaFreeHost(pinned));
	CHECK_RT(cudaStreamDestroy(s));
}

static void graph(int *d, int *h)
{
	cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
	unsigned long long id = 0;
	cudaGraphExec_t exec;
	cudaGraph_t g;
	size_t nodes = 0;
	cudaStream_t s;

	CHECK_RT(cudaStreamCreate(&s));
	CHECK_RT(cudaMemset(d, 0, N * sizeof(int)));
	CHECK_RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	for (int v = 1; v <= 3; v++)
		rt_add<<<N / 256, 256, 0, s>>>(d, N, v);
	CHECK_RT(cudaStreamGetCaptureInfo(s, &st, &id));
	printf("graph: capturing %s\n", st == cudaStreamCaptureStatusActive ? "active" : "not active");
	CHECK_RT(cudaStreamEndCapture(s, &g));
	CHECK_RT(cudaStreamIsCapturing(s, &st));
	CHECK_RT(cudaGraphGetNodes(g, NULL, &nodes));
	CHECK_RT(cudaGraphInstantiate(&exec, g, 0));
	for (int i = 0; i < 5; i++)
		CHECK_RT(cudaGraphLaunch(exec, s));
	CHECK_RT(cudaStreamSynchronize(s));
	CHECK_RT(cudaMemcpy(h, d, N * sizeof(int), cudaMemcpyDeviceToHost));
	printf("graph: %zu nodes, after capture %s, 5 launches give %d\n", nodes,
	       st == cudaStreamCaptureStatusNone ? "not capturing" : "capturing", h[0]);
	EXPECT(nodes == 3 && check_all(h, N, 30), "graph launches");
	CHECK_RT(cudaGraphExecDestroy(exec));
	CHECK_RT(cudaGraphDestroy(g));
	CHECK_RT(cudaStreamDestroy(s));
}

/* A pool of the program's own, as RAPIDS memory resources make one: its
 * threshold, an allocation from it, what it says it holds, its access. */
static void own_pool(cudaStream_t s, int *h)
{
	cudaMemPoolProps props = {};
	cudaMemPool_t pool, cur;
	cudaMemLocation here = {};
	cudaMemAccessFlags access;
	unsigned long long threshold = 64ull << 20, used = 0, after = 0, high = 0, reserved = 0, zero = 0;
	size_t n = (4u << 20) / sizeof(int);
	int *p;

	props.allocType = cudaMemAllocationTypePinned;
	props.handleTypes = cudaMemHandleTypeNone;
	props.location.type = cudaMemLocationTypeDevice;
	props.location.id = 0;
	CHECK_RT(cudaMemPoolCreate(&pool, &props));
	CHECK_RT(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
	CHECK_RT(cudaMallocFromPoolAsync((void **)&p, n * sizeof(int), pool, s));
	CHECK_RT(cudaMemsetAsync(p, 0, n * sizeof(int), s));
	rt_add<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(p, (int)n, 5);
	CHECK_RT(cudaMemcpyAsync(h, p, 1024 * sizeof(int), cudaMemcpyDeviceToHost, s));
	CHECK_RT(cudaStreamSynchronize(s));
	EXPECT(check_all(h, 1024, 5), "an allocation from a pool of one's own");
	CHECK_RT(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
	CHECK_RT(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
	EXPECT(reserved >= used, "a pool reserves at least what it uses");
	CHECK_RT(cudaFreeAsync(p, s));
	CHECK_RT(cudaStreamSynchronize(s));
	CHECK_RT(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &after));
	CHECK_RT(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high));
	CHECK_RT(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
	CHECK_RT(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
	here.type = cudaMemLocationTypeDevice;
	here.id = 0;
	CHECK_RT(cudaMemPoolGetAccess(&access, pool, &here));
	printf("own pool: used %llu, then %llu; high %llu, reset %llu; its device's access %d\n", used, after, high,
	       zero, (int)access);
	CHECK_RT(cudaDeviceSetMemPool(0, pool));
	CHECK_RT(cudaDeviceGetMemPool(&cur, 0));
	EXPECT(cur == pool, "the device's current pool is the one set");
	CHECK_RT(cudaMemPoolDestroy(pool));
	CHECK_RT(cudaDeviceGetMemPool(&cur, 0));
	CHECK_RT(cudaDeviceGetDefaultMemPool(&pool, 0));
	EXPECT(cur == pool, "a destroyed pool leaves the default current");
}

/* Allocations freed in stream order come back for later ones. */
static void ordered_allocator(int *h)
{
	cudaMemPool_t pool;
	unsigned long long threshold = 1 << 20, got = 0;
	unsigned long long sum = 0;
	cudaStream_t s;

	CHECK_RT(cudaDeviceGetDefaultMemPool(&pool, 0));
	CHECK_RT(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
	CHECK_RT(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &got));
	CHECK_RT(cudaStreamCreate(&s));
	for (int round = 0; round < 64; round++) {
		int n = 256 * (1 + round % 7), *p;
		CHECK_RT(cudaMallocAsync(&p, n * sizeof(int), s));
		CHECK_RT(cudaMemsetAsync(p, 0, n * sizeof(int), s));
		rt_add<<<(n + 255) / 256, 256, 0, s>>>(p, n, round);
		CHECK_RT(cudaMemcpyAsync(h, p, n * sizeof(int), cudaMemcpyDeviceToHost, s));
		CHECK_RT(cudaFreeAsync(p, s));
		CHECK_RT(cudaStreamSynchronize(s));
		EXPECT(check_all(h, n, round), "stream-ordered allocation contents");
		sum += (unsigned long long)h[n - 1] * n;
	}
	printf("stream-ordered allocator: threshold %llu, 64 rounds, sum %llu\n", got, sum);
	own_pool(s, h);
	CHECK_RT(cudaStreamDestroy(s));
}

static void cooperative(int *h)
{
	int *a, *b, coop = 0, n = 8 * 256;
	void *args[] = { &a, &b, &n };

	CHECK_RT(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0));
	CHECK_RT(cudaMalloc(&a, n * sizeof(int)));
	CHECK_RT(cudaMalloc(&b, n * sizeof(int)));
	CHECK_RT(cudaLaunchCooperativeKernel((void *)rt_coop, dim3(8), dim3(256), args, 0, 0));
	CHECK_RT(cudaMemcpy(h, b, n * sizeof(int), cudaMemcpyDeviceToHost));
	int ok = 1;
	for (int i = 0; i < n; i++)
		ok &= h[i] == ((i + 256) % n) * 3;
	printf("cooperative launch: supported %d, grid-wide sync %s\n", coop, ok ? "held" : "broken");
	EXPECT(ok, "cooperative launch");
	CHECK_RT(cudaFree(a));
	CHECK_RT(cudaFree(b));
}

static const char *kind(cudaMemoryType t)
{
	return t == cudaMemoryTypeDevice ? "device" : t == cudaMemoryTypeHost ? "host" :
	       t == cudaMemoryTypeManaged ? "managed" : "unregistered";
}

static void unified_addressing(int *d)
{
	cudaPointerAttributes a;
	int uva = 0, *pinned, local = 0;

	CHECK_RT(cudaDeviceGetAttribute(&uva, cudaDevAttrUnifiedAddressing, 0));
	CHECK_RT(cudaMallocHost(&pinned, 4096));
	CHECK_RT(cudaPointerGetAttributes(&a, d + 10));
	printf("unified addressing %d; device pointer: %s, device %d, own address %s\n", uva, kind(a.type),
	       a.device, a.devicePointer == d + 10 ? "yes" : "no");
	CHECK_RT(cudaPointerGetAttributes(&a, pinned));
	printf("pinned pointer: %s, host address %s\n", kind(a.type), a.hostPointer == pinned ? "yes" : "no");
	CHECK_RT(cudaPointerGetAttributes(&a, &local));
	printf("stack pointer: %s\n", kind(a.type));
	CHECK_RT(cudaFreeHost(pinned));
}

/* Several host threads, each with its own stream and memory. */
struct worker_arg {
	int id;
	unsigned long long sum;
};

static void *thread_work(void *p)
{
	struct worker_arg *w = (struct worker_arg *)p;
	int *d, h[1024];
	cudaStream_t s;

	w->sum = 0;
	if (cudaStreamCreate(&s) || cudaMalloc(&d, sizeof(h)))
		return NULL;
	for (int round = 0; round < 50; round++) {
		cudaMemsetAsync(d, 0, sizeof(h), s);
		rt_add<<<4, 256, 0, s>>>(d, 1024, w->id * 1000 + round);
		cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, s);
		cudaStreamSynchronize(s);
		w->sum += check_all(h, 1024, w->id * 1000 + round) ? (unsigned)h[0] : 1000000007ull;
	}
	cudaFree(d);
	cudaStreamDestroy(s);
	return NULL;
}

static void threads(void)
{
	pthread_t t[4];
	struct worker_arg w[4];

	for (int i = 0; i < 4; i++) {
		w[i].id = i + 1;
		pthread_create(&t[i], NULL, thread_work, &w[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		printf("thread %d: sum %llu\n", w[i].id, w[i].sum);
		EXPECT(w[i].sum == 50ull * (w[i].id * 1000) + 1225, "host thread results");
	}
}

/* Output comes at a synchronisation: a device synchronise, then a
 * blocking copy (1 MiB of pageable memory). */
static void device_printf(void)
{
	static int big[1 << 18];
	int *d;

	CHECK_RT(cudaMalloc(&d, sizeof(big)));
	printf("before the kernel's output\n");
	fflush(stdout);
	rt_hello<<<1, 1>>>(21);
	CHECK_RT(cudaDeviceSynchronize());
	printf("after the kernel's output\n");
	rt_hello<<<1, 1>>>(5);
	CHECK_RT(cudaMemcpy(big, d, sizeof(big), cudaMemcpyDeviceToHost));
	printf("after the copy\n");
	CHECK_RT(cudaFree(d));
}

int main(void)
{
	static int h[N];
	int *d;

	CHECK_RT(cudaMalloc(&d, N * sizeof(int)));
	CHECK_RT(cudaMemset(d, 0, N * sizeof(int)));
	priorities();
	events(d);
	host_functions(d);
	graph(d, h);
	ordered_allocator(h);
	cooperative(h);
	unified_addressing(d);
	threads();
	device_printf();
	CHECK_RT(cudaFree(d));
	if (failures) {
		printf("FAILED (%d)\n", failures);
		return 1;
	}
	printf("done\n");
	return 0;
}

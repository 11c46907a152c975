/*
 * rt_basic.cu: a CUDA runtime program built the normal way (nvcc's
 * default static runtime; tests.mk also builds it with -cudart shared).
 * It covers device properties, memory, kernels, constant and device
 * symbols, streams with priorities, events, pointer attributes, pinned
 * memory and several host threads at once. Every result is checked on the
 * host; the output is deterministic, so a run through Cicada must print
 * exactly what a native run prints.
 */
#include <cstdio>
#include <cstring>
#include <pthread.h>
#include "rt_common.h"

extern "C" {
__constant__ float rt_coeff[4];
__device__ int rt_counter;

__global__ void rt_axpy(float a, const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = a * x[i] + y[i];
}

__global__ void rt_coeff_apply(float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] *= rt_coeff[i & 3];
	if (i == 0)
		atomicAdd(&rt_counter, 1);
}

__global__ void rt_iota(int *p, int n, int base)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] = base + i;
}
}


static void expect(const char *what, bool ok)
{
	printf("%s %s\n", ok ? "ok  " : "FAIL", what);
	failures += !ok;
}

static void properties(void)
{
	cudaDeviceProp p;
	int count = 0, v = 0;

	CHECK_RT(cudaGetDeviceCount(&count));
	memset(&p, 0, sizeof(p));
	CHECK_RT(cudaGetDeviceProperties(&p, 0));
	printf("devices %d: %s, sm_%d%d, %d SMs, %zu MiB, warp %d\n", count, p.name, p.major, p.minor,
	       p.multiProcessorCount, p.totalGlobalMem >> 20, p.warpSize);
	/* Cicada serves managed memory without concurrent host access, and
	 * says so (README): these four are its own, not the GPU's; and so
	 * are the features it does not serve (interposer/device.c), which it
	 * says the device lacks. */
	printf("managed memory %d\n", p.managedMemory);
	p.concurrentManagedAccess = p.pageableMemoryAccess = 0;
	p.pageableMemoryAccessUsesHostPageTables = p.directManagedMemAccessFromHost = 0;
	p.gpuDirectRDMASupported = p.gpuDirectRDMAWritesOrdering = 0;
	p.gpuDirectRDMAFlushWritesOptions = p.memoryPoolSupportedHandleTypes = 0;
	p.timelineSemaphoreInteropSupported = p.sparseCudaArraySupported = p.deferredMappingCudaArraySupported = 0;
	printf("cudaDeviceProp hash %016llx\n", fnv(&p, sizeof(p)));
	CHECK_RT(cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerBlock, 0));
	printf("max threads per block %d\n", v);
	CHECK_RT(cudaDriverGetVersion(&v));
	expect("driver version is CUDA 13 or newer", v >= 13000);
}

static void memory_and_kernels(void)
{
	const int n = 4096;
	float hx[n], hy[n], out[n], coeff[4] = { 0.5f, 2.0f, -1.0f, 4.0f };
	float *x, *y;
	int counter = 0;

	for (int i = 0; i < n; i++) {
		hx[i] = (float)i;
		hy[i] = (float)(n - i);
	}
	CHECK_RT(cudaMalloc(&x, n * sizeof(float)));
	CHECK_RT(cudaMalloc(&y, n * sizeof(float)));
	CHECK_RT(cudaMemcpy(x, hx, sizeof(hx), cudaMemcpyHostToDevice));
	CHECK_RT(cudaMemcpy(y, hy, sizeof(hy), cudaMemcpyHostToDevice));
	CHECK_RT(cudaMemcpyToSymbol(rt_coeff, coeff, sizeof(coeff)));
	CHECK_RT(cudaMemcpyToSymbol(rt_counter, &counter, sizeof(counter)));
	rt_axpy<<<(n + 255) / 256, 256>>>(2.0f, x, y, n);
	CHECK_RT(cudaGetLastError());
	rt_coeff_apply<<<(n + 255) / 256, 256>>>(y, n);
	rt_coeff_apply<<<(n + 255) / 256, 256>>>(y, n);
	CHECK_RT(cudaDeviceSynchronize());
	CHECK_RT(cudaMemcpy(out, y, sizeof(out), cudaMemcpyDeviceToHost));
	CHECK_RT(cudaMemcpyFromSymbol(&counter, rt_counter, sizeof(counter)));
	bool ok = true;
	for (int i = 0; i < n; i++)
		ok &= out[i] == (2.0f * hx[i] + hy[i]) * coeff[i & 3] * coeff[i & 3];
	expect("axpy and constant coefficients", ok);
	printf("device counter %d\n", counter);
	CHECK_RT(cudaMemset(y, 0, n * sizeof(float)));
	CHECK_RT(cudaMemcpy(out, y, sizeof(out), cudaMemcpyDeviceToHost));
	expect("memset", out[0] == 0.0f && out[n - 1] == 0.0f);

	cudaPointerAttributes a;
	CHECK_RT(cudaPointerGetAttributes(&a, x));
	printf("pointer type of a device allocation: %d\n", (int)a.type);
	CHECK_RT(cudaFree(x));
	CHECK_RT(cudaFree(y));
}

static void streams_and_events(void)
{
	const int n = 1 << 16;
	int least = 0, greatest = 0, prio = 0, *d, *h;
	cudaStream_t s;
	cudaEvent_t start, stop;
	float ms = -1;

	CHECK_RT(cudaDeviceGetStreamPriorityRange(&least, &greatest));
	printf("stream priorities %d..%d\n", least, greatest);
	CHECK_RT(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest));
	CHECK_RT(cudaStreamGetPriority(s, &prio));
	expect("stream priority kept", prio == greatest);
	CHECK_RT(cudaMallocHost(&h, n * sizeof(int)));
	CHECK_RT(cudaMalloc(&d, n * sizeof(int)));
	CHECK_RT(cudaEventCreate(&start));
	CHECK_RT(cudaEventCreate(&stop));
	CHECK_RT(cudaEventRecord(start, s));
	rt_iota<<<n / 256, 256, 0, s>>>(d, n, 7);
	CHECK_RT(cudaMemcpyAsync(h, d, n * sizeof(int), cudaMemcpyDeviceToHost, s));
	CHECK_RT(cudaEventRecord(stop, s));
	CHECK_RT(cudaEventSynchronize(stop));
	CHECK_RT(cudaEventElapsedTime(&ms, start, stop));
	expect("event timing", ms >= 0);
	bool ok = true;
	for (int i = 0; i < n; i++)
		ok &= h[i] == 7 + i;
	expect("kernel and async copy on a priority stream", ok);
	CHECK_RT(cudaStreamQuery(s));
	CHECK_RT(cudaEventDestroy(start));
	CHECK_RT(cudaEventDestroy(stop));
	CHECK_RT(cudaStreamDestroy(s));
	CHECK_RT(cudaFreeHost(h));
	CHECK_RT(cudaFree(d));
}

static void *host_thread(void *arg)
{
	long t = (long)arg, sum = 0;
	const int n = 1000;
	int *d, h[n];
	cudaStream_t s;

	CHECK_RT(cudaSetDevice(0));
	CHECK_RT(cudaStreamCreate(&s));
	CHECK_RT(cudaMalloc(&d, sizeof(h)));
	for (int round = 0; round < 20; round++) {
		rt_iota<<<(n + 127) / 128, 128, 0, s>>>(d, n, (int)(t * 100000 + round));
		CHECK_RT(cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, s));
		CHECK_RT(cudaStreamSynchronize(s));
		for (int i = 0; i < n; i++)
			sum += h[i];
	}
	CHECK_RT(cudaFree(d));
	CHECK_RT(cudaStreamDestroy(s));
	return (void *)sum;
}

static void host_threads(void)
{
	pthread_t t[4];
	void *sum;

	for (long i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, host_thread, (void *)i);
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], &sum);
		printf("thread %d sum %ld\n", i, (long)sum);
	}
}

static void errors(void)
{
	cudaError_t e = cudaSetDevice(99);

	printf("cudaSetDevice(99): %s\n", cudaGetErrorName(e));
	cudaGetLastError();
	CHECK_RT(cudaSetDevice(0));
	CHECK_RT(cudaDeviceSynchronize());
}

int main(void)
{
	properties();
	memory_and_kernels();
	streams_and_events();
	host_threads();
	errors();
	printf("%s\n", failures ? "FAILED" : "done");
	return failures != 0;
}

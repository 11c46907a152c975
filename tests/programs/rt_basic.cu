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

static int failures;

#define CHECK(call)                                                                   \
	do {                                                                          \
		cudaError_t e_ = (call);                                              \
		if (e_ != cudaSuccess) {                                              \
			printf("FAIL %s: %s\n", #call, cudaGetErrorName(e_));         \
			failures++;                                                   \
		}                                                                     \
	} while (0)

static void expect(const char *what, bool ok)
{
	printf("%s %s\n", ok ? "ok  " : "FAIL", what);
	failures += !ok;
}

static unsigned long long fnv(const void *p, size_t n)
{
	unsigned long long h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
	return h;
}

static void properties(void)
{
	cudaDeviceProp p;
	int count = 0, v = 0;

	CHECK(cudaGetDeviceCount(&count));
	memset(&p, 0, sizeof(p));
	CHECK(cudaGetDeviceProperties(&p, 0));
	printf("devices %d: %s, sm_%d%d, %d SMs, %zu MiB, warp %d\n", count, p.name, p.major, p.minor,
	       p.multiProcessorCount, p.totalGlobalMem >> 20, p.warpSize);
	printf("cudaDeviceProp hash %016llx\n", fnv(&p, sizeof(p)));
	CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerBlock, 0));
	printf("max threads per block %d\n", v);
	CHECK(cudaDriverGetVersion(&v));
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
	CHECK(cudaMalloc(&x, n * sizeof(float)));
	CHECK(cudaMalloc(&y, n * sizeof(float)));
	CHECK(cudaMemcpy(x, hx, sizeof(hx), cudaMemcpyHostToDevice));
	CHECK(cudaMemcpy(y, hy, sizeof(hy), cudaMemcpyHostToDevice));
	CHECK(cudaMemcpyToSymbol(rt_coeff, coeff, sizeof(coeff)));
	CHECK(cudaMemcpyToSymbol(rt_counter, &counter, sizeof(counter)));
	rt_axpy<<<(n + 255) / 256, 256>>>(2.0f, x, y, n);
	CHECK(cudaGetLastError());
	rt_coeff_apply<<<(n + 255) / 256, 256>>>(y, n);
	rt_coeff_apply<<<(n + 255) / 256, 256>>>(y, n);
	CHECK(cudaDeviceSynchronize());
	CHECK(cudaMemcpy(out, y, sizeof(out), cudaMemcpyDeviceToHost));
	CHECK(cudaMemcpyFromSymbol(&counter, rt_counter, sizeof(counter)));
	bool ok = true;
	for (int i = 0; i < n; i++)
		ok &= out[i] == (2.0f * hx[i] + hy[i]) * coeff[i & 3] * coeff[i & 3];
	expect("axpy and constant coefficients", ok);
	printf("device counter %d\n", counter);
	CHECK(cudaMemset(y, 0, n * sizeof(float)));
	CHECK(cudaMemcpy(out, y, sizeof(out), cudaMemcpyDeviceToHost));
	expect("memset", out[0] == 0.0f && out[n - 1] == 0.0f);

	cudaPointerAttributes a;
	CHECK(cudaPointerGetAttributes(&a, x));
	printf("pointer type of a device allocation: %d\n", (int)a.type);
	CHECK(cudaFree(x));
	CHECK(cudaFree(y));
}

static void streams_and_events(void)
{
	const int n = 1 << 16;
	int least = 0, greatest = 0, prio = 0, *d, *h;
	cudaStream_t s;
	cudaEvent_t start, stop;
	float ms = -1;

	CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
	printf("stream priorities %d..%d\n", least, greatest);
	CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest));
	CHECK(cudaStreamGetPriority(s, &prio));
	expect("stream priority kept", prio == greatest);
	CHECK(cudaMallocHost(&h, n * sizeof(int)));
	CHECK(cudaMalloc(&d, n * sizeof(int)));
	CHECK(cudaEventCreate(&start));
	CHECK(cudaEventCreate(&stop));
	CHECK(cudaEventRecord(start, s));
	rt_iota<<<n / 256, 256, 0, s>>>(d, n, 7);
	CHECK(cudaMemcpyAsync(h, d, n * sizeof(int), cudaMemcpyDeviceToHost, s));
	CHECK(cudaEventRecord(stop, s));
	CHECK(cudaEventSynchronize(stop));
	CHECK(cudaEventElapsedTime(&ms, start, stop));
	expect("event timing", ms >= 0);
	bool ok = true;
	for (int i = 0; i < n; i++)
		ok &= h[i] == 7 + i;
	expect("kernel and async copy on a priority stream", ok);
	CHECK(cudaStreamQuery(s));
	CHECK(cudaEventDestroy(start));
	CHECK(cudaEventDestroy(stop));
	CHECK(cudaStreamDestroy(s));
	CHECK(cudaFreeHost(h));
	CHECK(cudaFree(d));
}

static void *host_thread(void *arg)
{
	long t = (long)arg, sum = 0;
	const int n = 1000;
	int *d, h[n];
	cudaStream_t s;

	CHECK(cudaSetDevice(0));
	CHECK(cudaStreamCreate(&s));
	CHECK(cudaMalloc(&d, sizeof(h)));
	for (int round = 0; round < 20; round++) {
		rt_iota<<<(n + 127) / 128, 128, 0, s>>>(d, n, (int)(t * 100000 + round));
		CHECK(cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, s));
		CHECK(cudaStreamSynchronize(s));
		for (int i = 0; i < n; i++)
			sum += h[i];
	}
	CHECK(cudaFree(d));
	CHECK(cudaStreamDestroy(s));
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
	CHECK(cudaSetDevice(0));
	CHECK(cudaDeviceSynchronize());
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

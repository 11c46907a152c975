/*
 * rt_steps.cu: a CUDA runtime program (static runtime) that works in
 * steps with pauses between them, for checkpoint/restore tests: device
 * memory, a __device__ counter, a stream and an event carry state from
 * step to step, and each step prints a checksum. A run checkpointed and
 * restored mid-way must print exactly what an uninterrupted run prints.
 * Usage: rt_steps [STEPS [MS [MODE]]]. MODE "hostfn" also runs a host
 * function and a stream-ordered allocation each step (both must go on
 * working after a restore); "graph" also launches a captured CUDA graph
 * each step (a checkpoint must refuse it, and the run go on); "managed"
 * also writes managed memory on the host, updates it in a kernel and
 * reads it back each step (it must come back whole after a restore).
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

extern "C" {
__device__ unsigned long long rt_step_count;

__global__ void rt_managed(unsigned *m, int n, unsigned step)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		m[i] += step * 3u + (unsigned)i;
}

__global__ void rt_step(unsigned *p, int n, unsigned step)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] = p[i] * 1664525u + 1013904223u + step;
	if (i == 0)
		rt_step_count++;
}
}

static unsigned long long host_steps;
static unsigned *managed;
static const int managed_n = 1 << 16;

static void CUDART_CB count_step(void *p)
{
	host_steps++;
}

/* A graph of one kernel launch, captured on s. */
static cudaGraphExec_t capture(unsigned *d, int n, cudaStream_t s)
{
	cudaGraphExec_t exec = NULL;
	cudaGraph_t g;

	if (cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal))
		return NULL;
	rt_step<<<n / 256, 256, 0, s>>>(d, n, 0u);
	if (cudaStreamEndCapture(s, &g) || cudaGraphInstantiate(&exec, g, 0))
		return NULL;
	return exec;
}

/* The extra work of a mode, queued on s after the step's kernel. */
static int extra(const char *mode, unsigned *d, int n, unsigned step, cudaStream_t s, cudaGraphExec_t exec)
{
	unsigned *tmp;

	if (!strcmp(mode, "graph"))
		return cudaGraphLaunch(exec, s) != cudaSuccess;
	if (!strcmp(mode, "managed")) {
		cudaStreamSynchronize(s);             /* no host access while kernels run */
		managed[step * 4099 % managed_n] += 7;
		managed[step * 257 % managed_n] = step;
		rt_managed<<<managed_n / 256, 256, 0, s>>>(managed, managed_n, step);
		return cudaGetLastError() != cudaSuccess;
	}
	if (strcmp(mode, "hostfn"))
		return 0;
	return cudaMallocAsync(&tmp, n * sizeof(unsigned), s) ||
	       cudaMemcpyAsync(tmp, d, n * sizeof(unsigned), cudaMemcpyDeviceToDevice, s) ||
	       cudaLaunchHostFunc(s, count_step, NULL) || cudaFreeAsync(tmp, s);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 3 ? argv[3] : "plain";
	cudaGraphExec_t exec = NULL;
	const int n = 1 << 20;
	int steps = argc > 1 ? atoi(argv[1]) : 10, ms = argc > 2 ? atoi(argv[2]) : 150;
	unsigned *d, *h;
	unsigned long long count = 0;
	cudaStream_t s;
	cudaEvent_t done;

	if (cudaMalloc(&d, n * sizeof(unsigned)) || cudaMallocHost(&h, n * sizeof(unsigned)) ||
	    cudaStreamCreate(&s) || cudaEventCreateWithFlags(&done, cudaEventDisableTiming) ||
	    cudaMemsetAsync(d, 0, n * sizeof(unsigned), s)) {
		printf("setup failed: %s\n", cudaGetErrorString(cudaGetLastError()));
		return 1;
	}
	if (!strcmp(mode, "managed") && cudaMallocManaged(&managed, managed_n * sizeof(unsigned))) {
		printf("managed allocation failed\n");
		return 1;
	}
	if (!strcmp(mode, "graph") && !(exec = capture(d, n, s))) {
		printf("graph capture failed\n");
		return 1;
	}
	for (int step = 1; step <= steps; step++) {
		unsigned long long sum = 0;
		rt_step<<<n / 256, 256, 0, s>>>(d, n, (unsigned)step);
		if (extra(mode, d, n, (unsigned)step, s, exec)) {
			printf("step %d: %s work failed\n", step, mode);
			return 1;
		}
		cudaMemcpyAsync(h, d, n * sizeof(unsigned), cudaMemcpyDeviceToHost, s);
		cudaEventRecord(done, s);
		if (cudaEventSynchronize(done)) {
			printf("step %d failed: %s\n", step, cudaGetErrorString(cudaGetLastError()));
			return 1;
		}
		for (int i = 0; i < n; i++)
			sum += (unsigned long long)h[i] * (unsigned)(i | 1);
		for (int i = 0; managed && i < managed_n; i++)
			sum += (unsigned long long)managed[i] * (unsigned)(i + 3);
		printf("step %d checksum %016llx\n", step, sum);
		fflush(stdout);
		struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
		while (nanosleep(&t, &t))
			;
	}
	cudaMemcpyFromSymbol(&count, rt_step_count, sizeof(count));
	printf("device steps %llu, host functions %llu\ndone\n", count, host_steps);
	return 0;
}

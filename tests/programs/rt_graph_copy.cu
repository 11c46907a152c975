/*
 * rt_graph_copy.cu: copies of pageable memory captured into a CUDA graph
 * (as HeCBench's graphExecution does): the graph copies the program's
 * input to the device, steps it in a kernel and copies it back at every
 * launch, from and to the program's memory as it is then. Each launch
 * gets new input; the output of each is checked and printed, so a run
 * through Cicada must print what a native run prints. A remote server
 * cannot reach the program's memory during a launch: there the capture
 * is refused with cudaErrorStreamCaptureUnsupported (the program says so
 * and stops).
 */
#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" __global__ void rt_step(unsigned *p, int n, unsigned step)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] = p[i] * 1664525u + 1013904223u + step;
}

int main()
{
	const int n = 1 << 16;
	std::vector<unsigned> in(n), out(n);
	unsigned *d;
	cudaStream_t s;
	cudaGraph_t g;
	cudaGraphExec_t exec;
	cudaError_t e;

	if (cudaMalloc(&d, n * sizeof(unsigned)) || cudaStreamCreate(&s) ||
	    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal)) {
		printf("setup failed\n");
		return 1;
	}
	if ((e = cudaMemcpyAsync(d, in.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice, s))) {
		printf("capturing a copy of pageable memory: %s\n", cudaGetErrorName(e));
		cudaStreamEndCapture(s, &g);
		return 0;
	}
	rt_step<<<n / 256, 256, 0, s>>>(d, n, 5u);
	if (cudaMemcpyAsync(out.data(), d, n * sizeof(unsigned), cudaMemcpyDeviceToHost, s) ||
	    cudaStreamEndCapture(s, &g) || cudaGraphInstantiate(&exec, g, 0)) {
		printf("capture failed: %s\n", cudaGetErrorString(cudaGetLastError()));
		return 1;
	}
	for (unsigned launch = 1; launch <= 3; launch++) {
		unsigned long long sum = 0;
		int right = 1;
		for (int i = 0; i < n; i++)
			in[i] = i * launch + 7;
		if (cudaGraphLaunch(exec, s) || cudaStreamSynchronize(s)) {
			printf("launch %u failed: %s\n", launch, cudaGetErrorString(cudaGetLastError()));
			return 1;
		}
		for (int i = 0; i < n; i++) {
			right &= out[i] == in[i] * 1664525u + 1013904223u + 5u;
			sum += (unsigned long long)out[i] * (unsigned)(i | 1);
		}
		printf("launch %u: output %s, checksum %016llx\n", launch, right ? "right" : "WRONG", sum);
	}
	cudaGraphExecDestroy(exec);
	cudaGraphDestroy(g);
	printf("done\n");
	return 0;
}

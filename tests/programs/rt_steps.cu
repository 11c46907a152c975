/*
 * rt_steps.cu: a CUDA runtime program (static runtime) that works in
 * steps with pauses between them, for checkpoint/restore tests: device
 * memory, a __device__ counter, a stream and an event carry state from
 * step to step, and each step prints a checksum, and whether the time
 * between two timing events recorded before the first step still reads
 * (PyTorch's DDP reads its timing events a step after recording them).
 * A run checkpointed and restored mid-way must print exactly what an
 * uninterrupted run prints.
 * Usage: rt_steps [STEPS [MS [MODE]]]. MODE "hostfn" also runs a host
 * function and a stream-ordered allocation each step (both must go on
 * working after a restore); "graph" also launches a captured CUDA graph
 * each step; "graphhost" one that allocates graph memory (a checkpoint
 * must refuse it, and the run go on); "managed"
 * also writes managed memory on the host, updates it in a kernel and
 * reads it back each step (it must come back whole after a restore);
 * "mapped" does the same with malloc'd memory registered mapped
 * (cudaHostRegisterMapped, through its device pointer: a remote client's
 * device sees a mirror of it);
 * "objects" holds what a checkpoint carries by description: a graph built
 * node by node (a kernel, a child graph, an event record) whose exec gets
 * new kernel parameters every other step, a CUDA array read through a
 * texture object, and memory the program maps itself through the VMM API
 * (driver entry points from the runtime, as PyTorch gets them), made
 * among many small reservations of its own (more than a gpu-server's
 * 1 GiB slab holds, every other one freed); each step writes a row of the
 * array, launches the exec and steps the VMM memory.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuda.h>

extern "C" {
__device__ unsigned long long rt_step_count;

__global__ void rt_managed(unsigned *m, int n, unsigned step)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		m[i] += step * 3u + (unsigned)i;
}

__global__ void rt_tex_2d(cudaTextureObject_t t, float *out, int w, int h)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
	if (x < w && y < h)
		out[y * w + x] = tex2D<float>(t, x + 0.5f, y + 0.5f) + 1.0f;
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
static unsigned *managed, *mapped_dev;       /* mapped: registered memory and its device pointer */
static const int managed_n = 1 << 16;

static void CUDART_CB count_step(void *p)
{
	host_steps++;
}

/* A graph of one kernel launch, captured on s; with a host function,
 * the kernel then a host function (which runs at every launch). */
static cudaGraphExec_t capture(unsigned *d, int n, cudaStream_t s, int host)
{
	cudaGraphExec_t exec = NULL;
	cudaGraph_t g;

	if (cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal))
		return NULL;
	rt_step<<<n / 256, 256, 0, s>>>(d, n, 0u);
	if (host && cudaLaunchHostFunc(s, count_step, NULL))
		return NULL;
	if (cudaStreamEndCapture(s, &g) || cudaGraphInstantiate(&exec, g, 0))
		return NULL;
	return exec;
}

/* --- mode "objects" --- */
enum { OW = 64, OH = 16, ON = 1 << 16 };

static struct {
	cudaArray_t array;
	cudaTextureObject_t tex;
	float *tout, *th;
	cudaGraphExec_t exec;
	cudaGraphNode_t knode;
	unsigned *gbuf, *vmm;
	int ng, nv;
} ob;

static void *driver(const char *name)
{
	void *f = NULL;
	cudaDriverEntryPointQueryResult q;

	return cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &q) || q != cudaDriverEntryPointSuccess ?
		       NULL : f;
}

/* Device memory of the program's own: reserve, create, map, set access;
 * the handle is released while mapped. */
static unsigned *vmm_alloc(size_t bytes)
{
	CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long) =
		(CUresult (*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long))driver("cuMemAddressReserve");
	CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long) =
		(CUresult (*)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long))
			driver("cuMemCreate");
	CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) =
		(CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long))driver("cuMemMap");
	CUresult (*access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t) =
		(CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t))driver("cuMemSetAccess");
	CUresult (*release)(CUmemGenericAllocationHandle) =
		(CUresult (*)(CUmemGenericAllocationHandle))driver("cuMemRelease");
	CUresult (*gran)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags) =
		(CUresult (*)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags))
			driver("cuMemGetAllocationGranularity");
	CUmemAllocationProp prop = {};
	CUmemAccessDesc rw = {};
	CUmemGenericAllocationHandle h;
	CUdeviceptr va;
	size_t g;

	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	rw.location = prop.location;
	rw.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	if (!reserve || !create || !map || !access || !release || !gran || gran(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM))
		return NULL;
	bytes = (bytes + g - 1) / g * g;
	if (reserve(&va, bytes, 0, 0, 0) || create(&h, bytes, &prop, 0) || map(va, bytes, 0, h, 0) ||
	    access(va, bytes, &rw, 1) || release(h))
		return NULL;
	return (unsigned *)(uintptr_t)va;
}

/* CROWD reservations of one granule, kept empty, every other one freed:
 * the VMM memory is made among them, and what is kept must come back
 * where it was. */
#define CROWD 600

static int vmm_crowd(void)
{
	CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long) =
		(CUresult (*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long))driver("cuMemAddressReserve");
	CUresult (*release)(CUdeviceptr, size_t) = (CUresult (*)(CUdeviceptr, size_t))driver("cuMemAddressFree");
	static CUdeviceptr v[CROWD];
	const size_t g = 2u << 20;

	if (!reserve || !release)
		return 1;
	for (int i = 0; i < CROWD; i++)
		if (reserve(&v[i], g, 0, 0, 0))
			return 1;
	for (int i = 1; i < CROWD; i += 2)
		if (release(v[i], g))
			return 1;
	return 0;
}

static int objects_setup(cudaStream_t s)
{
	cudaChannelFormatDesc f = cudaCreateChannelDesc<float>();
	cudaResourceDesc r = {};
	cudaTextureDesc t = {};
	cudaGraph_t g, child;
	cudaGraphNode_t cnode, child_k, ev_node;
	cudaKernelNodeParams k = {};
	cudaEvent_t ev;
	void *args[3];
	unsigned zero = 0, one = 1;
	float h[OW * OH];

	for (int i = 0; i < OW * OH; i++)
		h[i] = (float)(i % 97);
	ob.ng = ON;
	ob.nv = ON;
	/* RT_STEPS_SKIP (diagnosis): "vmm" takes cudaMalloc memory instead,
	 * "hostcopy" leaves the array's first contents zero. */
	const char *skip = getenv("RT_STEPS_SKIP") ? getenv("RT_STEPS_SKIP") : "";
	if (cudaMallocArray(&ob.array, &f, OW, OH) ||
	    (!strstr(skip, "hostcopy") && cudaMemcpy2DToArray(ob.array, 0, 0, h, OW * sizeof(float), OW * sizeof(float),
							       OH, cudaMemcpyHostToDevice)))
		return 1;
	r.resType = cudaResourceTypeArray;
	r.res.array.array = ob.array;
	t.filterMode = cudaFilterModePoint;
	t.readMode = cudaReadModeElementType;
	if (cudaCreateTextureObject(&ob.tex, &r, &t, NULL) || cudaMalloc(&ob.tout, sizeof(h)) ||
	    cudaMallocHost(&ob.th, sizeof(h)) || cudaMalloc(&ob.gbuf, ON * sizeof(unsigned)) ||
	    cudaMemset(ob.gbuf, 0, ON * sizeof(unsigned)) ||
	    (strstr(skip, "vmm") ? cudaMalloc(&ob.vmm, ON * sizeof(unsigned)) != cudaSuccess :
				   vmm_crowd() || !(ob.vmm = vmm_alloc(ON * sizeof(unsigned)))) ||
	    cudaMemset(ob.vmm, 0, ON * sizeof(unsigned)))
		return 1;
	/* kernel -> child graph (a kernel) -> event record */
	k.func = (void *)rt_step;
	k.gridDim = dim3(ON / 256);
	k.blockDim = dim3(256);
	k.kernelParams = args;
	args[0] = &ob.gbuf, args[1] = &ob.ng, args[2] = &zero;
	if (cudaGraphCreate(&g, 0) || cudaGraphCreate(&child, 0) || cudaEventCreate(&ev) ||
	    cudaGraphAddKernelNode(&ob.knode, g, NULL, 0, &k))
		return 1;
	args[2] = &one;
	if (cudaGraphAddKernelNode(&child_k, child, NULL, 0, &k) ||
	    cudaGraphAddChildGraphNode(&cnode, g, &ob.knode, 1, child) ||
	    cudaGraphAddEventRecordNode(&ev_node, g, &cnode, 1, ev) || cudaGraphInstantiate(&ob.exec, g, 0) ||
	    cudaGraphDestroy(child))
		return 1;
	return 0;
}

/* A row of the array from device memory, the texture read, the exec
 * (new parameters on odd steps), the VMM memory stepped. */
static int objects_step(unsigned *d, unsigned step, cudaStream_t s)
{
	cudaKernelNodeParams k = {};
	void *args[] = { &ob.gbuf, &ob.ng, &step };
	int row = (int)(step % OH);

	if (cudaMemcpy2DToArrayAsync(ob.array, 0, row, d + step * 131, OW * sizeof(float), OW * sizeof(float), 1,
				     cudaMemcpyDeviceToDevice, s))
		return 1;
	rt_tex_2d<<<dim3(OW / 32, OH), 32, 0, s>>>(ob.tex, ob.tout, OW, OH);
	if (step % 2) {
		k.func = (void *)rt_step;
		k.gridDim = dim3(ON / 256);
		k.blockDim = dim3(256);
		k.kernelParams = args;
		if (cudaGraphExecKernelNodeSetParams(ob.exec, ob.knode, &k))
			return 1;
	}
	rt_step<<<ON / 256, 256, 0, s>>>(ob.vmm, ob.nv, step + 7);
	return cudaGraphLaunch(ob.exec, s) != cudaSuccess || cudaGetLastError() != cudaSuccess;
}

/* What the objects hold, for the step's checksum. */
static unsigned long long objects_sum(cudaStream_t s)
{
	static unsigned hv[ON];
	unsigned long long sum = 0;

	if (cudaMemcpyAsync(ob.th, ob.tout, OW * OH * sizeof(float), cudaMemcpyDeviceToHost, s) ||
	    cudaStreamSynchronize(s))
		return 0;
	for (int i = 0; i < OW * OH; i++) {
		unsigned bits;
		memcpy(&bits, &ob.th[i], sizeof(bits));
		sum += (unsigned long long)bits * (unsigned)(i + 1);
	}
	if (cudaMemcpy(hv, ob.gbuf, sizeof(hv), cudaMemcpyDeviceToHost))
		return 0;
	for (int i = 0; i < ON; i++)
		sum += (unsigned long long)hv[i] * (unsigned)(i | 5);
	if (cudaMemcpy(hv, ob.vmm, sizeof(hv), cudaMemcpyDeviceToHost))
		return 0;
	for (int i = 0; i < ON; i++)
		sum += (unsigned long long)hv[i] * (unsigned)(i | 9);
	return sum;
}

/* The extra work of a mode, queued on s after the step's kernel. */
static int extra(const char *mode, unsigned *d, int n, unsigned step, cudaStream_t s, cudaGraphExec_t exec)
{
	unsigned *tmp;

	if (!strcmp(mode, "graph") || !strcmp(mode, "graphhost"))
		return cudaGraphLaunch(exec, s) != cudaSuccess;
	if (!strcmp(mode, "objects"))
		return objects_step(d, step, s);
	if (!strcmp(mode, "managed") || !strcmp(mode, "mapped")) {
		cudaStreamSynchronize(s);             /* no host access while kernels run */
		managed[step * 4099 % managed_n] += 7;
		managed[step * 257 % managed_n] = step;
		rt_managed<<<managed_n / 256, 256, 0, s>>>(mapped_dev ? mapped_dev : managed, managed_n, step);
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
	cudaEvent_t done, t0, t1;
	float elapsed;

	if (cudaMalloc(&d, n * sizeof(unsigned)) || cudaMallocHost(&h, n * sizeof(unsigned)) ||
	    cudaStreamCreate(&s) || cudaEventCreateWithFlags(&done, cudaEventDisableTiming) ||
	    cudaMemsetAsync(d, 0, n * sizeof(unsigned), s)) {
		printf("setup failed: %s\n", cudaGetErrorString(cudaGetLastError()));
		return 1;
	}
	if (cudaEventCreate(&t0) || cudaEventCreate(&t1) || cudaEventRecord(t0, s) || cudaEventRecord(t1, s) ||
	    cudaEventSynchronize(t1)) {
		printf("timing events failed: %s\n", cudaGetErrorString(cudaGetLastError()));
		return 1;
	}
	if (!strcmp(mode, "managed") && cudaMallocManaged(&managed, managed_n * sizeof(unsigned))) {
		printf("managed allocation failed\n");
		return 1;
	}
	if (!strcmp(mode, "mapped") &&
	    (!(managed = (unsigned *)calloc(managed_n, sizeof(unsigned))) ||
	     cudaHostRegister(managed, managed_n * sizeof(unsigned), cudaHostRegisterMapped) ||
	     cudaHostGetDevicePointer((void **)&mapped_dev, managed, 0))) {
		printf("mapped registration failed: %s\n", cudaGetErrorString(cudaGetLastError()));
		return 1;
	}
	if (!strcmp(mode, "objects") && objects_setup(s)) {
		printf("objects setup failed: %s\n", cudaGetErrorString(cudaGetLastError()));
		return 1;
	}
	if ((!strcmp(mode, "graph") || !strcmp(mode, "graphhost")) &&
	    !(exec = capture(d, n, s, !strcmp(mode, "graphhost")))) {
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
		if (!strcmp(mode, "objects"))
			sum += objects_sum(s);
		cudaError_t timing = cudaEventElapsedTime(&elapsed, t0, t1);
		printf("step %d checksum %016llx, timing events %s\n", step, sum,
		       timing == cudaSuccess ? "read" : cudaGetErrorName(timing));
		fflush(stdout);
		struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
		while (nanosleep(&t, &t))
			;
	}
	cudaMemcpyFromSymbol(&count, rt_step_count, sizeof(count));
	printf("device steps %llu, host functions %llu\ndone\n", count, host_steps);
	return 0;
}

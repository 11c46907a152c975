/*
 * rt_texture.cu: texture and surface objects and the CUDA arrays behind
 * them, the way an unmodified program uses them: a texture over linear
 * device memory, a 2D array filled from the host and read through a
 * texture, and a surface the kernel writes, read back from the array to
 * the host. Each result is checked here and printed with a hash of its
 * bytes, so a run through Cicada must print what a native run prints.
 */
#include "rt_common.h"

static const int W = 64, H = 32, N = 1024;

extern "C" {
__global__ void rt_tex_linear(cudaTextureObject_t t, float *out, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		out[i] = 2.0f * tex1Dfetch<float>(t, i);
}

/* Point sampling at texel centres, unnormalised coordinates. */
__global__ void rt_tex_2d(cudaTextureObject_t t, float *out, int w, int h)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
	if (x < w && y < h)
		out[y * w + x] = tex2D<float>(t, x + 0.5f, y + 0.5f) + 1.0f;
}

__global__ void rt_surf_write(cudaSurfaceObject_t s, int w, int h)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
	if (x < w && y < h)
		surf2Dwrite(x * 1000 + y, s, x * (int)sizeof(int), y);
}
}

static void check(const char *what, int ok, const void *p, size_t n)
{
	printf("%s: %s, hash %016llx\n", what, ok ? "as expected" : "WRONG", fnv(p, n));
	failures += !ok;
}

static void linear(void)
{
	static float h[N], out[N];
	float *d, *dout;
	cudaTextureObject_t t;
	cudaResourceDesc r = {};
	cudaTextureDesc td = {};
	int ok = 1;

	for (int i = 0; i < N; i++)
		h[i] = i * 0.25f;
	CHECK_RT(cudaMalloc(&d, sizeof(h)));
	CHECK_RT(cudaMalloc(&dout, sizeof(out)));
	CHECK_RT(cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice));
	r.resType = cudaResourceTypeLinear;
	r.res.linear.devPtr = d;
	r.res.linear.desc = cudaCreateChannelDesc<float>();
	r.res.linear.sizeInBytes = sizeof(h);
	td.readMode = cudaReadModeElementType;
	CHECK_RT(cudaCreateTextureObject(&t, &r, &td, NULL));
	rt_tex_linear<<<N / 256, 256>>>(t, dout, N);
	CHECK_RT(cudaMemcpy(out, dout, sizeof(out), cudaMemcpyDeviceToHost));
	for (int i = 0; i < N; i++)
		ok &= out[i] == 2.0f * h[i];
	check("texture over linear memory", ok, out, sizeof(out));
	CHECK_RT(cudaDestroyTextureObject(t));
	CHECK_RT(cudaFree(d));
	CHECK_RT(cudaFree(dout));
}

static void array_texture(void)
{
	static float h[W * H], out[W * H];
	cudaChannelFormatDesc fd = cudaCreateChannelDesc<float>();
	cudaArray_t a;
	cudaTextureObject_t t;
	cudaResourceDesc r = {};
	cudaTextureDesc td = {};
	cudaExtent e;
	float *dout;
	int ok = 1;

	for (int i = 0; i < W * H; i++)
		h[i] = (float)(i % 97) - 40.0f;
	CHECK_RT(cudaMallocArray(&a, &fd, W, H));
	CHECK_RT(cudaArrayGetInfo(&fd, &e, NULL, a));
	printf("array: %zu x %zu, %d-bit float channel\n", e.width, e.height, fd.x);
	CHECK_RT(cudaMemcpy2DToArray(a, 0, 0, h, W * sizeof(float), W * sizeof(float), H, cudaMemcpyHostToDevice));
	r.resType = cudaResourceTypeArray;
	r.res.array.array = a;
	td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
	td.filterMode = cudaFilterModePoint;
	td.readMode = cudaReadModeElementType;
	CHECK_RT(cudaCreateTextureObject(&t, &r, &td, NULL));
	CHECK_RT(cudaMalloc(&dout, sizeof(out)));
	rt_tex_2d<<<dim3(W / 32, H), 32>>>(t, dout, W, H);
	CHECK_RT(cudaMemcpy(out, dout, sizeof(out), cudaMemcpyDeviceToHost));
	for (int i = 0; i < W * H; i++)
		ok &= out[i] == h[i] + 1.0f;
	check("texture over a 2D array", ok, out, sizeof(out));
	CHECK_RT(cudaDestroyTextureObject(t));
	CHECK_RT(cudaFreeArray(a));
	CHECK_RT(cudaFree(dout));
}

static void surface(void)
{
	static int out[W * H];
	cudaChannelFormatDesc fd = cudaCreateChannelDesc<int>();
	cudaArray_t a;
	cudaSurfaceObject_t s;
	cudaResourceDesc r = {};
	cudaStream_t st;
	int ok = 1;

	CHECK_RT(cudaStreamCreate(&st));
	CHECK_RT(cudaMallocArray(&a, &fd, W, H, cudaArraySurfaceLoadStore));
	r.resType = cudaResourceTypeArray;
	r.res.array.array = a;
	CHECK_RT(cudaCreateSurfaceObject(&s, &r));
	rt_surf_write<<<dim3(W / 32, H), 32, 0, st>>>(s, W, H);
	CHECK_RT(cudaMemcpy2DFromArrayAsync(out, W * sizeof(int), a, 0, 0, W * sizeof(int), H,
					    cudaMemcpyDeviceToHost, st));
	CHECK_RT(cudaStreamSynchronize(st));
	for (int y = 0; y < H; y++)
		for (int x = 0; x < W; x++)
			ok &= out[y * W + x] == x * 1000 + y;
	check("surface written by a kernel, read back from its array", ok, out, sizeof(out));
	CHECK_RT(cudaDestroySurfaceObject(s));
	CHECK_RT(cudaFreeArray(a));
	CHECK_RT(cudaStreamDestroy(st));
}

int main(void)
{
	linear();
	array_texture();
	surface();
	if (failures) {
		printf("FAILED (%d)\n", failures);
		return 1;
	}
	printf("done\n");
	return 0;
}

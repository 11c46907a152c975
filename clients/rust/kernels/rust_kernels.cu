// rust_kernels.cu: the kernels of the Rust client's examples and GPU
// check (clients/rust/gpu-check.sh), built as PTX, cubin and fatbin into
// build/rust/kernels. The CPU stand-in (tests/fakecuda/kernels.c) has a
// C twin of each, by name, with the same parameters.

extern "C" __global__ void vec_add(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		c[i] = a[i] + b[i];
}

extern "C" __global__ void inc_u32(unsigned *p, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		p[i] += 1;
}

#define TILE 16

// C = A * B for n x n row-major matrices; blocks of TILE x TILE threads,
// one output element each, the inputs staged through shared memory.
extern "C" __global__ void matmul_f32(const float *a, const float *b, float *c, int n)
{
	__shared__ float ta[TILE][TILE], tb[TILE][TILE];
	int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
	float sum = 0;

	for (int t = 0; t < n; t += TILE) {
		ta[threadIdx.y][threadIdx.x] = row < n && t + threadIdx.x < n ? a[row * n + t + threadIdx.x] : 0;
		tb[threadIdx.y][threadIdx.x] = col < n && t + threadIdx.y < n ? b[(t + threadIdx.y) * n + col] : 0;
		__syncthreads();
		for (int k = 0; k < TILE; k++)
			sum += ta[threadIdx.y][k] * tb[k][threadIdx.x];
		__syncthreads();
	}
	if (row < n && col < n)
		c[row * n + col] = sum;
}

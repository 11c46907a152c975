/*
 * native_kernels.c: the Rust examples' kernels run natively, through the
 * driver API on the local driver, for clients/rust/gpu-check.sh to
 * compare with the Rust client through Cicada. Same inputs, same
 * launches, same output lines as examples/vector_add.rs and matmul.rs.
 *
 *   native_kernels KERNELS_DIR vector_add N
 *   native_kernels KERNELS_DIR matmul N ptx|cubin|fatbin REPEATS
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x) do { CUresult e_ = (x); if (e_) { const char *s_ = 0; cuGetErrorName(e_, &s_); \
	fprintf(stderr, "native_kernels: %s: %s\n", #x, s_ ? s_ : "?"); exit(2); } } while (0)

static void *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	long n;
	char *b;

	if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) || !(b = calloc(1, n + 1)) ||
	    fread(b, 1, n, f) != (size_t)n) {
		fprintf(stderr, "native_kernels: cannot read %s\n", path);
		exit(2);
	}
	fclose(f);
	return b;
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static CUfunction load(const char *dir, const char *format, const char *name)
{
	char path[4096];
	CUmodule m;
	CUfunction f;

	snprintf(path, sizeof(path), "%s/rust_kernels.%s", dir, format);
	CHECK(cuModuleLoadData(&m, read_file(path)));
	CHECK(cuModuleGetFunction(&f, m, name));
	return f;
}

/* The primary context of GPU 0, current; the device. */
static CUdevice start(void)
{
	CUdevice dev;
	CUcontext ctx;

	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	return dev;
}

/* Both examples' device side: inputs a and b copied up, room for c, and
 * two timing events. */
struct run {
	CUdeviceptr a, b, c;
	CUevent e0, e1;
};

static void upload(struct run *d, const float *a, const float *b, size_t bytes)
{
	CHECK(cuMemAlloc(&d->a, bytes));
	CHECK(cuMemAlloc(&d->b, bytes));
	CHECK(cuMemAlloc(&d->c, bytes));
	CHECK(cuMemcpyHtoD(d->a, a, bytes));
	CHECK(cuMemcpyHtoD(d->b, b, bytes));
	CHECK(cuEventCreate(&d->e0, 0));
	CHECK(cuEventCreate(&d->e1, 0));
}

static int vector_add(const char *dir, int n)
{
	double t0 = now_ms();
	size_t bytes = (size_t)n * sizeof(float);
	float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes), ms;
	struct run d;
	char name[256];
	int bad = 0, ver;
	CUdevice dev = start();
	CUfunction f = load(dir, "ptx", "vec_add");

	for (int i = 0; i < n; i++) {
		a[i] = (float)(i % 1000) * 0.001f;
		b[i] = (float)((i * 7) % 1000) * 0.002f;
	}
	upload(&d, a, b, bytes);
	void *args[] = { &d.a, &d.b, &d.c, &n };
	CHECK(cuEventRecord(d.e0, 0));
	CHECK(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, 0, args, 0));
	CHECK(cuEventRecord(d.e1, 0));
	CHECK(cuEventSynchronize(d.e1));
	CHECK(cuEventElapsedTime(&ms, d.e0, d.e1));
	CHECK(cuMemcpyDtoH(c, d.c, bytes));
	for (int i = 0; i < n; i++)
		bad += c[i] != a[i] + b[i];
	CHECK(cuDeviceGetName(name, sizeof(name), dev));
	CHECK(cuDriverGetVersion(&ver));
	printf("vector_add: n=%d on %s (%d) natively: %d wrong; kernel %.3f ms, all %.1f ms: %s\n", n, name, ver, bad,
	       ms, now_ms() - t0, bad ? "FAIL" : "PASS");
	return bad != 0;
}

static int matmul(const char *dir, int n, const char *format, int repeats)
{
	size_t nn = (size_t)n * n, bytes = nn * sizeof(float);
	float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes), *want = calloc(nn, sizeof(float)), ms;
	struct run d;
	uint64_t h = 0xcbf29ce484222325ull;
	int tiles = (n + 15) / 16, ok;
	CUfunction f;

	start();
	f = load(dir, format, "matmul_f32");
	for (size_t k = 0; k < nn; k++) {
		a[k] = (float)((k / n * 3 + k % n * 5) % 17) * 0.25f - 2.0f;
		b[k] = (float)((k / n * 7 + k % n * 11) % 13) * 0.5f - 3.0f;
	}
	upload(&d, a, b, bytes);
	void *args[] = { &d.a, &d.b, &d.c, &n };
	CHECK(cuLaunchKernel(f, tiles, tiles, 1, 16, 16, 1, 0, 0, args, 0));
	CHECK(cuEventRecord(d.e0, 0));
	for (int r = 0; r < repeats; r++)
		CHECK(cuLaunchKernel(f, tiles, tiles, 1, 16, 16, 1, 0, 0, args, 0));
	CHECK(cuEventRecord(d.e1, 0));
	CHECK(cuEventSynchronize(d.e1));
	CHECK(cuEventElapsedTime(&ms, d.e0, d.e1));
	ms /= repeats;
	CHECK(cuMemcpyDtoH(c, d.c, bytes));
	for (int i = 0; i < n; i++)
		for (int k = 0; k < n; k++)
			for (int j = 0; j < n; j++)
				want[(size_t)i * n + j] += a[(size_t)i * n + k] * b[(size_t)k * n + j];
	ok = !memcmp(c, want, bytes);
	for (size_t k = 0; k < nn; k++) {
		uint32_t bits;

		memcpy(&bits, &c[k], 4);
		for (int i = 0; i < 4; i++)
			h = (h ^ ((bits >> (8 * i)) & 0xff)) * 0x100000001b3ull;
	}
	printf("matmul: n=%d %s hash=%016llx kernel_ms=%.4f gflops=%.1f %s\n", n, format, (unsigned long long)h, ms,
	       2.0 * n * (double)n * n / (ms * 1e6), ok ? "PASS" : "FAIL");
	return !ok;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[2], "vector_add"))
		return vector_add(argv[1], atoi(argv[3]));
	if (argc >= 6 && !strcmp(argv[2], "matmul"))
		return matmul(argv[1], atoi(argv[3]), argv[4], atoi(argv[5]) > 0 ? atoi(argv[5]) : 1);
	fprintf(stderr, "usage: native_kernels KERNELS_DIR vector_add N | matmul N ptx|cubin|fatbin REPEATS\n");
	return 2;
}

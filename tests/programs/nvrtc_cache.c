/*
 * nvrtc_cache: compiles one kernel with nvrtc to a cubin for sm_90, as
 * cuBLASLt does at run time, and says whether nvrtc found it in the
 * driver's compute cache. Prints "cached yes|no" and "cubin HASH" (an
 * FNV-1a of the cubin). nvrtc runs on the CPU, so this needs no GPU; it
 * reaches the compute cache through libcuda.so.1 (export table
 * {da9151d3...}): through Cicada that is compute_cache.c. libnvrtc is
 * opened by name, else from $CUDA_HOME/lib64 (default /usr/local/cuda).
 * Exit 2 when there is no nvrtc to test with.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*create_fn)(void **, const char *, const char *, int, const char *const *, const char *const *);
typedef int (*compile_fn)(void *, int, const char *const *);
typedef int (*size_fn)(void *, size_t *);
typedef int (*get_fn)(void *, char *);

static const char source[] =
	"extern \"C\" __global__ void scale(float *x, float a, int n)\n"
	"{\n"
	"\tint i = blockIdx.x * blockDim.x + threadIdx.x;\n"
	"\tif (i < n)\n"
	"\t\tx[i] = x[i] * a + 1.0f;\n"
	"}\n";

static void *open_nvrtc(void)
{
	const char *home = getenv("CUDA_HOME");
	char path[512];
	void *h = dlopen("libnvrtc.so.13", RTLD_NOW);

	if (h)
		return h;
	snprintf(path, sizeof(path), "%s/lib64/libnvrtc.so.13", home && *home ? home : "/usr/local/cuda");
	return dlopen(path, RTLD_NOW);
}

static uint64_t fnv(const unsigned char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (n--)
		h = (h ^ *p++) * 0x100000001b3ull;
	return h;
}

int main(void)
{
	const char *opts[] = { "-arch=sm_90", "--enable-cache-trace" };
	void *lib = open_nvrtc(), *prog = NULL;
	char *log, *cubin;
	size_t n;

	if (!lib) {
		fprintf(stderr, "nvrtc_cache: no libnvrtc.so.13: %s\n", dlerror());
		return 2;
	}
	create_fn create = (create_fn)dlsym(lib, "nvrtcCreateProgram");
	compile_fn compile = (compile_fn)dlsym(lib, "nvrtcCompileProgram");
	size_fn log_size = (size_fn)dlsym(lib, "nvrtcGetProgramLogSize"), cubin_size = (size_fn)dlsym(lib, "nvrtcGetCUBINSize");
	get_fn get_log = (get_fn)dlsym(lib, "nvrtcGetProgramLog"), get_cubin = (get_fn)dlsym(lib, "nvrtcGetCUBIN");

	if (!create || !compile || !log_size || !cubin_size || !get_log || !get_cubin ||
	    create(&prog, source, "scale.cu", 0, NULL, NULL)) {
		fprintf(stderr, "nvrtc_cache: nvrtc is not usable\n");
		return 2;
	}
	if (compile(prog, 2, opts)) {
		fprintf(stderr, "nvrtc_cache: the compile failed\n");
		return 1;
	}
	if (log_size(prog, &n) || !(log = calloc(1, n + 1)) || get_log(prog, log) || cubin_size(prog, &n) ||
	    !(cubin = malloc(n)) || get_cubin(prog, cubin))
		return 1;
	fprintf(stderr, "%s", log);
	printf("cached %s\n", strstr(log, "Successfully retrieved cached") ? "yes" : "no");
	printf("cubin %016llx (%zu bytes)\n", (unsigned long long)fnv((unsigned char *)cubin, n), n);
	return 0;
}

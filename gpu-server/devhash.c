/*
 * devhash.c: hashes pieces of the arena on the GPU (devhash.cu, embedded
 * by the build) for the snapshot library: a piece of an incremental
 * snapshot or pre-copy round whose hash equals its parent's is left to
 * the parent without being read to the host. The module is loaded when
 * the worker starts, the same in every worker (loaded later, it would
 * move the program's module variables: wire/hostarea.c). Only ranges in
 * mapped arena chunks are hashed, under the lock that keeps them mapped;
 * others get 0 (no hash) and are read as before. Host memory mapped for
 * the device carries the ranges in and the hashes out: the worker makes
 * no device allocation of its own. CICADA_DEVHASH=0 turns it off.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "gpu-server.h"
#include "snapshot.h"

#define BLOCK 1024

struct devhash_piece {
	uint64_t va, size;
};

extern const unsigned char devhash_image[];
extern const size_t devhash_image_size;

static CUfunction hash_fn;

void devhash_prepare(void)
{
	const char *env = getenv("CICADA_DEVHASH");
	CUmodule mod;

	if (env && !strcmp(env, "0"))
		return;
	if (cuModuleLoadData(&mod, devhash_image) || cuModuleGetFunction(&hash_fn, mod, "cicada_devhash")) {
		hash_fn = NULL;
		log_info("no device hashing here: every piece of a snapshot is read to be compared");
	}
}

/* Host memory the device reads and writes: the ranges, then the hashes. */
static void *io_map(size_t size, CUdeviceptr *dev)
{
	void *p = hostarea_map(size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	if (cuMemHostRegister(p, size, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP) ||
	    cuMemHostGetDevicePointer(dev, p, 0)) {
		cuMemHostUnregister(p);
		hostarea_unmap(p, size);
		return NULL;
	}
	return p;
}

static void io_unmap(void *p, size_t size)
{
	cuMemHostUnregister(p);
	hostarea_unmap(p, size);
}

/* Launches the kernel over the k ranges in io; 0 once the hashes are in. */
static int run(struct devhash_piece *io, CUdeviceptr dev, unsigned k)
{
	CUdeviceptr out = dev + (CUdeviceptr)k * sizeof(*io);
	void *args[] = { &dev, &out, &k };
	CUstream s;
	int rc;

	if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING))
		return -1;
	rc = cuLaunchKernel(hash_fn, k, 1, 1, BLOCK, 1, 1, 0, s, args, NULL) || cuStreamSynchronize(s) ? -1 : 0;
	cuStreamDestroy(s);
	return rc;
}

/* out[i]: the device hash of ranges[i], or 0 where there is none. */
int devhash_ranges(struct worker *w, const struct snap_range *ranges, size_t n, uint64_t *out)
{
	size_t size = n * (sizeof(struct devhash_piece) + sizeof(uint64_t));
	struct devhash_piece *io;
	unsigned *index, k = 0;
	CUdeviceptr dev;
	int rc = -1;

	memset(out, 0, n * sizeof(*out));
	if (!hash_fn || !n || n > (1u << 30))
		return -1;
	cuCtxSetCurrent(w->base_ctx);
	if (!(index = calloc(n, sizeof(*index))))
		return -1;
	if (!(io = io_map(size, &dev))) {
		free(index);
		return -1;
	}
	devmem_hold(w, 1);
	for (size_t i = 0; i < n; i++)
		if (ranges[i].size && devmem_mapped(w, ranges[i].va, ranges[i].size)) {
			io[k] = (struct devhash_piece){ ranges[i].va, ranges[i].size };
			index[k++] = (unsigned)i;
		}
	if (k && !(rc = run(io, dev, k)))
		for (unsigned j = 0; j < k; j++)
			out[index[j]] = ((uint64_t *)(io + k))[j];
	devmem_hold(w, 0);
	io_unmap(io, size);
	free(index);
	return rc;
}

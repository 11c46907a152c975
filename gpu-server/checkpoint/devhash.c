/*
 * devhash.c: hashes pieces of the arena on the GPU (devhash.cu, embedded
 * by the build) for the snapshot library: a piece of an incremental
 * snapshot or pre-copy round whose hash equals its parent's is left to
 * the parent without being read to the host. The module is loaded into a
 * GPU's primary context as soon as the worker takes it (primary.c's hook),
 * before the program loads anything there, the same in every worker
 * (loaded later, it would move the program's module variables:
 * state/hostarea.c). Each GPU hashes its own memory. Only ranges in
 * mapped arena chunks are hashed, under the lock that keeps them mapped;
 * others get 0 (no hash) and are read as before. Host memory mapped for
 * the device carries the ranges in and the hashes out: the worker makes
 * no device allocation of its own. CICADA_DEVHASH=0 turns it off.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "checkpoint.h"
#include "snapshot.h"

#define BLOCK 1024

struct devhash_piece {
	uint64_t va, size;
};

extern const unsigned char devhash_image[];
extern const size_t devhash_image_size;

#define MAX_DEVICES 64

static int off;                              /* CICADA_DEVHASH=0 */
static CUfunction hash_fn[MAX_DEVICES];      /* loaded in each GPU's primary context */
static int failed[MAX_DEVICES];

/* The hash kernel of GPU dev, or NULL. */
static CUfunction hash_on(CUdevice dev)
{
	return off || dev < 0 || dev >= MAX_DEVICES ? NULL : hash_fn[dev];
}

/* primary.c's hook: GPU dev's primary context, just taken, is current. */
void devhash_load(CUdevice dev)
{
	CUmodule mod;

	if (off || dev < 0 || dev >= MAX_DEVICES || hash_fn[dev] || failed[dev])
		return;
	if (cuModuleLoadData(&mod, devhash_image) || cuModuleGetFunction(&hash_fn[dev], mod, "cicada_devhash")) {
		hash_fn[dev] = NULL;
		failed[dev] = 1;
		log_info("no device hashing on GPU %d: every piece of a snapshot is read to be compared", (int)dev);
	}
}

/* Before any GPU is taken: CICADA_DEVHASH=0 turns hashing off. */
void devhash_prepare(void)
{
	const char *env = getenv("CICADA_DEVHASH");

	off = env && !strcmp(env, "0");
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

/* Launches fn over the k ranges in io; 0 once the hashes are in. */
static int run(CUfunction fn, struct devhash_piece *io, CUdeviceptr dev, unsigned k)
{
	CUdeviceptr out = dev + (CUdeviceptr)k * sizeof(*io);
	void *args[] = { &dev, &out, &k };
	CUstream s;
	int rc;

	if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING))
		return -1;
	rc = cuLaunchKernel(fn, k, 1, 1, BLOCK, 1, 1, 0, s, args, NULL) || cuStreamSynchronize(s) ? -1 : 0;
	cuStreamDestroy(s);
	return rc;
}

/* The ranges on GPU gpu, hashed there (each GPU reads only its own
 * memory: peers may not reach each other). 0, or -1 if it failed. A GPU
 * whose context the worker has not taken holds none of the arena (and
 * taking it here, perhaps on a pre-copy's thread, would put it among the
 * program's calls where no restore takes it). */
static int hash_gpu(struct worker *w, CUdevice gpu, const struct snap_range *ranges, size_t n,
		    struct devhash_piece *io, CUdeviceptr dev, unsigned *index, uint64_t *out)
{
	CUcontext ctx;
	CUfunction fn;
	unsigned k = 0;
	int rc;

	if (!primary_held(gpu))
		return 0;
	ctx = primary_ctx(w, gpu);
	if (!ctx || cuCtxSetCurrent(ctx) || !(fn = hash_on(gpu)))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (ranges[i].size && devmem_device(w, ranges[i].va) == gpu &&
		    devmem_mapped(w, ranges[i].va, ranges[i].size)) {
			io[k] = (struct devhash_piece){ ranges[i].va, ranges[i].size };
			index[k++] = (unsigned)i;
		}
	if (!k || (rc = run(fn, io, dev, k)))
		return k ? -1 : 0;
	for (unsigned j = 0; j < k; j++)
		out[index[j]] = ((uint64_t *)(io + k))[j];
	return 0;
}

/* out[i]: the device hash of ranges[i], or 0 where there is none. */
int devhash_ranges(struct worker *w, const struct snap_range *ranges, size_t n, uint64_t *out)
{
	size_t size = n * (sizeof(struct devhash_piece) + sizeof(uint64_t));
	struct devhash_piece *io;
	unsigned *index;
	CUdeviceptr dev;
	int rc = 0;

	memset(out, 0, n * sizeof(*out));
	if (off || !n || n > (1u << 30))
		return -1;
	cuCtxSetCurrent(w->base_ctx);
	if (!(index = calloc(n, sizeof(*index))))
		return -1;
	if (!(io = io_map(size, &dev))) {
		free(index);
		return -1;
	}
	devmem_hold(w, 1);
	for (int g = 0; g < w->ngpus; g++)
		rc |= hash_gpu(w, w->gpu[g], ranges, n, io, dev, index, out);
	devmem_hold(w, 0);
	cuCtxSetCurrent(w->base_ctx);
	io_unmap(io, size);
	free(index);
	return rc;
}

/*
 * Kernel launches and occupancy queries.  A launch is checked the way the
 * driver checks it (dimensions, dynamic shared memory, stream, arguments
 * given either as kernelParams or as one packed buffer in "extra"), then
 * the C twin of the kernel from kernels.c runs to completion before the
 * call returns; one that needs more stack than its context has grows it
 * first, as the driver does (context.c).  Occupancy answers come from the
 * fake device's limits.
 */
#include <string.h>
#include "fakecuda.h"

static CUresult check_dims(struct fc_dim g, struct fc_dim b)
{
	CHECK_ARG(g.x && g.y && g.z && g.y <= 65535 && g.z <= 65535);
	CHECK_ARG(b.x && b.y && b.z && b.x <= 1024 && b.y <= 1024 && b.z <= 64);
	CHECK_ARG((unsigned long long)b.x * b.y * b.z <= 1024);
	return CUDA_SUCCESS;
}

/* Point args[i] at the value of each parameter. */
static CUresult collect(const struct fc_kernel *k, void **params, void **extra, void **args)
{
	char *buf = NULL;
	size_t size = 0, off;
	int i;

	CHECK_ARG(!params || !extra);
	for (i = 0; params && i < k->nparams; i++)
		args[i] = params[i];
	for (i = 0; extra && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
			buf = extra[i + 1];
		else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
			size = *(size_t *)extra[i + 1];
		else
			return CUDA_ERROR_INVALID_VALUE;
	}
	if (params || !k->nparams)
		return CUDA_SUCCESS;
	CHECK_ARG(buf);
	for (i = 0; i < k->nparams; i++) {
		off = fc_param_offset(k, i);
		CHECK_ARG(off + k->sizes[i] <= size);
		args[i] = buf + off;
	}
	return CUDA_SUCCESS;
}

/* A device cannot reach VMM memory it was not given access to: a kernel
 * that is passed such a pointer faults, as on a GPU. */
static CUresult check_access(const struct fc_kernel *k, void **args)
{
	struct fc_ctx *c;
	uintptr_t p;

	TRY(fc_current(&c));
	for (int i = 0; i < k->nparams; i++) {
		if (k->sizes[i] != sizeof(p))
			continue;
		memcpy(&p, args[i], sizeof(p));
		CHECK(fc_vmm_access(p, c->dev), CUDA_ERROR_ILLEGAL_ADDRESS);
	}
	return CUDA_SUCCESS;
}

static CUresult launch(CUfunction f, struct fc_dim grid, struct fc_dim block, unsigned shmem,
		       CUstream s, void **params, void **extra)
{
	void *args[FC_MAX_PARAMS] = { 0 };
	const struct fc_kernel *k;
	struct fc_launch l;
	int max_shmem;
	void *mod;

	struct fc_graph **capture = fc_stream_capture(s);

	TRY(fc_func(f, &k, &mod, &max_shmem));
	TRY(check_dims(grid, block));
	CHECK_ARG(shmem <= (unsigned)max_shmem);
	TRY(collect(k, params, extra, args));
	if (capture && *capture)
		return fc_capture_launch(*capture, f, k, grid, block, shmem, args);
	TRY(fc_check_stream(s));
	TRY(check_access(k, args));
	if (fc_kernel_stack(k)) {
		struct fc_ctx *c;
		TRY(fc_current(&c));
		fc_ctx_stack(c, fc_kernel_stack(k));
	}
	l = (struct fc_launch){ grid, block, args, mod, fc_stream_sms(s) };
	k->fn(&l);
	return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
			unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
			CUstream s, void **params, void **extra)
{
	return launch(f, (struct fc_dim){ gx, gy, gz }, (struct fc_dim){ bx, by, bz }, shmem, s,
		      params, extra);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	TRY(fc_need_init());
	CHECK_ARG(c && (!c->numAttrs || c->attrs));
	return launch(f, (struct fc_dim){ c->gridDimX, c->gridDimY, c->gridDimZ },
		      (struct fc_dim){ c->blockDimX, c->blockDimY, c->blockDimZ },
		      c->sharedMemBytes, c->hStream, params, extra);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
				   unsigned int bx, unsigned int by, unsigned int bz,
				   unsigned int shmem, CUstream s, void **params)
{
	return launch(f, (struct fc_dim){ gx, gy, gz }, (struct fc_dim){ bx, by, bz }, shmem, s,
		      params, NULL);
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *blocks, CUfunction f,
							      int block_size, size_t shmem,
							      unsigned int flags)
{
	TRY(fc_func(f, NULL, NULL, NULL));
	CHECK_ARG(blocks && block_size > 0);
	*blocks = block_size > 1024 ? 0 : 2048 / block_size;
	return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, CUfunction f, int block_size,
						     size_t shmem)
{
	return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, f, block_size, shmem, 0);
}

CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *min_grid, int *block_size, CUfunction f,
						   CUoccupancyB2DSize to_shmem, size_t shmem,
						   int limit, unsigned int flags)
{
	TRY(fc_func(f, NULL, NULL, NULL));
	CHECK_ARG(min_grid && block_size);
	*block_size = limit > 0 && limit < 1024 ? limit : 1024;
	*min_grid = 132 * (2048 / *block_size);
	return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxPotentialBlockSize(int *min_grid, int *block_size, CUfunction f,
					  CUoccupancyB2DSize to_shmem, size_t shmem, int limit)
{
	return cuOccupancyMaxPotentialBlockSizeWithFlags(min_grid, block_size, f, to_shmem, shmem,
							 limit, 0);
}

CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *size, CUfunction f, int blocks,
						 int block_size)
{
	TRY(fc_func(f, NULL, NULL, NULL));
	CHECK_ARG(size && blocks > 0 && block_size > 0 && block_size <= 1024);
	*size = blocks * block_size > 2048 ? 0 : 233472 / blocks - 1024;
	return CUDA_SUCCESS;
}

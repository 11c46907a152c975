/*
 * misc.c: the stand-in's smaller driver calls: stream attributes (kept per
 * stream and attribute), device properties (from the attributes), peer
 * and texture limits of its one device, the persisting-L2 reset, the
 * profiler switches, per-kernel cache configuration and the first ABI of
 * cuEventElapsedTime.
 */
#include <string.h>
#include "fakecuda.h"

#define MAX_STREAM_ATTRS 64

static struct {
	CUstream stream;
	CUstreamAttrID id;
	CUstreamAttrValue value;
} attrs[MAX_STREAM_ATTRS];
static int nattrs;

static int attr_find(CUstream s, CUstreamAttrID id)
{
	for (int i = 0; i < nattrs; i++)
		if (attrs[i].stream == s && attrs[i].id == id)
			return i;
	return -1;
}

static int attr_known(CUstreamAttrID id)
{
	return id == CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW || id == CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY ||
	       id == CU_LAUNCH_ATTRIBUTE_PRIORITY || id == CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP ||
	       id == CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN;
}

CUresult cuStreamGetAttribute(CUstream s, CUstreamAttrID id, CUstreamAttrValue *out)
{
	int i;

	TRY(fc_check_stream(s));
	CHECK_ARG(out && attr_known(id));
	i = attr_find(s, id);
	if (i < 0)
		memset(out, 0, sizeof(*out));
	else
		*out = attrs[i].value;
	return CUDA_SUCCESS;
}

CUresult cuStreamSetAttribute(CUstream s, CUstreamAttrID id, const CUstreamAttrValue *value)
{
	int i;

	TRY(fc_check_stream(s));
	CHECK_ARG(value && attr_known(id));
	i = attr_find(s, id);
	if (i < 0) {
		CHECK(nattrs < MAX_STREAM_ATTRS, CUDA_ERROR_OUT_OF_MEMORY);
		i = nattrs++;
	}
	attrs[i].stream = s;
	attrs[i].id = id;
	attrs[i].value = *value;
	return CUDA_SUCCESS;
}

CUresult cuStreamCopyAttributes(CUstream dst, CUstream src)
{
	TRY(fc_check_stream(dst));
	TRY(fc_check_stream(src));
	for (int i = 0, n = nattrs; i < n; i++)
		if (attrs[i].stream == src)
			TRY(cuStreamSetAttribute(dst, attrs[i].id, &attrs[i].value));
	return CUDA_SUCCESS;
}

CUresult cuStreamGetDevice(CUstream s, CUdevice *dev)
{
	CUcontext ctx;

	TRY(fc_check_stream(s));
	CHECK_ARG(dev);
	TRY(cuStreamGetCtx(s, &ctx));
	TRY(cuCtxGetDevice_v2(dev, ctx));
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetProperties(CUdevprop *p, CUdevice dev)
{
	static const CUdevice_attribute dims[3][2] = {
		{ CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X },
		{ CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y },
		{ CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z } };

	CHECK_ARG(p);
	TRY(cuDeviceGetAttribute(&p->maxThreadsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev));
	for (int i = 0; i < 3; i++) {
		TRY(cuDeviceGetAttribute(&p->maxThreadsDim[i], dims[i][0], dev));
		TRY(cuDeviceGetAttribute(&p->maxGridSize[i], dims[i][1], dev));
	}
	TRY(cuDeviceGetAttribute(&p->sharedMemPerBlock, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, dev));
	TRY(cuDeviceGetAttribute(&p->totalConstantMemory, CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, dev));
	TRY(cuDeviceGetAttribute(&p->SIMDWidth, CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev));
	TRY(cuDeviceGetAttribute(&p->memPitch, CU_DEVICE_ATTRIBUTE_MAX_PITCH, dev));
	TRY(cuDeviceGetAttribute(&p->regsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, dev));
	TRY(cuDeviceGetAttribute(&p->clockRate, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev));
	return cuDeviceGetAttribute(&p->textureAlign, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, dev);
}

/* One device: no peer to ask about. */
CUresult cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attr, CUdevice src, CUdevice dst)
{
	CHECK_ARG(value);
	return CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDeviceGetTexture1DLinearMaxWidth(size_t *width, CUarray_format format, unsigned channels, CUdevice dev)
{
	CHECK_ARG(width && (channels == 1 || channels == 2 || channels == 4));
	TRY(fc_check_dev(dev));
	*width = (size_t)1 << 28;
	return CUDA_SUCCESS;
}

CUresult cuCtxResetPersistingL2Cache(void)
{
	return CUDA_SUCCESS;
}

CUresult cuProfilerStart(void)
{
	return CUDA_SUCCESS;
}

CUresult cuProfilerStop(void)
{
	return CUDA_SUCCESS;
}

CUresult cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev)
{
	CHECK(kernel, CUDA_ERROR_INVALID_HANDLE);
	return CUDA_SUCCESS;
}

/* The first ABI of cuEventElapsedTime (cuda.h maps the name to _v2). */
#undef cuEventElapsedTime
CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end)
{
	return cuEventElapsedTime_v2(ms, start, end);
}

/* Managed memory: the stand-in's device memory is host memory already. */
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
	CHECK_ARG(flags == CU_MEM_ATTACH_GLOBAL || flags == CU_MEM_ATTACH_HOST);
	TRY(cuMemAlloc(dptr, size));
	memset((void *)*dptr, 0, size);
	return CUDA_SUCCESS;
}

#undef cuMemPrefetchAsync
CUresult cuMemPrefetchAsync(CUdeviceptr p, size_t count, CUdevice dst, CUstream s)
{
	TRY(fc_check_stream(s));
	return fc_range_check((uintptr_t)p, count);
}

CUresult cuMemPrefetchAsync_v2(CUdeviceptr p, size_t count, CUmemLocation loc, unsigned int flags, CUstream s)
{
	return cuMemPrefetchAsync(p, count, 0, s);
}

#undef cuMemAdvise
CUresult cuMemAdvise(CUdeviceptr p, size_t count, CUmem_advise advice, CUdevice dev)
{
	return fc_range_check((uintptr_t)p, count);
}

CUresult cuMemAdvise_v2(CUdeviceptr p, size_t count, CUmem_advise advice, CUmemLocation loc)
{
	return fc_range_check((uintptr_t)p, count);
}

CUresult cuStreamAttachMemAsync(CUstream s, CUdeviceptr p, size_t length, unsigned int flags)
{
	TRY(fc_check_stream(s));
	return fc_range_check((uintptr_t)p, length ? length : 1);
}

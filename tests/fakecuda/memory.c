/*
 * Device and pinned host memory of the stand-in.  cuMemAlloc hands out a
 * 256-byte aligned host allocation whose address is the device pointer;
 * pinned and registered host memory is recorded the same way, so every
 * copy, memset and pointer query can check its ranges against the table
 * in registry.c before doing a plain memcpy or memset.
 */
#include <stdlib.h>
#include <string.h>
#include "fakecuda.h"

enum { HOST, DEVICE, UNIFIED };

CUresult cuMemAlloc(CUdeviceptr *dptr, size_t n)
{
	struct fc_ctx *ctx;
	void *p;

	TRY(fc_current(&ctx));
	CHECK_ARG(dptr && n);
	CHECK(n <= FC_TOTAL_MEM && fc_mem_used(n) != (size_t)-1, CUDA_ERROR_OUT_OF_MEMORY);
	if (posix_memalign(&p, 256, n) || fc_range_add((uintptr_t)p, n, FC_MEM_DEVICE, ctx, 1)) {
		fc_mem_used(-(long long)n);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*dptr = (CUdeviceptr)p;
	return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr dptr)
{
	struct fc_range range;

	TRY(fc_current(NULL));
	CHECK_ARG(fc_range_del(dptr, FC_MEM_DEVICE, &range));
	fc_mem_used(-(long long)range.size);
	free((void *)dptr);
	return CUDA_SUCCESS;
}

CUresult cuMemGetInfo(size_t *free_bytes, size_t *total)
{
	TRY(fc_current(NULL));
	CHECK_ARG(free_bytes && total);
	*total = FC_TOTAL_MEM;
	*free_bytes = FC_TOTAL_MEM - fc_mem_used(0);
	return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	struct fc_range range;

	TRY(fc_current(NULL));
	CHECK(fc_range_find(dptr, &range), CUDA_ERROR_NOT_FOUND);
	if (pbase)
		*pbase = range.base;
	if (psize)
		*psize = range.size;
	return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void **pp, size_t n, unsigned int flags)
{
	struct fc_ctx *ctx;
	void *p;

	TRY(fc_current(&ctx));
	CHECK_ARG(pp && n && !(flags & ~7u));
	CHECK(!posix_memalign(&p, 4096, n), CUDA_ERROR_OUT_OF_MEMORY);
	if (fc_range_add((uintptr_t)p, n, FC_MEM_HOST, ctx, 1)) {
		free(p);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	fc_range_set_flags((uintptr_t)p, flags);
	*pp = p;
	return CUDA_SUCCESS;
}

CUresult cuMemAllocHost(void **pp, size_t n)
{
	return cuMemHostAlloc(pp, n, 0);
}

CUresult cuMemFreeHost(void *p)
{
	TRY(fc_current(NULL));
	CHECK_ARG(fc_range_del((uintptr_t)p, FC_MEM_HOST, NULL));
	free(p);
	return CUDA_SUCCESS;
}

/* FAKECUDA_MAPPED_MAX_MIB=N: a mapped (DEVICEMAP) registration of more
 * than N MiB fails, as where the driver cannot pin that much. */
static int mapped_too_big(size_t n, unsigned flags)
{
	const char *e = getenv("FAKECUDA_MAPPED_MAX_MIB");

	return e && (flags & CU_MEMHOSTREGISTER_DEVICEMAP) && n > (size_t)atol(e) << 20;
}

CUresult cuMemHostRegister(void *p, size_t n, unsigned int flags)
{
	struct fc_ctx *ctx;

	TRY(fc_current(&ctx));
	CHECK_ARG(p && n && !(flags & ~0xfu));
	CHECK(!mapped_too_big(n, flags), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK(!fc_range_overlaps((uintptr_t)p, n), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	CHECK(!fc_range_add((uintptr_t)p, n, FC_MEM_REGISTERED, ctx, 1), CUDA_ERROR_OUT_OF_MEMORY);
	fc_range_set_flags((uintptr_t)p, flags & (CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP));
	return CUDA_SUCCESS;
}

CUresult cuMemHostUnregister(void *p)
{
	TRY(fc_current(NULL));
	CHECK_ARG(p);
	CHECK(fc_range_del((uintptr_t)p, FC_MEM_REGISTERED, NULL),
	      CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	return CUDA_SUCCESS;
}

static int is_host(int kind)
{
	return kind == FC_MEM_HOST || kind == FC_MEM_REGISTERED;
}

CUresult cuMemHostGetDevicePointer(CUdeviceptr *pdptr, void *p, unsigned int flags)
{
	struct fc_range range;

	TRY(fc_current(NULL));
	CHECK_ARG(pdptr && !flags);
	CHECK_ARG(fc_range_find((uintptr_t)p, &range) && is_host(range.kind));
	*pdptr = (CUdeviceptr)p;
	return CUDA_SUCCESS;
}

/* With unified addressing (as every GPU here has) all pinned memory is
 * mapped: its flags say DEVICEMAP whatever was asked, as the driver's do. */
CUresult cuMemHostGetFlags(unsigned int *pflags, void *p)
{
	struct fc_range range;

	TRY(fc_current(NULL));
	CHECK_ARG(pflags && fc_range_find((uintptr_t)p, &range) && is_host(range.kind));
	*pflags = range.flags | CU_MEMHOSTALLOC_DEVICEMAP;
	return CUDA_SUCCESS;
}

/* Write one attribute; r is NULL for a pointer nobody knows. */
static CUresult attr(void *data, CUpointer_attribute a, CUdeviceptr ptr, const struct fc_range *r)
{
	int host = r && is_host(r->kind);

	switch (a) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = r ? (CUcontext)r->ctx : NULL;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned *)data = !r ? 0 : host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = r ? ptr : 0;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		*(void **)data = host ? (void *)ptr : NULL;
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		*(unsigned long long *)data = r ? r->id : 0;
		break;
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
	case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
		*(int *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		*(int *)data = r && r->kind == FC_MEM_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(int *)data = r != NULL;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = !r ? -1 : r->ctx ? r->ctx->dev : r->kind == FC_MEM_VMM ? fc_vmm_device(ptr) : 0;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(CUdeviceptr *)data = r ? r->base : 0;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		*(void **)data = r ? (void *)r->base : NULL;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
		*(size_t *)data = r ? r->size : 0;
		break;
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
		*(unsigned long long *)data = r && r->kind == FC_MEM_VMM ?
			CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : 0;
		break;
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		*(unsigned *)data = r && r->usable ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE : 0;
		break;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		*(CUmemoryPool *)data = NULL;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute a, CUdeviceptr ptr)
{
	struct fc_range range;

	TRY(fc_need_init());
	CHECK_ARG(data && fc_range_find(ptr, &range));
	CHECK_ARG(a != CU_POINTER_ATTRIBUTE_HOST_POINTER || is_host(range.kind));
	return attr(data, a, ptr, &range);
}

/* Unlike the above, unknown pointers get default values, not an error. */
CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data,
				CUdeviceptr ptr)
{
	struct fc_range range;
	int found;
	unsigned i;

	TRY(fc_need_init());
	CHECK_ARG(n && attrs && data);
	found = fc_range_find(ptr, &range);
	for (i = 0; i < n; i++)
		if (data[i])
			TRY(attr(data[i], attrs[i], ptr, found ? &range : NULL));
	return CUDA_SUCCESS;
}

/* One side of a copy: host memory, device memory, or either (cuMemcpy).
 * As on the GPU, the current context's device copies, so VMM memory must
 * have been made accessible to it. */
static CUresult side(uintptr_t p, size_t n, int how)
{
	struct fc_range range;
	struct fc_ctx *c;

	CHECK_ARG(p);
	if (how == DEVICE || (how == UNIFIED && fc_range_find(p, &range))) {
		TRY(fc_range_check(p, n));
		CHECK_ARG(fc_current(&c) || fc_vmm_access(p, c->dev));
	}
	return CUDA_SUCCESS;
}

static CUresult copy(uintptr_t dst, int dst_how, uintptr_t src, int src_how, size_t n,
		     CUstream s)
{
	TRY(fc_check_stream(s));
	if (!n)
		return CUDA_SUCCESS;
	TRY(side(dst, n, dst_how));
	TRY(side(src, n, src_how));
	memmove((void *)dst, (const void *)src, n);
	return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n)
{
	return copy(dst, DEVICE, (uintptr_t)src, HOST, n, NULL);
}

CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n)
{
	return copy((uintptr_t)dst, HOST, src, DEVICE, n, NULL);
}

CUresult cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return copy(dst, DEVICE, src, DEVICE, n, NULL);
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return copy(dst, UNIFIED, src, UNIFIED, n, NULL);
}

/* Copies between two devices' memory: the contexts must be live. */
CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t n)
{
	CUdevice d;

	TRY(fc_need_init());
	CHECK(dst_ctx && src_ctx, CUDA_ERROR_INVALID_CONTEXT);
	TRY(cuCtxGetDevice_v2(&d, dst_ctx));
	TRY(cuCtxGetDevice_v2(&d, src_ctx));
	return copy(dst, DEVICE, src, DEVICE, n, NULL);
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t n,
			   CUstream s)
{
	CUdevice d;

	TRY(fc_need_init());
	CHECK(dst_ctx && src_ctx, CUDA_ERROR_INVALID_CONTEXT);
	TRY(cuCtxGetDevice_v2(&d, dst_ctx));
	TRY(cuCtxGetDevice_v2(&d, src_ctx));
	return copy(dst, DEVICE, src, DEVICE, n, s);
}

/* Async copies on a capturing stream become copy nodes, as in the driver. */
CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
	CUresult err;

	return fc_capture_copy(s, dst, 0, (uintptr_t)src, 1, n, &err) ? copy(dst, DEVICE, (uintptr_t)src, HOST, n, s) : err;
}

CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
	CUresult err;

	return fc_capture_copy(s, (uintptr_t)dst, 1, src, 0, n, &err) ? copy((uintptr_t)dst, HOST, src, DEVICE, n, s) : err;
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	CUresult err;

	return fc_capture_copy(s, dst, 0, src, 0, n, &err) ? copy(dst, DEVICE, src, DEVICE, n, s) : err;
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	return copy(dst, UNIFIED, src, UNIFIED, n, s);
}

static CUresult fill(CUdeviceptr dst, unsigned v, size_t n, size_t width, CUstream s)
{
	size_t i;

	TRY(fc_check_stream(s));
	if (!n)
		return CUDA_SUCCESS;
	CHECK_ARG(dst % width == 0 && n <= SIZE_MAX / width);
	TRY(fc_range_check(dst, n * width));
	if (width == 1)
		memset((void *)dst, v, n);
	for (i = 0; width == 2 && i < n; i++)
		((uint16_t *)dst)[i] = v;
	for (i = 0; width == 4 && i < n; i++)
		((uint32_t *)dst)[i] = v;
	return CUDA_SUCCESS;
}

CUresult cuMemsetD8(CUdeviceptr dst, unsigned char v, size_t n)
{
	return fill(dst, v, n, 1, NULL);
}

CUresult cuMemsetD16(CUdeviceptr dst, unsigned short v, size_t n)
{
	return fill(dst, v, n, 2, NULL);
}

CUresult cuMemsetD32(CUdeviceptr dst, unsigned int v, size_t n)
{
	return fill(dst, v, n, 4, NULL);
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s)
{
	return fill(dst, v, n, 1, s);
}

CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short v, size_t n, CUstream s)
{
	return fill(dst, v, n, 2, s);
}

CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s)
{
	return fill(dst, v, n, 4, s);
}

/* 2D memsets: height rows of width elements, pitch bytes apart. */
static CUresult fill_2d(CUdeviceptr dst, size_t pitch, unsigned v, size_t w, size_t h, int width, CUstream s)
{
	CHECK_ARG(h <= 1 || pitch >= w * (size_t)width);
	for (size_t r = 0; r < h; r++)
		TRY(fill(dst + r * pitch, v, w, width, s));
	return CUDA_SUCCESS;
}

CUresult cuMemsetD2D8(CUdeviceptr dst, size_t pitch, unsigned char v, size_t w, size_t h)
{
	return fill_2d(dst, pitch, v, w, h, 1, NULL);
}

CUresult cuMemsetD2D16(CUdeviceptr dst, size_t pitch, unsigned short v, size_t w, size_t h)
{
	return fill_2d(dst, pitch, v, w, h, 2, NULL);
}

CUresult cuMemsetD2D32(CUdeviceptr dst, size_t pitch, unsigned int v, size_t w, size_t h)
{
	return fill_2d(dst, pitch, v, w, h, 4, NULL);
}

CUresult cuMemsetD2D8Async(CUdeviceptr dst, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s)
{
	return fill_2d(dst, pitch, v, w, h, 1, s);
}

CUresult cuMemsetD2D16Async(CUdeviceptr dst, size_t pitch, unsigned short v, size_t w, size_t h, CUstream s)
{
	return fill_2d(dst, pitch, v, w, h, 2, s);
}

CUresult cuMemsetD2D32Async(CUdeviceptr dst, size_t pitch, unsigned int v, size_t w, size_t h, CUstream s)
{
	return fill_2d(dst, pitch, v, w, h, 4, s);
}

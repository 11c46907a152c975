/*
 * array.c: CUDA arrays, copies that involve them, and texture and surface
 * objects. The worker holds the arrays; a copy between device memory and
 * an array is one call. Host memory never reaches the worker directly: a
 * copy between host memory and an array goes through a device buffer
 * (host to buffer as any copy, then buffer to array, or the reverse),
 * freed in stream order (so not inside a graph capture). 3D copies between
 * host and device memory go slice by slice as 2D copies (copy.c's
 * copy_2d). The 2D and 3D copy entry points are here, above copy.c, as a
 * 2D copy may have an array on either side.
 */
#include "interposer.h"

enum side_kind { SIDE_HOST, SIDE_DEVICE, SIDE_ARRAY };

CUresult CUDAAPI cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	if (!d)
		return CUDA_ERROR_INVALID_VALUE;
	return rpc_array_create(pHandle, d->Width, d->Height, d->Depth, d->Format, d->NumChannels, d->Flags);
}

CUresult CUDAAPI cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
	if (!d)
		return CUDA_ERROR_INVALID_VALUE;
	return rpc_array_create(pHandle, d->Width, d->Height, 0, d->Format, d->NumChannels, 0);
}

CUresult CUDAAPI cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *d, CUarray hArray)
{
	unsigned format, channels, flags;
	CUresult err;

	if (!d)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = rpc_array_descriptor(hArray, &d->Width, &d->Height, &d->Depth, &format, &channels, &flags)))
		return err;
	d->Format = (CUarray_format)format;
	d->NumChannels = channels;
	d->Flags = flags;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *d, CUarray hArray)
{
	CUDA_ARRAY3D_DESCRIPTOR d3;
	CUresult err;

	if (!d)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = cuArray3DGetDescriptor_v2(&d3, hArray)))
		return err;
	*d = (CUDA_ARRAY_DESCRIPTOR){ d3.Width, d3.Height, d3.Format, d3.NumChannels };
	return CUDA_SUCCESS;
}

static enum side_kind kind_of(CUmemorytype type, CUdeviceptr dev)
{
	if (type == CU_MEMORYTYPE_ARRAY)
		return SIDE_ARRAY;
	if (type == CU_MEMORYTYPE_DEVICE)
		return SIDE_DEVICE;
	if (type == CU_MEMORYTYPE_UNIFIED && devmem_contains(dev))
		return SIDE_DEVICE;
	return SIDE_HOST;
}

static void pack_side(copy_side *s, CUmemorytype type, CUdeviceptr dev, CUarray array, size_t x, size_t y, size_t z,
		      size_t pitch, size_t height)
{
	*s = (copy_side){ type == CU_MEMORYTYPE_ARRAY ? CU_MEMORYTYPE_ARRAY : CU_MEMORYTYPE_DEVICE, dev,
			  handle_id(array), x, y, z, pitch, height };
}

/* Device memory and arrays only: one call to the worker. */
static CUresult copy_on_device(const CUDA_MEMCPY3D *p, CUstream stream, int async)
{
	memcpy3d_args a = { .width_bytes = p->WidthInBytes, .height = p->Height, .depth = p->Depth,
			    .stream = handle_id(stream) };
	uint64_t none[1];
	scalar_res r = { 0, { 0, none } };

	pack_side(&a.src, p->srcMemoryType, p->srcDevice, p->srcArray, p->srcXInBytes, p->srcY, p->srcZ,
		  p->srcPitch, p->srcHeight);
	pack_side(&a.dst, p->dstMemoryType, p->dstDevice, p->dstArray, p->dstXInBytes, p->dstY, p->dstZ,
		  p->dstPitch, p->dstHeight);
	if (async)
		return rpc_memcpy_3d_async(&a);
	return rpc_memcpy_3d(&a, &r);
}

/* Host and device memory: one 2D copy per slice. */
static CUresult copy_slices(const CUDA_MEMCPY3D *p, CUstream stream, int async)
{
	CUresult err = CUDA_SUCCESS;

	for (size_t z = 0; z < p->Depth && !err; z++) {
		CUDA_MEMCPY2D s = {
			p->srcXInBytes, p->srcY + (p->srcZ + z) * p->srcHeight, p->srcMemoryType, p->srcHost,
			p->srcDevice, NULL, p->srcPitch,
			p->dstXInBytes, p->dstY + (p->dstZ + z) * p->dstHeight, p->dstMemoryType, p->dstHost,
			p->dstDevice, NULL, p->dstPitch, p->WidthInBytes, p->Height };
		err = copy_2d(&s, stream, async);
	}
	return err;
}

/* Host memory and an array: through a packed device buffer, which the
 * first copy fills and the second empties. */
static CUresult copy_staged(const CUDA_MEMCPY3D *p, CUstream stream, int async, int to_array)
{
	CUDA_MEMCPY3D first = *p, second = *p;
	CUdeviceptr buf;
	CUresult err, freed;
	size_t size;

	if (__builtin_mul_overflow(p->WidthInBytes, p->Height, &size) || __builtin_mul_overflow(size, p->Depth, &size))
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = mempool_alloc_async(&buf, size, stream)))
		return err;
	first.dstMemoryType = CU_MEMORYTYPE_DEVICE, first.dstDevice = buf;
	first.dstXInBytes = first.dstY = first.dstZ = 0;
	first.dstPitch = p->WidthInBytes, first.dstHeight = p->Height;
	second.srcMemoryType = CU_MEMORYTYPE_DEVICE, second.srcDevice = buf;
	second.srcXInBytes = second.srcY = second.srcZ = 0;
	second.srcPitch = p->WidthInBytes, second.srcHeight = p->Height;
	err = to_array ? copy_slices(&first, stream, async) : copy_on_device(&first, stream, async);
	if (!err)
		err = to_array ? copy_on_device(&second, stream, async) : copy_slices(&second, stream, async);
	freed = mempool_free_async(buf, stream);
	return err ? err : freed;
}

static CUresult copy_3d(const CUDA_MEMCPY3D *p, CUstream stream, int async)
{
	enum side_kind src, dst;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	if (!p->WidthInBytes || !p->Height || !p->Depth)
		return CUDA_SUCCESS;
	src = kind_of(p->srcMemoryType, p->srcDevice);
	dst = kind_of(p->dstMemoryType, p->dstDevice);
	if (src != SIDE_HOST && dst != SIDE_HOST)
		return copy_on_device(p, stream, async);
	if (src != SIDE_ARRAY && dst != SIDE_ARRAY)
		return copy_slices(p, stream, async);
	return copy_staged(p, stream, async, dst == SIDE_ARRAY);
}

/* A 2D copy with an array on either side, as a 3D copy of depth 1. */
static CUresult copy_2d_array(const CUDA_MEMCPY2D *p, CUstream stream, int async)
{
	CUDA_MEMCPY3D c = { 0 };

	c.srcXInBytes = p->srcXInBytes, c.srcY = p->srcY, c.srcMemoryType = p->srcMemoryType;
	c.srcHost = p->srcHost, c.srcDevice = p->srcDevice, c.srcArray = p->srcArray, c.srcPitch = p->srcPitch;
	c.srcHeight = p->Height;
	c.dstXInBytes = p->dstXInBytes, c.dstY = p->dstY, c.dstMemoryType = p->dstMemoryType;
	c.dstHost = p->dstHost, c.dstDevice = p->dstDevice, c.dstArray = p->dstArray, c.dstPitch = p->dstPitch;
	c.dstHeight = p->Height;
	c.WidthInBytes = p->WidthInBytes, c.Height = p->Height, c.Depth = 1;
	return copy_3d(&c, stream, async);
}

/* A 2D copy: with an array on either side here, else copy.c's. */
static CUresult copy_2d_any(const CUDA_MEMCPY2D *p, CUstream stream, int async)
{
	if (p && (p->srcMemoryType == CU_MEMORYTYPE_ARRAY || p->dstMemoryType == CU_MEMORYTYPE_ARRAY))
		return copy_2d_array(p, stream, async);
	return copy_2d(p, stream, async);
}

CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
	return copy_2d_any(pCopy, NULL, 0);
}

CUresult CUDAAPI cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{
	return copy_2d_any(pCopy, NULL, 0);
}

CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
	return copy_2d_any(pCopy, hStream, 1);
}

CUresult CUDAAPI cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{
	return copy_3d(pCopy, NULL, 0);
}

CUresult CUDAAPI cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
	return copy_3d(pCopy, hStream, 1);
}

/* A copy between contexts: device pointers are unique across the GPUs
 * (unified addressing, one arena), so it is the 3D copy without them. */
static CUDA_MEMCPY3D from_peer(const CUDA_MEMCPY3D_PEER *p)
{
	CUDA_MEMCPY3D c = { 0 };

	c.srcXInBytes = p->srcXInBytes, c.srcY = p->srcY, c.srcZ = p->srcZ, c.srcLOD = p->srcLOD;
	c.srcMemoryType = p->srcMemoryType, c.srcHost = p->srcHost, c.srcDevice = p->srcDevice;
	c.srcArray = p->srcArray, c.srcPitch = p->srcPitch, c.srcHeight = p->srcHeight;
	c.dstXInBytes = p->dstXInBytes, c.dstY = p->dstY, c.dstZ = p->dstZ, c.dstLOD = p->dstLOD;
	c.dstMemoryType = p->dstMemoryType, c.dstHost = p->dstHost, c.dstDevice = p->dstDevice;
	c.dstArray = p->dstArray, c.dstPitch = p->dstPitch, c.dstHeight = p->dstHeight;
	c.WidthInBytes = p->WidthInBytes, c.Height = p->Height, c.Depth = p->Depth;
	return c;
}

CUresult CUDAAPI cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy)
{
	CUDA_MEMCPY3D c;

	if (!pCopy)
		return CUDA_ERROR_INVALID_VALUE;
	c = from_peer(pCopy);
	return copy_3d(&c, NULL, 0);
}

CUresult CUDAAPI cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{
	CUDA_MEMCPY3D c;

	if (!pCopy)
		return CUDA_ERROR_INVALID_VALUE;
	c = from_peer(pCopy);
	return copy_3d(&c, hStream, 1);
}

/* --- texture and surface objects --- */

static CUresult create_object(unsigned proc, CUDA_RESOURCE_DESC res, const CUDA_TEXTURE_DESC *tex,
			      const CUDA_RESOURCE_VIEW_DESC *view, unsigned long long *out)
{
	tex_object_args a = { { sizeof(res), (char *)&res }, { tex ? sizeof(*tex) : 0, (char *)tex },
			      { view ? sizeof(*view) : 0, (char *)view } };
	uint64_t v[1];
	scalar_res r = { 0, { 0, v } };
	CUresult err;

	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (res.resType == CU_RESOURCE_TYPE_ARRAY)
		res.res.array.hArray = (CUarray)(uintptr_t)handle_id(res.res.array.hArray);
	err = client_call(proc, (xdrproc_t)xdr_tex_object_args, &a, (xdrproc_t)xdr_scalar_res, &r);
	if (!err && r.v.v_len != 1)
		return client_lost("malformed reply");
	if (!err)
		*out = r.v.v_val[0];
	return err;
}

CUresult CUDAAPI cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
				   const CUDA_TEXTURE_DESC *pTexDesc, const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)
{
	if (!pResDesc || !pTexDesc)
		return CUDA_ERROR_INVALID_VALUE;
	return create_object(P_tex_object_create, *pResDesc, pTexDesc, pResViewDesc, pTexObject);
}

CUresult CUDAAPI cuSurfObjectCreate(CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc)
{
	if (!pResDesc)
		return CUDA_ERROR_INVALID_VALUE;
	return create_object(P_surf_object_create, *pResDesc, NULL, NULL, pSurfObject);
}

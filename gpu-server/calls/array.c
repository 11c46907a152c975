/*
 * array.c: CUDA arrays, copies to and from them, and texture and surface
 * objects. Arrays are handles like any other; copies name device memory
 * or arrays only (the client stages host memory through device memory);
 * the driver's texture and surface descriptors arrive as bytes, checked
 * for size, with an array in them given by its handle id. A checkpoint
 * carries them (objects.c).
 */
#include <string.h>
#include "calls.h"

/* An array's bytes for the quota, from its descriptor (the driver may
 * pad rows; formats without a plain element size count 4 bytes). */
static uint64_t array_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	uint64_t elem;

	switch (d->Format) {
	case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: elem = 1; break;
	case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: elem = 2; break;
	default: elem = 4; break;
	}
	return (uint64_t)d->Width * (d->Height ? d->Height : 1) * (d->Depth ? d->Depth : 1) *
	       (d->NumChannels ? d->NumChannels : 1) * elem;
}

CUresult wrap_array_create(struct worker *w, CUarray *out, size_t width, size_t height, size_t depth,
			   unsigned int format, unsigned int channels, unsigned int flags)
{
	CUDA_ARRAY3D_DESCRIPTOR d = { width, height, depth, (CUarray_format)format, channels, flags };
	CUresult err = quota_charge(w, array_bytes(&d), "a CUDA array");

	if (err)
		return err;
	if ((err = cuArray3DCreate(out, &d)))
		quota_release(w, array_bytes(&d));
	return err;
}

CUresult wrap_cuArrayDestroy(struct worker *w, CUarray a)
{
	CUDA_ARRAY3D_DESCRIPTOR d;
	int known = cuArray3DGetDescriptor(&d, a) == CUDA_SUCCESS;
	CUresult err = cuArrayDestroy(a);

	if (!err && known)
		quota_release(w, array_bytes(&d));
	return err;
}

CUresult wrap_array_descriptor(struct worker *w, CUarray a, size_t *width, size_t *height, size_t *depth,
			       unsigned int *format, unsigned int *channels, unsigned int *flags)
{
	CUDA_ARRAY3D_DESCRIPTOR d;
	CUresult err = cuArray3DGetDescriptor(&d, a);

	if (err)
		return err;
	*width = d.Width;
	*height = d.Height;
	*depth = d.Depth;
	*format = d.Format;
	*channels = d.NumChannels;
	*flags = d.Flags;
	return CUDA_SUCCESS;
}

static CUresult side(struct worker *w, const copy_side *s, CUmemorytype *type, CUdeviceptr *dev, CUarray *array)
{
	*type = (CUmemorytype)s->type;
	*dev = 0;
	*array = NULL;
	if (s->type == CU_MEMORYTYPE_DEVICE) {
		*dev = (CUdeviceptr)s->device;
		return CUDA_SUCCESS;
	}
	if (s->type == CU_MEMORYTYPE_ARRAY)
		return handle_get(w, H_ARRAY, s->array, (void **)array);
	return CUDA_ERROR_INVALID_VALUE;
}

static CUresult copy_3d(struct worker *w, const memcpy3d_args *a, int async)
{
	CUDA_MEMCPY3D c = { 0 };
	CUstream stream;
	CUresult err;

	if ((err = side(w, &a->src, &c.srcMemoryType, &c.srcDevice, &c.srcArray)) ||
	    (err = side(w, &a->dst, &c.dstMemoryType, &c.dstDevice, &c.dstArray)) ||
	    (err = handle_get(w, H_STREAM, a->stream, (void **)&stream)))
		return err;
	c.srcXInBytes = a->src.x_bytes, c.srcY = a->src.y, c.srcZ = a->src.z;
	c.srcPitch = a->src.pitch, c.srcHeight = a->src.height;
	c.dstXInBytes = a->dst.x_bytes, c.dstY = a->dst.y, c.dstZ = a->dst.z;
	c.dstPitch = a->dst.pitch, c.dstHeight = a->dst.height;
	c.WidthInBytes = a->width_bytes, c.Height = a->height, c.Depth = a->depth;
	return async ? cuMemcpy3DAsync(&c, stream) : cuMemcpy3D(&c);
}

CUresult hand_memcpy_3d(struct worker *w, void *args, void *res)
{
	return copy_3d(w, args, 0);
}

CUresult hand_memcpy_3d_async(struct worker *w, void *args, void *res)
{
	return copy_3d(w, args, 1);
}

/* The resource descriptor, its array translated; mipmapped arrays are
 * not offered. */
static CUresult resource(struct worker *w, const tex_object_args *a, CUDA_RESOURCE_DESC *r)
{
	if (a->res.res_len != sizeof(*r))
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(r, a->res.res_val, sizeof(*r));
	if (r->resType == CU_RESOURCE_TYPE_ARRAY)
		return handle_get(w, H_ARRAY, (uint64_t)(uintptr_t)r->res.array.hArray, (void **)&r->res.array.hArray);
	if (r->resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY)
		return CUDA_ERROR_NOT_SUPPORTED;
	return CUDA_SUCCESS;
}

static CUresult object_reply(struct worker *w, scalar_res *r, uint64_t value, int surface, const tex_object_args *a)
{
	CUresult err = one_scalar(r, value);

	if (!err) {
		w->calls->tex_objects++;
		objects_tex_created(w, value, surface, a);
	}
	return err;
}

CUresult hand_tex_object_create(struct worker *w, void *args, void *res)
{
	tex_object_args *a = args;
	CUDA_RESOURCE_DESC r;
	CUDA_TEXTURE_DESC t;
	CUDA_RESOURCE_VIEW_DESC v;
	CUtexObject obj;
	CUresult err;

	if ((err = resource(w, a, &r)))
		return err;
	if (a->tex.tex_len != sizeof(t) || (a->view.view_len && a->view.view_len != sizeof(v)))
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&t, a->tex.tex_val, sizeof(t));
	if (a->view.view_len)
		memcpy(&v, a->view.view_val, sizeof(v));
	if ((err = cuTexObjectCreate(&obj, &r, &t, a->view.view_len ? &v : NULL)))
		return err;
	return object_reply(w, res, obj, 0, a);
}

CUresult hand_surf_object_create(struct worker *w, void *args, void *res)
{
	tex_object_args *a = args;
	CUDA_RESOURCE_DESC r;
	CUsurfObject obj;
	CUresult err;

	if ((err = resource(w, a, &r)) || (err = cuSurfObjectCreate(&obj, &r)))
		return err;
	return object_reply(w, res, obj, 1, a);
}

CUresult wrap_cuTexObjectDestroy(struct worker *w, CUtexObject t)
{
	CUresult err = cuTexObjectDestroy(t);

	if (!err && w->calls->tex_objects)
		w->calls->tex_objects--;
	if (!err)
		objects_tex_destroyed(w, t);
	return err;
}

CUresult wrap_cuSurfObjectDestroy(struct worker *w, CUsurfObject s)
{
	CUresult err = cuSurfObjectDestroy(s);

	if (!err && w->calls->tex_objects)
		w->calls->tex_objects--;
	if (!err)
		objects_tex_destroyed(w, s);
	return err;
}

/*
 * CUDA arrays, 3D copies between arrays and device memory, and texture
 * and surface objects of the stand-in.  An array is plain memory, rows of
 * Width elements, Height rows a slice; an object is a copy of its
 * descriptors, and its value (what kernels get) is the copy's address, so
 * the kernels of kernels.c can read and write through it (fc_object).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "fakecuda.h"

struct fc_array {
	CUDA_ARRAY3D_DESCRIPTOR d;
	size_t elem;
	char *data;
};

static size_t format_size(CUarray_format f)
{
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
	default: return 0;
	}
}

static void array_free(void *p)
{
	struct fc_array *a = p;

	free(a->data);
	free(a);
}

CUresult cuArray3DCreate_v2(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	struct fc_ctx *ctx;
	struct fc_array *a;
	size_t elem;

	TRY(fc_current(&ctx));
	CHECK_ARG(out && d && d->Width && (d->NumChannels == 1 || d->NumChannels == 2 || d->NumChannels == 4));
	CHECK_ARG((elem = format_size(d->Format) * d->NumChannels));
	a = calloc(1, sizeof(*a));
	CHECK(a, CUDA_ERROR_OUT_OF_MEMORY);
	a->d = *d;
	a->elem = elem;
	a->data = calloc(d->Width * (d->Height ? d->Height : 1) * (d->Depth ? d->Depth : 1), elem);
	if (!a->data || fc_obj_add(a, FC_ARRAY, ctx, array_free)) {
		array_free(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*out = (CUarray)a;
	return CUDA_SUCCESS;
}

CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *d, CUarray a)
{
	TRY(fc_need_init());
	CHECK_ARG(d);
	CHECK(fc_obj_has(a, FC_ARRAY), CUDA_ERROR_INVALID_HANDLE);
	*d = ((struct fc_array *)a)->d;
	return CUDA_SUCCESS;
}

CUresult cuArrayDestroy(CUarray a)
{
	TRY(fc_need_init());
	CHECK(fc_obj_del(a, FC_ARRAY), CUDA_ERROR_INVALID_HANDLE);
	array_free(a);
	return CUDA_SUCCESS;
}

/* The byte address of (x, y, z) on one side, its row pitch and slice size. */
static CUresult locate(CUmemorytype type, CUdeviceptr dev, const void *host, CUarray arr, size_t x, size_t y,
		       size_t z, size_t pitch, size_t height, char **at, size_t *row, size_t *slice)
{
	if (type == CU_MEMORYTYPE_HOST) {     /* the driver's own copies (a checkpoint's) */
		CHECK_ARG(host);
		dev = (CUdeviceptr)(uintptr_t)host;
		type = CU_MEMORYTYPE_DEVICE;
	}
	if (type == CU_MEMORYTYPE_ARRAY) {
		struct fc_array *a = (struct fc_array *)arr;
		CHECK(fc_obj_has(arr, FC_ARRAY), CUDA_ERROR_INVALID_HANDLE);
		*row = a->d.Width * a->elem;
		*slice = *row * (a->d.Height ? a->d.Height : 1);
	} else {
		CHECK_ARG(type == CU_MEMORYTYPE_DEVICE);
		*row = pitch;
		*slice = pitch * height;
	}
	*at = (type == CU_MEMORYTYPE_ARRAY ? ((struct fc_array *)arr)->data : (char *)(uintptr_t)dev) +
	      z * *slice + y * *row + x;
	return CUDA_SUCCESS;
}

CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *p)
{
	size_t srow, sslice, drow, dslice;
	char *src, *dst;

	TRY(fc_need_init());
	CHECK_ARG(p);
	TRY(locate(p->srcMemoryType, p->srcDevice, p->srcHost, p->srcArray, p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch,
		   p->srcHeight, &src, &srow, &sslice));
	TRY(locate(p->dstMemoryType, p->dstDevice, p->dstHost, p->dstArray, p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch,
		   p->dstHeight, &dst, &drow, &dslice));
	for (size_t z = 0; z < p->Depth; z++)
		for (size_t y = 0; y < p->Height; y++)
			memmove(dst + z * dslice + y * drow, src + z * sslice + y * srow, p->WidthInBytes);
	return CUDA_SUCCESS;
}

CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *p, CUstream s)
{
	TRY(fc_check_stream(s));
	return cuMemcpy3D_v2(p);
}

/* One address space for all devices here: a peer copy is a 3D copy. */
CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *p)
{
	CUDA_MEMCPY3D c;

	_Static_assert(sizeof(c) == sizeof(*p), "the peer form lays out as the plain one");
	CHECK_ARG(p);
	memcpy(&c, p, sizeof(c));
	c.reserved0 = c.reserved1 = NULL;                /* the contexts */
	return cuMemcpy3D_v2(&c);
}

CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *p, CUstream s)
{
	TRY(fc_check_stream(s));
	return cuMemcpy3DPeer(p);
}

/* --- texture and surface objects --- */

struct fc_object {
	CUDA_RESOURCE_DESC res;
	CUDA_TEXTURE_DESC tex;
};

/* Objects are small numbers, as the driver's are: a slot of this table,
 * plus one; the lowest free slot is taken. */
#define MAX_OBJECTS 4096
static struct fc_object *objects[MAX_OBJECTS];
static pthread_mutex_t objects_lock = PTHREAD_MUTEX_INITIALIZER;

static struct fc_object *object_of(unsigned long long v)
{
	struct fc_object *o = v && v <= MAX_OBJECTS ? objects[v - 1] : NULL;

	return o && fc_obj_has(o, FC_OBJECT) ? o : NULL;
}

static CUresult object_create(unsigned long long *out, const CUDA_RESOURCE_DESC *res, const CUDA_TEXTURE_DESC *tex)
{
	struct fc_ctx *ctx;
	struct fc_object *o;

	TRY(fc_current(&ctx));
	CHECK_ARG(out && res);
	CHECK_ARG(res->resType != CU_RESOURCE_TYPE_ARRAY || fc_obj_has(res->res.array.hArray, FC_ARRAY));
	CHECK(res->resType == CU_RESOURCE_TYPE_ARRAY || res->resType == CU_RESOURCE_TYPE_LINEAR,
	      CUDA_ERROR_NOT_SUPPORTED);
	o = calloc(1, sizeof(*o));
	CHECK(o, CUDA_ERROR_OUT_OF_MEMORY);
	o->res = *res;
	if (tex)
		o->tex = *tex;
	pthread_mutex_lock(&objects_lock);
	unsigned i = 0;
	while (i < MAX_OBJECTS && object_of(i + 1))
		i++;
	if (i == MAX_OBJECTS || fc_obj_add(o, FC_OBJECT, ctx, free)) {
		pthread_mutex_unlock(&objects_lock);
		free(o);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	objects[i] = o;
	pthread_mutex_unlock(&objects_lock);
	*out = i + 1;
	return CUDA_SUCCESS;
}

static CUresult object_destroy(unsigned long long v)
{
	struct fc_object *o;

	TRY(fc_need_init());
	pthread_mutex_lock(&objects_lock);
	o = object_of(v);
	if (o) {
		objects[v - 1] = NULL;
		fc_obj_del(o, FC_OBJECT);
		free(o);
	}
	pthread_mutex_unlock(&objects_lock);
	CHECK(o, CUDA_ERROR_INVALID_VALUE);
	return CUDA_SUCCESS;
}

CUresult cuTexObjectCreate(CUtexObject *out, const CUDA_RESOURCE_DESC *res, const CUDA_TEXTURE_DESC *tex,
			   const CUDA_RESOURCE_VIEW_DESC *view)
{
	CHECK_ARG(tex);
	return object_create(out, res, tex);
}

CUresult cuTexObjectDestroy(CUtexObject t)
{
	return object_destroy(t);
}

CUresult cuSurfObjectCreate(CUsurfObject *out, const CUDA_RESOURCE_DESC *res)
{
	return object_create(out, res, NULL);
}

CUresult cuSurfObjectDestroy(CUsurfObject s)
{
	return object_destroy(s);
}

/* For kernels: element (x, y) of the object's memory (linear: x only),
 * NULL outside it. */
void *fc_object_at(unsigned long long v, size_t x, size_t y)
{
	struct fc_object *o = object_of(v);

	if (!o)
		return NULL;
	if (o->res.resType == CU_RESOURCE_TYPE_LINEAR) {
		size_t elem = format_size(o->res.res.linear.format) * o->res.res.linear.numChannels;
		return elem && (x + 1) * elem <= o->res.res.linear.sizeInBytes && !y ?
		       (char *)(uintptr_t)o->res.res.linear.devPtr + x * elem : NULL;
	}
	struct fc_array *a = (struct fc_array *)o->res.res.array.hArray;
	if (x >= a->d.Width || y >= (a->d.Height ? a->d.Height : 1))
		return NULL;
	return a->data + (y * a->d.Width + x) * a->elem;
}

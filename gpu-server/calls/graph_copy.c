/*
 * graph_copy.c: a copy node's parameters between the wire and the driver,
 * both ways: each side is device memory, an array, or host memory in a
 * region the client shares with the worker (a host side must stay inside
 * its region). Below graph_node.c, which turns every node's parameters,
 * and graph_stage.c, whose staged copies end in a plain copy.
 */
#include <string.h>
#include "calls.h"

/* A node's context: 0 names the current one. */
CUresult graph_ctx_in(struct worker *w, uint64_t id, CUcontext *ctx)
{
	*ctx = NULL;
	return id ? handle_get(w, H_CTX, id, (void **)ctx) : cuCtxGetCurrent(ctx);
}

/* Where the client's host memory is in the worker: a region it shares. */
static CUresult host_of(struct worker *w, uint64_t region, uint64_t off, void **out)
{
	if (!region || region >= MAX_HOST_REGIONS || !w->calls->regions[region].base ||
	    off > w->calls->regions[region].size) {
		log_warn("client %s: a graph copy names host memory not shared with the worker", w->peer);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	*out = (char *)w->calls->regions[region].base + off;
	return CUDA_SUCCESS;
}

static CUresult copy_side_in(struct worker *w, const uint64_t *v, CUmemorytype *type, const void **host,
			     CUdeviceptr *dev, CUarray *array, size_t *x, size_t *y, size_t *z, size_t *pitch,
			     size_t *height)
{
	CUresult err = CUDA_SUCCESS;

	*type = (CUmemorytype)v[GM_TYPE];
	*x = v[GM_X], *y = v[GM_Y], *z = v[GM_Z], *pitch = v[GM_PITCH], *height = v[GM_HEIGHT];
	if (*type == CU_MEMORYTYPE_DEVICE || *type == CU_MEMORYTYPE_UNIFIED) {
		*dev = (CUdeviceptr)v[GM_DEVICE];
		*type = CU_MEMORYTYPE_DEVICE;
	} else if (*type == CU_MEMORYTYPE_ARRAY) {
		err = handle_get(w, H_ARRAY, v[GM_ARRAY], (void **)array);
	} else if (*type == CU_MEMORYTYPE_HOST) {
		err = host_of(w, v[GM_REGION], v[GM_DEVICE], (void **)host);
	} else {
		err = CUDA_ERROR_INVALID_VALUE;
	}
	return err;
}

/* A host side of a copy must stay inside its region: the last byte the
 * copy reaches, from the side's offset and the copy's shape. */
static CUresult host_span_ok(struct worker *w, const uint64_t *v, uint64_t width, uint64_t rows, uint64_t depth)
{
	unsigned __int128 pitch = v[GM_PITCH] ? v[GM_PITCH] : width, height = v[GM_HEIGHT] ? v[GM_HEIGHT] : rows;
	unsigned __int128 end;

	if (v[GM_TYPE] != CU_MEMORYTYPE_HOST)
		return CUDA_SUCCESS;
	rows = rows ? rows : 1, depth = depth ? depth : 1;
	end = (unsigned __int128)v[GM_DEVICE] + v[GM_X] + ((unsigned __int128)v[GM_Z] * height + v[GM_Y]) * pitch +
	      ((depth - 1) * height + (rows - 1)) * pitch + width;
	return end <= w->calls->regions[v[GM_REGION]].size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* A copy's scalars (GM_N of them) -> the driver's parameters. */
CUresult graph_copy_in(struct worker *w, const uint64_t *v, CUgraphNodeParams *p)
{
	CUDA_MEMCPY3D *c = &p->memcpy.copyParams;
	CUresult err;

	memset(p, 0, sizeof(*p));
	p->type = CU_GRAPH_NODE_TYPE_MEMCPY;
	if ((err = copy_side_in(w, v, &c->srcMemoryType, &c->srcHost, &c->srcDevice, &c->srcArray,
				&c->srcXInBytes, &c->srcY, &c->srcZ, &c->srcPitch, &c->srcHeight)) ||
	    (err = copy_side_in(w, v + GM_SIDE, &c->dstMemoryType, (const void **)&c->dstHost, &c->dstDevice,
				&c->dstArray, &c->dstXInBytes, &c->dstY, &c->dstZ, &c->dstPitch, &c->dstHeight)))
		return err;
	c->WidthInBytes = v[GM_WIDTH], c->Height = v[GM_ROWS], c->Depth = v[GM_DEPTH];
	if ((err = host_span_ok(w, v, v[GM_WIDTH], v[GM_ROWS], v[GM_DEPTH])) ||
	    (err = host_span_ok(w, v + GM_SIDE, v[GM_WIDTH], v[GM_ROWS], v[GM_DEPTH])))
		return err;
	return graph_ctx_in(w, v[GM_CTX], &p->memcpy.copyCtx);
}

static void copy_side_out(struct worker *w, uint64_t *v, CUmemorytype type, const void *host, CUdeviceptr dev,
			  CUarray array, size_t x, size_t y, size_t z, size_t pitch, size_t height)
{
	v[GM_TYPE] = type;
	v[GM_DEVICE] = dev;
	v[GM_ARRAY] = array ? handle_put(w, H_ARRAY, array) : 0;
	v[GM_X] = x, v[GM_Y] = y, v[GM_Z] = z, v[GM_PITCH] = pitch, v[GM_HEIGHT] = height;
	for (unsigned r = 1; type == CU_MEMORYTYPE_HOST && r < MAX_HOST_REGIONS; r++) {
		const char *b = w->calls->regions[r].base;
		if (b && (const char *)host >= b && (const char *)host <= b + w->calls->regions[r].size) {
			v[GM_REGION] = r;
			v[GM_DEVICE] = (uint64_t)((const char *)host - b);
		}
	}
}

/* The driver's parameters -> a copy's scalars (GM_N of them). */
void graph_copy_out(struct worker *w, const CUDA_MEMCPY3D *c, uint64_t *v)
{
	copy_side_out(w, v, c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcXInBytes, c->srcY,
		      c->srcZ, c->srcPitch, c->srcHeight);
	copy_side_out(w, v + GM_SIDE, c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstXInBytes,
		      c->dstY, c->dstZ, c->dstPitch, c->dstHeight);
	v[GM_WIDTH] = c->WidthInBytes, v[GM_ROWS] = c->Height, v[GM_DEPTH] = c->Depth;
}

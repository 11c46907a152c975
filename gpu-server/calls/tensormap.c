/*
 * tensormap.c: tensor maps (TMA descriptors) for the client: the driver
 * encodes them here from the parameters the client sent as words
 * (interposer/tensormap.c packs them; wire/cicada.x says in which
 * order), and the map's 128 bytes go back. Nothing is kept: a map is a
 * pure function of its parameters, among them a device address that is
 * the same in the client.
 */
#include <stdlib.h>
#include <string.h>
#include "calls.h"

#define RANK_MAX 5

struct words {
	const uint64_t *v;
	unsigned n, at;
	int short_;                          /* asked past the end */
};

static uint64_t get(struct words *w)
{
	if (w->at < w->n)
		return w->v[w->at++];
	w->short_ = 1;
	return 0;
}

static void get_u64s(struct words *w, cuuint64_t *out, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		out[i] = get(w);
}

static void get_u32s(struct words *w, cuuint32_t *out, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		out[i] = (cuuint32_t)get(w);
}

static void get_ints(struct words *w, int *out, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		out[i] = (int)(int64_t)get(w);
}

/* What every encoder begins with; 0 if the rank is one it takes. */
struct head {
	CUtensorMapDataType type;
	cuuint32_t rank;
	void *addr;
	cuuint64_t dims[RANK_MAX], strides[RANK_MAX];
};

static int get_head(struct words *w, struct head *h, unsigned min_rank)
{
	h->type = (CUtensorMapDataType)get(w);
	h->rank = (cuuint32_t)get(w);
	h->addr = (void *)(uintptr_t)get(w);
	if (h->rank < min_rank || h->rank > RANK_MAX)
		return -1;
	get_u64s(w, h->dims, h->rank);
	get_u64s(w, h->strides, h->rank - 1);
	return 0;
}

static CUresult tiled(struct words *w, CUtensorMap *map)
{
	cuuint32_t box[RANK_MAX], estr[RANK_MAX];
	uint64_t il, sw, l2, oob;
	struct head h;

	if (get_head(w, &h, 1))
		return CUDA_ERROR_INVALID_VALUE;
	get_u32s(w, box, h.rank);
	get_u32s(w, estr, h.rank);
	il = get(w), sw = get(w), l2 = get(w), oob = get(w);
	if (w->short_ || w->at != w->n)
		return CUDA_ERROR_INVALID_VALUE;
	return cuTensorMapEncodeTiled(map, h.type, h.rank, h.addr, h.dims, h.strides, box, estr,
				      (CUtensorMapInterleave)il, (CUtensorMapSwizzle)sw, (CUtensorMapL2promotion)l2,
				      (CUtensorMapFloatOOBfill)oob);
}

static CUresult im2col(struct words *w, CUtensorMap *map)
{
	int lower[RANK_MAX], upper[RANK_MAX];
	cuuint32_t channels, pixels, estr[RANK_MAX];
	uint64_t il, sw, l2, oob;
	struct head h;

	if (get_head(w, &h, 3))
		return CUDA_ERROR_INVALID_VALUE;
	get_ints(w, lower, h.rank - 2);
	get_ints(w, upper, h.rank - 2);
	channels = (cuuint32_t)get(w);
	pixels = (cuuint32_t)get(w);
	get_u32s(w, estr, h.rank);
	il = get(w), sw = get(w), l2 = get(w), oob = get(w);
	if (w->short_ || w->at != w->n)
		return CUDA_ERROR_INVALID_VALUE;
	return cuTensorMapEncodeIm2col(map, h.type, h.rank, h.addr, h.dims, h.strides, lower, upper, channels, pixels,
				       estr, (CUtensorMapInterleave)il, (CUtensorMapSwizzle)sw,
				       (CUtensorMapL2promotion)l2, (CUtensorMapFloatOOBfill)oob);
}

static CUresult im2col_wide(struct words *w, CUtensorMap *map)
{
	cuuint32_t channels, pixels, estr[RANK_MAX];
	uint64_t il, mode, sw, l2, oob;
	int lower, upper;
	struct head h;

	if (get_head(w, &h, 3))
		return CUDA_ERROR_INVALID_VALUE;
	lower = (int)(int64_t)get(w);
	upper = (int)(int64_t)get(w);
	channels = (cuuint32_t)get(w);
	pixels = (cuuint32_t)get(w);
	get_u32s(w, estr, h.rank);
	il = get(w), mode = get(w), sw = get(w), l2 = get(w), oob = get(w);
	if (w->short_ || w->at != w->n)
		return CUDA_ERROR_INVALID_VALUE;
	return cuTensorMapEncodeIm2colWide(map, h.type, h.rank, h.addr, h.dims, h.strides, lower, upper, channels,
					   pixels, estr, (CUtensorMapInterleave)il, (CUtensorMapIm2ColWideMode)mode,
					   (CUtensorMapSwizzle)sw, (CUtensorMapL2promotion)l2,
					   (CUtensorMapFloatOOBfill)oob);
}

static CUresult replace(const tensor_map_args *a, struct words *w, CUtensorMap *map)
{
	void *addr = (void *)(uintptr_t)get(w);

	if (w->short_ || w->at != w->n || a->map.map_len != sizeof(*map))
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(map, a->map.map_val, sizeof(*map));
	return cuTensorMapReplaceAddress(map, addr);
}

/* in: the encoder and its parameters; out: the map's bytes. */
CUresult hand_tensor_map_encode(struct worker *w, void *args, void *res)
{
	tensor_map_args *a = args;
	bytes_res *r = res;
	struct words in = { a->v.v_val, a->v.v_len, 0, 0 };
	CUtensorMap map;
	CUresult err;

	memset(&map, 0, sizeof(map));
	switch (a->kind) {
	case TENSOR_MAP_TILED: err = tiled(&in, &map); break;
	case TENSOR_MAP_IM2COL: err = im2col(&in, &map); break;
	case TENSOR_MAP_IM2COL_WIDE: err = im2col_wide(&in, &map); break;
	case TENSOR_MAP_REPLACE: err = replace(a, &in, &map); break;
	default: err = CUDA_ERROR_INVALID_VALUE; break;
	}
	if (err)
		return err;
	if (!(r->data.data_val = malloc(sizeof(map))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	memcpy(r->data.data_val, &map, sizeof(map));
	r->data.data_len = sizeof(map);
	return CUDA_SUCCESS;
}

/*
 * tensormap.c: tensor maps, the TMA descriptors of Hopper and later GPUs
 * (cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col, ...Im2colWide and
 * cuTensorMapReplaceAddress), encoded by the worker's driver. A map
 * describes device memory by its address, which is the same in the
 * worker, so the program passes it to its kernels by value as it would
 * natively. The parameters travel as words (wire/cicada.x says in which
 * order); arrays the driver would read are checked here first.
 */
#include <string.h>
#include "interposer.h"

#define RANK_MAX 5

struct packer {
	tensor_map_args a;
	uint64_t v[TENSOR_MAP_WORDS];
};

static void put(struct packer *p, uint64_t x)
{
	if (p->a.v.v_len < TENSOR_MAP_WORDS)
		p->v[p->a.v.v_len++] = x;
}

static void put_u64s(struct packer *p, const cuuint64_t *x, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		put(p, x[i]);
}

static void put_u32s(struct packer *p, const cuuint32_t *x, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		put(p, x[i]);
}

static void put_ints(struct packer *p, const int *x, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		put(p, (uint64_t)(int64_t)x[i]);
}

/* The parameters every encoder begins with. */
static void put_head(struct packer *p, unsigned kind, CUtensorMapDataType type, cuuint32_t rank, void *addr,
		     const cuuint64_t *dims, const cuuint64_t *strides)
{
	p->a.kind = kind;
	p->a.v.v_val = p->v;
	put(p, (uint64_t)type);
	put(p, rank);
	put(p, (uint64_t)(uintptr_t)addr);
	put_u64s(p, dims, rank);
	put_u64s(p, strides, rank - 1);
}

/* What the tiled and im2col encoders end with. */
static void put_tail(struct packer *p, const cuuint32_t *estr, cuuint32_t rank, CUtensorMapInterleave il,
		     CUtensorMapSwizzle sw, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
	put_u32s(p, estr, rank);
	put(p, (uint64_t)il);
	put(p, (uint64_t)sw);
	put(p, (uint64_t)l2);
	put(p, (uint64_t)oob);
}

static CUresult encode(struct packer *p, CUtensorMap *map)
{
	bytes_res r = { 0 };
	CUresult err = rpc_tensor_map_encode(&p->a, &r);

	if (!err && r.data.data_len != sizeof(*map))
		err = client_lost("malformed tensor map");
	if (!err)
		memcpy(map, r.data.data_val, sizeof(*map));
	xdr_free((xdrproc_t)xdr_bytes_res, (char *)&r);
	return err;
}

CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
					cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim,
					const cuuint64_t *globalStrides, const cuuint32_t *boxDim,
					const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
					CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
					CUtensorMapFloatOOBfill oobFill)
{
	struct packer p = { 0 };

	if (!tensorMap || !tensorRank || tensorRank > RANK_MAX || !globalDim || (tensorRank > 1 && !globalStrides) ||
	    !boxDim || !elementStrides)
		return CUDA_ERROR_INVALID_VALUE;
	put_head(&p, TENSOR_MAP_TILED, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides);
	put_u32s(&p, boxDim, tensorRank);
	put_tail(&p, elementStrides, tensorRank, interleave, swizzle, l2Promotion, oobFill);
	return encode(&p, tensorMap);
}

CUresult CUDAAPI cuTensorMapEncodeIm2col(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
					 cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim,
					 const cuuint64_t *globalStrides, const int *pixelBoxLowerCorner,
					 const int *pixelBoxUpperCorner, cuuint32_t channelsPerPixel,
					 cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides,
					 CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
					 CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)
{
	struct packer p = { 0 };

	if (!tensorMap || tensorRank < 3 || tensorRank > RANK_MAX || !globalDim || !globalStrides ||
	    !pixelBoxLowerCorner || !pixelBoxUpperCorner || !elementStrides)
		return CUDA_ERROR_INVALID_VALUE;
	put_head(&p, TENSOR_MAP_IM2COL, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides);
	put_ints(&p, pixelBoxLowerCorner, tensorRank - 2);
	put_ints(&p, pixelBoxUpperCorner, tensorRank - 2);
	put(&p, channelsPerPixel);
	put(&p, pixelsPerColumn);
	put_tail(&p, elementStrides, tensorRank, interleave, swizzle, l2Promotion, oobFill);
	return encode(&p, tensorMap);
}

CUresult CUDAAPI cuTensorMapEncodeIm2colWide(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
					     cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim,
					     const cuuint64_t *globalStrides, int pixelBoxLowerCornerWidth,
					     int pixelBoxUpperCornerWidth, cuuint32_t channelsPerPixel,
					     cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides,
					     CUtensorMapInterleave interleave, CUtensorMapIm2ColWideMode mode,
					     CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
					     CUtensorMapFloatOOBfill oobFill)
{
	struct packer p = { 0 };

	if (!tensorMap || tensorRank < 3 || tensorRank > RANK_MAX || !globalDim || !globalStrides || !elementStrides)
		return CUDA_ERROR_INVALID_VALUE;
	put_head(&p, TENSOR_MAP_IM2COL_WIDE, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides);
	put(&p, (uint64_t)(int64_t)pixelBoxLowerCornerWidth);
	put(&p, (uint64_t)(int64_t)pixelBoxUpperCornerWidth);
	put(&p, channelsPerPixel);
	put(&p, pixelsPerColumn);
	put_u32s(&p, elementStrides, tensorRank);
	put(&p, (uint64_t)interleave);
	put(&p, (uint64_t)mode);
	put(&p, (uint64_t)swizzle);
	put(&p, (uint64_t)l2Promotion);
	put(&p, (uint64_t)oobFill);
	return encode(&p, tensorMap);
}

CUresult CUDAAPI cuTensorMapReplaceAddress(CUtensorMap *tensorMap, void *globalAddress)
{
	struct packer p = { 0 };

	if (!tensorMap)
		return CUDA_ERROR_INVALID_VALUE;
	p.a.kind = TENSOR_MAP_REPLACE;
	p.a.v.v_val = p.v;
	put(&p, (uint64_t)(uintptr_t)globalAddress);
	p.a.map.map_val = (char *)tensorMap;
	p.a.map.map_len = sizeof(*tensorMap);
	return encode(&p, tensorMap);
}

/*
 * tensormap.c: the stand-in's tensor maps. No TMA runs here, so a map is
 * only its parameters packed into the 16 words, each checked as the
 * driver documents (rank, alignments, sizes), so that a map made through
 * Cicada can be compared with one made natively, bit for bit, and a bad
 * parameter is refused alike.
 */
#include <string.h>
#include "fakecuda.h"

#define RANK_MAX 5

static int head_ok(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *addr,
		   const cuuint64_t *dims, const cuuint64_t *strides, CUtensorMapInterleave il)
{
	if (!map || (uintptr_t)map % 64 || (unsigned)type > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B || !rank ||
	    rank > RANK_MAX || (il != CU_TENSOR_MAP_INTERLEAVE_NONE && rank < 3) || !addr ||
	    (uintptr_t)addr % (il == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16) || !dims || (rank > 1 && !strides))
		return 0;
	for (cuuint32_t i = 0; i < rank; i++)
		if (!dims[i] || dims[i] > (1ull << 32))
			return 0;
	for (cuuint32_t i = 0; i + 1 < rank; i++)
		if (strides[i] % 16 || strides[i] >= (1ull << 40))
			return 0;
	return 1;
}

static void pack_head(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *addr,
		      const cuuint64_t *dims, const cuuint64_t *strides, uint64_t modes)
{
	memset(map, 0, sizeof(*map));
	map->opaque[0] = (uint64_t)(uintptr_t)addr;
	map->opaque[1] = (uint64_t)type | (uint64_t)rank << 8 | modes << 16;
	for (cuuint32_t i = 0; i < rank; i++)
		map->opaque[2 + i] = dims[i];
	for (cuuint32_t i = 0; i + 1 < rank; i++)
		map->opaque[7 + i] = strides[i];
}

static int strides_ok(const cuuint32_t *estr, cuuint32_t rank)
{
	if (!estr)
		return 0;
	for (cuuint32_t i = 0; i < rank; i++)
		if (!estr[i] || estr[i] > 8)
			return 0;
	return 1;
}

static uint64_t modes(CUtensorMapInterleave il, CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
		      CUtensorMapFloatOOBfill oob, unsigned extra)
{
	return (uint64_t)il | (uint64_t)sw << 8 | (uint64_t)l2 << 16 | (uint64_t)oob << 24 | (uint64_t)extra << 32;
}

CUresult cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *addr,
				const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
				const cuuint32_t *estr, CUtensorMapInterleave il, CUtensorMapSwizzle sw,
				CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
	CHECK_ARG(head_ok(map, type, rank, addr, dims, strides, il) && box && strides_ok(estr, rank));
	for (cuuint32_t i = 0; i < rank; i++)
		CHECK_ARG(box[i] && box[i] <= 256);
	pack_head(map, type, rank, addr, dims, strides, modes(il, sw, l2, oob, 0));
	for (cuuint32_t i = 0; i < rank; i++) {
		map->opaque[11] |= (uint64_t)box[i] << (12 * i);
		map->opaque[12] |= (uint64_t)estr[i] << (4 * i);
	}
	return CUDA_SUCCESS;
}

CUresult cuTensorMapEncodeIm2col(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *addr,
				 const cuuint64_t *dims, const cuuint64_t *strides, const int *lower, const int *upper,
				 cuuint32_t channels, cuuint32_t pixels, const cuuint32_t *estr,
				 CUtensorMapInterleave il, CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
				 CUtensorMapFloatOOBfill oob)
{
	CHECK_ARG(rank >= 3 && head_ok(map, type, rank, addr, dims, strides, il) && lower && upper &&
		  channels && channels <= 256 && pixels && pixels <= 1024 && strides_ok(estr, rank));
	pack_head(map, type, rank, addr, dims, strides, modes(il, sw, l2, oob, 1));
	for (cuuint32_t i = 0; i + 2 < rank; i++)
		map->opaque[11] |= ((uint64_t)(uint16_t)lower[i] | (uint64_t)(uint16_t)upper[i] << 16) << (32 * i % 64);
	map->opaque[12] = (uint64_t)channels | (uint64_t)pixels << 32;
	for (cuuint32_t i = 0; i < rank; i++)
		map->opaque[13] |= (uint64_t)estr[i] << (4 * i);
	return CUDA_SUCCESS;
}

CUresult cuTensorMapEncodeIm2colWide(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *addr,
				     const cuuint64_t *dims, const cuuint64_t *strides, int lower, int upper,
				     cuuint32_t channels, cuuint32_t pixels, const cuuint32_t *estr,
				     CUtensorMapInterleave il, CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle sw,
				     CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
	CHECK_ARG(rank >= 3 && head_ok(map, type, rank, addr, dims, strides, il) && channels && channels <= 256 &&
		  pixels && pixels <= 1024 && strides_ok(estr, rank));
	pack_head(map, type, rank, addr, dims, strides, modes(il, sw, l2, oob, 2 | (unsigned)mode << 4));
	map->opaque[11] = (uint64_t)(uint32_t)lower | (uint64_t)(uint32_t)upper << 32;
	map->opaque[12] = (uint64_t)channels | (uint64_t)pixels << 32;
	for (cuuint32_t i = 0; i < rank; i++)
		map->opaque[13] |= (uint64_t)estr[i] << (4 * i);
	return CUDA_SUCCESS;
}

CUresult cuTensorMapReplaceAddress(CUtensorMap *map, void *addr)
{
	CHECK_ARG(map && (uintptr_t)map % 64 == 0 && addr && (uintptr_t)addr % 16 == 0 && map->opaque[1]);
	map->opaque[0] = (uint64_t)(uintptr_t)addr;
	return CUDA_SUCCESS;
}

/*
 * tensor_map: tensor maps (TMA descriptors) as FlashAttention-3, Triton's
 * and CUTLASS's Hopper kernels make them: tiled maps of rank 1 to 5 with
 * swizzles, L2 promotions and out-of-bound fills, im2col and wide im2col
 * maps, a map moved to another address, and maps the driver refuses.
 * Prints each result and each map's 128 bytes (moved to one fixed
 * address, as the allocation's differs from run to run): through Cicada
 * they must be what the driver makes natively.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

static CUdeviceptr base;

/* The result, and a map made at the allocation (whose address differs
 * between runs) moved to one fixed address, then its bytes. */
#define CANON ((void *)(uintptr_t)0x7e0000000000ull)

static void show(const char *what, CUresult r, CUtensorMap *map)
{
	printf("%s: %s", what, errname(r));
	if (r == CUDA_SUCCESS) {
		r = cuTensorMapReplaceAddress(map, CANON);
		printf(", moved: %s", errname(r));
	}
	if (r == CUDA_SUCCESS) {
		printf(" ");
		for (int i = 0; i < 16; i++)
			printf("%016llx", (unsigned long long)map->opaque[i]);
	}
	printf("\n");
}

/* A float tensor of the given rank: dims 64, 8, 8, ... packed. */
static void shape(unsigned rank, cuuint64_t *dims, cuuint64_t *strides)
{
	cuuint64_t bytes = 4;

	for (unsigned i = 0; i < rank; i++) {
		dims[i] = i ? 8 : 64;
		bytes *= dims[i];
		if (i + 1 < rank)
			strides[i] = bytes;
	}
}

static void tiled(void)
{
	static const CUtensorMapSwizzle sw[] = { CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_SWIZZLE_32B,
						  CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_SWIZZLE_128B };
	cuuint64_t dims[5], strides[5];
	cuuint32_t box[5] = { 32, 4, 2, 2, 1 }, estr[5] = { 1, 1, 1, 2, 1 };
	char what[96];
	CUtensorMap map;

	for (unsigned rank = 1; rank <= 5; rank++) {
		/* the inner box fits the swizzle's span (32, 64, 128 bytes) */
		box[0] = sw[rank % 4] == CU_TENSOR_MAP_SWIZZLE_NONE ? 32 : 4u << sw[rank % 4];
		shape(rank, dims, strides);
		snprintf(what, sizeof(what), "tiled rank %u swizzle %u l2 %u", rank, (unsigned)sw[rank % 4], rank % 4);
		show(what, cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, rank, (void *)base, dims,
						  strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, sw[rank % 4],
						  (CUtensorMapL2promotion)(rank % 4),
						  rank % 2 ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE :
							     CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA),
		     &map);
	}
	shape(2, dims, strides);
	show("tiled bf16 box 64x8", cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)base,
							     dims, strides, (cuuint32_t[]){ 64, 8 }, estr,
							     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
							     CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
							     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
	     &map);
	show("moved within the allocation", cuTensorMapReplaceAddress(&map, (void *)(base + 4096)), &map);
	show("moved to a misaligned address", cuTensorMapReplaceAddress(&map, (void *)(base + 8)), &map);
	/* refused alike */
	show("tiled rank 6", cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 6, (void *)base, dims,
						    strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
						    CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
						    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
	     &map);
	show("tiled misaligned address", cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2,
								(void *)(base + 4), dims, strides, box, estr,
								CU_TENSOR_MAP_INTERLEAVE_NONE,
								CU_TENSOR_MAP_SWIZZLE_NONE,
								CU_TENSOR_MAP_L2_PROMOTION_NONE,
								CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
	     &map);
	show("tiled box of 0", cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)base, dims,
						      strides, (cuuint32_t[]){ 0, 4 }, estr,
						      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
						      CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
	     &map);
	show("tiled no dims", cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)base, NULL,
						     strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
						     CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
						     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
	     &map);
	show("tiled no map", cuTensorMapEncodeTiled(NULL, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)base, dims,
						    strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
						    CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
						    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
	     NULL);
}

static void im2col(void)
{
	static const int lower[3][3] = { { -1 }, { -1, -1 }, { -1, -1, -1 } }, upper[3][3] = { { 1 }, { 1, 1 }, { 1, 1, 1 } };
	cuuint64_t dims[5], strides[5];
	cuuint32_t estr[5] = { 1, 1, 1, 1, 1 };
	char what[64];
	CUtensorMap map;

	for (unsigned rank = 3; rank <= 5; rank++) {
		shape(rank, dims, strides);
		snprintf(what, sizeof(what), "im2col rank %u", rank);
		show(what, cuTensorMapEncodeIm2col(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, rank, (void *)base, dims,
						   strides, lower[rank - 3], upper[rank - 3], 32, 64, estr,
						   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
						   CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
		     &map);
	}
	shape(3, dims, strides);
	show("im2col rank 2", cuTensorMapEncodeIm2col(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)base, dims,
						      strides, lower[0], upper[0], 32, 64, estr,
						      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
						      CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
	     &map);
	/* Blackwell's: a Hopper driver may refuse it, the same through Cicada */
	show("im2col wide rank 3", cuTensorMapEncodeIm2colWide(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, (void *)base,
								dims, strides, -1, 1, 32, 64, estr,
								CU_TENSOR_MAP_INTERLEAVE_NONE,
								CU_TENSOR_MAP_IM2COL_WIDE_MODE_W,
								CU_TENSOR_MAP_SWIZZLE_128B,
								CU_TENSOR_MAP_L2_PROMOTION_NONE,
								CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
	     &map);
}

int main(void)
{
	CUcontext ctx;
	CUdevice dev;
	CUdeviceptr mem;

	start("tensor_map");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuMemAlloc(&mem, 8 << 20));
	base = (mem + 1023) & ~(CUdeviceptr)1023;
	tiled();
	im2col();
	CHECK(cuMemFree(mem));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	printf("done\n");
	return 0;
}

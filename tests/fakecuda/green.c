/*
 * green.c: the stand-in's green contexts. A device's SMs are one
 * resource (a set of SM numbers); cuDevSmResourceSplitByCount cuts it into
 * groups of a multiple of 8 SMs (the H100's and H200's granularity), in
 * order; a descriptor joins groups of one split; a green context made
 * from it is a view of the primary context (the same modules, memory and
 * limits) whose launches run on its SMs alone: the work of streams made
 * while it is current, and of the NULL stream while it is. The sm_ids
 * kernel (kernels.c) shows which SMs ran a launch, as %smid does.
 */
#include <stdlib.h>
#include <string.h>
#include "fakecuda.h"

#define SM_UNIT 8
#define RES_MAGIC 0x6772656e

/* What a CUdevResource carries in its internal bytes. */
struct res_inside {
	uint32_t magic;
	uint32_t split;                 /* which split made it (0: the device's) */
	CUdevice dev;
	uint64_t set[FC_SM_WORDS];
};

struct desc {
	CUdevice dev;
	uint64_t set[FC_SM_WORDS];
};

struct green {
	struct fc_ctx view;             /* what cuCtxFromGreenCtx gives */
	uint64_t set[FC_SM_WORDS];
};

static unsigned splits;

static unsigned count(const uint64_t *set)
{
	unsigned n = 0;

	for (int i = 0; i < FC_SM_WORDS; i++)
		n += (unsigned)__builtin_popcountll(set[i]);
	return n;
}

static struct res_inside *inside(CUdevResource *r)
{
	return (struct res_inside *)r->_internal_padding;
}

static void fill(CUdevResource *r, CUdevice dev, unsigned split, const uint64_t *set)
{
	memset(r, 0, sizeof(*r));
	r->type = CU_DEV_RESOURCE_TYPE_SM;
	r->sm.smCount = count(set);
	r->sm.minSmPartitionSize = SM_UNIT;
	r->sm.smCoscheduledAlignment = SM_UNIT;
	*inside(r) = (struct res_inside){ RES_MAGIC, split, dev, { 0 } };
	memcpy(inside(r)->set, set, sizeof(inside(r)->set));
}

static int valid(const CUdevResource *r)
{
	return r && r->type == CU_DEV_RESOURCE_TYPE_SM && inside((CUdevResource *)r)->magic == RES_MAGIC;
}

CUresult cuDeviceGetDevResource(CUdevice dev, CUdevResource *res, CUdevResourceType type)
{
	uint64_t set[FC_SM_WORDS] = { 0 };
	int sms;

	TRY(fc_need_init());
	TRY(fc_check_dev(dev));
	CHECK_ARG(res);
	CHECK(type == CU_DEV_RESOURCE_TYPE_SM, CUDA_ERROR_INVALID_RESOURCE_TYPE);
	TRY(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
	for (int i = 0; i < sms && i < FC_SM_WORDS * 64; i++)
		set[i / 64] |= 1ull << (i % 64);
	fill(res, dev, 0, set);
	return CUDA_SUCCESS;
}

/* The next n SMs of set from SM *at on, taken out of set. */
static void take(uint64_t *set, unsigned n, uint64_t *out)
{
	memset(out, 0, FC_SM_WORDS * sizeof(*out));
	for (int i = 0; i < FC_SM_WORDS * 64 && n; i++)
		if (set[i / 64] >> (i % 64) & 1) {
			set[i / 64] &= ~(1ull << (i % 64));
			out[i / 64] |= 1ull << (i % 64);
			n--;
		}
}

CUresult cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *nbGroups, const CUdevResource *input,
				     CUdevResource *remaining, unsigned int useFlags, unsigned int minCount)
{
	uint64_t left[FC_SM_WORDS], part[FC_SM_WORDS];
	unsigned size, most, n, split;

	TRY(fc_need_init());
	CHECK_ARG(nbGroups && valid(input) && minCount <= input->sm.smCount);
	size = minCount < SM_UNIT ? SM_UNIT : (minCount + SM_UNIT - 1) / SM_UNIT * SM_UNIT;
	most = input->sm.smCount / size;
	if (!result) {
		*nbGroups = most;
		return CUDA_SUCCESS;
	}
	n = *nbGroups < most ? *nbGroups : most;
	memcpy(left, inside((CUdevResource *)input)->set, sizeof(left));
	split = __atomic_add_fetch(&splits, 1, __ATOMIC_RELAXED);
	for (unsigned g = 0; g < n; g++) {
		take(left, size, part);
		fill(&result[g], inside((CUdevResource *)input)->dev, split, part);
	}
	if (remaining)
		fill(remaining, inside((CUdevResource *)input)->dev, split, left);
	*nbGroups = n;
	return CUDA_SUCCESS;
}

CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *phDesc, CUdevResource *resources, unsigned int nbResources)
{
	struct desc *d;

	TRY(fc_need_init());
	CHECK_ARG(phDesc && resources && nbResources);
	for (unsigned i = 0; i < nbResources; i++) {
		CHECK_ARG(valid(&resources[i]));
		CHECK(inside(&resources[i])->split == inside(&resources[0])->split,
		      CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
	}
	CHECK(d = calloc(1, sizeof(*d)), CUDA_ERROR_OUT_OF_MEMORY);
	d->dev = inside(&resources[0])->dev;
	for (unsigned i = 0; i < nbResources; i++)
		for (int w = 0; w < FC_SM_WORDS; w++)
			d->set[w] |= inside(&resources[i])->set[w];
	*phDesc = (CUdevResourceDesc)d;
	return CUDA_SUCCESS;
}

CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags)
{
	struct desc *d = (struct desc *)desc;
	CUcontext primary;
	struct green *g;

	TRY(fc_need_init());
	CHECK_ARG(phCtx && d && flags == CU_GREEN_CTX_DEFAULT_STREAM);
	CHECK(d->dev == dev, CUDA_ERROR_INVALID_DEVICE);
	TRY(cuDevicePrimaryCtxRetain(&primary, dev));
	CHECK(g = calloc(1, sizeof(*g)), CUDA_ERROR_OUT_OF_MEMORY);
	memcpy(g->set, d->set, sizeof(g->set));
	g->view.dev = dev;
	g->view.live = 1;
	g->view.base = (struct fc_ctx *)primary;
	g->view.sms = g->set;
	if (fc_obj_add(&g->view, FC_CTX, NULL, NULL)) {
		free(g);
		cuDevicePrimaryCtxRelease(dev);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*phCtx = (CUgreenCtx)g;
	return CUDA_SUCCESS;
}

static CUresult green_of(CUgreenCtx h, struct green **out)
{
	struct green *g = (struct green *)h;

	TRY(fc_need_init());
	CHECK(g && fc_obj_has(&g->view, FC_CTX) && g->view.base, CUDA_ERROR_INVALID_HANDLE);
	*out = g;
	return CUDA_SUCCESS;
}

CUresult cuCtxFromGreenCtx(CUcontext *pContext, CUgreenCtx hCtx)
{
	struct green *g;

	CHECK_ARG(pContext);
	TRY(green_of(hCtx, &g));
	*pContext = (CUcontext)&g->view;
	return CUDA_SUCCESS;
}

/* Its streams are left detached: their calls fail, as the driver's do. */
CUresult cuGreenCtxDestroy(CUgreenCtx hCtx)
{
	struct green *g;

	TRY(green_of(hCtx, &g));
	g->view.live = 0;
	fc_obj_del(&g->view, FC_CTX);
	fc_ctx_forget(&g->view);
	cuDevicePrimaryCtxRelease(g->view.dev);
	return CUDA_SUCCESS;         /* g stays: its streams still point at it */
}

CUresult cuGreenCtxGetDevResource(CUgreenCtx hCtx, CUdevResource *resource, CUdevResourceType type)
{
	struct green *g;

	TRY(green_of(hCtx, &g));
	CHECK_ARG(resource);
	CHECK(type == CU_DEV_RESOURCE_TYPE_SM, CUDA_ERROR_INVALID_RESOURCE_TYPE);
	fill(resource, g->view.dev, 0, g->set);
	return CUDA_SUCCESS;
}

/* The n-th SM (wrapping) of set, or n itself on a whole device of sms. */
unsigned fc_sm_of(const uint64_t *set, unsigned n, unsigned sms)
{
	unsigned k, have = set ? count(set) : 0;

	if (!have)
		return n % sms;
	k = n % have;
	for (int i = 0; i < FC_SM_WORDS * 64; i++)
		if (set[i / 64] >> (i % 64) & 1 && !k--)
			return (unsigned)i;
	return 0;
}

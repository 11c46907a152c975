/*
 * test_vmm_place.c: unit tests of where the application's VMM
 * reservations go (gpu-server/state/vmm_place.c), against the CPU stand-in's
 * cuMemAddressReserve, which maps the address space for real: small ones
 * carved out of 1 GiB slabs at the regions' start, aligned, never
 * overlapping, released and reused; large ones at the regions' next
 * place; what happens at the regions' ends; a restore's carving again.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <cmocka.h>
#include "gpu-server.h"

/* vmm_place.c's regions, as it defines them */
#define APP_BASE 0x300000000000ull
#define APP_END 0x380000000000ull
#define MORE_BASE 0x410000000000ull
#define MORE_END 0x550000000000ull
#define SLAB (1ull << 30)
#define MiB (1ull << 20)

#define MAXR 1100
static struct { uint64_t va, size; int carved; } got[MAXR];   /* what each test reserved */
static unsigned ngot;

static int group_setup(void **state)
{
	return cuInit(0) == CUDA_SUCCESS ? 0 : -1;
}

static int setup(void **state)
{
	ngot = 0;
	*state = places_new();
	return *state ? 0 : -1;
}

/* Gives the driver back what a test took: the slabs, the large ones. */
static int teardown(void **state)
{
	for (unsigned i = 0; i < ngot; i++)
		if (!got[i].carved)
			cuMemAddressFree(got[i].va, got[i].size);
	for (uint64_t i = 0; i < 64; i++) {
		cuMemAddressFree(APP_BASE + i * SLAB, SLAB);
		cuMemAddressFree(MORE_BASE + i * SLAB, SLAB);
		cuMemAddressFree(APP_END - (i + 1) * SLAB, SLAB);
		cuMemAddressFree(MORE_END - (i + 1) * SLAB, SLAB);
	}
	free(*state);                                /* (its arrays are left: no places_free) */
	return 0;
}

static uint64_t reserve(struct vmm_places *p, uint64_t size, uint64_t align, int want_carved)
{
	CUdeviceptr ptr = 0;
	int carved = -1;

	assert_int_equal(places_reserve(p, "unit", &ptr, size, align, 0, &carved), CUDA_SUCCESS);
	assert_int_equal(carved, want_carved);
	assert_true(ngot < MAXR);
	got[ngot++] = (typeof(got[0])){ ptr, size, carved };
	return ptr;
}

/* No two reservations of the test overlap, each lies in the regions. */
static void no_overlaps(void)
{
	for (unsigned i = 0; i < ngot; i++) {
		assert_true(places_in_regions(got[i].va));
		assert_true(places_in_regions(got[i].va + got[i].size - 1));
		for (unsigned j = 0; j < i; j++)
			assert_false(got[i].va < got[j].va + got[j].size && got[j].va < got[i].va + got[i].size);
	}
}

static void carved_from_slab(void **state)
{
	struct vmm_places *p = *state;

	assert_int_equal(reserve(p, 2 * MiB, 0, 1), APP_BASE);
	assert_int_equal(reserve(p, 2 * MiB, 0, 1), APP_BASE + 2 * MiB);
	assert_int_equal(reserve(p, 32 * MiB, 0, 1), APP_BASE + 4 * MiB);
	/* the slab is the driver's reservation: taking its place again fails */
	CUdeviceptr ptr;
	assert_int_equal(cuMemAddressReserve(&ptr, SLAB, SLAB, APP_BASE, 0), CUDA_SUCCESS);
	assert_int_not_equal(ptr, APP_BASE);
	cuMemAddressFree(ptr, SLAB);
	no_overlaps();
}

static void alignment(void **state)
{
	struct vmm_places *p = *state;
	uint64_t va;

	reserve(p, 2 * MiB, 0, 1);
	va = reserve(p, 8 * MiB, 8 * MiB, 1);
	assert_int_equal(va, APP_BASE + 8 * MiB);
	va = reserve(p, 64 * MiB, 64 * MiB, 1);
	assert_int_equal(va % (64 * MiB), 0);
	/* a smaller one fills the gap left in front */
	assert_int_equal(reserve(p, 2 * MiB, 0, 1), APP_BASE + 2 * MiB);
	assert_int_equal(reserve(p, 4 * MiB, 4 * MiB, 1), APP_BASE + 4 * MiB);
	no_overlaps();
}

/* A full slab: the next one comes right after it. */
static void slab_full_then_next(void **state)
{
	struct vmm_places *p = *state;

	for (unsigned i = 0; i < SLAB / (2 * MiB); i++)
		assert_int_equal(reserve(p, 2 * MiB, 0, 1), APP_BASE + i * 2 * MiB);
	assert_int_equal(reserve(p, 2 * MiB, 0, 1), APP_BASE + SLAB);
	/* a size that fits no gap of the first goes to the second too */
	assert_int_equal(reserve(p, 512 * MiB, 0, 1), APP_BASE + SLAB + 2 * MiB);
	no_overlaps();
}

static void release_and_reuse(void **state)
{
	struct vmm_places *p = *state;
	uint64_t a = reserve(p, 2 * MiB, 0, 1), b = reserve(p, 4 * MiB, 0, 1), c = reserve(p, 2 * MiB, 0, 1);

	assert_int_equal(places_release(p, b), 1);
	assert_int_equal(places_release(p, b), 0);      /* once */
	assert_int_equal(places_release(p, b + 2 * MiB), 0);   /* not a carve's start */
	assert_int_equal(places_release(p, 0x1234), 0);
	ngot = 0;
	got[ngot++] = (typeof(got[0])){ a, 2 * MiB, 1 };
	got[ngot++] = (typeof(got[0])){ c, 2 * MiB, 1 };
	assert_int_equal(reserve(p, 2 * MiB, 0, 1), b);  /* the place freed serves again */
	assert_int_equal(reserve(p, 2 * MiB, 0, 1), b + 2 * MiB);
	assert_int_equal(reserve(p, 2 * MiB, 0, 1), c + 2 * MiB);
	/* the latest one let go (the end of the list) is free again too */
	assert_int_equal(places_release(p, c + 2 * MiB), 1);
	ngot--;
	assert_int_equal(reserve(p, 2 * MiB, 0, 1), c + 2 * MiB);
	no_overlaps();
}

/* 1 GiB and more: at the regions' next place, not carved; forgetting the
 * last one gives its place back. */
static void large_at_next_place(void **state)
{
	struct vmm_places *p = *state;
	uint64_t a, b;

	reserve(p, 2 * MiB, 0, 1);                      /* a slab at APP_BASE */
	a = reserve(p, SLAB, 0, 0);
	assert_int_equal(a, APP_BASE + SLAB);
	b = reserve(p, 2 * SLAB, 0, 0);
	assert_int_equal(b, APP_BASE + 2 * SLAB);
	no_overlaps();
	assert_int_equal(cuMemAddressFree(b, 2 * SLAB), CUDA_SUCCESS);
	places_forget(p, b, 2 * SLAB);
	ngot--;
	assert_int_equal(reserve(p, 4 * SLAB, 0, 0), b);
	/* forgetting one not last moves nothing */
	places_forget(p, a, SLAB);
	places_forget(p, 0x7e0000000000ull, SLAB);      /* (one the driver placed, past the regions) */
	assert_int_equal(reserve(p, SLAB, 0, 0), b + 4 * SLAB);
	no_overlaps();
}

/* What the driver would refuse goes to it, refused as natively. */
static void refused_sizes_go_to_driver(void **state)
{
	struct vmm_places *p = *state;
	CUdeviceptr ptr = 0;
	int carved = -1;

	assert_int_not_equal(places_reserve(p, "unit", &ptr, 1 * MiB, 0, 0, &carved), CUDA_SUCCESS);
	assert_int_equal(carved, 0);
	assert_int_not_equal(places_reserve(p, "unit", &ptr, 0, 0, 0, &carved), CUDA_SUCCESS);
	assert_int_equal(carved, 0);
	assert_int_not_equal(places_reserve(p, "unit", &ptr, 2 * MiB, 0, 1, &carved), CUDA_SUCCESS);
	assert_int_equal(carved, 0);
	/* an alignment beyond a slab is not carved */
	assert_int_equal(places_reserve(p, "unit", &ptr, 2 * MiB, 2 * SLAB, 0, &carved), CUDA_SUCCESS);
	assert_int_equal(carved, 0);
	assert_int_equal(ptr % (2 * SLAB), 0);
	got[ngot++] = (typeof(got[0])){ ptr, 2 * MiB, 0 };
}

/* The first region full: the second; both full: the driver's choice. */
static void ends_of_regions(void **state)
{
	struct vmm_places *p = *state;
	CUdeviceptr ptr;
	int carved;

	places_note(p, APP_END - SLAB, SLAB);
	assert_int_equal(reserve(p, SLAB, 0, 0), MORE_BASE);
	assert_int_equal(reserve(p, 2 * MiB, 0, 1), MORE_BASE + SLAB);   /* a slab there */
	places_note(p, MORE_END - 2 * SLAB, SLAB);
	assert_int_equal(reserve(p, SLAB, 0, 0), MORE_END - SLAB);        /* the very end fits */
	no_overlaps();
	/* nothing fits now: the driver places it, outside the regions */
	assert_int_equal(places_reserve(p, "unit", &ptr, SLAB, 0, 0, &carved), CUDA_SUCCESS);
	assert_int_equal(carved, 0);
	assert_false(places_in_regions(ptr));
	cuMemAddressFree(ptr, SLAB);
	/* a small one still fits the slab it has */
	assert_int_equal(reserve(p, 2 * MiB, 0, 1), MORE_BASE + SLAB + 2 * MiB);
	/* places outside the regions move nothing */
	places_note(p, 0x7000000000ull, SLAB);
	places_note(p, APP_BASE, SLAB);                   /* behind the next place */
	assert_int_equal(places_reserve(p, "unit", &ptr, SLAB, 0, 0, &carved), CUDA_SUCCESS);
	assert_false(places_in_regions(ptr));
	cuMemAddressFree(ptr, SLAB);
}

static void region_bounds(void **state)
{
	assert_false(places_in_regions(0));
	assert_false(places_in_regions(APP_BASE - 1));
	assert_true(places_in_regions(APP_BASE));
	assert_true(places_in_regions(APP_END - 1));
	assert_false(places_in_regions(APP_END));
	assert_false(places_in_regions(MORE_BASE - 1));
	assert_true(places_in_regions(MORE_BASE));
	assert_true(places_in_regions(MORE_END - 1));
	assert_false(places_in_regions(MORE_END));
	assert_false(places_in_regions(UINT64_MAX));
}

/* A restore carves again where a snapshot says, over its slab; what no
 * carve could have been is refused. */
static void restore_take(void **state)
{
	struct vmm_places *p = *state;
	uint64_t va = APP_BASE + 3 * SLAB + 6 * MiB;

	assert_int_equal(places_take(p, va, 2 * MiB), 0);
	assert_int_equal(places_take(p, va, 2 * MiB), -1);             /* overlaps itself */
	assert_int_equal(places_take(p, va + MiB, 2 * MiB), -1);
	assert_int_equal(places_take(p, va + 2 * MiB, 4 * MiB), 0);    /* same slab, beside it */
	assert_int_equal(places_take(p, va, 0), -1);
	assert_int_equal(places_take(p, APP_BASE, SLAB), -1);          /* not small */
	assert_int_equal(places_take(p, APP_BASE + SLAB - 2 * MiB, 4 * MiB), -1);   /* crosses its slab */
	assert_int_equal(places_take(p, APP_END - 2 * MiB, 4 * MiB), -1);
	assert_int_equal(places_take(p, 0x7000000000ull, 2 * MiB), -1);   /* outside the regions */
	assert_int_equal(places_take(p, UINT64_MAX - MiB, 2 * MiB), -1);
	assert_int_equal(places_take(p, MORE_END - 2 * MiB, 2 * MiB), 0); /* the last place there is */
	/* the slab's place taken by someone else: refused */
	CUdeviceptr other;
	assert_int_equal(cuMemAddressReserve(&other, SLAB, SLAB, APP_BASE + 5 * SLAB, 0), CUDA_SUCCESS);
	assert_int_equal(other, APP_BASE + 5 * SLAB);
	assert_int_equal(places_take(p, APP_BASE + 5 * SLAB, 2 * MiB), -1);
	/* later carving avoids what the restore took: the slab below va is its */
	ngot = 0;
	for (unsigned i = 0; i < 4; i++)
		reserve(p, 2 * MiB, 0, 1);
	for (unsigned i = 0; i < ngot; i++)
		assert_false(got[i].va < va + 6 * MiB && va < got[i].va + got[i].size);
	no_overlaps();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(carved_from_slab), T(alignment), T(slab_full_then_next), T(release_and_reuse), T(large_at_next_place),
		T(refused_sizes_go_to_driver), T(ends_of_regions), T(region_bounds), T(restore_take),
	};

	return cmocka_run_group_tests_name("vmm_place", tests, group_setup, NULL);
}

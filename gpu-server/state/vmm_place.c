/*
 * vmm_place.c: where the application's VMM reservations go when it names
 * no address, so that a restore can ask for the same addresses again:
 * regions of their own above the worker's arena.
 *
 * The driver does not put a small reservation where it is asked. An
 * H100's put 2 MiB ones, and 32 MiB ones in a part of the address space
 * it had not used yet, among its own addresses (0x7f...) whatever the
 * address asked, and a new worker's driver may hold those places at a
 * restore (NCCL's buffers are such reservations). It did place 1 GiB and
 * larger ones where asked, rounding the address up to 32 MiB. So a
 * reservation smaller than SLAB is carved out of a slab: a reservation of
 * SLAB bytes the worker makes at a SLAB-aligned place of the regions. A
 * slab lives as long as the worker; a restore makes again the slab under
 * each carved reservation, at the reservation's address rounded down to
 * SLAB, and carves it at the same address. The driver's own area is left
 * as it was (a restored module's globals come back where they were).
 */
#include <stdlib.h>
#include "state.h"

#define APP_BASE 0x300000000000ull           /* above the arena's 16 slices (devmem.c) */
#define APP_END 0x380000000000ull            /* below the IPC imports (ipc.c) */
#define MORE_BASE 0x410000000000ull          /* then: above a migration's scratch (preload.c) */
#define MORE_END 0x550000000000ull           /* below where Linux loads a PIE and its heap */
#define SLAB (1ull << 30)
#define PAGE (2ull << 20)                    /* the driver's granularity for device memory */
#define PLACE_TRIES 8
#define PLACE_STEP_MAX (1ull << 40)

struct carve {
	uint64_t va, size;
};

struct vmm_places {
	uint64_t next;                       /* the regions' next free place */
	uint64_t *slabs;
	unsigned nslabs, cap_slabs;
	struct carve *carves;
	unsigned ncarves, cap_carves;
};

static uint64_t align_up(uint64_t va, uint64_t align)
{
	return (va + align - 1) & ~(align - 1);
}

/* The end of the region va lies in (0 outside them). */
static uint64_t region_end(uint64_t va)
{
	return va >= APP_BASE && va < APP_END ? APP_END : va >= MORE_BASE && va < MORE_END ? MORE_END : 0;
}

/* The first free place of the regions from next on, aligned (0 when they
 * are full). */
static uint64_t place(uint64_t next, uint64_t size, uint64_t align)
{
	uint64_t va = align_up(next, align);

	if (va < APP_END && size <= APP_END - va)
		return va;
	va = align_up(va > MORE_BASE ? va : MORE_BASE, align);
	return va < MORE_END && size <= MORE_END - va ? va : 0;
}

struct vmm_places *places_new(void)
{
	struct vmm_places *p = calloc(1, sizeof(*p));

	if (p)
		p->next = APP_BASE;
	return p;
}

/* Reserved [va, va + size): the regions' next place moves past it. */
void places_note(struct vmm_places *p, uint64_t va, uint64_t size)
{
	if (region_end(va) && va >= p->next)
		p->next = va + size;
}

/* [va, va + size) freed: the next place moves back if it was the last. */
void places_forget(struct vmm_places *p, uint64_t va, uint64_t size)
{
	if (va + size == p->next)
		p->next = va;
}

/* Where the driver gave what was asked at va, or a place further on in
 * the same region (it rounds the address up). */
static int placed(uint64_t got, uint64_t va, uint64_t size, int exact)
{
	if (got == va)
		return 1;
	return !exact && got > va && region_end(va) && got + size > got && got + size <= region_end(va);
}

/* Reserves size bytes at the next place of the regions (exact: at a place
 * aligned to align, as asked). Where the driver will not give it
 * (something of its own is there), places further on are tried, each step
 * four times the last (at most 1 TiB). 0, or -1 with nothing reserved. */
static int reserve_next(struct vmm_places *p, const char *peer, CUdeviceptr *ptr, uint64_t size, size_t alignment,
			uint64_t align, unsigned long long flags, int exact)
{
	uint64_t va, next = p->next, step = size;

	for (int i = 0; i < PLACE_TRIES && (va = place(next, size, align)); i++) {
		CUresult err = cuMemAddressReserve(ptr, size, alignment, va, flags);

		if (!err && placed(*ptr, va, size, exact)) {
			places_note(p, *ptr, size);
			return 0;
		}
		if (!err)
			cuMemAddressFree(*ptr, size);
		log_info("client %s: the driver would not reserve %llu bytes at 0x%llx (alignment %zu, flags %llu: "
			 "%s 0x%llx); trying further", peer, (unsigned long long)size, (unsigned long long)va,
			 alignment, flags, err ? "error" : "offered",
			 err ? (unsigned long long)err : (unsigned long long)*ptr);
		next = va + step;
		step = step < PLACE_STEP_MAX / 4 ? step * 4 : PLACE_STEP_MAX;
	}
	return -1;
}

/* The carved reservation [va, va + size) overlaps (-1: none). */
static int overlapping(const struct vmm_places *p, uint64_t va, uint64_t size)
{
	for (unsigned i = 0; i < p->ncarves; i++)
		if (va < p->carves[i].va + p->carves[i].size && p->carves[i].va < va + size)
			return (int)i;
	return -1;
}

/* The first place in slab s that size bytes, aligned, fit (0: none). */
static uint64_t carve_in(const struct vmm_places *p, uint64_t s, uint64_t size, uint64_t align)
{
	uint64_t va = s;
	int i;

	while (va + size <= s + SLAB) {
		if ((i = overlapping(p, va, size)) < 0)
			return va;
		va = align_up(p->carves[i].va + p->carves[i].size, align);
	}
	return 0;
}

static int add_slab(struct vmm_places *p, uint64_t va)
{
	if (array_grow((void **)&p->slabs, &p->cap_slabs, p->nslabs, sizeof(*p->slabs)))
		return -1;
	p->slabs[p->nslabs++] = va;
	return 0;
}

static int add_carve(struct vmm_places *p, uint64_t va, uint64_t size)
{
	if (array_grow((void **)&p->carves, &p->cap_carves, p->ncarves, sizeof(*p->carves)))
		return -1;
	p->carves[p->ncarves++] = (struct carve){ va, size };
	return 0;
}

/* A small reservation, carved out of a slab (a new one where none has
 * room). 1 where it was, 0 where no slab could be made. */
static int carve(struct vmm_places *p, const char *peer, CUdeviceptr *ptr, uint64_t size, uint64_t align)
{
	CUdeviceptr s;
	uint64_t va = 0;

	for (unsigned i = 0; i < p->nslabs && !va; i++)
		va = carve_in(p, p->slabs[i], size, align);
	if (!va) {
		if (reserve_next(p, peer, &s, SLAB, SLAB, SLAB, 0, 1))
			return 0;
		if (add_slab(p, s)) {
			cuMemAddressFree(s, SLAB);
			return 0;
		}
		va = s;
	}
	if (add_carve(p, va, size))
		return 0;
	*ptr = va;
	return 1;
}

/* A reservation the application leaves to the driver: carved out of a
 * slab if small, else reserved at the next place of the regions; where
 * neither can be, the driver chooses, and the log says so. (What the
 * driver might refuse, a size of no whole number of 2 MiB pages or flags,
 * goes to the driver, which answers as it would natively.) *carved: 1 for
 * a carved one (places_release lets it go, not the driver). */
CUresult places_reserve(struct vmm_places *p, const char *peer, CUdeviceptr *ptr, uint64_t size, size_t alignment,
			unsigned long long flags, int *carved)
{
	uint64_t align = alignment ? alignment : PAGE;

	*carved = size && size % PAGE == 0 && size < SLAB && align <= SLAB && !flags &&
		  carve(p, peer, ptr, size, align);
	if (*carved || !reserve_next(p, peer, ptr, size, alignment, align, flags, 0))
		return CUDA_SUCCESS;
	log_warn("client %s: a reservation of %llu bytes is left where the driver puts it: a restore may find that "
		 "place taken", peer, (unsigned long long)size);
	return cuMemAddressReserve(ptr, size, alignment, 0, flags);
}

/* A restore: [va, va + size) carved again, over the slab it was carved
 * from (made again if it is not here yet). 0, or -1 if that cannot be
 * (no place a carved reservation could have, the slab's place taken). */
int places_take(struct vmm_places *p, uint64_t va, uint64_t size)
{
	uint64_t base = va & ~(SLAB - 1);
	CUdeviceptr got;
	unsigned i;

	if (!size || size >= SLAB || !region_end(va) || va + size > base + SLAB || region_end(base) != region_end(va))
		return -1;
	for (i = 0; i < p->nslabs && p->slabs[i] != base; i++)
		;
	if (i == p->nslabs) {
		if (cuMemAddressReserve(&got, SLAB, SLAB, base, 0))
			return -1;
		if (got != base || add_slab(p, base)) {
			cuMemAddressFree(got, SLAB);
			return -1;
		}
		places_note(p, base, SLAB);
	}
	if (overlapping(p, va, size) >= 0 || add_carve(p, va, size))
		return -1;
	return 0;
}

/* The application let go of a carved reservation at va: 1 if it was one. */
int places_release(struct vmm_places *p, uint64_t va)
{
	for (unsigned i = 0; i < p->ncarves; i++)
		if (p->carves[i].va == va) {
			p->carves[i] = p->carves[--p->ncarves];
			return 1;
		}
	return 0;
}

/* Whether va lies in the regions (a reservation the client named there
 * needs nothing more at a restore). */
int places_in_regions(uint64_t va)
{
	return region_end(va) != 0;
}

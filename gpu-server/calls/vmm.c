/*
 * vmm.c: the application's own virtual memory management (cuMemCreate,
 * cuMemAddressReserve, cuMemMap, cuMemSetAccess and their inverses), as
 * PyTorch's expandable segments and other allocators use it. It lives
 * beside the worker's arena (devmem.c): reservations the application
 * leaves to the driver are placed in regions of their own above the
 * arena (vmm_place.c), so that a restore can ask for the same addresses
 * again.
 *
 * The client holds allocation handles as ids (the handle table, kind
 * H_VMM); the worker keeps what a snapshot needs to rebuild the same
 * layout: reservations, physical allocations (with their properties),
 * mappings, and the access calls in their order. An allocation lives
 * while the client holds its handle or any mapping uses it, as in the
 * driver.
 */
#include <stdlib.h>
#include <string.h>
#include "calls.h"
#include "snapshot.h"

struct vmm_alloc {
	CUmemGenericAllocationHandle h;
	uint64_t size;
	CUmemAllocationProp prop;
	unsigned long long flags;
	unsigned held;                       /* the client's references */
	unsigned maps;
	uint64_t id;                         /* while held */
	unsigned index;                      /* while saving */
	uint64_t after;                      /* the replay log's seq when made */
	uint8_t *imported;                   /* another process's memory: the export's token (ipc.c) */
	int pending;                         /* restored: imported again when the client comes (vmm_resume) */
	struct worker *charged;              /* made here: charged to this worker's quota */
};

struct vmm_resv {
	uint64_t va, size, align;
	unsigned long long flags;
	int carved;                          /* out of a slab (vmm_place.c), not the driver's */
	uint64_t after;
};

struct vmm_map {
	uint64_t va, size, offset;
	struct vmm_alloc *a;
	uint64_t after;
};

struct vmm_access {
	uint64_t va, size;
	CUmemAccessDesc d;
	uint64_t after;
};

struct vmm {
	struct vmm_resv *resvs;
	unsigned nresvs, cap_resvs;
	struct vmm_map *maps;
	unsigned nmaps, cap_maps;
	struct vmm_access *access;
	unsigned naccess, cap_access;
	struct vmm_places *places;           /* where reservations go (vmm_place.c) */
};

static struct vmm *vmm_of(struct worker *w)
{
	if (!w->calls->vmm && (w->calls->vmm = calloc(1, sizeof(*w->calls->vmm))) &&
	    !(w->calls->vmm->places = places_new())) {
		free(w->calls->vmm);
		w->calls->vmm = NULL;
	}
	return w->calls->vmm;
}

static CUresult alloc_of(struct worker *w, uint64_t id, struct vmm_alloc **a)
{
	CUresult err = handle_get(w, H_VMM, id, (void **)a);

	return err ? err : *a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;    /* id 0 */
}

/* The memory is gone (or never came): its bytes leave the quota. */
static void uncharge(struct vmm_alloc *a)
{
	if (a->charged)
		quota_release(a->charged, a->size);
	a->charged = NULL;
}

static void alloc_unref(struct vmm_alloc *a)
{
	if (a->held || a->maps)
		return;
	uncharge(a);
	free(a->imported);
	free(a);
}

static int inside(uint64_t va, uint64_t size, uint64_t ptr, uint64_t len)
{
	return va >= ptr && va - ptr < len && size <= len - (va - ptr);
}

/* Whether [ptr, ptr + size) lies in one of the application's own
 * reservations: the worker's arena is not the client's to map or unmap. */
static int reserved(const struct vmm *v, uint64_t ptr, uint64_t size)
{
	for (unsigned i = 0; i < v->nresvs; i++)
		if (inside(ptr, size, v->resvs[i].va, v->resvs[i].size))
			return 1;
	return 0;
}

/* Reserves size bytes where the client asks (a restore: where they were;
 * carve: carved out of a slab again, as they were), else where
 * vmm_place.c puts them. */
static CUresult reserve(struct worker *w, CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
			unsigned long long flags, int carve)
{
	struct vmm *v = vmm_of(w);
	int carved = 0;
	CUresult err;

	if (!v || array_grow((void **)&v->resvs, &v->cap_resvs, v->nresvs, sizeof(*v->resvs)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (alignment & (alignment - 1))
		return CUDA_ERROR_INVALID_VALUE;
	if (carve && places_take(v->places, addr, size))
		return CUDA_ERROR_ALREADY_MAPPED;          /* (the slab's place is taken) */
	if ((carved = carve))
		*ptr = addr, err = CUDA_SUCCESS;
	else if (addr)
		err = cuMemAddressReserve(ptr, size, alignment, addr, flags);
	else
		err = places_reserve(v->places, w->peer, ptr, size, alignment, flags, &carved);
	if (err)
		return err;
	if (!carved)
		places_note(v->places, *ptr, size);      /* (a restore's explicit addresses too) */
	if (!places_in_regions(*ptr) && addr && !w->calls->vmm_restoring)
		log_info("client %s: %zu bytes reserved where it asked, at 0x%llx, outside the worker's regions: "
			 "a restore needs that place free", w->peer, size, (unsigned long long)*ptr);
	log_debug("client %s: reserved 0x%llx, %zu bytes%s (asked at 0x%llx, alignment %zu, flags %llu)", w->peer,
		  (unsigned long long)*ptr, size, carved ? " out of a slab" : "", (unsigned long long)addr,
		  alignment, flags);
	v->resvs[v->nresvs++] = (struct vmm_resv){ *ptr, size, alignment, flags, carved, replay_seq(w) };
	return CUDA_SUCCESS;
}

CUresult wrap_cuMemAddressReserve(struct worker *w, CUdeviceptr *ptr, size_t size, size_t alignment,
				  CUdeviceptr addr, unsigned long long flags)
{
	return reserve(w, ptr, size, alignment, addr, flags, 0);
}

CUresult wrap_cuMemAddressFree(struct worker *w, CUdeviceptr ptr, size_t size)
{
	struct vmm *v = vmm_of(w);
	CUresult err;

	if (!v)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (unsigned i = 0; i < v->nresvs; i++) {
		if (v->resvs[i].va != ptr)
			continue;
		if (v->resvs[i].carved && size != v->resvs[i].size)
			return CUDA_ERROR_INVALID_VALUE;
		if (v->resvs[i].carved)
			places_release(v->places, ptr);
		else if ((err = cuMemAddressFree(ptr, size)))
			return err;
		else
			places_forget(v->places, ptr, size);
		v->resvs[i] = v->resvs[--v->nresvs];
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_INVALID_VALUE;     /* not the application's */
}

/* A location as the client numbers devices, as the driver's (real): the
 * worker keeps the client's numbering, which a restore onto other GPUs
 * translates again. */
static CUresult location_in(const struct worker *w, CUmemLocation *l)
{
	CUdevice dev;
	CUresult err;

	if (l->type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_SUCCESS;
	if ((err = device_in(w, (uint64_t)(int64_t)l->id, &dev)))
		return err;
	l->id = dev;
	return CUDA_SUCCESS;
}

static CUresult create(struct worker *w, struct vmm_alloc *a)
{
	CUmemAllocationProp real = a->prop;
	CUresult err = location_in(w, &real.location);

	if (err || (err = quota_charge(w, a->size, "a VMM allocation")))
		return err;
	if ((err = cuMemCreate(&a->h, a->size, &real, a->flags)))
		quota_release(w, a->size);
	else
		a->charged = w;
	return err;
}

static CUresult set_access(const struct worker *w, CUdeviceptr ptr, size_t size, CUmemAccessDesc d)
{
	CUresult err = location_in(w, &d.location);

	return err ? err : cuMemSetAccess(ptr, size, &d, 1);
}

CUresult wrap_cuMemGetAllocationGranularity(struct worker *w, size_t *granularity, const CUmemAllocationProp *prop,
					    CUmemAllocationGranularity_flags option)
{
	CUmemAllocationProp real = *prop;
	CUresult err = location_in(w, &real.location);

	real.win32HandleMetaData = NULL;
	return err ? err : cuMemGetAllocationGranularity(granularity, &real, option);
}

static CUresult hold(struct worker *w, struct vmm_alloc *a, CUmemGenericAllocationHandle *out)
{
	uint64_t id = handle_put(w, H_VMM, a);

	if (!id)
		return CUDA_ERROR_OUT_OF_MEMORY;
	a->id = id;
	a->held++;
	*out = id;
	return CUDA_SUCCESS;
}

CUresult wrap_cuMemCreate(struct worker *w, CUmemGenericAllocationHandle *handle, size_t size,
			  const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct vmm_alloc *a = calloc(1, sizeof(*a));
	CUresult err;

	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	a->prop = *prop;
	a->prop.win32HandleMetaData = NULL;  /* a pointer into the client */
	a->size = size;
	a->flags = flags;
	a->after = replay_seq(w);
	if ((err = create(w, a))) {
		free(a);
		return err;
	}
	log_debug("client %s: created %zu bytes (type %d, location %d/%d, handle types 0x%x, compression %u, "
		  "usage %u)", w->peer, size, a->prop.type, a->prop.location.type, a->prop.location.id,
		  a->prop.requestedHandleTypes, a->prop.allocFlags.compressionType, a->prop.allocFlags.usage);
	if ((err = hold(w, a, handle))) {
		cuMemRelease(a->h);
		uncharge(a);
		free(a);
	}
	return err;
}

/* An allocation of the client's, for an export (ipc.c): the driver's
 * handle and its size. */
CUresult vmm_alloc_real(struct worker *w, uint64_t id, CUmemGenericAllocationHandle *h, uint64_t *size)
{
	struct vmm_alloc *a;
	CUresult err = alloc_of(w, id, &a);

	if (!err) {
		*h = a->h;
		*size = a->size;
	}
	return err;
}

/* Another process's memory, imported (ipc.c) by the export's token, as
 * an allocation of the client's: its id. A snapshot keeps the token, not
 * the bytes (the exporter's snapshot has them). */
CUresult vmm_adopt(struct worker *w, CUmemGenericAllocationHandle h, uint64_t size, const void *token, uint64_t *id)
{
	struct vmm_alloc *a = calloc(1, sizeof(*a));
	CUmemGenericAllocationHandle held;
	CUresult err;

	if (!a || !(a->imported = malloc(SNAP_IPC_HANDLE_SIZE))) {
		free(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	memcpy(a->imported, token, SNAP_IPC_HANDLE_SIZE);
	if ((err = cuMemGetAllocationPropertiesFromHandle(&a->prop, h))) {
		free(a->imported);
		free(a);
		return err;
	}
	if (a->prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE)
		a->prop.location.id = (int)device_out(w, a->prop.location.id);
	a->h = h;
	a->size = size;
	a->after = replay_seq(w);
	if ((err = hold(w, a, &held))) {
		free(a->imported);
		free(a);
		return err;
	}
	*id = (uint64_t)held;
	return CUDA_SUCCESS;
}

/* The driver's handle goes when the client lets go of its last
 * reference; the memory stays while mappings use it. */
CUresult wrap_cuMemRelease(struct worker *w, CUmemGenericAllocationHandle handle)
{
	struct vmm_alloc *a;
	CUresult err;

	if ((err = alloc_of(w, handle, &a)))
		return err;
	if (--a->held)
		return CUDA_SUCCESS;
	handle_forget(w, handle);
	a->id = 0;
	err = cuMemRelease(a->h);
	alloc_unref(a);
	return err;
}

CUresult wrap_cuMemMap(struct worker *w, CUdeviceptr ptr, size_t size, size_t offset,
		       CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	struct vmm *v = vmm_of(w);
	struct vmm_alloc *a;
	CUresult err;

	if (!v || array_grow((void **)&v->maps, &v->cap_maps, v->nmaps, sizeof(*v->maps)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (!reserved(v, ptr, size))
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = alloc_of(w, handle, &a)) || (err = cuMemMap(ptr, size, offset, a->h, flags)))
		return err;
	a->maps++;
	v->maps[v->nmaps++] = (struct vmm_map){ ptr, size, offset, a, replay_seq(w) };
	log_debug("client %s: mapped 0x%llx, %zu bytes at offset %zu", w->peer, (unsigned long long)ptr, size, offset);
	return CUDA_SUCCESS;
}


CUresult wrap_cuMemUnmap(struct worker *w, CUdeviceptr ptr, size_t size)
{
	struct vmm *v = vmm_of(w);
	CUresult err;

	if (!v)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (!reserved(v, ptr, size))
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = cuMemUnmap(ptr, size)))
		return err;
	for (unsigned i = 0; i < v->nmaps;) {
		struct vmm_map *m = &v->maps[i];
		if (!inside(m->va, m->size, ptr, size)) {
			i++;
			continue;
		}
		m->a->maps--;
		alloc_unref(m->a);
		*m = v->maps[--v->nmaps];
	}
	for (unsigned i = 0; i < v->naccess;) {
		if (inside(v->access[i].va, v->access[i].size, ptr, size))
			memmove(&v->access[i], &v->access[i + 1], (--v->naccess - i) * sizeof(*v->access));
		else
			i++;
	}
	return CUDA_SUCCESS;
}

CUresult wrap_vmm_set_access(struct worker *w, CUdeviceptr ptr, size_t size, int type, int id,
			     unsigned long long flags)
{
	struct vmm *v = vmm_of(w);
	CUmemAccessDesc d = { { (CUmemLocationType)type, id }, (CUmemAccess_flags)flags };
	CUresult err;

	if (!v || array_grow((void **)&v->access, &v->cap_access, v->naccess, sizeof(*v->access)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (!reserved(v, ptr, size))
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = set_access(w, ptr, size, d)))
		return err;
	log_debug("client %s: access %llu to 0x%llx, %zu bytes, for %d/%d", w->peer, flags, (unsigned long long)ptr,
		  size, type, id);
	v->access[v->naccess++] = (struct vmm_access){ ptr, size, d, replay_seq(w) };
	return CUDA_SUCCESS;
}

CUresult wrap_vmm_get_access(struct worker *w, unsigned long long *flags, int type, int id, CUdeviceptr ptr)
{
	CUmemLocation l = { (CUmemLocationType)type, id };
	CUresult err = location_in(w, &l);

	return err ? err : cuMemGetAccess(flags, &l, ptr);
}

CUresult wrap_cuMemGetAllocationPropertiesFromHandle(struct worker *w, CUmemAllocationProp *prop,
						     CUmemGenericAllocationHandle handle)
{
	struct vmm_alloc *a;
	CUresult err = alloc_of(w, handle, &a);

	if (err)
		return err;
	*prop = a->prop;                     /* as the client made it: its device numbers */
	return CUDA_SUCCESS;
}

/* The allocation mapped at addr, as a new reference (the driver's own
 * retain, so that its count matches the client's). */
CUresult wrap_vmm_retain_handle(struct worker *w, CUmemGenericAllocationHandle *handle, CUdeviceptr addr)
{
	struct vmm *v = vmm_of(w);
	CUmemGenericAllocationHandle h;
	CUresult err;

	for (unsigned i = 0; v && i < v->nmaps; i++) {
		struct vmm_map *m = &v->maps[i];
		if (addr < m->va || addr - m->va >= m->size)
			continue;
		if ((err = cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)addr)))
			return err;
		if (!m->a->held)
			m->a->h = h;
		else
			cuMemRelease(h);     /* the worker holds one reference for all */
		return hold(w, m->a, handle);
	}
	return CUDA_ERROR_INVALID_VALUE;
}

/* --- snapshots --- */

/* Whether [va, va + size) was given access by some cuMemSetAccess. */
static int accessible(const struct vmm *v, uint64_t va, uint64_t size)
{
	for (unsigned i = 0; i < v->naccess; i++)
		if (v->access[i].d.flags && inside(va, size, v->access[i].va, v->access[i].size))
			return 1;
	return 0;
}

/* The GPU whose memory backs the application's mapping at va (the
 * driver's ordinal), or -1 where there is none. */
CUdevice vmm_device_of(const struct worker *w, uint64_t va)
{
	const struct vmm *v = w->calls->vmm;

	for (unsigned i = 0; v && i < v->nmaps; i++) {
		const CUmemAllocationProp *p = &v->maps[i].a->prop;

		if (va - v->maps[i].va < v->maps[i].size && p->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
		    p->location.id >= 0 && p->location.id < w->ngpus)
			return w->gpu[p->location.id];
	}
	return -1;
}

/* The mapped, accessible ranges whose bytes a snapshot keeps; with out
 * NULL, how many there are. */
unsigned vmm_ranges(const struct worker *w, struct snap_range *out)
{
	const struct vmm *v = w->calls->vmm;
	unsigned n = 0;

	for (unsigned i = 0; v && i < v->nmaps; i++)
		if (!v->maps[i].a->imported && accessible(v, v->maps[i].va, v->maps[i].size)) {
			if (out)
				out[n] = (struct snap_range){ v->maps[i].va, v->maps[i].size };
			n++;
		}
	return n;
}

static void *entry(void **list, size_t *n, size_t size)
{
	void *e = calloc(1, size);

	if (e)
		list[(*n)++] = e;
	return e;
}

/* The allocation's index in the manifest, saving it the first time. */
static int save_alloc(Cicada__Manifest *m, struct vmm_alloc *a)
{
	Cicada__VmmAllocation *p;

	if (a->index != ~0u)
		return (int)a->index;
	if (!(p = entry((void **)m->vmm_allocations, &m->n_vmm_allocations, sizeof(*p))))
		return -1;
	cicada__vmm_allocation__init(p);
	p->size = a->size;
	p->prop.data = (uint8_t *)&a->prop;
	p->prop.len = sizeof(a->prop);
	p->flags = a->flags;
	p->handle = a->id;
	p->held = a->held;
	p->after_seq = a->after;
	p->has_prop = p->has_flags = p->has_handle = p->has_held = p->has_after_seq = 1;
	if (a->imported) {
		p->imported.data = a->imported;
		p->imported.len = SNAP_IPC_HANDLE_SIZE;
		p->has_imported = 1;
	}
	a->index = (unsigned)m->n_vmm_allocations - 1;
	return (int)a->index;
}

static int save_lists(struct worker *w, struct vmm *v, Cicada__Manifest *m)
{
	for (unsigned i = 0; i < v->nresvs; i++) {
		Cicada__VmmReservation *r = entry((void **)m->vmm_reservations, &m->n_vmm_reservations, sizeof(*r));
		if (!r)
			return -1;
		cicada__vmm_reservation__init(r);
		r->va = v->resvs[i].va, r->size = v->resvs[i].size;
		r->align = v->resvs[i].align, r->flags = v->resvs[i].flags, r->after_seq = v->resvs[i].after;
		r->has_align = r->has_flags = r->has_after_seq = 1;
		r->carved = v->resvs[i].carved;
		r->has_carved = r->carved;
	}
	for (unsigned i = 0; i < w->nhandles; i++)
		if (w->handles[i].kind == H_VMM && save_alloc(m, w->handles[i].real) < 0)
			return -1;
	for (unsigned i = 0; i < v->nmaps; i++) {
		Cicada__VmmMapping *p = entry((void **)m->vmm_mappings, &m->n_vmm_mappings, sizeof(*p));
		int a = save_alloc(m, v->maps[i].a);
		if (!p || a < 0)
			return -1;
		cicada__vmm_mapping__init(p);
		p->va = v->maps[i].va, p->size = v->maps[i].size, p->offset = v->maps[i].offset;
		p->after_seq = v->maps[i].after;
		p->has_offset = p->has_after_seq = 1;
		p->allocation = (uint32_t)a;
	}
	for (unsigned i = 0; i < v->naccess; i++) {
		Cicada__VmmAccess *x = entry((void **)m->vmm_access, &m->n_vmm_access, sizeof(*x));
		if (!x)
			return -1;
		cicada__vmm_access__init(x);
		x->va = v->access[i].va, x->size = v->access[i].size;
		x->location_type = v->access[i].d.location.type, x->location_id = v->access[i].d.location.id;
		x->flags = v->access[i].d.flags;
		x->after_seq = v->access[i].after;
		x->has_location_type = x->has_location_id = x->has_flags = x->has_after_seq = 1;
	}
	return 0;
}

/* Fills the manifest's VMM lists (vmm_save_free frees them). */
int vmm_save(struct worker *w, Cicada__Manifest *m)
{
	struct vmm *v = vmm_of(w);
	unsigned nalloc = v ? v->nmaps : 0;

	for (unsigned i = 0; i < w->nhandles; i++)
		if (w->handles[i].kind == H_VMM) {
			((struct vmm_alloc *)w->handles[i].real)->index = ~0u;
			nalloc++;
		}
	for (unsigned i = 0; v && i < v->nmaps; i++)
		v->maps[i].a->index = ~0u;
	if (!v || !(m->vmm_reservations = calloc(v->nresvs + 1, sizeof(void *))) ||
	    !(m->vmm_allocations = calloc(nalloc + 1, sizeof(void *))) ||
	    !(m->vmm_mappings = calloc(v->nmaps + 1, sizeof(void *))) ||
	    !(m->vmm_access = calloc(v->naccess + 1, sizeof(void *))) || save_lists(w, v, m)) {
		vmm_save_free(m);
		return -1;
	}
	return 0;
}

static void free_list(void **list, size_t n)
{
	for (size_t i = 0; list && i < n; i++)
		free(list[i]);
	free(list);
}

void vmm_save_free(Cicada__Manifest *m)
{
	free_list((void **)m->vmm_reservations, m->n_vmm_reservations);
	free_list((void **)m->vmm_allocations, m->n_vmm_allocations);
	free_list((void **)m->vmm_mappings, m->n_vmm_mappings);
	free_list((void **)m->vmm_access, m->n_vmm_access);
	m->vmm_reservations = NULL, m->vmm_allocations = NULL, m->vmm_mappings = NULL, m->vmm_access = NULL;
	m->n_vmm_reservations = m->n_vmm_allocations = m->n_vmm_mappings = m->n_vmm_access = 0;
}

/* --- restore --- */

/* What a restore made so far: each allocation by manifest index, and how
 * far each list has been made. Entries are made in the replay log's order
 * (vmm_restore_upto), the rest at the end (vmm_restore). */
struct vmm_restoring {
	struct vmm_alloc **a;
	char *done_r, *done_m, *done_x;
};

static struct vmm_restoring *restoring(struct worker *w, const Cicada__Manifest *m)
{
	struct vmm_restoring *st = w->calls->vmm_restoring;

	if (st || !vmm_of(w))
		return st;
	if (!(st = calloc(1, sizeof(*st))))
		return NULL;
	st->a = calloc(m->n_vmm_allocations + 1, sizeof(*st->a));
	st->done_r = calloc(m->n_vmm_reservations + 1, 1);
	st->done_m = calloc(m->n_vmm_mappings + 1, 1);
	st->done_x = calloc(m->n_vmm_access + 1, 1);
	if (!st->a || !st->done_r || !st->done_m || !st->done_x) {
		free(st->a), free(st->done_r), free(st->done_m), free(st->done_x);
		free(st);
		return NULL;
	}
	return w->calls->vmm_restoring = st;
}

static int restore_reservation(struct worker *w, const Cicada__VmmReservation *r, char *err)
{
	CUdeviceptr got = 0;
	int carve = r->has_carved && r->carved;
	CUresult rc = reserve(w, &got, r->size, r->align, r->va, r->flags, carve);

	if (rc || got != r->va) {
		if (!rc)
			wrap_cuMemAddressFree(w, got, r->size);
		wire_fail(err, "cannot reserve the application's device addresses 0x%llx-0x%llx (%s)",
			 (unsigned long long)r->va, (unsigned long long)(r->va + r->size),
			 rc && carve ? "the worker's slab for them cannot be made there again" :
			 rc ? "the driver refused" : "taken: the driver offered another place");
		return -1;
	}
	return 0;
}

/* Makes an allocation again; a handle the client held takes its old id.
 * The restore holds one reference of its own until the end. */
static int restore_alloc(struct worker *w, const Cicada__VmmAllocation *p, struct vmm_alloc **out, char *err)
{
	struct vmm_alloc *a = calloc(1, sizeof(*a));
	CUresult rc;

	*out = a;
	if (!a)
		return wire_fail(err, "out of memory");
	memcpy(&a->prop, p->prop.data, sizeof(a->prop));
	a->prop.win32HandleMetaData = NULL;
	a->size = p->size;
	a->flags = p->flags;
	a->after = replay_seq(w);            /* this worker's log numbers its records anew */
	a->held = 1;
	if (p->has_imported && !(a->imported = malloc(SNAP_IPC_HANDLE_SIZE))) {
		free(a);
		*out = NULL;
		return wire_fail(err, "out of memory");
	}
	if (p->has_imported)
		memcpy(a->imported, p->imported.data, SNAP_IPC_HANDLE_SIZE);
	if ((a->pending = p->has_imported)) {
		rc = CUDA_SUCCESS;           /* another process's: imported when the client comes */
	} else if ((rc = create(w, a))) {
		wire_fail(err, "cannot create an allocation of %llu bytes (error %d)",
			 (unsigned long long)a->size, (int)rc);
		free(a);
		*out = NULL;
		return -1;
	}
	if (!p->handle)
		return 0;
	w->replay_id = p->handle;
	a->id = handle_put(w, H_VMM, a);
	w->replay_id = 0;
	if (a->id != p->handle)
		return wire_fail(err, "allocation handle %llu is taken", (unsigned long long)p->handle);
	a->held = p->held + 1;
	return 0;
}

static int restore_map(struct worker *w, const Cicada__VmmMapping *p, struct vmm_alloc *al, char *err)
{
	struct vmm *v = w->calls->vmm;

	if (!al || array_grow((void **)&v->maps, &v->cap_maps, v->nmaps, sizeof(*v->maps)) ||
	    (!al->pending && cuMemMap(p->va, p->size, p->offset, al->h, 0))) {
		wire_fail(err, "cannot map the application's device memory at 0x%llx",
			 (unsigned long long)p->va);
		return -1;
	}
	al->maps++;
	v->maps[v->nmaps++] = (struct vmm_map){ p->va, p->size, p->offset, al, replay_seq(w) };
	return 0;
}

/* An access call again, over what of its range is mapped now (later
 * unmaps may have left holes in it, which the driver would refuse). */
static int restore_access(struct worker *w, const Cicada__VmmAccess *x, char *err)
{
	struct vmm *v = w->calls->vmm;
	CUmemAccessDesc d = { { (CUmemLocationType)x->location_type, x->location_id }, (CUmemAccess_flags)x->flags };

	for (unsigned i = 0; i < v->nmaps; i++) {
		uint64_t lo = v->maps[i].va > x->va ? v->maps[i].va : x->va;
		uint64_t hi = v->maps[i].va + v->maps[i].size < x->va + x->size ? v->maps[i].va + v->maps[i].size :
										   x->va + x->size;
		if (lo < hi && !v->maps[i].a->pending && set_access(w, lo, hi - lo, d)) {
			wire_fail(err, "cannot set access to 0x%llx", (unsigned long long)lo);
			return -1;
		}
	}
	if (array_grow((void **)&v->access, &v->cap_access, v->naccess, sizeof(*v->access)))
		return wire_fail(err, "out of memory");
	v->access[v->naccess++] = (struct vmm_access){ x->va, x->size, d, replay_seq(w) };
	return 0;
}

/* Makes, in each list's order, what was made before the record seq. */
int vmm_restore_upto(struct worker *w, const Cicada__Manifest *m, uint64_t seq, char *err)
{
	struct vmm_restoring *st;

	if (!m->n_vmm_reservations && !m->n_vmm_allocations)
		return 0;
	if (!(st = restoring(w, m)))
		return wire_fail(err, "out of memory");
	/* (lists are in no order of their own: each entry is looked at) */
	for (size_t i = 0; i < m->n_vmm_reservations; i++)
		if (!st->done_r[i] && m->vmm_reservations[i]->after_seq < seq &&
		    (st->done_r[i] = 1, restore_reservation(w, m->vmm_reservations[i], err)))
			return -1;
	for (size_t i = 0; i < m->n_vmm_allocations; i++)
		if (!st->a[i] && m->vmm_allocations[i]->after_seq < seq &&
		    restore_alloc(w, m->vmm_allocations[i], &st->a[i], err))
			return -1;
	for (size_t i = 0; i < m->n_vmm_mappings; i++)
		if (!st->done_m[i] && m->vmm_mappings[i]->after_seq < seq &&
		    (st->done_m[i] = 1, restore_map(w, m->vmm_mappings[i], st->a[m->vmm_mappings[i]->allocation], err)))
			return -1;
	for (size_t i = 0; i < m->n_vmm_access; i++)
		if (!st->done_x[i] && m->vmm_access[i]->after_seq < seq &&
		    (st->done_x[i] = 1, restore_access(w, m->vmm_access[i], err)))
			return -1;
	return 0;
}

/* The rest, then the restore's own references go. */
int vmm_restore(struct worker *w, const Cicada__Manifest *m, char *err)
{
	struct vmm_restoring *st;
	int rc;

	if (!m->n_vmm_reservations && !m->n_vmm_allocations)
		return 0;
	rc = vmm_restore_upto(w, m, UINT64_MAX, err);
	if (!(st = w->calls->vmm_restoring))
		return rc;
	for (size_t i = 0; i < m->n_vmm_allocations; i++) {
		struct vmm_alloc *a = st->a[i];
		if (!a || --a->held)
			continue;
		if (!a->pending)
			cuMemRelease(a->h);
		alloc_unref(a);
	}
	free(st->a), free(st->done_r), free(st->done_m), free(st->done_x);
	free(st);
	w->calls->vmm_restoring = NULL;
	return rc;
}

/* --- imported memory --- */

/* each(w, token, ctx) for every allocation imported from another process
 * and opened here (not pending): the first nonzero answer, else 0. */
int vmm_each_import(struct worker *w, int (*each)(struct worker *w, const void *token, void *ctx), void *ctx)
{
	struct vmm *v = w->calls->vmm;
	int rc;

	for (unsigned i = 0; i < w->nhandles; i++) {
		struct vmm_alloc *a = w->handles[i].real;
		if (w->handles[i].kind == H_VMM && a->imported && !a->pending && (rc = each(w, a->imported, ctx)))
			return rc;
	}
	for (unsigned i = 0; v && i < v->nmaps; i++) {
		struct vmm_alloc *a = v->maps[i].a;
		if (a->imported && !a->pending && (rc = each(w, a->imported, ctx)))
			return rc;
	}
	return 0;
}

/* After a restore: */

/* Imports pending allocation a again (open gives the driver's handle of
 * the token's memory) and maps it where it was, with the access the
 * client had given there. */
static CUresult resume_alloc(struct worker *w, struct vmm_alloc *a, vmm_open_fn open, void *ctx)
{
	struct vmm *v = w->calls->vmm;
	CUresult err;

	if ((err = open(w, a->imported, &a->h, ctx)))
		return err;
	for (unsigned i = 0; i < v->nmaps; i++)
		if (v->maps[i].a == a && (err = cuMemMap(v->maps[i].va, v->maps[i].size, v->maps[i].offset, a->h, 0)))
			return err;
	for (unsigned j = 0; j < v->naccess; j++)
		for (unsigned i = 0; i < v->nmaps; i++) {
			const struct vmm_map *mp = &v->maps[i];
			const struct vmm_access *x = &v->access[j];
			uint64_t lo = mp->va > x->va ? mp->va : x->va;
			uint64_t hi = mp->va + mp->size < x->va + x->size ? mp->va + mp->size : x->va + x->size;
			if (mp->a == a && lo < hi && (err = set_access(w, lo, hi - lo, x->d)))
				return err;
		}
	a->pending = 0;
	if (!a->held)
		cuMemRelease(a->h);          /* the mappings keep the memory, as before */
	log_info("client %s: imported again the VMM memory of another process (%llu bytes)", w->peer,
		 (unsigned long long)a->size);
	return CUDA_SUCCESS;
}

/* The client comes back after a restore: the VMM memory it had imported
 * from other processes is imported and mapped again. 0, or an error. */
CUresult vmm_resume(struct worker *w, vmm_open_fn open, void *ctx)
{
	struct vmm *v = w->calls->vmm;
	CUresult err;

	for (unsigned i = 0; i < w->nhandles; i++) {
		struct vmm_alloc *a = w->handles[i].real;
		if (w->handles[i].kind == H_VMM && a->pending && (err = resume_alloc(w, a, open, ctx)))
			return err;
	}
	for (unsigned i = 0; v && i < v->nmaps; i++)
		if (v->maps[i].a->pending && (err = resume_alloc(w, v->maps[i].a, open, ctx)))
			return err;
	return CUDA_SUCCESS;
}

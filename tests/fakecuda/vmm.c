/*
 * Virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap,
 * cuMemSetAccess and their inverses) done with the host's own VM: a
 * reservation is a PROT_NONE anonymous mapping, placed at the caller's
 * hint when it is free; a physical allocation is a memfd; mapping it puts
 * the memfd MAP_SHARED|MAP_FIXED over the reserved pages, still PROT_NONE
 * until cuMemSetAccess makes it read-write.  Mapped, accessible ranges
 * are valid device memory for copies and kernels; a kernel may use a
 * mapping only from a device that cuMemSetAccess named (launch.c asks).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fakecuda.h"

#define MAX_RESV 1024

struct alloc {
	int fd;
	size_t size;
	CUmemAllocationProp prop;
	unsigned refs;                  /* handle references (cuMemRetainAllocationHandle adds) */
	unsigned maps;                  /* mappings keep the allocation */
};

/* What each mapping maps, for cuMemRetainAllocationHandle and cuMemGetAccess. */
struct map {
	uintptr_t base;
	size_t size;
	struct alloc *a;
	unsigned long long flags;
	unsigned devices;               /* devices the access was granted to */
};

static struct map maps[MAX_RESV];
static int nmaps;

struct resv {
	uintptr_t base;
	size_t size;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct resv resvs[MAX_RESV];
static int nresvs;

static CUresult check_prop(const CUmemAllocationProp *prop)
{
	if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	return fc_check_dev(prop->location.id);
}

CUresult cuMemGetAllocationGranularity(size_t *gran, const CUmemAllocationProp *prop,
				       CUmemAllocationGranularity_flags option)
{
	TRY(fc_need_init());
	CHECK_ARG(gran && prop);
	TRY(check_prop(prop));
	*gran = FC_GRANULARITY;
	return CUDA_SUCCESS;
}

/* As an H100's driver does: a reservation smaller than HINT_LEAST is put
 * among the driver's own addresses, whatever the address asked (here a
 * pool whose place depends on the pid, so that it differs from one
 * process to the next); a larger one's address is rounded up to
 * HINT_ROUND. (That driver placed 32 MiB ones where asked only near
 * places it had used before; 1 GiB ones always.) */
#define HINT_LEAST (1ull << 30)
#define HINT_ROUND (32ull << 20)
#define POOL_BASE 0x7e0000000000ull

static void *reserve_pooled(size_t size, size_t align)
{
	const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE;
	static uintptr_t next;
	void *m;

	if (!next)
		next = POOL_BASE + ((uintptr_t)(getpid() % 31) << 30);
	for (int i = 0; i < 64; i++) {
		uintptr_t start = (next + align - 1) & ~(align - 1);
		next = start + size;
		m = mmap((void *)start, size, PROT_NONE, flags, -1, 0);
		if (m == (void *)start)
			return m;
		if (m != MAP_FAILED)
			munmap(m, size);
	}
	return NULL;
}

static void *reserve_at(uintptr_t hint, size_t size, size_t align)
{
	const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
	uintptr_t p, start;
	void *m;

	if (size < HINT_LEAST && (m = reserve_pooled(size, align)))
		return m;
	hint = (hint + HINT_ROUND - 1) & ~(uintptr_t)(HINT_ROUND - 1);
	if (hint && hint % align == 0) {
		m = mmap((void *)hint, size, PROT_NONE, flags | MAP_FIXED_NOREPLACE, -1, 0);
		if (m == (void *)hint)
			return m;
		if (m != MAP_FAILED)
			munmap(m, size);
	}
	m = mmap(NULL, size + align, PROT_NONE, flags, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	p = (uintptr_t)m;
	start = (p + align - 1) & ~(align - 1);
	if (start > p)
		munmap(m, start - p);
	munmap((void *)(start + size), p + align - start);
	return (void *)start;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
			     unsigned long long flags)
{
	void *p;

	TRY(fc_need_init());
	CHECK_ARG(ptr && size && size % FC_GRANULARITY == 0 && !(align & (align - 1)) && !flags);
	if (align < FC_GRANULARITY)
		align = FC_GRANULARITY;
	pthread_mutex_lock(&lock);
	p = nresvs < MAX_RESV ? reserve_at(addr, size, align) : NULL;
	if (p)
		resvs[nresvs++] = (struct resv){ (uintptr_t)p, size };
	pthread_mutex_unlock(&lock);
	CHECK(p, CUDA_ERROR_OUT_OF_MEMORY);
	*ptr = (CUdeviceptr)p;
	return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	CUresult r = CUDA_ERROR_INVALID_VALUE;
	int i;

	TRY(fc_need_init());
	pthread_mutex_lock(&lock);
	for (i = 0; i < nresvs; i++) {
		if (resvs[i].base == ptr && resvs[i].size == size) {
			resvs[i] = resvs[--nresvs];
			fc_range_span(ptr, size, FC_MEM_VMM, 0, 1);
			munmap((void *)ptr, size);
			r = CUDA_SUCCESS;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return r;
}

static int reserved(uintptr_t p, size_t size)
{
	int i, hit = 0;

	pthread_mutex_lock(&lock);
	for (i = 0; i < nresvs && !hit; i++)
		hit = p >= resvs[i].base && p + size <= resvs[i].base + resvs[i].size;
	pthread_mutex_unlock(&lock);
	return hit;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
		     const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct alloc *a;

	TRY(fc_need_init());
	CHECK_ARG(handle && prop && size && size % FC_GRANULARITY == 0 && !flags);
	TRY(check_prop(prop));
	CHECK(size <= FC_TOTAL_MEM && fc_mem_used(size) != (size_t)-1, CUDA_ERROR_OUT_OF_MEMORY);
	a = malloc(sizeof(*a));
	if (a)
		a->fd = memfd_create("fakecuda-vmm", MFD_CLOEXEC);
	if (!a || a->fd < 0 || ftruncate(a->fd, size) || fc_obj_add(a, FC_VMM, NULL, NULL)) {
		if (a && a->fd >= 0)
			close(a->fd);
		free(a);
		fc_mem_used(-(long long)size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	a->size = size;
	a->prop = *prop;
	a->refs = 1;
	a->maps = 0;
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)a;
	return CUDA_SUCCESS;
}

static void alloc_put(struct alloc *a)
{
	if (a->refs || a->maps)
		return;
	fc_obj_del(a, FC_VMM);
	close(a->fd);		/* live mappings keep the pages */
	fc_mem_used(-(long long)a->size);
	free(a);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	struct alloc *a = (struct alloc *)(uintptr_t)handle;

	TRY(fc_need_init());
	CHECK(fc_obj_has(a, FC_VMM) && a->refs, CUDA_ERROR_INVALID_HANDLE);
	pthread_mutex_lock(&lock);
	a->refs--;
	alloc_put(a);
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
		  CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	struct alloc *a = (struct alloc *)(uintptr_t)handle;
	void *m;

	TRY(fc_need_init());
	CHECK_ARG(size && size % FC_GRANULARITY == 0 && offset % FC_GRANULARITY == 0 && !flags);
	CHECK(fc_obj_has(a, FC_VMM) && a->refs, CUDA_ERROR_INVALID_HANDLE);
	CHECK_ARG(offset <= a->size && size <= a->size - offset);
	CHECK_ARG(reserved(ptr, size) && !fc_range_overlaps(ptr, size));
	CHECK(nmaps < MAX_RESV, CUDA_ERROR_OUT_OF_MEMORY);
	m = mmap((void *)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, a->fd, offset);
	CHECK(m != MAP_FAILED, CUDA_ERROR_OUT_OF_MEMORY);
	CHECK(!fc_range_add(ptr, size, FC_MEM_VMM, NULL, 0), CUDA_ERROR_OUT_OF_MEMORY);
	pthread_mutex_lock(&lock);
	a->maps++;
	maps[nmaps++] = (struct map){ ptr, size, a, 0, 0 };
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

/* Is every byte of [p, p+size) inside some mapped VMM range? */
static int mapped(uintptr_t p, size_t size)
{
	uintptr_t end = p + size;
	struct fc_range range;

	while (p < end) {
		if (!fc_range_find(p, &range) || range.kind != FC_MEM_VMM)
			return 0;
		p = range.base + range.size;
	}
	return 1;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED;

	TRY(fc_need_init());
	CHECK_ARG(size && mapped(ptr, size));
	CHECK(mmap((void *)ptr, size, PROT_NONE, flags, -1, 0) != MAP_FAILED, CUDA_ERROR_UNKNOWN);
	fc_range_span(ptr, size, FC_MEM_VMM, 0, 1);
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nmaps;) {
		if (maps[i].base < ptr || maps[i].base - ptr >= size) {
			i++;
			continue;
		}
		maps[i].a->maps--;
		alloc_put(maps[i].a);
		maps[i] = maps[--nmaps];
	}
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	unsigned flags = 0, devices = 0;
	size_t i;
	int prot;

	TRY(fc_need_init());
	CHECK_ARG(desc && count && size && mapped(ptr, size));
	for (i = 0; i < count; i++) {
		CHECK_ARG(desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE);
		TRY(fc_check_dev(desc[i].location.id));
		flags = desc[i].flags;
		if (flags != CU_MEM_ACCESS_FLAGS_PROT_NONE)
			devices |= 1u << desc[i].location.id;
	}
	prot = flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE :
	       flags == CU_MEM_ACCESS_FLAGS_PROT_READ ? PROT_READ :
	       flags == CU_MEM_ACCESS_FLAGS_PROT_NONE ? PROT_NONE : -1;
	CHECK_ARG(prot >= 0 && !mprotect((void *)ptr, size, prot));
	fc_range_span(ptr, size, FC_MEM_VMM, prot == (PROT_READ | PROT_WRITE), 0);
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nmaps; i++)
		if (maps[i].base >= ptr && maps[i].base - ptr < size) {
			maps[i].flags = flags;
			maps[i].devices = devices;
		}
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

/* The mapping holding addr, or NULL; call with lock held. */
static struct map *map_at(uintptr_t addr)
{
	for (int i = 0; i < nmaps; i++)
		if (addr >= maps[i].base && addr - maps[i].base < maps[i].size)
			return &maps[i];
	return NULL;
}

CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
	struct map *m;

	TRY(fc_need_init());
	CHECK_ARG(flags && location && location->type == CU_MEM_LOCATION_TYPE_DEVICE);
	TRY(fc_check_dev(location->id));
	pthread_mutex_lock(&lock);
	m = map_at(ptr);
	if (m)
		*flags = m->devices & 1u << location->id ? m->flags : CU_MEM_ACCESS_FLAGS_PROT_NONE;
	pthread_mutex_unlock(&lock);
	return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	struct map *m;

	TRY(fc_need_init());
	CHECK_ARG(handle);
	pthread_mutex_lock(&lock);
	m = map_at((uintptr_t)addr);
	if (m) {
		m->a->refs++;
		*handle = (CUmemGenericAllocationHandle)(uintptr_t)m->a;
	}
	pthread_mutex_unlock(&lock);
	return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
	struct alloc *a = (struct alloc *)(uintptr_t)handle;

	TRY(fc_need_init());
	CHECK_ARG(prop);
	CHECK(fc_obj_has(a, FC_VMM) && a->refs, CUDA_ERROR_INVALID_HANDLE);
	*prop = a->prop;
	return CUDA_SUCCESS;
}

/* Whether a kernel on dev may use addr: 1 unless addr is in a mapping
 * that was not made accessible to dev. */
int fc_vmm_access(uintptr_t addr, CUdevice dev)
{
	struct map *m;
	int ok;

	pthread_mutex_lock(&lock);
	m = map_at(addr);
	ok = !m || (m->devices & 1u << dev);
	pthread_mutex_unlock(&lock);
	return ok;
}

/* The device whose memory backs a mapping at addr, or -1. */
int fc_vmm_device(uintptr_t addr)
{
	struct map *m;
	int dev;

	pthread_mutex_lock(&lock);
	m = map_at(addr);
	dev = m ? m->a->prop.location.id : -1;
	pthread_mutex_unlock(&lock);
	return dev;
}

/* Shareable handles: the allocation's memfd (POSIX file descriptors only,
 * and only for allocations that asked for them, as the driver checks). */
CUresult cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle handle,
				      CUmemAllocationHandleType type, unsigned long long flags)
{
	struct alloc *a = (struct alloc *)(uintptr_t)handle;
	int fd;

	TRY(fc_need_init());
	CHECK_ARG(out && !flags && type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	CHECK(fc_obj_has(a, FC_VMM) && a->refs, CUDA_ERROR_INVALID_HANDLE);
	CHECK_ARG(a->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	CHECK((fd = fcntl(a->fd, F_DUPFD_CLOEXEC, 0)) >= 0, CUDA_ERROR_OUT_OF_MEMORY);
	*(int *)out = fd;
	return CUDA_SUCCESS;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *os_handle,
					CUmemAllocationHandleType type)
{
	int fd = (int)(intptr_t)os_handle;
	struct alloc *a;
	struct stat st;

	TRY(fc_need_init());
	CHECK_ARG(handle && type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	CHECK_ARG(!fstat(fd, &st) && st.st_size > 0 && st.st_size % FC_GRANULARITY == 0);
	a = calloc(1, sizeof(*a));
	if (a)
		a->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (!a || a->fd < 0 || fc_obj_add(a, FC_VMM, NULL, NULL)) {
		if (a && a->fd >= 0)
			close(a->fd);
		free(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	a->size = (size_t)st.st_size;
	a->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	a->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	a->refs = 1;
	fc_mem_used((long long)a->size);     /* alloc_put gives it back */
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)a;
	return CUDA_SUCCESS;
}

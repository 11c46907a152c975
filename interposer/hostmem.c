/*
 * hostmem.c: host memory the application asks the driver about. Pinned
 * allocations of a local client are memfd regions shared with the worker,
 * which registers them with the driver, so copies from them are direct
 * DMA and mapped ones are true zero-copy. A remote client's pinned memory
 * is ordinary memory here (mapped allocations are managed memory), and so
 * are registered pages a local worker cannot share: once their device
 * pointer is asked for, the device sees a mirror (mapped.c). Device
 * allocations are devmem.c's; cuMemAlloc and cuMemFree are here, above
 * managed.c, whose ranges they free.
 *
 * A session that moves to a worker that cannot share the pages (another
 * node: the client is remote from then on) carries its shared regions:
 * each becomes ordinary memory here, as a remote client's is, and the new
 * worker holds a pinned copy of it at the device address the region had,
 * kept coherent with the program's pages as a mirror (mapped.c). A move
 * that fails leaves every region as it was, shared with the old worker.
 *
 * With unified addressing a kernel may be given pinned memory's host
 * address itself. Where the worker reaches the memory at another address
 * (a mirror, a region mapped elsewhere), each 8-byte word of a launch's
 * arguments of 8 bytes or more that points into such memory is made to
 * point at the same byte of the device's copy (args_to_device, launch.c's
 * filter), as cuMemHostGetDevicePointer would give; an address kept in
 * device memory is not seen, and stays the host's.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "interposer.h"

struct host_alloc {
	char *base;
	size_t size;
	unsigned region;                     /* shared with the server, or 0 */
	unsigned flags;
	int registered;                      /* cuMemHostRegister: not ours */
	char *user;                          /* registered: the range asked for */
	size_t user_size;
	CUdeviceptr device_ptr;
	int coherent;                        /* remote mapped: managed memory (managed.c) */
	int mirrored;                        /* device_ptr is a mirror (mapped.c) */
	int same_at;                         /* at the worker's address too (alloc_shared) */
	int carried;                         /* the worker holds a copy, mirrored (share_again) */
	int stale;                           /* remapped for a worker the session did not stay on */
	CUcontext ctx;                       /* current when made (a carry's thread has none) */
};

#define SAME_AT_TRIES 4                      /* alloc_shared */

static pthread_mutex_t hm_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;   /* (a carry copies under it) */
static pthread_mutex_t register_lock = PTHREAD_MUTEX_INITIALIZER;
static struct host_alloc *hosts;
static unsigned nhosts, cap_hosts;
static unsigned char region_used[CICADA_MAX_REGIONS];

static int grow(void **arr, unsigned *cap, unsigned n, size_t elem)
{
	void *p;

	if (n < *cap)
		return 0;
	p = realloc(*arr, (*cap ? *cap * 2 : 64) * elem);
	if (!p)
		return -1;
	*arr = p;
	*cap = *cap ? *cap * 2 : 64;
	return 0;
}

static struct host_alloc *find_host(const void *ptr, size_t size)
{
	const char *p = ptr;

	for (unsigned i = 0; i < nhosts; i++)
		if (p >= hosts[i].base && p - hosts[i].base + size <= hosts[i].size)
			return &hosts[i];
	return NULL;
}

int hostmem_find(const void *ptr, size_t size, struct host_range *out)
{
	struct host_alloc *h;
	int found = 0;

	pthread_mutex_lock(&hm_lock);
	h = find_host(ptr, size);
	if (h && h->region && !h->carried) {
		out->region = h->region;
		out->offset = (uint64_t)((const char *)ptr - h->base);
		found = 1;
	}
	pthread_mutex_unlock(&hm_lock);
	return found;
}

/* The application's address of an offset into a shared region, or NULL. */
void *hostmem_region_ptr(unsigned region, uint64_t offset)
{
	void *p = NULL;

	pthread_mutex_lock(&hm_lock);
	for (unsigned i = 0; i < nhosts && !p; i++)
		if (region && hosts[i].region == region && !hosts[i].carried && offset <= hosts[i].size)
			p = hosts[i].base + offset;
	pthread_mutex_unlock(&hm_lock);
	return p;
}

/* Whether the device may reach h at an address other than its host one. */
static int foreign(const struct host_alloc *h)
{
	return !h->coherent && h->device_ptr != (CUdeviceptr)(uintptr_t)h->base;
}

struct range {
	uintptr_t base, end;
};

static struct range *franges;                /* the foreign allocations, by address */
static unsigned nfranges, cap_franges;
static uintptr_t franges_lo, franges_hi;     /* all of them lie within (device memory never does) */

static int range_cmp(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return x->base < y->base ? -1 : x->base > y->base;
}

static CUresult args_to_device(char *buf, unsigned len);
static CUresult device_pointer(const void *p, CUdeviceptr *out);

/* (with hm_lock held, after hosts changed) the foreign allocations again,
 * and launch.c's filter set while there are any; without room for them,
 * none is looked for in arguments. */
static void count_foreign(void)
{
	unsigned n = 0;

	(void)grow((void **)&franges, &cap_franges, nhosts, sizeof(*franges));   /* (else: what fits) */
	for (unsigned i = 0; i < nhosts && n < cap_franges; i++)
		if (foreign(&hosts[i]))
			franges[n++] = (struct range){ (uintptr_t)hosts[i].base, (uintptr_t)hosts[i].base + hosts[i].size };
	qsort(franges, n, sizeof(*franges), range_cmp);
	nfranges = n;
	franges_lo = n ? franges[0].base : 0;
	franges_hi = 0;
	for (unsigned i = 0; i < n; i++)
		franges_hi = franges[i].end > franges_hi ? franges[i].end : franges_hi;
	launch_set_param_filter(n ? args_to_device : NULL);
}

/* (with hm_lock held) whether w lies in a foreign allocation */
static int in_foreign(uintptr_t w)
{
	unsigned lo = 0, hi = nfranges;

	if (w < franges_lo || w >= franges_hi)
		return 0;                        /* (most words: device pointers, sizes, flags) */
	while (hi - lo > 1) {
		unsigned mid = (lo + hi) / 2;
		if (franges[mid].base <= w)
			lo = mid;
		else
			hi = mid;
	}
	return nfranges && franges[lo].base <= w && w < franges[lo].end;
}

static int add_host(const struct host_alloc *h)
{
	int rc;

	pthread_mutex_lock(&hm_lock);
	rc = grow((void **)&hosts, &cap_hosts, nhosts, sizeof(*hosts));
	if (!rc)
		hosts[nhosts++] = *h;
	count_foreign();
	pthread_mutex_unlock(&hm_lock);
	return rc;
}

static int take_host(const void *base, int registered, struct host_alloc *out)
{
	int rc = -1;

	pthread_mutex_lock(&hm_lock);
	for (unsigned i = 0; i < nhosts; i++)
		if ((registered ? hosts[i].user : hosts[i].base) == base && hosts[i].registered == registered) {
			*out = hosts[i];
			hosts[i] = hosts[--nhosts];
			rc = 0;
			break;
		}
	count_foreign();
	pthread_mutex_unlock(&hm_lock);
	return rc;
}

/* The lowest free region id (ids are reused: the worker has a fixed table). */
static unsigned take_region_id(void)
{
	unsigned id = 0;

	pthread_mutex_lock(&hm_lock);
	for (unsigned i = 1; i < CICADA_MAX_REGIONS && !id; i++)
		if (!region_used[i])
			region_used[id = i] = 1;
	pthread_mutex_unlock(&hm_lock);
	return id;
}

static void put_region_id(unsigned id)
{
	pthread_mutex_lock(&hm_lock);
	region_used[id] = 0;
	pthread_mutex_unlock(&hm_lock);
}

/* Shares region h->region (a memfd) with the worker, which maps it at
 * h->base if it can (its own range of addresses: see alloc_shared);
 * fills h->device_ptr and *at, where the worker mapped it. */
static CUresult share_region_id(struct host_alloc *h, int fd, uint64_t *at)
{
	host_region_args a = { .region = h->region, .size = h->size, .flags = h->flags,
			       .at = (uint64_t)(uintptr_t)h->base };
	host_region_res r = { 0 };
	CUresult err;

	client_lock();
	if (wire_send_fd(client_socket(), fd))
		err = client_lost("cannot pass a memory region");
	else
		err = rpc_host_region_map_locked(&a, &r);
	client_unlock();
	h->device_ptr = r.device_ptr;
	if (at)
		*at = err ? 0 : r.host_at;
	return err;
}

static CUresult share_region(struct host_alloc *h, int fd, uint64_t *at)
{
	CUresult err;

	if (!(h->region = take_region_id()))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if ((err = share_region_id(h, fd, at)))
		put_region_id(h->region);
	return err;
}

static CUresult unshare_region(unsigned id);

/* Pinned memory of a local client: a memfd the worker maps first, in its
 * own range of addresses, and this process then at the same address where
 * that is free here (it normally is: the range is far from where this
 * process maps anything). With unified addressing a pinned pointer is the
 * device's pointer too, and programs rely on it (NCCL hands the host
 * pointers of its work queues to its kernels); elsewhere, only the
 * pointer cuMemHostGetDevicePointer gives reaches it from the device.
 * *at: the worker's address (0 if it named none). */
static CUresult alloc_shared_once(struct host_alloc *h, uint64_t *at)
{
	int fd = memfd_create("cicada-pinned", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	CUresult err = CUDA_ERROR_OUT_OF_MEMORY;
	void *p = MAP_FAILED;

	h->base = NULL;
	*at = 0;
	if (fd < 0 || ftruncate(fd, h->size) || shm_fd_seal(fd) || (err = share_region(h, fd, at)))
		goto out;
	if (*at)
		p = mmap((void *)(uintptr_t)*at, h->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
	if (p != MAP_FAILED && p != (void *)(uintptr_t)*at) {
		munmap(p, h->size);
		p = MAP_FAILED;
	}
	if (p == MAP_FAILED)
		p = mmap(NULL, h->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		unshare_region(h->region);
		err = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	h->base = p;
	h->same_at = p == (void *)(uintptr_t)*at;
out:
	if (fd >= 0)
		close(fd);
	return err;
}

/* As alloc_shared_once; where the worker's address is taken here, the
 * worker is asked for another while it keeps the first (so that it does
 * not name the same again), a few times, before the pinned memory is
 * left at different addresses on the two sides. */
static CUresult alloc_shared(struct host_alloc *h)
{
	unsigned held[SAME_AT_TRIES], nheld = 0;
	CUresult err;
	uint64_t at;

	while (!(err = alloc_shared_once(h, &at)) && at && !h->same_at && nheld < SAME_AT_TRIES) {
		munmap(h->base, h->size);
		held[nheld++] = h->region;
	}
	for (unsigned i = 0; i < nheld; i++)
		unshare_region(held[i]);
	if (!err && at && !h->same_at)
		log_warn("pinned memory of %zu bytes is at %p here but at 0x%llx in the worker: a kernel given its "
			 "host pointer will not reach it", h->size, h->base, (unsigned long long)at);
	return err;
}

/* Gives h's pages a memfd with the same bytes, mapped over the old pages
 * (same addresses), which the worker can then share; the fd is the
 * caller's to close. Another thread writing those pages meanwhile may
 * lose the write. */
static int remap_shared(struct host_alloc *h)
{
	int fd = memfd_create("cicada-pinned", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0 || ftruncate(fd, h->size) || shm_fd_seal(fd) || pwrite(fd, h->base, h->size, 0) != (ssize_t)h->size ||
	    mmap(h->base, h->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) != h->base) {
		log_error("pinned memory at %p: %s", h->base, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Shares h again, its pages remapped onto a new memory file, under its
 * old id with a worker that has none of it. */
static int share_remapped(struct host_alloc *h)
{
	CUdeviceptr old = h->device_ptr;
	uint64_t at = 0;
	CUresult err;
	int fd = remap_shared(h);

	if (fd < 0)
		return -1;
	h->stale = 1;
	err = share_region_id(h, fd, &at);
	close(fd);
	if (err) {
		log_error("pinned memory at %p: the worker refused it (error %d)", h->base, (int)err);
		return -1;
	}
	if (old && h->device_ptr != old)
		log_warn("mapped pinned memory at %p has a new device address after the restore", h->base);
	else if (h->same_at && at != (uint64_t)(uintptr_t)h->base)
		log_warn("pinned memory at %p is elsewhere in the restored worker: a kernel given its host "
			 "pointer no longer reaches it", h->base);
	return 0;
}

/* Has a worker that cannot share h's pages hold a pinned copy of them at
 * h's device address; h itself changes only once the whole session
 * resumed (carry_commit). */
static int carry(struct host_alloc *h)
{
	host_region_args a = { .region = h->region, .size = h->size, .flags = h->flags | CICADA_REGION_OWN,
			       .at = h->device_ptr };
	host_region_res r = { 0 };
	CUresult err = h->device_ptr ? rpc_host_region_map_locked(&a, &r) : CUDA_ERROR_INVALID_VALUE;

	if (!err && r.device_ptr != h->device_ptr) {
		log_error("pinned memory at %p (%zu bytes): the new worker cannot map it at its device address "
			  "0x%llx", h->base, h->size, (unsigned long long)h->device_ptr);
		return -1;
	}
	if (!err) {
		int pushed = !ctx_current() && h->ctx && !cuCtxPushCurrent_v2(h->ctx);

		err = copy_htod_device(h->device_ptr, h->base, h->size);
		if (pushed)
			cuCtxPopCurrent_v2(NULL);
	}
	if (err)
		log_error("pinned memory at %p (%zu bytes): the new worker cannot hold it (error %d)", h->base,
			  h->size, (int)err);
	return err ? -1 : 0;
}

/* The regions carried become mirrored ordinary memory. */
static int carry_commit(void)
{
	for (unsigned i = 0; i < nhosts; i++) {
		struct host_alloc *h = &hosts[i];

		h->stale = 0;
		if (!h->region || (!h->carried && client_shm()))
			continue;
		if (mapped_adopt(h->base, h->size, h->device_ptr, h->ctx)) {
			log_error("pinned memory at %p: out of memory for its mirror", h->base);
			return -1;
		}
		if (!h->carried)
			log_info("pinned memory at %p (%zu bytes) is mirrored by the new worker from now on",
				 h->base, h->size);
		h->carried = h->mirrored = 1;
	}
	return 0;
}

/* Back on a worker that kept the regions, after a resume elsewhere
 * failed: those remapped for that one are shared with it again. */
static int share_stale(void)
{
	for (unsigned i = 0; i < nhosts; i++) {
		struct host_alloc *h = &hosts[i];
		uint64_t v = h->region;
		scalars a = { { 1, &v } };
		scalar_res r = { 0 };

		if (!h->stale)
			continue;
		rpc_host_region_unmap_locked(&a, &r);
		xdr_free((xdrproc_t)xdr_scalar_res, (char *)&r);
		if (share_remapped(h))
			return -1;
		h->stale = 0;
	}
	return 0;
}

/* A restored worker has none of our pinned regions: a local one shares
 * them again under their old ids (their pages remapped), one that cannot
 * share this process's pages gets a copy of each (carry). Nothing of the
 * regions changes until all are done: a resume that fails goes back to
 * the old worker, which still has them (share_stale). This is the last
 * of the resume hooks that can fail (the order of the objects). */
static int share_again(int regions_lost)
{
	int rc = 0;

	pthread_mutex_lock(&hm_lock);
	if (!regions_lost) {
		rc = share_stale();
		pthread_mutex_unlock(&hm_lock);
		return rc;
	}
	for (unsigned i = 0; i < nhosts && !rc; i++) {
		struct host_alloc *h = &hosts[i];

		if (h->region)
			rc = h->carried || !client_shm() ? carry(h) : share_remapped(h);
	}
	if (!rc)
		rc = carry_commit();
	count_foreign();
	pthread_mutex_unlock(&hm_lock);
	return rc;
}

/* launch.c's filter: each argument word that points into pinned memory
 * the device reaches elsewhere points at the device's copy instead. Set
 * only while such memory exists (never for a local client, whose pinned
 * memory the worker maps at its own address). */
static CUresult args_to_device(char *buf, unsigned len)
{
	static int told;
	unsigned hits[CICADA_PARAMS_MAX / sizeof(uint64_t)], nhits = 0;
	CUdeviceptr d;
	uint64_t w;

	pthread_mutex_lock(&hm_lock);
	for (unsigned off = 0; off + sizeof(w) <= len; off += sizeof(w)) {
		memcpy(&w, buf + off, sizeof(w));
		if (in_foreign((uintptr_t)w))
			hits[nhits++] = off;
	}
	pthread_mutex_unlock(&hm_lock);
	for (unsigned i = 0; i < nhits; i++) {
		memcpy(&w, buf + hits[i], sizeof(w));
		if (device_pointer((const void *)(uintptr_t)w, &d) || d == w)
			continue;
		memcpy(buf + hits[i], &d, sizeof(d));
		if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
			log_info("a kernel argument is the host address of pinned memory the worker reaches elsewhere: "
				 "it is given the device's copy");
	}
	return CUDA_SUCCESS;
}

static const struct client_hooks hostmem_hooks = { .resume = share_again };

__attribute__((constructor)) static void hostmem_hook(void)
{
	client_add_hooks(&hostmem_hooks);
	copy_set_region_finder(hostmem_find);
}

/* Mapped pinned memory of a remote client: the worker cannot reach this
 * process's pages, so it is managed memory (managed.c): device memory at
 * the same address as these host pages, kept coherent around device work.
 * As there, the host must not touch it while kernels that use it run. */
static CUresult alloc_coherent(struct host_alloc *h)
{
	static int told;
	CUdeviceptr d;
	CUresult err = cuMemAllocManaged(&d, h->size, CU_MEM_ATTACH_GLOBAL);

	if (err)
		return err;
	if (!told++)
		log_info("mapped pinned memory over a remote link is kept coherent as managed memory is: "
			 "the host sees kernels' writes after a synchronisation");
	h->base = (char *)(uintptr_t)d;
	h->device_ptr = d;
	h->coherent = 1;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
	struct host_alloc h = { .flags = flags, .ctx = ctx_current() };
	long page = sysconf(_SC_PAGESIZE);
	CUresult err;

	if (!pp || !bytesize)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = client_connect()))
		return err;
	h.size = (bytesize + page - 1) / page * page;
	if (client_shm()) {
		err = alloc_shared(&h);
	} else if (flags & CU_MEMHOSTALLOC_DEVICEMAP) {
		err = alloc_coherent(&h);
	} else {
		h.base = mmap(NULL, h.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		err = h.base == MAP_FAILED ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
	}
	if (!err && add_host(&h))
		err = CUDA_ERROR_OUT_OF_MEMORY;
	if (!err)
		*pp = h.base;
	return err;
}

CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	return cuMemHostAlloc(pp, bytesize, 0);
}

/* The worker unmaps region id, which is then free for another. */
static CUresult unshare_region(unsigned id)
{
	uint64_t v = id;
	scalars a = { { 1, &v } };
	scalar_res r = { 0 };
	CUresult err = rpc_host_region_unmap(&a, &r);

	xdr_free((xdrproc_t)xdr_scalar_res, (char *)&r);
	put_region_id(id);
	return err;
}

CUresult CUDAAPI cuMemFreeHost(void *p)
{
	struct host_alloc h;
	CUresult err = CUDA_SUCCESS;

	if (take_host(p, 0, &h))
		return CUDA_ERROR_INVALID_VALUE;
	if (h.coherent)
		return cuMemFree_v2(h.device_ptr);   /* its host pages go with it */
	if (h.mirrored)
		mapped_remove(h.base, 0);
	/* (unmapped here first: once the worker lets go, its place may be
	 * named at once for another thread's pinned memory) */
	munmap(h.base, h.size);
	if (h.region)
		err = unshare_region(h.region);
	return err;
}

/* Host memory the worker cannot reach gets a device mirror (mapped.c)
 * when its device pointer is first asked for: with unified addressing all
 * pinned and registered memory is mapped, whatever its flags. */
static CUresult map_mirror(const char *base)
{
	struct host_alloc *h, copy = { 0 };
	CUdeviceptr d = 0;
	CUresult err = CUDA_SUCCESS;

	pthread_mutex_lock(&register_lock);
	pthread_mutex_lock(&hm_lock);
	if ((h = find_host(base, 1)) && h->base == base)
		copy = *h;
	pthread_mutex_unlock(&hm_lock);
	if (!copy.base)
		err = CUDA_ERROR_INVALID_VALUE;
	else if (!copy.device_ptr)
		err = mapped_add(copy.base, copy.size, copy.registered && (copy.flags & CU_MEMHOSTREGISTER_READ_ONLY),
				 &d);
	pthread_mutex_lock(&hm_lock);
	if (d && (h = find_host(base, 1)) && h->base == base && !h->device_ptr) {
		h->device_ptr = d;
		h->mirrored = 1;
		d = 0;
	}
	pthread_mutex_unlock(&hm_lock);
	if (d)                                   /* freed meanwhile */
		mapped_remove(copy.base, 0);
	pthread_mutex_unlock(&register_lock);
	if (!copy.device_ptr && !err)
		log_info("host memory at %p (%zu bytes) is mapped through a device mirror: kernels see the host's "
			 "writes made before their launch, the host theirs after a synchronisation", copy.base,
			 copy.size);
	return err;
}

/* p's device pointer, mapping it first if need be. */
static CUresult device_pointer(const void *p, CUdeviceptr *out)
{
	struct host_alloc *h;
	char *base = NULL;
	CUresult err;

	pthread_mutex_lock(&hm_lock);
	h = find_host(p, 1);
	if (h && h->device_ptr)
		*out = h->device_ptr + (CUdeviceptr)((const char *)p - h->base);
	else if (h)
		base = h->base;
	pthread_mutex_unlock(&hm_lock);
	if (!h)
		return CUDA_ERROR_INVALID_VALUE;
	if (!base)
		return CUDA_SUCCESS;
	if ((err = map_mirror(base)))
		return err;
	return device_pointer(p, out);
}

CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int flags)
{
	if (!pdptr || flags)
		return CUDA_ERROR_INVALID_VALUE;
	return device_pointer(p, pdptr);
}

CUresult CUDAAPI cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
	struct host_alloc *h;
	CUresult err = CUDA_ERROR_INVALID_VALUE;

	if (!pFlags)
		return err;
	pthread_mutex_lock(&hm_lock);
	h = find_host(p, 1);
	if (h) {
		/* all of it is mapped, whatever was asked (a mirror where the
		 * worker cannot reach it): with unified addressing the driver
		 * says so too */
		*pFlags = h->flags | CU_MEMHOSTALLOC_DEVICEMAP;
		err = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&hm_lock);
	return err;
}

/* Whether [start, end) is all private anonymous read-write memory (heap
 * or mmap'd), the only kind whose pages can be remapped onto a memory file
 * without changing what the program sees. */
static int anonymous_private(uintptr_t start, uintptr_t end)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512], perms[8];
	unsigned long lo, hi, inode;
	uintptr_t covered = start;
	int n;

	if (!f)
		return 0;
	while (covered < end && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %7s %*s %*s %lu %n", &lo, &hi, perms, &inode, &n) < 4 || hi <= covered)
			continue;
		if (lo > covered || strcmp(perms, "rw-p") || inode ||
		    (line[n] && strncmp(line + n, "[heap]", 6)))
			break;
		covered = hi;
	}
	fclose(f);
	return covered >= end;
}

/* Whether any remembered host memory overlaps [base, base + size). */
static int overlaps(const char *base, size_t size)
{
	int found = 0;

	pthread_mutex_lock(&hm_lock);
	for (unsigned i = 0; i < nhosts && !found; i++)
		found = base < hosts[i].base + hosts[i].size && hosts[i].base < base + size;
	pthread_mutex_unlock(&hm_lock);
	return found;
}

/* With a local server the registered pages (private anonymous memory
 * only) become a shared region, as if allocated pinned: copies are direct
 * and the device reaches the pages. The pages stay shared after
 * unregistering (a fork() child would share them). Pages another
 * registration holds, other kinds of memory, read-only registrations and
 * remote servers keep the application's memory as it is (copies take the
 * pageable path), and the device sees a mirror (mapped.c), made at once
 * for DEVICEMAP, else when the device pointer is first asked for. */
static CUresult register_shared(struct host_alloc *h)
{
	CUresult err;
	int fd = remap_shared(h);

	if (fd < 0)
		return CUDA_ERROR_OPERATING_SYSTEM;
	err = share_region(h, fd, NULL);
	close(fd);
	if (!err && add_host(h))
		err = CUDA_ERROR_OUT_OF_MEMORY;
	return err;
}

/* Registered memory as it is; DEVICEMAP mirrors it on the device now
 * (so that the registration fails, not a later call, where it cannot). */
static CUresult register_mirrored(void *p, size_t bytesize, unsigned flags)
{
	struct host_alloc h = { .base = p, .size = bytesize, .flags = flags, .registered = 1, .user = p,
				.user_size = bytesize };
	CUresult err;

	if (!host_range_valid(p, bytesize))
		return CUDA_ERROR_INVALID_VALUE;
	if ((flags & CU_MEMHOSTREGISTER_DEVICEMAP) &&
	    (err = mapped_add(p, bytesize, (flags & CU_MEMHOSTREGISTER_READ_ONLY) != 0, &h.device_ptr)))
		return err;
	h.mirrored = h.device_ptr != 0;
	if (add_host(&h)) {
		if (h.mirrored)
			mapped_remove(p, 0);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int flags)
{
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)p / page * page, end = ((uintptr_t)p + bytesize + page - 1) / page * page;
	struct host_alloc h = { .base = (char *)start, .size = end - start, .flags = flags, .registered = 1,
				.user = p, .user_size = bytesize, .ctx = ctx_current() };
	CUresult err;

	if (!p || !bytesize)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = client_connect()))
		return err;
	pthread_mutex_lock(&register_lock);
	if (overlaps(p, bytesize))
		err = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	else if (client_shm() && !(flags & CU_MEMHOSTREGISTER_READ_ONLY) && !overlaps(h.base, h.size) &&
		 anonymous_private(start, end))
		err = register_shared(&h);
	else
		err = register_mirrored(p, bytesize, flags);
	pthread_mutex_unlock(&register_lock);
	return err;
}

/* The pages stay as they are (a memory file now), the worker lets go. */
CUresult CUDAAPI cuMemHostUnregister(void *p)
{
	struct host_alloc h;

	if (take_host(p, 1, &h))
		return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	if (h.mirrored)
		mapped_remove(h.base, 1);
	return h.region ? unshare_region(h.region) : CUDA_SUCCESS;
}

/* The host allocation holding ptr, by its host address or, for mapped
 * memory, by its device address; *offset is ptr's place in it. */
static struct host_alloc *find_either(CUdeviceptr ptr, uint64_t *offset)
{
	for (unsigned i = 0; i < nhosts; i++) {
		struct host_alloc *h = &hosts[i];
		if (ptr >= (CUdeviceptr)h->base && ptr - (CUdeviceptr)h->base < h->size) {
			*offset = ptr - (CUdeviceptr)h->base;
			return h;
		}
		if (h->device_ptr && ptr >= h->device_ptr && ptr - h->device_ptr < h->size) {
			*offset = ptr - h->device_ptr;
			return h;
		}
	}
	return NULL;
}

static CUresult host_attribute(const struct host_alloc *h, uint64_t off, CUpointer_attribute attr, void *data)
{
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data = CU_MEMORYTYPE_HOST; break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER: *(void **)data = h->base + off; break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		if (!h->device_ptr)
			return CUDA_ERROR_INVALID_VALUE;
		*(CUdeviceptr *)data = h->device_ptr + off;
		break;
	case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = ctx_current(); break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(int *)data = 0; break;     /* managed memory is device memory here */
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = 0; break;
	case CU_POINTER_ATTRIBUTE_MAPPED: *(int *)data = 1; break;      /* all of it (map_mirror) */
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(CUdeviceptr *)data = (CUdeviceptr)(h->user ? h->user : h->base);
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = h->user ? h->user_size : h->size; break;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

/* Pointer attributes of the application's pinned or registered memory
 * are answered here: the server knows it under other addresses. Returns
 * 0 if ptr is none of it (the server answers for device memory). map:
 * the device pointer asked for is made if need be (map_mirror); else
 * memory not mapped yet has none (cuPointerGetAttributes, which the
 * runtime asks of every pinned pointer, so leaves it unmapped). */
int hostmem_attribute(CUdeviceptr ptr, CUpointer_attribute attr, void *data, CUresult *err, int map)
{
	struct host_alloc *h;
	uint64_t off = 0;

	pthread_mutex_lock(&hm_lock);
	h = find_either(ptr, &off);
	if (h && map && attr == CU_POINTER_ATTRIBUTE_DEVICE_POINTER && !h->device_ptr) {
		pthread_mutex_unlock(&hm_lock);
		*err = device_pointer((const void *)(uintptr_t)ptr, (CUdeviceptr *)data);
		return 1;
	}
	if (h)
		*err = host_attribute(h, off, attr, data);
	pthread_mutex_unlock(&hm_lock);
	return h != NULL;
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	return devmem_alloc(dptr, bytesize);
}

CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
				    unsigned int ElementSizeBytes)
{
	CUresult err = rpc_cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);

	if (!err)
		devmem_note_alloc(*dptr, *pPitch * Height);
	return err;
}

/* Freeing 0 does nothing and succeeds, as in the driver: cudaFree(NULL)
 * (cuBLAS's cublasCreate makes that call) arrives as cuMemFree_v2(0). */
CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
	CUresult err;

	if (!dptr)
		return CUDA_SUCCESS;
	err = devmem_free(managed_raw(dptr));
	if (!err)
		managed_free(dptr);
	return err;
}

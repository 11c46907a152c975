/*
 * managed.c: managed memory (cuMemAllocManaged) as a software coherence
 * protocol between the application's host pages and the worker's device
 * memory, so that it works with a local server and over TCP alike.
 *
 * A managed allocation is device memory in the worker's arena, and this
 * process maps host pages at the very same address: one pointer, valid on
 * both sides. The range is kept in blocks, each INVALID (the device holds
 * the data; pages inaccessible), CLEAN (host and device agree; read-only)
 * or DIRTY (the host wrote; read-write). A host access to an INVALID block
 * faults, and the handler fetches the block; a write to a CLEAN block
 * faults and makes it DIRTY. Before device work (client.c's hook: launches,
 * copies, memsets, graph launches) every DIRTY block is written to the
 * device, and device work that may write makes every block INVALID again.
 *
 * That is the model of a device without concurrent managed access (the
 * host must not touch managed memory while kernels run), and the device
 * attributes say so: CONCURRENT_MANAGED_ACCESS and PAGEABLE_MEMORY_ACCESS
 * are 0, MANAGED_MEMORY is 1. Prefetches and advice are accepted; a
 * checkpoint carries the device copy after the dirty blocks are written.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include "interposer.h"

#define BLOCK (64u << 10)
#define MAX_MANAGED 4096
#define PLACE_TRIES 4                         /* alloc_placed */

enum { B_INVALID, B_CLEAN, B_DIRTY };

struct managed {
	uintptr_t base;
	CUdeviceptr raw;                      /* the device allocation (base rounded up from it) */
	size_t size;                          /* whole blocks */
	unsigned char *state;                 /* one per block */
	size_t live, dirty;                   /* blocks not INVALID, blocks DIRTY */
};

static struct managed ranges[MAX_MANAGED];
static int nranges;
static volatile int any;                      /* read without the lock */
static pthread_mutex_t m_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static struct sigaction previous;
static int in_hook;

static struct managed *range_of(uintptr_t a)
{
	for (int i = 0; i < nranges; i++)
		if (a - ranges[i].base < ranges[i].size)
			return &ranges[i];
	return NULL;
}

static void set_block(struct managed *m, size_t b, int state)
{
	int prot = state == B_INVALID ? PROT_NONE : state == B_CLEAN ? PROT_READ : PROT_READ | PROT_WRITE;

	if (mprotect((void *)(m->base + b * BLOCK), BLOCK, prot))
		log_error("managed memory: mprotect failed: %s", strerror(errno));
	m->live += (state != B_INVALID) - (m->state[b] != B_INVALID);
	m->dirty += (state == B_DIRTY) - (m->state[b] == B_DIRTY);
	m->state[b] = (unsigned char)state;
}

/* Every block of m INVALID at once: one call, whatever the size. */
static void invalidate(struct managed *m)
{
	if (mprotect((void *)m->base, m->size, PROT_NONE))
		log_error("managed memory: mprotect failed: %s", strerror(errno));
	memset(m->state, B_INVALID, m->size / BLOCK);
	m->live = m->dirty = 0;
}

/* Fetches block b from the device (it is INVALID). Its own copy is no
 * device work for the hook to act on. */
static CUresult fetch(struct managed *m, size_t b)
{
	uintptr_t a = m->base + b * BLOCK;
	CUresult err;

	in_hook = 1;
	set_block(m, b, B_DIRTY);                /* writable while it fills */
	err = copy_dtoh_device((void *)a, (CUdeviceptr)a, BLOCK);
	set_block(m, b, B_CLEAN);
	in_hook = 0;
	return err;
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	struct managed *m;
	int write = 0;

#if defined(__x86_64__)
	write = (((ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#endif
	client_lock();                           /* always before m_lock: the hook runs under it */
	pthread_mutex_lock(&m_lock);
	m = range_of(a);
	if (m) {
		size_t b = (a - m->base) / BLOCK;
		if (m->state[b] == B_INVALID && fetch(m, b))
			log_error("managed memory: fetching 0x%lx from the device failed", (unsigned long)a);
		if (write || m->state[b] == B_INVALID)
			set_block(m, b, B_DIRTY);
		pthread_mutex_unlock(&m_lock);
		client_unlock();
		return;
	}
	pthread_mutex_unlock(&m_lock);
	client_unlock();
	/* Not ours: as if this handler were not there. */
	if (previous.sa_flags & SA_SIGINFO && previous.sa_sigaction) {
		previous.sa_sigaction(sig, si, uc);
	} else if (previous.sa_handler != SIG_IGN && previous.sa_handler != SIG_DFL && previous.sa_handler) {
		previous.sa_handler(sig);
	} else {
		signal(sig, SIG_DFL);
		raise(sig);
	}
}

/* Writes every DIRTY block to the device; if writes, all become INVALID
 * (the device work to come may change any of them). The caller holds the
 * client lock (locks are always taken client first, then m_lock). */
static void before_device_work(int writes)
{
	if (!any || in_hook)
		return;
	pthread_mutex_lock(&m_lock);
	in_hook = 1;
	for (int i = 0; i < nranges; i++) {
		struct managed *m = &ranges[i];
		for (size_t b = 0; m->dirty && b < m->size / BLOCK; b++) {
			uintptr_t a = m->base + b * BLOCK;
			if (m->state[b] == B_DIRTY &&
			    copy_htod_device((CUdeviceptr)a, (const void *)a, BLOCK) == CUDA_SUCCESS && !writes)
				set_block(m, b, B_CLEAN);
		}
		if (writes && m->live)
			invalidate(m);
	}
	in_hook = 0;
	pthread_mutex_unlock(&m_lock);
}

/* What a call does to device memory: -1 nothing, 0 it reads it (a copy
 * out), 1 it may write it (launches, copies in, memsets). */
int device_work_writes(unsigned proc)
{
	switch (proc) {
	case P_memcpy_dtoh:
		return 0;
	case P_cuMemcpyDtoD_v2:
	case P_cuMemcpyDtoDAsync_v2:
	case P_launch_kernel:
	case P_cuGraphLaunch:
	case P_memcpy_htod:
	case P_memcpy_htod_async:
	case P_memcpy_shm:
	case P_memcpy_shm_async:
	case P_memcpy_3d:
	case P_memcpy_3d_async:
	case P_cuMemsetD8_v2:
	case P_cuMemsetD16_v2:
	case P_cuMemsetD32_v2:
	case P_cuMemsetD8Async:
	case P_cuMemsetD16Async:
	case P_cuMemsetD32Async:
	case P_cuMemsetD2D8_v2:
	case P_cuMemsetD2D16_v2:
	case P_cuMemsetD2D32_v2:
	case P_cuMemsetD2D8Async:
	case P_cuMemsetD2D16Async:
	case P_cuMemsetD2D32Async:
		return 1;
	default:
		return -1;
	}
}

/* The hook client.c calls before a call that reaches device memory. */
static void device_work_hook(unsigned proc)
{
	int writes = device_work_writes(proc);

	if (writes >= 0)
		before_device_work(writes);
}

static int install_handler(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGSEGV, &sa, &previous);
}

/* Device memory for size bytes at a block boundary (host pages map only
 * there; the arena hands out 256-byte units): *raw is what to free. */
static CUresult alloc_aligned(size_t size, CUdeviceptr *raw, CUdeviceptr *d)
{
	CUresult err = devmem_alloc(raw, size);

	if (!err && *raw % BLOCK) {
		devmem_free(*raw);
		err = devmem_alloc(raw, size + BLOCK);
	}
	*d = (*raw + BLOCK - 1) / BLOCK * BLOCK;
	return err;
}

/* Device memory whose address is free in this process too, mapped there
 * (inaccessible): where the worker's address is taken here (a mapping
 * the program made where freed managed memory was), the worker is asked
 * for another while it keeps the first, a few times. */
static CUresult alloc_placed(size_t size, CUdeviceptr *raw, CUdeviceptr *d, void **p)
{
	CUdeviceptr held[PLACE_TRIES];
	unsigned nheld = 0;
	CUresult err;

	for (;;) {
		if ((err = alloc_aligned(size, raw, d)))
			break;
		*p = mmap((void *)(uintptr_t)*d, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			  -1, 0);
		if (*p == (void *)(uintptr_t)*d)
			break;
		if (*p != MAP_FAILED)
			munmap(*p, size);
		*p = MAP_FAILED;
		if (errno != EEXIST || nheld == PLACE_TRIES)
			break;
		held[nheld++] = *raw;
	}
	for (unsigned i = 0; i < nheld; i++)
		devmem_free(held[i]);
	return err;
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	size_t size = (bytesize + BLOCK - 1) / BLOCK * BLOCK;
	struct managed m = { 0 };
	CUdeviceptr d;
	CUresult err;
	void *p = MAP_FAILED;

	if (!dptr || !bytesize || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = alloc_placed(size, &m.raw, &d, &p)))
		return err;
	m.state = calloc(size / BLOCK, 1);
	if (p != (void *)(uintptr_t)d || !m.state || (err = cuMemsetD8_v2(d, 0, size))) {
		log_warn("managed memory: cannot map %zu bytes at 0x%llx in this process", size,
			 (unsigned long long)d);
		if (p != MAP_FAILED)
			munmap(p, size);
		free(m.state);
		devmem_free(m.raw);
		return err ? err : CUDA_ERROR_OUT_OF_MEMORY;
	}
	m.base = (uintptr_t)d;
	m.size = size;
	pthread_mutex_lock(&m_lock);
	if (nranges == MAX_MANAGED || (!any && install_handler())) {
		pthread_mutex_unlock(&m_lock);
		munmap(p, size);
		free(m.state);
		devmem_free(m.raw);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	ranges[nranges++] = m;
	if (!any)
		client_set_device_work_hook(device_work_hook);
	any = 1;
	pthread_mutex_unlock(&m_lock);
	*dptr = d;
	return CUDA_SUCCESS;
}

/* The device allocation to free for p: a managed range's own, else p. */
CUdeviceptr managed_raw(CUdeviceptr p)
{
	struct managed *m;
	CUdeviceptr raw = p;

	if (!any)
		return p;
	pthread_mutex_lock(&m_lock);
	if ((m = range_of((uintptr_t)p)) && m->base == (uintptr_t)p)
		raw = m->raw;
	pthread_mutex_unlock(&m_lock);
	return raw;
}

/* cuMemFree of managed memory: the host mapping goes too. */
int managed_free(CUdeviceptr p)
{
	struct managed *m;

	if (!any)
		return 0;
	pthread_mutex_lock(&m_lock);
	m = range_of((uintptr_t)p);
	if (m && m->base == (uintptr_t)p) {
		munmap((void *)m->base, m->size);
		free(m->state);
		*m = ranges[--nranges];
	}
	pthread_mutex_unlock(&m_lock);
	return m != NULL;
}

int managed_contains(const void *p, size_t n)
{
	int hit;

	if (!any)
		return 0;
	pthread_mutex_lock(&m_lock);
	hit = range_of((uintptr_t)p) || (n && range_of((uintptr_t)p + n - 1));
	pthread_mutex_unlock(&m_lock);
	return hit;
}

/* Before a checkpoint: the device copy must be whole. */
void managed_flush(void)
{
	before_device_work(0);
}

/* Prefetch to the host fetches the blocks; to a device writes what the
 * host changed. Either way the data stays where it is coherent. */
static CUresult prefetch(CUdeviceptr p, size_t count, int to_host)
{
	struct managed *m;
	CUresult err = CUDA_SUCCESS;

	client_lock();
	pthread_mutex_lock(&m_lock);
	m = range_of((uintptr_t)p);
	if (!m || (uintptr_t)p + count - m->base > m->size)
		err = CUDA_ERROR_INVALID_VALUE;
	else if (to_host)
		for (size_t b = ((uintptr_t)p - m->base) / BLOCK; b * BLOCK < (uintptr_t)p + count - m->base; b++)
			if (m->state[b] == B_INVALID)
				fetch(m, b);
	pthread_mutex_unlock(&m_lock);
	if (!err && !to_host)
		before_device_work(0);
	client_unlock();
	return err;
}

#undef cuMemPrefetchAsync
CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr p, size_t count, CUdevice dst, CUstream stream);
CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr p, size_t count, CUdevice dst, CUstream stream)
{
	return prefetch(p, count, dst == CU_DEVICE_CPU);
}

CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr p, size_t count, CUmemLocation location, unsigned int flags,
				       CUstream stream)
{
	return prefetch(p, count, location.type == CU_MEM_LOCATION_TYPE_HOST ||
				  location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
				  location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT);
}

/* Advice only tunes placement; the data is coherent either way. */
#undef cuMemAdvise
CUresult CUDAAPI cuMemAdvise(CUdeviceptr p, size_t count, CUmem_advise advice, CUdevice dev);
CUresult CUDAAPI cuMemAdvise(CUdeviceptr p, size_t count, CUmem_advise advice, CUdevice dev)
{
	return managed_contains((void *)(uintptr_t)p, count) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr p, size_t count, CUmem_advise advice, CUmemLocation location)
{
	return cuMemAdvise(p, count, advice, 0);
}

CUresult CUDAAPI cuStreamAttachMemAsync(CUstream stream, CUdeviceptr p, size_t length, unsigned int flags)
{
	return managed_contains((void *)(uintptr_t)p, length ? length : 1) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* What this process's managed memory is, for the device attributes. */
int managed_attribute(CUdevice_attribute attr, int *value)
{
	switch (attr) {
	case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
		*value = 1;
		return 1;
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
	case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
	case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES:
	case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST:
		*value = 0;
		return 1;
	default:
		return 0;
	}
}

/*
 * devmem.c: the device allocations the client knows of, so that cuMemcpy
 * and pointer queries can tell device pointers from host pointers under
 * unified addressing. Every allocation path notes what it got here
 * (cuMemAlloc, the stream-ordered allocator, modules' globals, VMM maps);
 * devmem_alloc and devmem_free are plain device memory, allocated and
 * noted, for the files that keep memory of their own (managed.c,
 * mapped.c) and for cuMemAlloc itself (hostmem.c). It calls nothing but
 * the generated calls.
 */
#include <pthread.h>
#include <stdlib.h>
#include "interposer.h"

struct dev_alloc {
	CUdeviceptr base;
	size_t size;
};

static pthread_mutex_t dm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct dev_alloc *devs;
static unsigned ndevs, cap_devs;

/* Room for one more (with the lock held); -1 if there is none. */
static int grow(void)
{
	unsigned cap = cap_devs ? cap_devs * 2 : 64;
	struct dev_alloc *p;

	if (ndevs < cap_devs)
		return 0;
	if (!(p = realloc(devs, cap * sizeof(*p))))
		return -1;
	devs = p;
	cap_devs = cap;
	return 0;
}

void devmem_note_alloc(CUdeviceptr ptr, size_t size)
{
	pthread_mutex_lock(&dm_lock);
	for (unsigned i = 0; i < ndevs; i++)
		if (devs[i].base == ptr) {
			devs[i].size = size;
			pthread_mutex_unlock(&dm_lock);
			return;
		}
	if (!grow())
		devs[ndevs++] = (struct dev_alloc){ ptr, size };
	pthread_mutex_unlock(&dm_lock);
}

void devmem_note_free(CUdeviceptr ptr)
{
	pthread_mutex_lock(&dm_lock);
	for (unsigned i = 0; i < ndevs; i++)
		if (devs[i].base == ptr) {
			devs[i] = devs[--ndevs];
			break;
		}
	pthread_mutex_unlock(&dm_lock);
}

/* Forgets the device ranges inside [ptr, ptr + size) (cuMemUnmap). */
void devmem_note_unmap(CUdeviceptr ptr, size_t size)
{
	pthread_mutex_lock(&dm_lock);
	for (unsigned i = 0; i < ndevs;)
		if (devs[i].base >= ptr && devs[i].base - ptr < size)
			devs[i] = devs[--ndevs];
		else
			i++;
	pthread_mutex_unlock(&dm_lock);
}

/* Whether ptr lies in a device allocation the client knows of. */
int devmem_contains(CUdeviceptr ptr)
{
	int found = 0;

	pthread_mutex_lock(&dm_lock);
	for (unsigned i = 0; i < ndevs && !found; i++)
		found = ptr >= devs[i].base && ptr - devs[i].base < devs[i].size;
	pthread_mutex_unlock(&dm_lock);
	return found;
}

CUresult devmem_alloc(CUdeviceptr *dptr, size_t size)
{
	CUresult err = rpc_cuMemAlloc_v2(dptr, size);

	if (!err)
		devmem_note_alloc(*dptr, size);
	return err;
}

/* Freeing 0 does nothing and succeeds, as in the driver. */
CUresult devmem_free(CUdeviceptr ptr)
{
	CUresult err = ptr ? rpc_cuMemFree_v2(ptr) : CUDA_SUCCESS;

	if (!err && ptr)
		devmem_note_free(ptr);
	return err;
}

/*
 * ipc.c: CUDA IPC between the clients of one gpu-server (two processes of
 * a job, each with its worker). A client's cuIpcGetMemHandle names the
 * arena chunk that holds the allocation: the handle carries the exporting
 * worker's pid, the chunk, the allocation's offset in it, its GPU and a
 * random secret. The worker of a client that opens the handle connects
 * to the exporter's IPC socket, <run_dir>/ipc-<pid>.sock (the run
 * directory is private to the server's user), proves the secret, and
 * receives the chunk's physical memory as a file descriptor, which it maps
 * in an import region of its own address space. The exporter keeps the
 * descriptor while the chunk lives, so what it hands out is always the
 * memory the handle named. Event handles are the driver's own: workers are
 * processes of one node.
 *
 * The application's own VMM allocations travel the same way
 * (cuMemExportToShareableHandle with POSIX file descriptors, as NCCL
 * shares its buffers): the export is the driver's descriptor, kept here
 * under a key of its own, and the client's "descriptor" is a small file
 * holding the token (interposer/ipc.c); the importing worker fetches the
 * memory and the client holds it as an allocation of its own.
 *
 * A session with imported memory cannot be checkpointed: the memory is
 * another process's (worker_quiesce asks ipc_busy and vmm_imported).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include "gpu-server.h"

#define IPC_BASE 0x380000000000ull           /* 56 TiB: above the application's VMM (vmm.c) */
#define IPC_SIZE (1ull << 42)
#define IPC_MAGIC "CICADA01"
#define VMM_MAGIC "CICADAVM"
#define VMM_KEY (1ull << 63)                 /* export keys of VMM allocations */

struct ipc_handle {
	char magic[8];
	uint64_t pid;                        /* the exporting worker */
	uint64_t va, size;                   /* its chunk */
	uint64_t offset;                     /* of the allocation in the chunk */
	uint8_t secret[16];
	int32_t device;                      /* the chunk's GPU */
	uint32_t pad;
};
_Static_assert(sizeof(struct ipc_handle) == sizeof(CUipcMemHandle), "an IPC handle is 64 bytes");

struct ipc_request {
	uint64_t va, size;
	uint8_t secret[16];
};

struct export {
	uint64_t va, size;
	uint8_t secret[16];
	int fd;
};

struct import {
	uint64_t va, size;                   /* where it is mapped here */
	CUmemGenericAllocationHandle h;
};

static struct {
	struct export *ex;
	unsigned nex, cap_ex;
	pthread_mutex_t lock;
	int listening;
	char path[108];
	struct import *im;
	unsigned nim, cap_im;
	uint64_t next;                       /* import region: bump, reset when empty */
	int reserved;
	uint64_t vmm_exports;                /* keys given so far */
} ipc = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* --- the exporting side --- */

/* A handle as the reply's 8 words. */
static CUresult handle_reply(scalar_res *r, const struct ipc_handle *h)
{
	if (!(r->v.v_val = malloc(sizeof(*h))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	memcpy(r->v.v_val, h, sizeof(*h));
	r->v.v_len = sizeof(*h) / 8;
	return CUDA_SUCCESS;
}

/* devmem's hook: a chunk went, and with it any export of it. */
static void forget(struct worker *w, uint64_t va)
{
	pthread_mutex_lock(&ipc.lock);
	for (unsigned i = 0; i < ipc.nex; i++)
		if (ipc.ex[i].va == va) {
			close(ipc.ex[i].fd);
			ipc.ex[i] = ipc.ex[--ipc.nex];
			break;
		}
	pthread_mutex_unlock(&ipc.lock);
}

static void serve_one(int c)
{
	struct ipc_request q;
	int32_t status = -1;
	int fd = -1;

	if (wire_recv_all(c, &q, sizeof(q)))
		return;
	pthread_mutex_lock(&ipc.lock);
	for (unsigned i = 0; i < ipc.nex; i++)
		if (ipc.ex[i].va == q.va && ipc.ex[i].size == q.size && !memcmp(ipc.ex[i].secret, q.secret, 16)) {
			fd = dup(ipc.ex[i].fd);
			break;
		}
	pthread_mutex_unlock(&ipc.lock);
	status = fd >= 0 ? 0 : -1;
	if (!wire_send_all(c, &status, sizeof(status)) && fd >= 0)
		wire_send_fd(c, fd);
	if (fd >= 0)
		close(fd);
}

static void *listen_loop(void *arg)
{
	struct timeval limit = { 5, 0 };     /* a peer that stalls holds the door no longer */
	int l = (int)(intptr_t)arg;

	for (;;) {
		int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL;
		}
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
		setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
		serve_one(c);
		close(c);
	}
}

static int start_listening(struct worker *w)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	pthread_t t;
	int l;

	if (ipc.listening)
		return 0;
	snprintf(ipc.path, sizeof(ipc.path), "%s/ipc-%d.sock", w->run_dir, (int)getpid());
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", ipc.path);
	unlink(ipc.path);
	if ((l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	if (bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 64) ||
	    pthread_create(&t, NULL, listen_loop, (void *)(intptr_t)l)) {
		close(l);
		return -1;
	}
	pthread_detach(t);
	ipc.listening = 1;
	devmem_on_unmap(w, forget);
	return 0;
}

/* The worker ends: its socket goes. */
void ipc_end(void)
{
	if (ipc.listening)
		unlink(ipc.path);
}

static struct export *export_of(uint64_t va)
{
	for (unsigned i = 0; i < ipc.nex; i++)
		if (ipc.ex[i].va == va)
			return &ipc.ex[i];
	return NULL;
}

/* Keeps memory the driver exported as fd under key, with a new secret,
 * and names it in h (the fd is the table's, or closed). 0, or an error. */
static CUresult export_add(struct worker *w, uint64_t key, int fd, struct ipc_handle *h)
{
	CUresult err = CUDA_SUCCESS;

	if (start_listening(w)) {
		log_warn("client %s: cannot open the IPC socket in %s: %s", w->peer, w->run_dir, strerror(errno));
		err = CUDA_ERROR_OPERATING_SYSTEM;
	} else if (getrandom(h->secret, sizeof(h->secret), 0) != sizeof(h->secret)) {
		err = CUDA_ERROR_OPERATING_SYSTEM;
	}
	pthread_mutex_lock(&ipc.lock);
	if (!err && array_grow((void **)&ipc.ex, &ipc.cap_ex, ipc.nex, sizeof(*ipc.ex)))
		err = CUDA_ERROR_OUT_OF_MEMORY;
	if (!err) {
		h->va = key;
		ipc.ex[ipc.nex] = (struct export){ .va = key, .size = h->size, .fd = fd };
		memcpy(ipc.ex[ipc.nex++].secret, h->secret, sizeof(h->secret));
	}
	pthread_mutex_unlock(&ipc.lock);
	if (err)
		close(fd);
	return err;
}

/* in: device pointer; out: the handle, 8 words. A chunk is exported
 * once; later handles of it carry the same secret. */
CUresult hand_ipc_get_mem_handle(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	scalar_res *r = res;
	struct ipc_handle h = { .magic = IPC_MAGIC, .pid = (uint64_t)getpid() };
	CUmemGenericAllocationHandle chunk;
	uint64_t base, size;
	struct export *e;
	CUresult err;
	int fd;

	if (a->v.v_len != 1)
		return CUDA_ERROR_INVALID_VALUE;
	if (devmem_range(w, a->v.v_val[0], &base, &size) || devmem_chunk(w, base, &h.va, &h.size, &chunk, &h.device))
		return CUDA_ERROR_INVALID_VALUE;     /* not an allocation of cuMemAlloc's */
	h.offset = base - h.va;
	pthread_mutex_lock(&ipc.lock);
	if ((e = export_of(h.va)))
		memcpy(h.secret, e->secret, sizeof(h.secret));
	pthread_mutex_unlock(&ipc.lock);
	if (e)
		return handle_reply(r, &h);
	if (cuMemExportToShareableHandle(&fd, chunk, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)) {
		log_info("client %s: cuIpcGetMemHandle: the driver cannot export the memory at 0x%llx", w->peer,
			 (unsigned long long)base);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return (err = export_add(w, h.va, fd, &h)) ? err : handle_reply(r, &h);
}

/* in: an allocation handle of the client's VMM; out: the token, 8 words.
 * The driver's descriptor stays here while the worker lives: an importer
 * may come after the exporter let go of its handle, as natively. */
CUresult hand_vmm_export(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	scalar_res *r = res;
	struct ipc_handle h = { .magic = VMM_MAGIC, .pid = (uint64_t)getpid(), .device = -1 };
	CUmemGenericAllocationHandle real;
	uint64_t key;
	CUresult err;
	int fd = -1;

	if (a->v.v_len != 1)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = vmm_alloc_real(w, a->v.v_val[0], &real, &h.size)) ||
	    (err = cuMemExportToShareableHandle(&fd, real, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)))
		return err;
	key = VMM_KEY | ++ipc.vmm_exports;           /* (the main thread's alone) */
	return (err = export_add(w, key, fd, &h)) ? err : handle_reply(r, &h);
}

/* --- the opening side --- */

/* The exporter's memory as a descriptor, or -1 (err says why). */
static int fetch(struct worker *w, const struct ipc_handle *h, const char **why)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ipc_request q = { .va = h->va, .size = h->size };
	int32_t status = -1;
	int s, fd = -1;

	memcpy(q.secret, h->secret, sizeof(q.secret));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/ipc-%llu.sock", w->run_dir, (unsigned long long)h->pid);
	if ((s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return *why = "no socket", -1;
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)))
		*why = "its process is gone, or it is another server's";
	else if (wire_send_all(s, &q, sizeof(q)) || wire_recv_all(s, &status, sizeof(status)) || status)
		*why = "the exporting process no longer has that memory";
	else if ((fd = wire_recv_fd(s)) < 0)
		*why = "the memory did not arrive";
	close(s);
	return fd;
}

static uint64_t import_place(uint64_t size, uint64_t align)
{
	uint64_t va;

	if (!ipc.nim)
		ipc.next = IPC_BASE;
	va = (ipc.next + align - 1) / align * align;
	if (va + size > IPC_BASE + IPC_SIZE)
		return 0;
	ipc.next = va + size;
	return va;
}

/* The memory a handle names, fetched from its worker and imported: the
 * driver's handle of it. Says why in the log if it cannot. */
static CUresult import(struct worker *w, const struct ipc_handle *h, CUmemGenericAllocationHandle *mh)
{
	const char *why = "";
	CUresult err;
	int fd;

	if ((fd = fetch(w, h, &why)) < 0) {
		log_info("client %s: cannot open a handle of worker %llu: %s", w->peer, (unsigned long long)h->pid, why);
		return CUDA_ERROR_INVALID_VALUE;
	}
	err = cuMemImportFromShareableHandle(mh, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	close(fd);
	return err;
}

/* Maps imported memory mh (taken: released if it fails) in the import region. */
static CUresult map_import(struct worker *w, CUmemGenericAllocationHandle mh, const struct ipc_handle *h,
			   uint64_t *va)
{
	CUmemAccessDesc access[CICADA_MAX_GPUS];
	CUdeviceptr got;
	CUresult err = CUDA_SUCCESS;

	if (!ipc.reserved && !(err = cuMemAddressReserve(&got, IPC_SIZE, 0, IPC_BASE, 0))) {
		if (got != IPC_BASE) {
			cuMemAddressFree(got, IPC_SIZE);
			err = CUDA_ERROR_OUT_OF_MEMORY;
		}
		ipc.reserved = !err;
	}
	if (!err && (array_grow((void **)&ipc.im, &ipc.cap_im, ipc.nim, sizeof(*ipc.im)) ||
		     !(*va = import_place(h->size, 1ull << 21))))
		err = CUDA_ERROR_OUT_OF_MEMORY;
	if (!err && !(err = cuMemMap(*va, h->size, 0, mh, 0)) &&
	    (err = cuMemSetAccess(*va, h->size, access, devmem_access(w, h->device, access))))
		cuMemUnmap(*va, h->size);
	if (err) {
		cuMemRelease(mh);
		return err;
	}
	ipc.im[ipc.nim++] = (struct import){ *va, h->size, mh };
	return CUDA_SUCCESS;
}

/* in: the handle (8 words), flags; out: the device pointer. */
CUresult hand_ipc_open_mem_handle(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	scalar_res *r = res;
	CUmemGenericAllocationHandle mh;
	struct ipc_handle h;
	uint64_t va;
	CUresult err;

	if (a->v.v_len != sizeof(h) / 8 + 1)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&h, a->v.v_val, sizeof(h));
	if (memcmp(h.magic, IPC_MAGIC, 8) || !h.size || h.offset >= h.size)
		return CUDA_ERROR_INVALID_VALUE;
	if (h.pid == (uint64_t)getpid())
		return CUDA_ERROR_INVALID_CONTEXT;   /* the driver's answer in the exporting process */
	if (device_out(w, h.device) == (uint64_t)(int64_t)CU_DEVICE_INVALID)
		log_info("client %s: an IPC handle of a GPU it does not see (GPU %d of the node)", w->peer, h.device);
	if ((err = import(w, &h, &mh)))
		return err;
	if ((err = map_import(w, mh, &h, &va))) {
		log_info("client %s: cannot map an IPC handle's memory (%llu bytes): error %d", w->peer,
			 (unsigned long long)h.size, err);
		return err;
	}
	return one_scalar(r, va + h.offset);
}

CUresult wrap_cuIpcCloseMemHandle(struct worker *w, CUdeviceptr dptr)
{
	for (unsigned i = 0; i < ipc.nim; i++) {
		struct import *m = &ipc.im[i];

		if (dptr < m->va || dptr - m->va >= m->size)
			continue;
		cuCtxSynchronize();
		cuMemUnmap(m->va, m->size);
		cuMemRelease(m->h);
		ipc.im[i] = ipc.im[--ipc.nim];
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_INVALID_VALUE;
}

/* Whether the session maps another process's memory (no checkpoint then). */
int ipc_busy(void)
{
	return ipc.nim > 0;
}

/* in: a VMM export's token (8 words); out: the allocation handle the
 * client holds it by. */
CUresult hand_vmm_import(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	scalar_res *r = res;
	CUmemGenericAllocationHandle real;
	struct ipc_handle h;
	uint64_t id;
	CUresult err;

	if (a->v.v_len != sizeof(h) / 8)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&h, a->v.v_val, sizeof(h));
	if (memcmp(h.magic, VMM_MAGIC, 8) || !(h.va & VMM_KEY) || !h.size)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = import(w, &h, &real)))
		return err;
	if ((err = vmm_adopt(w, real, h.size, &id))) {
		cuMemRelease(real);
		return err;
	}
	return one_scalar(r, id);
}

/* in: the driver's event handle (8 words); out: the event's id. */
CUresult hand_ipc_open_event_handle(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	scalar_res *r = res;
	CUipcEventHandle h;
	CUevent ev;
	CUresult err;

	if (a->v.v_len != sizeof(h) / 8)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&h, a->v.v_val, sizeof(h));
	if ((err = cuIpcOpenEventHandle(&ev, h)))
		return err;
	return one_scalar(r, handle_put(w, H_EVENT, ev));
}

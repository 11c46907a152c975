/*
 * ipc.c: CUDA IPC between the clients of one gpu-server (two processes of
 * a job, each with its worker). A client's cuIpcGetMemHandle names the
 * arena chunk that holds the allocation: the handle carries the exporting
 * session's owner id (ipc_owner: random, and kept across restores), the
 * chunk, the allocation's offset in it, its GPU and a random secret. The
 * worker of a client that opens the handle connects to the exporter's IPC
 * socket (abstract, named by the run directory and the owner id; the
 * exporter answers only workers of its own user, root's or the server
 * user's), proves the secret, and receives the chunk's physical
 * memory as a file descriptor, which it maps in an import region of its
 * own address space. The exporter keeps the descriptor while the chunk
 * lives, so what it hands out is always the memory the handle named.
 *
 * The application's own VMM allocations travel the same way
 * (cuMemExportToShareableHandle with POSIX file descriptors, as NCCL
 * shares its buffers): the export is the driver's descriptor, kept here
 * under a key of its own, and the client's "descriptor" is a small file
 * holding the token (interposer/ipc.c); the importing worker fetches the
 * memory and the client holds it as an allocation of its own.
 *
 * Interprocess events are handles of the same kind: the exporter keeps
 * the driver's handle of the event, and the opening worker fetches it
 * through the socket. So a handle never names a worker's pid or the
 * driver's objects, and survives a checkpoint: ipc_save.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "ipc-internal.h"

struct ipc_request {
	uint64_t va, size;                   /* the export's key and size (an event's: 0) */
	uint8_t secret[16];
	uint32_t probe;                      /* only whether a restore could export it again */
	uint32_t pad;
};

struct ipc_state ipc = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The session's name among the server's workers (never 0). */
uint64_t ipc_owner(void)
{
	if (!ipc.owner && getrandom(&ipc.owner, sizeof(ipc.owner), 0) != sizeof(ipc.owner))
		ipc.owner = ((uint64_t)getpid() << 32) ^ wire_now_ns();
	if (!ipc.owner)
		ipc.owner = 1;
	return ipc.owner;
}

/* --- the socket --- */

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
		if (ipc.ex[i].key == va && ipc.ex[i].fd >= 0 && !(va & (VMM_KEY | EVENT_KEY))) {
			close(ipc.ex[i].fd);
			ipc.ex[i] = ipc.ex[--ipc.nex];
			break;
		}
	pthread_mutex_unlock(&ipc.lock);
}

/* One request: the memory as a descriptor, or an event's driver handle;
 * or (a probe) whether it is here still, as a restore could export it. */
static void serve_one(int c)
{
	struct ipc_request q;
	CUipcEventHandle eh = { { 0 } };
	int32_t status = -1;
	int fd = -1, event = 0, here = 0;

	if (wire_recv_all(c, &q, sizeof(q)))
		return;
	pthread_mutex_lock(&ipc.lock);
	for (unsigned i = 0; i < ipc.nex; i++) {
		const struct export *e = &ipc.ex[i];
		if (e->key != q.va || e->size != q.size || memcmp(e->secret, q.secret, 16))
			continue;
		here = !(e->key & VMM_KEY) || e->local;      /* a VMM export whose handle went is not */
		if (q.probe)
			break;
		if (e->fd >= 0)
			fd = dup(e->fd);
		else
			eh = e->eh, event = 1;
		break;
	}
	pthread_mutex_unlock(&ipc.lock);
	status = fd >= 0 || event || (q.probe && here) ? 0 : -1;
	if (q.probe) {
		wire_send_all(c, &status, sizeof(status));
	} else if (!wire_send_all(c, &status, sizeof(status))) {
		if (fd >= 0)
			wire_send_fd(c, fd);
		else if (event)
			wire_send_all(c, &eh, sizeof(eh));
	}
	if (fd >= 0)
		close(fd);
}

/* Another user's worker gets nothing of ours, whatever it knows. */
static int same_user(int c)
{
	struct ucred cred;

	if (peer_cred(c, &cred))
		return 0;
	if (cred.uid == geteuid() || peer_is_server(cred.uid))
		return 1;
	log_warn("refused CUDA IPC to a worker of uid %u: another user's", (unsigned)cred.uid);
	return 0;
}

static void *listen_loop(void *arg)
{
	int l = (int)(intptr_t)arg;

	for (;;) {
		int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL;
		}
		wire_set_timeouts(c, 5000);      /* a peer that stalls holds the door no longer */
		if (same_user(c))
			serve_one(c);
		close(c);
	}
}

/* The abstract address of owner's IPC socket, and its length. */
static unsigned socket_addr(const struct worker *w, uint64_t owner, struct sockaddr_un *sa)
{
	char leaf[32];

	snprintf(leaf, sizeof(leaf), "ipc-%016llx", (unsigned long long)owner);
	return run_socket_addr(w->calls->run_dir, leaf, sa);
}

/* A worker this session was restored from may answer for it still (the
 * same snapshot restored twice): the name is taken when it lets go. */
static int start_listening(struct worker *w)
{
	struct sockaddr_un sa;
	unsigned len = socket_addr(w, ipc_owner(), &sa);
	pthread_t t;
	int l;

	if (ipc.listening)
		return 0;
	if ((l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	if (bind(l, (struct sockaddr *)&sa, len) || listen(l, 64) ||
	    pthread_create(&t, NULL, listen_loop, (void *)(intptr_t)l)) {
		if (errno == EADDRINUSE)
			log_warn("client %s: another worker answers for CUDA IPC session %016llx (the same snapshot "
				 "restored twice?)", w->peer, (unsigned long long)ipc.owner);
		close(l);
		return -1;
	}
	pthread_detach(t);
	ipc.listening = 1;
	devmem_on_unmap(w, forget);
	return 0;
}

/* Asks the exporter for what h names: *fd (memory) or *eh (events), or
 * with fd NULL whether it has it still. 0; -2 if the exporter is not
 * there (gone, not restored yet, or another server's); -1 if it refused.
 * why says which. */
static int ask(struct worker *w, const struct ipc_handle *h, int *fd, CUipcEventHandle *eh, const char **why)
{
	struct sockaddr_un sa;
	unsigned len = socket_addr(w, h->owner, &sa);
	struct ipc_request q = { .va = h->va, .size = h->size, .probe = !fd };
	int event = !memcmp(h->magic, EVENT_MAGIC, 8);
	int32_t status = -1;
	int s, rc = -1;

	if (fd)
		*fd = -1;
	if (fd && event && !eh)
		return *why = "not a handle of memory", -1;
	memcpy(q.secret, h->secret, sizeof(q.secret));
	if ((s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return *why = "no socket", -1;
	if (connect(s, (struct sockaddr *)&sa, len))
		*why = "its process is gone, or it is another server's", rc = -2;
	else if (wire_set_timeouts(s, 5000) || wire_send_all(s, &q, sizeof(q)) ||
		 wire_recv_all(s, &status, sizeof(status)) || status)
		*why = "the exporting process no longer has it, or is another user's";
	else if (fd && (event ? wire_recv_all(s, eh, sizeof(*eh)) : (*fd = wire_recv_fd(s)) < 0))
		*why = "it did not arrive";
	else
		rc = 0;
	close(s);
	return rc;
}

int ipc_fetch(struct worker *w, const struct ipc_handle *h, int *fd, CUipcEventHandle *eh, const char **why)
{
	return ask(w, h, fd, eh, why);
}

int ipc_probe(struct worker *w, const struct ipc_handle *h, const char **why)
{
	return ask(w, h, NULL, NULL, why);
}

/* handles.c's hook: an event the client destroyed is neither exported nor
 * imported any more; a VMM allocation whose handle the client let go
 * cannot be found again by a restore (its export stays for importers
 * meanwhile, as the driver keeps it). */
static void let_go(struct worker *w, enum handle_kind kind, uint64_t id)
{
	for (unsigned i = 0; kind == H_EVENT && i < ipc.nim;) {
		if (ipc.im[i].event == id)
			ipc.im[i] = ipc.im[--ipc.nim];
		else
			i++;
	}
	pthread_mutex_lock(&ipc.lock);
	for (unsigned i = 0; i < ipc.nex;) {
		struct export *e = &ipc.ex[i];
		if (kind == H_EVENT && e->key == (EVENT_KEY | id)) {
			*e = ipc.ex[--ipc.nex];
			continue;
		}
		if (kind == H_VMM && e->key & VMM_KEY && e->local == id)
			e->local = 0;
		i++;
	}
	pthread_mutex_unlock(&ipc.lock);
}

/* The hook, once the session exports or imports anything. */
void ipc_watch(struct worker *w)
{
	handles_on_forget(w, let_go);
}

/* --- the exporting side --- */

static struct export *export_of(uint64_t key)
{
	for (unsigned i = 0; i < ipc.nex; i++)
		if (ipc.ex[i].key == key)
			return &ipc.ex[i];
	return NULL;
}

/* Keeps e (its descriptor is the table's, or closed) under its key, with
 * the given secret (a restore) or a new one, replacing an export of that
 * key, and fills the handle h names it by. 0, or an error. */
CUresult ipc_export_add(struct worker *w, const struct export *e, const uint8_t *secret, struct ipc_handle *h)
{
	struct export n = *e, *old;
	CUresult err = CUDA_SUCCESS;

	ipc_watch(w);
	if (start_listening(w)) {
		log_warn("client %s: cannot open the CUDA IPC socket: %s", w->peer, strerror(errno));
		err = CUDA_ERROR_OPERATING_SYSTEM;
	} else if (secret) {
		memcpy(n.secret, secret, sizeof(n.secret));
	} else if (getrandom(n.secret, sizeof(n.secret), 0) != sizeof(n.secret)) {
		err = CUDA_ERROR_OPERATING_SYSTEM;
	}
	pthread_mutex_lock(&ipc.lock);
	if (!err && (old = export_of(n.key))) {
		if (old->fd >= 0)
			close(old->fd);
		*old = n;
	} else if (!err && array_grow((void **)&ipc.ex, &ipc.cap_ex, ipc.nex, sizeof(*ipc.ex))) {
		err = CUDA_ERROR_OUT_OF_MEMORY;
	} else if (!err) {
		ipc.ex[ipc.nex++] = n;
	}
	pthread_mutex_unlock(&ipc.lock);
	if (err && n.fd >= 0)
		close(n.fd);
	if (!err) {
		h->owner = ipc.owner;
		h->va = n.key;
		h->size = n.size;
		h->device = n.device;
		memcpy(h->secret, n.secret, sizeof(h->secret));
	}
	return err;
}

/* in: device pointer; out: the handle, 8 words. A chunk is exported
 * once; later handles of it carry the same secret. */
CUresult hand_ipc_get_mem_handle(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	scalar_res *r = res;
	struct ipc_handle h = { .magic = IPC_MAGIC };
	struct export e = { .fd = -1 };
	CUmemGenericAllocationHandle chunk;
	uint64_t base, size;
	struct export *old;
	CUresult err;
	int found;

	if (a->v.v_len != 1)
		return CUDA_ERROR_INVALID_VALUE;
	if (devmem_range(w, a->v.v_val[0], &base, &size) || devmem_chunk(w, base, &e.key, &e.size, &chunk, &e.device))
		return CUDA_ERROR_INVALID_VALUE;     /* not an allocation of cuMemAlloc's */
	h.offset = base - e.key;
	pthread_mutex_lock(&ipc.lock);
	if ((found = (old = export_of(e.key)) != NULL)) {
		h.owner = ipc.owner, h.va = old->key, h.size = old->size, h.device = old->device;
		memcpy(h.secret, old->secret, sizeof(h.secret));
	}
	pthread_mutex_unlock(&ipc.lock);
	if (found)
		return handle_reply(r, &h);
	if (cuMemExportToShareableHandle(&e.fd, chunk, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)) {
		log_info("client %s: cuIpcGetMemHandle: the driver cannot export the memory at 0x%llx", w->peer,
			 (unsigned long long)base);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if ((err = ipc_export_add(w, &e, NULL, &h)))
		return err;
	return handle_reply(r, &h);
}

/* in: an allocation handle of the client's VMM; out: the token, 8 words.
 * The driver's descriptor stays here while the worker lives: an importer
 * may come after the exporter let go of its handle, as natively. */
CUresult hand_vmm_export(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	scalar_res *r = res;
	struct ipc_handle h = { .magic = VMM_MAGIC };
	struct export e = { .device = -1, .fd = -1 };
	CUmemGenericAllocationHandle real;
	CUresult err;

	if (a->v.v_len != 1)
		return CUDA_ERROR_INVALID_VALUE;
	e.local = a->v.v_val[0];
	if ((err = vmm_alloc_real(w, e.local, &real, &e.size)) ||
	    (err = cuMemExportToShareableHandle(&e.fd, real, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)))
		return err;
	e.key = VMM_KEY | ++ipc.vmm_exports;         /* (the main thread's alone) */
	if ((err = ipc_export_add(w, &e, NULL, &h)))
		return err;
	return handle_reply(r, &h);
}

/* in: the event's id; out: its handle, 8 words. The driver's handle of
 * the event stays here for the processes that open ours. */
CUresult hand_ipc_get_event_handle(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	scalar_res *r = res;
	struct ipc_handle h = { .magic = EVENT_MAGIC };
	struct export e = { .device = -1, .fd = -1 }, *old;
	uint8_t secret[16];
	CUresult err;
	int same;

	if (a->v.v_len != 1)
		return CUDA_ERROR_INVALID_VALUE;
	e.local = a->v.v_val[0];
	e.key = EVENT_KEY | e.local;
	if ((err = handle_get(w, H_EVENT, e.local, (void **)&e.event)) || (err = cuIpcGetEventHandle(&e.eh, e.event)))
		return err;
	pthread_mutex_lock(&ipc.lock);
	if ((same = (old = export_of(e.key)) && old->event == e.event))
		memcpy(secret, old->secret, sizeof(secret));     /* the same event: the same handle */
	pthread_mutex_unlock(&ipc.lock);
	if ((err = ipc_export_add(w, &e, same ? secret : NULL, &h)))
		return err;
	return handle_reply(r, &h);
}

/* --- the opening side --- */

/* Where imported memory goes in the region: bump, from its start again
 * when no memory is imported (events are imports too). */
static uint64_t import_place(uint64_t size, uint64_t align)
{
	unsigned mapped = 0;
	uint64_t va;

	for (unsigned i = 0; i < ipc.nim; i++)
		mapped += !ipc.im[i].event;
	if (!mapped || ipc.next < IPC_BASE)
		ipc.next = IPC_BASE;
	va = (ipc.next + align - 1) / align * align;
	if (va + size > IPC_BASE + IPC_SIZE)
		return 0;
	ipc.next = va + size;
	return va;
}

/* The memory a handle names, fetched from its exporter and imported: the
 * driver's handle of it. Says why in the log if it cannot. */
static CUresult import(struct worker *w, const struct ipc_handle *h, CUmemGenericAllocationHandle *mh)
{
	const char *why = "";
	CUresult err;
	int fd;

	if (ipc_fetch(w, h, &fd, NULL, &why)) {
		log_info("client %s: cannot open a handle of session %016llx: %s", w->peer,
			 (unsigned long long)h->owner, why);
		return CUDA_ERROR_INVALID_VALUE;
	}
	err = cuMemImportFromShareableHandle(mh, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	close(fd);
	return err;
}

/* The import region, reserved once. */
CUresult ipc_reserve(void)
{
	CUdeviceptr got;
	CUresult err;

	if (ipc.reserved)
		return CUDA_SUCCESS;
	if ((err = cuMemAddressReserve(&got, IPC_SIZE, 0, IPC_BASE, 0))) {
		log_warn("cannot reserve the CUDA IPC import region: error %d", (int)err);
		return err;
	}
	if (got != IPC_BASE) {
		log_warn("the CUDA IPC import region 0x%llx is taken (the driver offers 0x%llx)",
			 (unsigned long long)IPC_BASE, (unsigned long long)got);
		cuMemAddressFree(got, IPC_SIZE);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	ipc.reserved = 1;
	return CUDA_SUCCESS;
}

/* Maps imported memory mh at va, accessible from the client's GPUs (the
 * handle's GPU number is the exporter's at the time: the memory's own
 * properties say where it is now). */
CUresult ipc_map(struct worker *w, CUmemGenericAllocationHandle mh, const struct ipc_handle *h, uint64_t va)
{
	CUmemAccessDesc access[CICADA_MAX_GPUS];
	CUmemAllocationProp prop;
	CUdevice dev = h->device;
	CUresult err;

	if ((err = ipc_reserve()))
		return err;
	if (!cuMemGetAllocationPropertiesFromHandle(&prop, mh) && prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE)
		dev = prop.location.id;
	if ((err = cuMemMap(va, h->size, 0, mh, 0))) {
		log_info("client %s: cannot map imported memory at 0x%llx: error %d", w->peer, (unsigned long long)va, err);
		return err;
	}
	if ((err = cuMemSetAccess(va, h->size, access, devmem_access(w, dev, access)))) {
		log_info("client %s: cannot give access to imported memory (GPU %d): error %d", w->peer, (int)dev, err);
		cuMemUnmap(va, h->size);
	}
	return err;
}

/* in: the handle (8 words), flags; out: the device pointer. */
CUresult hand_ipc_open_mem_handle(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	scalar_res *r = res;
	struct import im = { 0 };
	CUresult err;

	if (a->v.v_len != sizeof(im.from) / 8 + 1)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&im.from, a->v.v_val, sizeof(im.from));
	if (memcmp(im.from.magic, IPC_MAGIC, 8) || !im.from.size || im.from.offset >= im.from.size ||
	    im.from.va & (VMM_KEY | EVENT_KEY))
		return CUDA_ERROR_INVALID_VALUE;
	if (im.from.owner == ipc.owner)
		return CUDA_ERROR_INVALID_CONTEXT;   /* the driver's answer in the exporting process */
	if (device_out(w, im.from.device) == (uint64_t)(int64_t)CU_DEVICE_INVALID)
		log_info("client %s: an IPC handle of a GPU it does not see (GPU %d of the node)", w->peer,
			 im.from.device);
	if (array_grow((void **)&ipc.im, &ipc.cap_im, ipc.nim, sizeof(*ipc.im)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if ((err = import(w, &im.from, &im.h)))
		return err;
	if (!(im.va = import_place(im.from.size, 1ull << 21)))
		err = CUDA_ERROR_OUT_OF_MEMORY;
	if (err || (err = ipc_map(w, im.h, &im.from, im.va))) {
		log_info("client %s: cannot map an IPC handle's memory (%llu bytes): error %d", w->peer,
			 (unsigned long long)im.from.size, err);
		cuMemRelease(im.h);
		return err;
	}
	ipc.im[ipc.nim++] = im;
	return one_scalar(r, im.va + im.from.offset);
}

CUresult wrap_cuIpcCloseMemHandle(struct worker *w, CUdeviceptr dptr)
{
	for (unsigned i = 0; i < ipc.nim; i++) {
		struct import *m = &ipc.im[i];

		if (m->event || m->pending || dptr < m->va || dptr - m->va >= m->from.size)
			continue;
		cuCtxSynchronize();
		cuMemUnmap(m->va, m->from.size);
		cuMemRelease(m->h);
		ipc.im[i] = ipc.im[--ipc.nim];
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_INVALID_VALUE;
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
	if ((err = vmm_adopt(w, real, h.size, &h, &id))) {
		cuMemRelease(real);
		return err;
	}
	return one_scalar(r, id);
}

/* in: the event's handle (8 words); out: the event's id. */
CUresult hand_ipc_open_event_handle(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	scalar_res *r = res;
	struct import im = { 0 };
	CUipcEventHandle eh;
	const char *why = "";
	CUresult err;
	int fd;

	if (a->v.v_len != sizeof(im.from) / 8)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&im.from, a->v.v_val, sizeof(im.from));
	if (memcmp(im.from.magic, EVENT_MAGIC, 8) || im.from.size || !(im.from.va & EVENT_KEY))
		return CUDA_ERROR_INVALID_VALUE;
	if (array_grow((void **)&ipc.im, &ipc.cap_im, ipc.nim, sizeof(*ipc.im)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (ipc_fetch(w, &im.from, &fd, &eh, &why)) {
		log_info("client %s: cannot open an event handle of session %016llx: %s", w->peer,
			 (unsigned long long)im.from.owner, why);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if ((err = cuIpcOpenEventHandle(&im.real, eh)))
		return err;
	if (!(im.event = handle_put(w, H_EVENT, im.real))) {
		cuEventDestroy(im.real);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	ipc_watch(w);
	ipc.im[ipc.nim++] = im;
	return one_scalar(r, im.event);
}

/*
 * ipc_save.c: CUDA IPC through a checkpoint (ipc.c has the handles). A
 * snapshot keeps the session's owner id, the handles it exported and those
 * it opened of other processes, never the other processes' bytes: those
 * are in their own snapshots. A restore exports the same memory and
 * events again under the same handles (owner, keys and secrets are kept),
 * so the handles the processes hold keep working, and reserves what it
 * had opened where it was mapped. It opens those again when its client
 * comes back (ipc_resume): by then every process of the job has been
 * restored, as CRIU's plugin restores all the snapshots of a dump before
 * any process runs. An importer restored alone waits for its exporter
 * (CICADA_IPC_WAIT seconds, 30 by default), then fails with one line.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "checkpoint.h"
#include "calls/ipc-internal.h"
#include "snapshot.h"

#define IPC_WAIT_S 30

/* --- checkpoint --- */

static Cicada__IpcEntry *entry(Cicada__IpcEntry ***list, size_t *n, const struct ipc_handle *h, uint64_t local)
{
	Cicada__IpcEntry *e = calloc(1, sizeof(*e) + sizeof(*h));

	if (!e)
		return NULL;
	cicada__ipc_entry__init(e);
	memcpy(e + 1, h, sizeof(*h));
	e->handle.data = (uint8_t *)(e + 1);
	e->handle.len = sizeof(*h);
	e->local = local;
	e->has_local = 1;
	(*list)[(*n)++] = e;
	return e;
}

/* An export as the handle that names it. */
static struct ipc_handle export_handle(const struct export *e)
{
	struct ipc_handle h = { .owner = ipc.owner, .va = e->key, .size = e->size, .device = e->device };

	memcpy(h.magic, e->key & EVENT_KEY ? EVENT_MAGIC : e->key & VMM_KEY ? VMM_MAGIC : IPC_MAGIC, 8);
	memcpy(h.secret, e->secret, sizeof(h.secret));
	return h;
}

/* What a restore can export again: events and arena memory are dropped
 * from the table when they go (let_go, forget); a VMM allocation whose
 * handle the client let go cannot be found again. */
static int save_exports(struct worker *w, Cicada__Manifest *m)
{
	int rc = 0;

	pthread_mutex_lock(&ipc.lock);
	for (unsigned i = 0; !rc && i < ipc.nex; i++) {
		const struct export *e = &ipc.ex[i];
		struct ipc_handle h = export_handle(e);
		if (e->key & VMM_KEY && !e->local) {
			log_info("client %s: a VMM export whose handle was let go is not in the checkpoint", w->peer);
			continue;
		}
		if (!entry(&m->ipc_exports, &m->n_ipc_exports, &h, e->local))
			rc = -1;
	}
	pthread_mutex_unlock(&ipc.lock);
	return rc;
}

/* An import, asking its exporter whether a restore of it could export it
 * again: memory that it cannot refuses the checkpoint (its bytes are in no
 * snapshot); an event becomes this process's own (it is complete now,
 * and no other process can record it again). */
static int save_import(struct worker *w, Cicada__Manifest *m, const struct import *im, char *err)
{
	const char *why = "";
	Cicada__IpcEntry *e;
	int gone = !im->pending && !im->alone && ipc_probe(w, &im->from, &why);

	if (gone && !im->event) {
		wire_fail(err, "the application maps device memory another process no longer shares "
			 "(CUDA IPC: %s); close that handle first", why);
		return -1;
	}
	if (!(e = entry(&m->ipc_imports, &m->n_ipc_imports, &im->from, im->event ? im->event : im->va))) {
		wire_fail(err, "out of memory");
		return -1;
	}
	e->alone = gone || im->alone;
	e->has_alone = 1;
	return 0;
}

/* vmm_each_import's: VMM memory imported, that its exporter could not
 * export again after a restore (ctx: the error buffer). */
static int vmm_import_gone(struct worker *w, const void *token, void *ctx)
{
	struct ipc_handle h;
	const char *why = "";

	memcpy(&h, token, sizeof(h));
	if (!ipc_probe(w, &h, &why))
		return 0;
	wire_fail(ctx, "the application maps VMM memory another process no longer shares as it did "
		 "(CUDA IPC: %s; the exporter let go of its handle, or ended); release it first", why);
	return -1;
}

/* Fills the manifest's IPC fields (ipc_save_free frees them); -1 with err
 * if the session cannot be checkpointed. */
int ipc_save(struct worker *w, Cicada__Manifest *m, char *err)
{
	if (vmm_each_import(w, vmm_import_gone, err))
		return -1;
	if (!ipc.nex && !ipc.nim)
		return 0;
	m->ipc_owner = ipc_owner();
	m->has_ipc_owner = 1;
	if (!(m->ipc_exports = calloc(ipc.nex + 1, sizeof(void *))) ||
	    !(m->ipc_imports = calloc(ipc.nim + 1, sizeof(void *))) || save_exports(w, m)) {
		wire_fail(err, "out of memory");
		return -1;
	}
	for (unsigned i = 0; i < ipc.nim; i++)
		if (save_import(w, m, &ipc.im[i], err))
			return -1;
	return 0;
}

/* After the objects are described: no graph may record or wait on an event
 * opened from another process (a restore could not give it back that
 * event). -1 with err. */
int ipc_save_graphs(const Cicada__Manifest *m, char *err)
{
	for (unsigned i = 0; i < ipc.nim; i++)
		if (ipc.im[i].event && objects_use_event(m, ipc.im[i].event)) {
			wire_fail(err, "a CUDA graph records or waits on an event another process shares "
				 "(CUDA IPC), which checkpoints do not cover yet; destroy that graph first");
			return -1;
		}
	return 0;
}

void ipc_save_free(Cicada__Manifest *m)
{
	for (size_t i = 0; m->ipc_exports && i < m->n_ipc_exports; i++)
		free(m->ipc_exports[i]);
	for (size_t i = 0; m->ipc_imports && i < m->n_ipc_imports; i++)
		free(m->ipc_imports[i]);
	free(m->ipc_exports);
	free(m->ipc_imports);
	m->ipc_exports = m->ipc_imports = NULL;
	m->n_ipc_exports = m->n_ipc_imports = 0;
}

/* --- restore --- */

/* The export h names, made again from what the restore rebuilt. */
static CUresult export_again(struct worker *w, const struct ipc_handle *h, uint64_t local)
{
	struct export e = { .key = h->va, .size = h->size, .device = h->device, .local = local, .fd = -1 };
	CUmemGenericAllocationHandle real;
	struct ipc_handle out = *h;
	uint64_t va, size;
	CUresult err;

	if (e.key & EVENT_KEY) {
		if ((err = handle_get(w, H_EVENT, local, (void **)&e.event)) || (err = cuIpcGetEventHandle(&e.eh, e.event)))
			return err;
	} else if (e.key & VMM_KEY) {
		if ((err = vmm_alloc_real(w, local, &real, &size)))
			return err;
		if (size != e.size)
			return CUDA_ERROR_INVALID_VALUE;
		if ((err = cuMemExportToShareableHandle(&e.fd, real, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)))
			return err;
		if ((e.key & ~VMM_KEY) > ipc.vmm_exports)
			ipc.vmm_exports = e.key & ~VMM_KEY;
	} else {
		if (devmem_chunk(w, e.key, &va, &size, &real, &e.device) || va != e.key || size != e.size)
			return CUDA_ERROR_INVALID_VALUE;
		if ((err = cuMemExportToShareableHandle(&e.fd, real, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)))
			return err;
	}
	return ipc_export_add(w, &e, h->secret, &out);
}

/* Whether imported memory [va, va + h->size) fits the import region,
 * beside what is there already. */
static int place_ok(const struct ipc_handle *h, uint64_t va)
{
	if (!h->size || h->offset >= h->size || h->size > IPC_SIZE || va < IPC_BASE || va - IPC_BASE > IPC_SIZE - h->size)
		return 0;
	for (unsigned i = 0; i < ipc.nim; i++)
		if (!ipc.im[i].event && va < ipc.im[i].va + ipc.im[i].from.size && ipc.im[i].va < va + h->size)
			return 0;
	return 1;
}

/* An import to open again: memory keeps its place in the import region;
 * an event's id is bound now, to an event that stands in until then (or
 * for good, alone: its exporter had let go of it). */
static int import_later(struct worker *w, const struct ipc_handle *h, uint64_t local, int alone, char *err)
{
	struct import im = { .from = *h, .pending = !alone, .alone = alone };
	uint64_t id;

	if (array_grow((void **)&ipc.im, &ipc.cap_im, ipc.nim, sizeof(*ipc.im)))
		return wire_fail(err, "out of memory");
	if (!memcmp(h->magic, EVENT_MAGIC, 8)) {
		im.event = local;
		if (local < HANDLE_BASE || local - HANDLE_BASE >= (1u << 24))
			return wire_fail(err, "the snapshot names an IPC event of id %llu",
					(unsigned long long)local);
		if (cuEventCreate(&im.real, CU_EVENT_DISABLE_TIMING))
			return wire_fail(err, "cannot create an event");
		w->replay_id = local;
		id = handle_put(w, H_EVENT, im.real);
		w->replay_id = 0;
		if (id != local) {
			cuEventDestroy(im.real);
			return wire_fail(err, "event handle %llu is taken", (unsigned long long)local);
		}
	} else if (!memcmp(h->magic, IPC_MAGIC, 8) && !alone) {
		im.va = local;
		if (!place_ok(h, local))
			return wire_fail(err, "the snapshot maps imported memory outside the import region, "
					"or over other imports (0x%llx)", (unsigned long long)local);
		if (ipc_reserve())
			return wire_fail(err, "cannot reserve the CUDA IPC import region");
		if (local + h->size > ipc.next)
			ipc.next = local + h->size;
	} else {
		return wire_fail(err, "the snapshot names an IPC handle of an unknown kind");
	}
	ipc.im[ipc.nim++] = im;
	return 0;
}

/* After the rest of the restore: exports again, imports later. */
int ipc_restore(struct worker *w, const Cicada__Manifest *m, char *err)
{
	struct ipc_handle h;
	CUresult rc;

	if (!m->n_ipc_exports && !m->n_ipc_imports)
		return 0;
	ipc.owner = m->ipc_owner;
	for (size_t i = 0; i < m->n_ipc_exports; i++) {
		memcpy(&h, m->ipc_exports[i]->handle.data, sizeof(h));
		if ((rc = export_again(w, &h, m->ipc_exports[i]->local)))
			log_warn("restore: the CUDA IPC export %016llx is gone (error %d): its handles will be refused",
				 (unsigned long long)h.va, (int)rc);
	}
	for (size_t i = 0; i < m->n_ipc_imports; i++) {
		memcpy(&h, m->ipc_imports[i]->handle.data, sizeof(h));
		if (import_later(w, &h, m->ipc_imports[i]->local, m->ipc_imports[i]->alone, err))
			return -1;
	}
	ipc_watch(w);
	return 0;
}

/* Fetches what h names, waiting until the deadline for its exporter. */
static int fetch_wait(struct worker *w, const struct ipc_handle *h, int *fd, CUipcEventHandle *eh, uint64_t deadline,
		      const char **why)
{
	struct timespec pause = { 0, 20 * 1000 * 1000 };
	int rc;

	while ((rc = ipc_fetch(w, h, fd, eh, why)) == -2 && wire_now_ns() < deadline)
		nanosleep(&pause, NULL);
	return rc;
}

static CUresult open_again(struct worker *w, struct import *im, uint64_t deadline, const char **why)
{
	CUipcEventHandle eh;
	CUevent ev;
	CUresult err;
	int fd;

	if (fetch_wait(w, &im->from, &fd, &eh, deadline, why))
		return CUDA_ERROR_INVALID_VALUE;
	*why = "the driver refused it";
	if (im->event) {
		if ((err = cuIpcOpenEventHandle(&ev, eh)))
			return err;
		handle_set(w, im->event, ev);
		cuEventDestroy(im->real);
		im->real = ev;
		return CUDA_SUCCESS;
	}
	err = cuMemImportFromShareableHandle(&im->h, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	close(fd);
	if (!err && (err = ipc_map(w, im->h, &im->from, im->va)))
		cuMemRelease(im->h);
	return err;
}

struct vmm_opening {
	uint64_t deadline;
	const char *why;
	uint64_t owner;
};

/* vmm_resume's: the VMM memory a token names, imported again. */
static CUresult open_vmm(struct worker *w, const void *token, CUmemGenericAllocationHandle *h, void *ctx)
{
	struct vmm_opening *o = ctx;
	struct ipc_handle from;
	CUresult err;
	int fd;

	memcpy(&from, token, sizeof(from));
	o->owner = from.owner;
	if (fetch_wait(w, &from, &fd, NULL, o->deadline, &o->why))
		return CUDA_ERROR_INVALID_VALUE;
	o->why = "the driver refused it";
	err = cuMemImportFromShareableHandle(h, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	close(fd);
	return err;
}

/* The client comes back after a restore: what the session had opened of
 * other processes is opened again. 0, or -1 with err. */
int ipc_resume(struct worker *w, char *err)
{
	const char *env = getenv("CICADA_IPC_WAIT");
	uint64_t deadline = wire_now_ns() + (uint64_t)(env ? atoi(env) : IPC_WAIT_S) * 1000000000ull;
	struct vmm_opening o = { deadline, "", 0 };
	const char *why = "";
	CUresult rc;

	if ((rc = vmm_resume(w, open_vmm, &o))) {
		wire_fail(err, "cannot import again the VMM memory of session %016llx (error %d): %s",
			 (unsigned long long)o.owner, (int)rc, o.why);
		return -1;
	}

	for (unsigned i = 0; i < ipc.nim; i++) {
		struct import *im = &ipc.im[i];
		if (!im->pending)
			continue;
		if ((rc = open_again(w, im, deadline, &why))) {
			wire_fail(err, "cannot open again the CUDA IPC %s of session %016llx (error %d): %s",
				 im->event ? "event" : "memory", (unsigned long long)im->from.owner, (int)rc, why);
			return -1;
		}
		im->pending = 0;
		log_info("client %s: opened again the CUDA IPC %s of session %016llx", w->peer,
			 im->event ? "event" : "memory", (unsigned long long)im->from.owner);
	}
	return 0;
}

/*
 * ipc-internal.h: what ipc.c (CUDA IPC handles, live) and ipc_save.c
 * (their checkpoint and restore) share: the handles' layout, the tables
 * of what the session exported and opened, and the socket between the
 * server's workers.
 */
#ifndef CICADA_IPC_INTERNAL_H
#define CICADA_IPC_INTERNAL_H

#include <pthread.h>
#include <sys/types.h>
#include "calls.h"

#define IPC_MAGIC "CICADA01"                 /* arena memory (cuIpcGetMemHandle) */
#define VMM_MAGIC "CICADAVM"                 /* VMM memory (cuMemExportToShareableHandle) */
#define EVENT_MAGIC "CICADAEV"               /* an interprocess event (cuIpcGetEventHandle) */
#define IPC_BASE 0x380000000000ull           /* the import region, 56 TiB: above the application's VMM (vmm.c) */
#define IPC_SIZE (1ull << 42)
#define VMM_KEY (1ull << 63)                 /* export keys of VMM allocations */
#define EVENT_KEY (1ull << 62)               /* and of events */

/* A handle as the application holds it (64 bytes, in CUipcMemHandle,
 * CUipcEventHandle or the VMM export's small file). */
struct ipc_handle {
	char magic[8];
	uint64_t owner;                      /* the exporting session (ipc_owner) */
	uint64_t va, size;                   /* the export's key and size (an event's: 0) */
	uint64_t offset;                     /* of the allocation in the chunk */
	uint8_t secret[16];
	int32_t device;                      /* the chunk's GPU */
	uint32_t pad;
};
_Static_assert(sizeof(struct ipc_handle) == sizeof(CUipcMemHandle), "an IPC handle is 64 bytes");
_Static_assert(sizeof(struct ipc_handle) == sizeof(CUipcEventHandle), "an IPC handle is 64 bytes");

/* Something other processes may open. Keys: a chunk's address, VMM_KEY |
 * n, EVENT_KEY | the event's id. */
struct export {
	uint64_t key, size;
	uint8_t secret[16];
	int32_t device;
	uint64_t local;                      /* the VMM allocation's or event's id */
	int fd;                              /* memory: the driver's descriptor; events: -1 */
	CUevent event;                       /* events: the event and its driver handle */
	CUipcEventHandle eh;
};

/* Something this session opened of another's: memory mapped in the import
 * region, or an event. */
struct import {
	struct ipc_handle from;              /* the handle it was opened with */
	uint64_t va;                         /* memory: where it is mapped (from.size bytes) */
	CUmemGenericAllocationHandle h;
	uint64_t event;                      /* events: the id the client holds */
	CUevent real;
	int pending;                         /* restored: opened again when the client comes */
	int alone;                           /* an event its exporter let go of: this process's own */
};

struct ipc_state {
	pthread_mutex_t lock;                /* the exports: the socket's thread reads them */
	struct export *ex;
	unsigned nex, cap_ex;
	struct import *im;
	unsigned nim, cap_im;
	uint64_t owner;                      /* names the exports; kept across restores */
	uint64_t next;                       /* import region: bump, reset when empty */
	int reserved;
	uint64_t vmm_exports;                /* VMM keys given so far */
	int listening;
};
extern struct ipc_state ipc;

uint64_t ipc_owner(void);
CUresult ipc_export_add(struct worker *w, const struct export *e, const uint8_t *secret, struct ipc_handle *h);
int ipc_fetch(struct worker *w, const struct ipc_handle *h, int *fd, CUipcEventHandle *eh, const char **why);
int ipc_probe(struct worker *w, const struct ipc_handle *h, const char **why);
void ipc_watch(struct worker *w);
CUresult ipc_reserve(void);
CUresult ipc_map(struct worker *w, CUmemGenericAllocationHandle mh, const struct ipc_handle *h, uint64_t va);

#endif

/*
 * state.h: the worker's state, below every other part: the per-client
 * worker (struct worker: the fields state/ uses, whoever else does; a
 * field no lower part uses is in the header of the lowest part that
 * does), its handle table, the procedure table by number, its GPUs and
 * their primary contexts, the device memory arena and the
 * stream-ordered allocator, the replay log, the records of live objects
 * a checkpoint describes, module images, pinned buffers and who is at
 * the other end of a socket.
 */
#ifndef CICADA_GPU_SERVER_STATE_H
#define CICADA_GPU_SERVER_STATE_H

#include <cuda.h>
#include <cudaProfiler.h>
#include "wire.h"
#include "hostarea.h"

enum handle_kind { H_FREE, H_CTX, H_MODULE, H_FUNCTION, H_LIBRARY, H_KERNEL, H_STREAM, H_EVENT,
		   H_GRAPH, H_GRAPH_EXEC, H_ARRAY, H_LINK, H_GRAPH_NODE, H_VMM };

struct handle_entry {
	enum handle_kind kind;
	uint64_t loaded;                     /* where cuFuncLoad was done (loaded_key); H_EVENT: recording kept */
	uint64_t in_ctxs;                    /* H_KERNEL: bit i: used in context kernel_ctxs[i] */
	void *real;
};

struct devmem;
struct objects;
struct ordered_free;
struct replay_log;
struct image_table;
struct worker_calls;                         /* calls.h */
struct worker_ckpt;                          /* checkpoint.h */
struct worker_front;                         /* front.h */

/* The worker: what state/ keeps, and each upper part's own fields, in
 * the struct its header declares (front/worker.c makes them all). */
struct worker {
	int sock;
	char peer[128];
	const char *cache_dir;
	char cache_part[80];                 /* the module cache index of this client */
	struct handle_entry *handles;
	unsigned nhandles, cap_handles;
	uint64_t kernel_ctxs[64];            /* contexts library kernels were used in (handles.c) */
	unsigned nkernel_ctxs;
	void (*on_forget)(struct worker *w, enum handle_kind kind, uint64_t id);   /* handles_on_forget */
	CUcontext base_ctx;                  /* the first GPU's primary, for copies */
	int (*start_on)(struct worker *w, CUdevice dev);   /* worker.c's: base_ctx on dev */
	struct devmem *devmem;
	struct objects *objects;             /* textures, exec graphs' sources */
	struct ordered_free *frees;          /* cuMemFreeAsync not yet reached */
	unsigned nfrees, cap_frees;
	uint64_t *graph_mem;                 /* graph memory: allocated in captures */
	unsigned ngraph_mem, cap_graph_mem;
	struct replay_log *replay;
	struct image_table *images;          /* module images a snapshot brought */
	uint64_t current_ctx;                /* the client's current context id */
	uint64_t created;                    /* handle the running call created */
	uint64_t replay_id;                  /* restore: id the next handle takes */
	int replay_broken;
	int ngpus;                           /* the GPUs the client sees, by its ordinal */
	CUdevice gpu[CICADA_MAX_GPUS];
	/* the client's ordinals in the order the worker took their primary
	 * contexts (the driver places modules by it): a restore keeps it */
	unsigned char gpu_order[CICADA_MAX_GPUS];
	unsigned ngpu_order;
	int nreal;                           /* GPUs of the node (the driver's count) */
	CUdevice assigned[CICADA_MAX_GPUS];  /* the gpu-server's choice for it; none: all */
	unsigned nassigned;
	uint64_t quota, charged;             /* device memory: the quota (0: none), charged (quota.c) */
	uint64_t sm_mask[CICADA_MAX_GPUS];   /* by real ordinal: the SM groups given (0: all; green.c) */
	CUgreenCtx green[CICADA_MAX_GPUS];   /* the session's green context there, if made */
	CUcontext green_view[CICADA_MAX_GPUS];
	struct session_stat *stat;           /* shared with the server (stat.c), or NULL */
	struct worker_calls *calls;          /* the calls' fields (calls.h) */
	struct worker_ckpt *ckpt;            /* checkpoints' and restores' (checkpoint.h) */
	struct worker_front *front;          /* the session's (front.h) */
};

#define HANDLE_BASE 0x1000u
#define HANDLE_MAX (1u << 24)               /* ids a restore may bind */
CUresult handle_get(struct worker *w, enum handle_kind kind, uint64_t id, void **real);
uint64_t handle_put(struct worker *w, enum handle_kind kind, void *real);
void handle_drop(struct worker *w, enum handle_kind kind, uint64_t id);
void handle_forget(struct worker *w, uint64_t id);
void handle_set(struct worker *w, uint64_t id, void *real);
void handles_on_forget(struct worker *w, void (*hook)(struct worker *w, enum handle_kind kind, uint64_t id));
uint64_t handle_find(struct worker *w, enum handle_kind kind, const void *real);
enum handle_kind handle_kind_of(struct worker *w, uint64_t id);
void handles_on_load(void (*hook)(struct worker *w, uint64_t id));

/* The procedure table (generated). */
enum { PROC_ASYNC = 1, PROC_SYNCPOINT = 2, PROC_RECORD = 4, PROC_CREATES = 8 };

typedef CUresult (*hand_fn)(struct worker *w, void *args, void *res);
typedef CUresult (*scalar_fn)(struct worker *w, const uint64_t *in, uint64_t *out);

struct proc_desc {
	unsigned proc;
	const char *name;
	xdrproc_t xargs;
	size_t args_size;
	xdrproc_t xres;
	size_t res_size;
	hand_fn hand;
	scalar_fn scalar;
	unsigned nin, nout;
	unsigned flags;
	int parent_arg;                      /* scalar input that is the parent handle */
};

extern const struct proc_desc server_procs[];

/* procs.c: the table by number (below dispatch.c, replay.c, restore.c) */
void worker_index_procs(void);
const struct proc_desc *worker_proc(unsigned proc);
CUresult one_scalar(scalar_res *r, uint64_t v);

static inline uint64_t float_to_u64(float f)
{
	union { float f; uint32_t u; } v = { .f = f };
	return v.u;
}

/* primary.c */
#define PRIMARY_DEVICES_MAX 64               /* GPUs whose primary context the worker may hold */
CUcontext primary_ctx(struct worker *w, CUdevice dev);
void primary_on_take(void (*hook)(struct worker *w, CUdevice dev));
int primary_held(CUdevice dev);

/* gpus.c: the GPUs a client sees and its ordinals for them */
void gpus_init(struct worker *w);
void gpus_assign(struct worker *w, const uint32_t *ids, unsigned n);
int gpus_choose(struct worker *w, const char *visible, char *why);
int gpus_setup(struct worker *w, const char *visible, char *why);
void gpus_taken(struct worker *w, CUdevice dev);
int gpus_uuid_text(CUdevice dev, char *out, size_t len);
CUresult device_in(const struct worker *w, uint64_t v, CUdevice *real);
uint64_t device_out(const struct worker *w, CUdevice real);
int device_slot(const struct worker *w, CUdevice real);

/* devmem.c: device memory in a fixed VMM arena (pointer-stable restore) */
int array_grow(void **arr, unsigned *cap, unsigned n, size_t elem);
CUresult devmem_init(struct worker *w, uint64_t base, uint64_t size);
int devmem_read_live(struct worker *w, uint64_t va, void *buf, size_t size, CUstream s);

CUresult devmem_create(struct worker *w, uint64_t va, uint64_t size, CUmemGenericAllocationHandle *h);
CUdevice devmem_device(const struct worker *w, uint64_t va);
unsigned devmem_access(const struct worker *w, CUdevice dev, CUmemAccessDesc *d);
int devmem_chunk(struct worker *w, uint64_t va, uint64_t *chunk_va, uint64_t *size,
		 CUmemGenericAllocationHandle *handle, int32_t *dev);
void devmem_on_unmap(struct worker *w, void (*hook)(struct worker *w, uint64_t va));
void devmem_set_source(struct worker *w, int (*take)(void *, uint64_t, uint64_t, CUmemGenericAllocationHandle *),
		       void *ctx);
void devmem_hold(struct worker *w, int hold);
int devmem_mapped(struct worker *w, uint64_t va, uint64_t size);
/* devmem.c, continued */
void devmem_arena(const struct worker *w, uint64_t *base, uint64_t *size);
CUresult devmem_alloc(struct worker *w, uint64_t size, uint64_t *va);
CUresult devmem_free(struct worker *w, uint64_t va);
CUresult devmem_range(struct worker *w, uint64_t va, uint64_t *base, uint64_t *size);
unsigned devmem_count(const struct worker *w, int chunks);
void devmem_get(const struct worker *w, int chunks, unsigned i, uint64_t *va, uint64_t *size);
CUresult devmem_restore_chunk(struct worker *w, uint64_t va, uint64_t size);
CUresult devmem_restore_alloc(struct worker *w, uint64_t va, uint64_t size);

/* stat.c: a worker's figures, shared with the server for cicadactl */
#define STAT_NO_QUOTA UINT64_MAX             /* quota_asked: remove the quota */
struct session_stat {
	uint64_t started;                    /* a session runs: the rest is set */
	uint64_t client_pid;
	uint32_t uid;                        /* the tenant's unix user; (uint32_t)-1: remote */
	uint32_t paused;                     /* from the server: hold the session's calls */
	uint64_t quota, charged, calls;
	uint64_t quota_asked;                /* from the server: a new quota, or STAT_NO_QUOTA */
	char tenant[48];
	char gpus[32];
	uint16_t sm_total[CICADA_MAX_GPUS];  /* by real ordinal, before 'R': the GPU's SMs */
	uint16_t sm_unit[CICADA_MAX_GPUS];   /* and the SMs of one group (green.c) */
	uint64_t sm_mask[CICADA_MAX_GPUS];   /* the groups the session runs on (0: all) */
	uint64_t sm_asked[CICADA_MAX_GPUS];  /* from the server: new groups, asked as sm_ask_seq */
	uint32_t sm_ask_seq;                 /* from the server: the last request's number */
	uint32_t sm_ack;                     /* the worker: the last request it took (sm_mask: what it has) */
	uint32_t ended;                      /* the worker: its client is gone, it exits */
};
void stat_open(struct worker *w);
void stat_session(struct worker *w, uint64_t client_pid, uint32_t uid, const char *tenant);
void stat_memory(struct worker *w);
int stat_quota_asked(struct worker *w, uint64_t *bytes);
void stat_wait_resumed(struct worker *w);

/* quota.c: the session's device memory quota (--memory-quota) */
/* green.c: a session's share of a GPU's SMs, in a green context */
#define GREEN_GROUPS_MAX 64
void green_describe(struct worker *w);
CUresult green_context(struct worker *w, CUdevice dev, CUcontext *ctx);
int green_sms(struct worker *w, CUdevice dev);
void green_take_asked(struct worker *w);
CUcontext green_view_of(struct worker *w, CUcontext ctx);
int green_lower(struct worker *w, unsigned sms);

/* tenant_policy.c: a server option's value by tenant */
typedef int (*policy_value_fn)(const char *text, uint64_t *value);   /* 0: taken */
#define TENANT_RULES_MAX 64
struct tenant_rule {
	int kind;
	unsigned id;
	char name[64];                       /* a token rule's token, a tls rule's client name */
	uint64_t value;
};
struct tenant_rules {
	int n;
	struct tenant_rule rule[TENANT_RULES_MAX];
};
int tenant_rules_parse(const char *policy, const char *opt, policy_value_fn value, struct tenant_rules *rs,
		       char *err);
int tenant_rules_find(const struct tenant_rules *rs, const char *token, const char *tls_name, int remote,
		      unsigned uid, unsigned gid, uint64_t *out);
int tenant_policy_check(const char *policy, const char *opt, policy_value_fn value, char *err);
int tenant_policy_value(const char *policy, policy_value_fn value, const char *token, const char *tls_name,
			int remote, unsigned uid, unsigned gid, uint64_t *out);
int quota_policy_check(const char *policy, char *err);
uint64_t quota_for(const char *policy, const char *token, const char *tls_name, int remote, unsigned uid,
		   unsigned gid);
void quota_set(struct worker *w, uint64_t bytes);
void quota_lower(struct worker *w, uint64_t bytes);       /* a client's own cap: never more */
CUresult quota_charge(struct worker *w, uint64_t bytes, const char *what);
void quota_release(struct worker *w, uint64_t bytes);
void quota_mem_info(struct worker *w, size_t *free_b, size_t *total);
void quota_nvml(const struct worker *w, uint64_t *total, uint64_t *free_b, uint64_t *used);

/* vmm_place.c: where the application's reservations go */
struct vmm_places;
struct vmm_places *places_new(void);
void places_note(struct vmm_places *p, uint64_t va, uint64_t size);
void places_forget(struct vmm_places *p, uint64_t va, uint64_t size);
CUresult places_reserve(struct vmm_places *p, const char *peer, CUdeviceptr *ptr, uint64_t size, size_t alignment,
			unsigned long long flags, int *carved);
int places_take(struct vmm_places *p, uint64_t va, uint64_t size);
int places_release(struct vmm_places *p, uint64_t va);
int places_in_regions(uint64_t va);
/* objects.c: graphs, executable
 * graphs, arrays' contents, texture and surface objects, as a checkpoint
 * describes them */
struct snap_writer;
void objects_tex_created(struct worker *w, uint64_t value, int surface, const tex_object_args *a);
void objects_tex_destroyed(struct worker *w, uint64_t value);
void objects_exec_created(struct worker *w, CUgraphExec exec, CUgraph source, unsigned long long flags);
void objects_exec_destroyed(struct worker *w, CUgraphExec exec);
void objects_graph_destroying(struct worker *w, CUgraph g, int depth);
void objects_exec_stale(struct worker *w, CUgraphExec exec, const char *why);
CUgraphNode objects_exec_node(struct worker *w, CUgraphExec exec, CUgraphNode node);
void objects_exec_node_set(struct worker *w, CUgraphExec exec, CUgraphNode node, CUgraphNodeParams *p);
void objects_exec_event_set(struct worker *w, CUgraphExec exec, CUgraphNode node, CUevent event, int wait);
void objects_exec_updated(struct worker *w, CUgraphExec exec, CUgraph graph);
/* ordered.c, graph.c, hostfn.c */
void ordered_collect(struct worker *w, int wait);
CUresult ordered_alloc(struct worker *w, uint64_t size, uint64_t *va);
CUresult ordered_free(struct worker *w, uint64_t va);
CUresult ordered_note_graph_mem(struct worker *w, uint64_t va);
CUresult ordered_alloc_async(struct worker *w, CUdeviceptr *dptr, size_t size, CUstream stream);
CUresult ordered_free_async(struct worker *w, CUdeviceptr dptr, CUstream stream);
/* globals.c */
void globals_track(struct worker *w, uint64_t id, void *handle, int library, const void *image, size_t size);

/* replay.c: the replay log of state-changing calls */
struct replay_entry {
	uint64_t seq;
	unsigned proc;
	uint64_t handle, parent, ctx;
	uint64_t chunks;                     /* arena chunks mapped when recorded */
	unsigned gpus;                       /* GPU contexts taken then (gpu_order) */
	const void *args;
	size_t len;
};
typedef int (*replay_fn)(void *ctx, const struct replay_entry *e);
void replay_note(struct worker *w, const struct proc_desc *d, void *args, uint64_t parent);
void replay_note_global(struct worker *w, uint64_t parent, uint64_t va, uint64_t size);
void replay_drop(struct worker *w, uint64_t id);
void replay_note_load(struct worker *w, uint64_t id);
void replay_note_events(struct worker *w);
#define STREAM_PEAK_MAX 1024                 /* streams a stream_peak record makes alive at most */
unsigned replay_count(const struct worker *w);
uint64_t replay_seq(const struct worker *w);
int replay_each(const struct worker *w, replay_fn fn, void *ctx);
struct replay_global {
	uint64_t va, size, parent;           /* parent: the module or library */
};
const struct replay_global *replay_globals(const struct worker *w, unsigned *n);
/* pinned.c: pinned host buffers */
void *worker_pinned(struct worker *w, size_t size);
void worker_pinned_free(void *p, size_t size);
int client_pinned_take(struct worker *w, uint64_t size, const char *what);   /* --max-staged */
void client_pinned_give(uint64_t size);

/* peer.c: who is at the other end of a socket */
struct ucred;
struct sockaddr_un;
void peer_set_server(uid_t uid);
int peer_is_server(uid_t uid);
int peer_cred(int fd, struct ucred *out);
#define REMOTE_HOST_MAX 64
int peer_mark_remote(int fd, const char *host);  /* handed as remote (host) or local (NULL) */
const char *peer_remote_host(int fd);
int peer_privileged(int fd);
unsigned run_socket_addr(const char *run_dir, const char *leaf, struct sockaddr_un *sa);
#define CLIENT_FD_TIMEOUT_MS 10000       /* a descriptor a client's request announced */

/* modcache.c: module images, from the node's cache or a restored snapshot */
struct snap_reader;
struct Cicada__Manifest;
int worker_images_load(struct worker *w, struct snap_reader *r, const struct Cicada__Manifest *m, char *err);
int worker_image_find(struct worker *w, const image_hash *hash, void **data, size_t *size);
void modcache_identify(struct worker *w);
int modcache_lookup(const struct worker *w, const image_hash *hash, void **image, size_t *size);
void modcache_store(const struct worker *w, const image_hash *hash, const void *image, size_t size);
void image_hash_compute(const void *image, size_t size, image_hash *out);

#endif

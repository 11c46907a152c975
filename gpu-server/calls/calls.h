/*
 * calls.h: the driver calls a client makes: the dispatch loop and
 * the wrap_ and hand_ functions calls.tbl names, object by object, and
 * the worker's fields that only they and the parts above use (struct
 * worker_calls). Above state/ alone.
 */
#ifndef CICADA_GPU_SERVER_CALLS_H
#define CICADA_GPU_SERVER_CALLS_H

#include "state/state.h"

/* The wrap_ functions calls.tbl names, which the generated handlers call. */
#include "server_calls.h"

#define MAX_HOST_REGIONS CICADA_MAX_REGIONS

struct host_region {
	void *base;                          /* the server's mapping */
	size_t size;
	unsigned flags;
	unsigned staged;                     /* graph copy nodes staged in it: it stays mapped */
};

struct vmm;
struct vmm_restoring;
struct lanes;

/* The worker's fields of calls/ and of the parts above it alone
 * (w->calls). */
struct worker_calls {
	struct wire_stream stream;
	struct shm_segment shm;
	const char *run_dir;                 /* session sockets of detached workers */
	CUresult pending;                    /* first error of a pipelined call */
	/* session.c's: opens a channel to the client (hostfn.c, lanes.c) */
	CUresult (*channel_call)(struct worker *w, const scalars *a, name_res *r, int *fd);
	struct host_region regions[MAX_HOST_REGIONS];
	void *scratch_in, *scratch_out;      /* pinned, CICADA_CHUNK_MAX each */
	struct vmm *vmm;                     /* the application's own VMM */
	struct vmm_restoring *vmm_restoring; /* while a restore runs */
	int callback_fd;                     /* host functions: the client's channel */
	struct lanes *lanes;                 /* a remote client's bulk lanes (lanes.c) */
	unsigned tex_objects;                /* texture and surface objects alive */
	unsigned captures;                   /* stream captures in progress */
	uint64_t call_parent;                /* set by hand calls that derive */
	uint64_t client_pid;                 /* as the client said in its hello */
	int detach;                          /* the client asked to detach */
	int exiting;
	struct worker_profile *prof;         /* CICADA_STATS's timings, or NULL (profile.c) */
	char params[CICADA_PARAMS_MAX];      /* a launch's parameters, decoded in place */
};
/* profile.c: the worker's time by part and procedure, for CICADA_STATS */
enum prof_part { PROF_WAIT, PROF_DECODE, PROF_BOOK, PROF_RUN, PROF_REPLY, PROF_PARTS };
uint64_t profile_add_on(struct worker *w, enum prof_part part, unsigned proc, uint64_t since);
static inline uint64_t profile_mark(struct worker *w)
{
	return w->calls->prof ? wire_now_ns() : 0;
}
/* Counts the time since a mark to part (and proc); the next mark. */
static inline uint64_t profile_add(struct worker *w, enum prof_part part, unsigned proc, uint64_t since)
{
	return w->calls->prof ? profile_add_on(w, part, proc, since) : 0;
}
/* vmm.c: the application's own virtual memory (cuMemCreate, cuMemMap) */
struct snap_range;
struct Cicada__Manifest;
unsigned vmm_ranges(const struct worker *w, struct snap_range *out);
CUdevice vmm_device_of(const struct worker *w, uint64_t va);
int vmm_save(struct worker *w, struct Cicada__Manifest *m);
void vmm_save_free(struct Cicada__Manifest *m);
int vmm_restore_upto(struct worker *w, const struct Cicada__Manifest *m, uint64_t seq, char *err);
int vmm_restore(struct worker *w, const struct Cicada__Manifest *m, char *err);
CUresult vmm_alloc_real(struct worker *w, uint64_t id, CUmemGenericAllocationHandle *h, uint64_t *size);
CUresult vmm_adopt(struct worker *w, CUmemGenericAllocationHandle h, uint64_t size, const void *token, uint64_t *id);
typedef CUresult (*vmm_open_fn)(struct worker *w, const void *token, CUmemGenericAllocationHandle *h, void *ctx);
CUresult vmm_resume(struct worker *w, vmm_open_fn open, void *ctx);
int vmm_each_import(struct worker *w, int (*each)(struct worker *w, const void *token, void *ctx), void *ctx);
/* graph_copy.c: a copy node's parameters (below graph_node.c, graph_stage.c) */
CUresult graph_ctx_in(struct worker *w, uint64_t id, CUcontext *ctx);
CUresult graph_copy_in(struct worker *w, const uint64_t *v, CUgraphNodeParams *p);
void graph_copy_out(struct worker *w, const CUDA_MEMCPY3D *c, uint64_t *v);
/* graph_node.c: a node's parameters between the wire and the driver */
CUresult graph_params_in(struct worker *w, graph_params *g, CUgraphNodeParams *p, void **ptrs);
CUresult graph_params_out(struct worker *w, CUgraphNode node, graph_params *g);

/* jit.c: JIT and linker options a client sent, and the logs they fill */
#define JIT_SET_MAX (CICADA_JIT_OPTIONS_MAX + 4)
struct jit_set {
	CUjit_option opt[JIT_SET_MAX];
	void *val[JIT_SET_MAX];
	unsigned n;
	char *info, *error;                  /* the worker's log buffers */
	size_t info_size, error_size;
	float wall_time;
	int wall;
};
CUresult jit_set_make(struct jit_set *s, const jit_option *o, unsigned n);
void jit_set_logs(const struct jit_set *s, jit_logs *out);
void jit_set_free(struct jit_set *s);

/* module.c: the launch configuration launch_config_pack sent */
CUresult launch_config_unpack(struct worker *w, const uint64_t *v, CUlaunchConfig *c, CUlaunchAttribute *attrs);
/* hostfn.c: host functions, the client runs them */
void hostfn_close(struct worker *w);
CUresult hostfn_node(struct worker *w, uint64_t id, CUhostFn *fn, void **data);
uint64_t hostfn_node_id(CUhostFn fn, void *data);
CUresult hostfn_copy_node(struct worker *w, const uint64_t *params, unsigned n, void *shared, uint64_t size,
			  int to_device, CUhostFn *fn, void **data, void **stage);
const uint64_t *hostfn_copy_params(CUhostFn fn, void *data, unsigned *n);

/* graph_stage.c: graph copy nodes of a client's pageable memory */
int graph_staged(const graph_params *g);
CUresult graph_stage_build(struct worker *w, const graph_params *g, CUgraph into);
const uint64_t *graph_stage_params(CUgraphNode node, unsigned *n);
CUresult graph_stage_set(struct worker *w, CUgraphExec exec, CUgraphNode node, graph_params *g);

/* array.c: CUDA arrays, texture and surface objects */

/* output.c: device printf output, forwarded to the client */
int output_capture(void);
int output_forward(struct worker *w, struct wire_buf *out);
int output_waiting(void);
/* dispatch.c: the calls (below session.c, checkpoint.c, restore.c) */
#define ARGS_MAX 1024
int worker_decode(struct worker *w, const struct wire_buf *in, struct wire_call_hdr *hdr,
		  const struct proc_desc **desc, void *args);
void worker_free_args(unsigned proc, const struct proc_desc *d, void *args);
int worker_serve(struct worker *w);
CUresult worker_execute(struct worker *w, const struct proc_desc *d, void *args, void *res,
			uint64_t *scalar_out);
/* lanes.c: a remote client's bulk lanes */
void lanes_close(struct worker *w);          /* lanes.c */
/* nvml.c, nvml_real.c, nvml_cuda.c: NVML queries for Cicada's
 * libnvidia-ml.so.1, answered by the server's NVML or, where it has none,
 * from the driver API. ret values are nvmlReturn_t (wire/nvml-wire.h);
 * the functions are cicada.x's nvml_func. */
struct nvml_reply {
	uint64_t v[CICADA_SCALARS_MAX];
	unsigned nv;
	char data[4096];
	unsigned ndata;
};
/* nvml_put.c: the reply being filled (below the three) */
void nvml_put(struct nvml_reply *r, uint64_t v);
void nvml_put_text(struct nvml_reply *r, const char *text);
void nvml_prepare(void);
int nvml_real_open(char *why, size_t len);
int nvml_real_count(unsigned *count);
int nvml_real_index_by_pci(const char *bus, unsigned *index);
int nvml_real_answer(struct worker *w, const nvml_args *a, struct nvml_reply *r);
int nvml_cuda_count(unsigned *count);
int nvml_cuda_answer(const struct worker *w, const nvml_args *a, struct nvml_reply *r);

#endif

/*
 * interposer.h: the internals of libcicada.so, the drop-in libcuda.so.1.
 * The public interface is CUDA's own cuda.h; this header ties together the
 * connection (client.c), the thread's current context (current.c), context
 * and stream ids (ids.c, stream.c), host memory (hostmem.c), copies
 * (copy.c), modules and launches (module.c, launch.c) and symbol lookup
 * (loader.c).
 *
 * Calls run downward only, through four layers; a file calls files of its
 * own layer or below, and no two files call each other:
 *  1. the connection, and what needs nothing else: client.c, stats.c,
 *     loader.c, unsupported.c, devmem.c, copy_pool.c, userobj.c,
 *     nvml_bridge.c;
 *  2. what the calls share: current.c, ids.c, answers.c, stream.c,
 *     launch.c, jit.c, lanes.c, transfer.c, hostfn.c;
 *  3. memory kept here: managed.c, mapped.c, hostmem.c, mempool.c, vmm.c;
 *  4. the rest of the driver API (copy.c, array.c, graph*.c, context.c,
 *     module.c, device.c, export_tables.c, proc_address.c, control.c,
 *     limit.c...),
 *     where an entry point may call the entry points of a file below.
 * What must go up goes through a hook the upper file registers: client.c
 * calls its users through client_add_hooks and the device work hooks,
 * transfer.c asks hostmem.c which memory is shared (copy_set_region_finder).
 */
#ifndef CICADA_INTERPOSER_H
#define CICADA_INTERPOSER_H

#include <cuda.h>
#include <cudaProfiler.h>
#include <stdint.h>
#include <string.h>
#include "wire.h"
#include "client_calls.h"

/* client.c: the one connection to the gpu-server */
CUresult client_connect(void);
void client_lock(void);
void client_unlock(void);
int client_trylock(void);
const char *error_name(CUresult err);           /* generated from cuda.h; NULL if unknown */
CUresult client_call(unsigned proc, xdrproc_t xargs, void *args, xdrproc_t xres, void *res);
CUresult client_call_locked(unsigned proc, xdrproc_t xargs, void *args, xdrproc_t xres, void *res);
CUresult client_send_locked(unsigned proc, xdrproc_t xargs, void *args, int first, uint32_t *xid);
CUresult client_reply_locked(unsigned proc, uint32_t xid, xdrproc_t xres, void *res);
CUresult client_scalar_call(unsigned proc, int async, const uint64_t *in, unsigned nin, uint64_t *out,
			    unsigned nout);
struct shm_segment *client_shm(void);
int client_socket(void);
CUresult client_lost(const char *why);
int client_connected(void);
void client_wait_mode(unsigned ctx_flags);
int client_wait_polls(void);
void *client_scratch(void);
int client_pause(char *ticket, size_t tlen, char *server, size_t slen, char *err);
int client_resume(const char *server, const char *ticket, char *err);
int client_open_channel(unsigned proc, char *err);
/* What the connection's users do when a session pauses and resumes (with
 * the client lock held); resume returns nonzero if the session cannot go
 * on. Registered from constructors, so client.c calls none of them by name. */
struct client_hooks {
	void (*pause)(void);
	int (*resume)(int regions_lost);
	void (*connected)(void);             /* the first connection is made (control.c) */
	CUcontext (*current)(void);          /* the calling thread's context (current.c; one) */
};
void client_add_hooks(const struct client_hooks *h);
/* lanes.c: large copies of a client without shared memory, over bulk lanes */
#define LANES_UNUSED ((CUresult)0x7fffffff)
CUresult lanes_copy(char *host, CUdeviceptr dev, size_t n, CUstream stream, int async, int to_device);
/* answers.c: answers kept for queries marked "cache" in calls.tbl */
CUresult client_cached_call(unsigned proc, const uint64_t *in, unsigned nin, uint64_t *out, unsigned nout);
CUresult client_cached_code_call(unsigned proc, const uint64_t *in, unsigned nin, uint64_t *out, unsigned nout);
void answers_flush(void);
void answers_flush_code(void);
enum { SETTING_KERNEL = 2, SETTING_FUNC = 3 };   /* kinds of kept settings (answers.c) */
int answers_setting_is(unsigned proc, unsigned kind, const uint64_t *in, unsigned nin, uint64_t value);
void answers_setting_keep(unsigned proc, unsigned kind, const uint64_t *in, unsigned nin, uint64_t value);
void answers_error(CUresult err);
/* stats.c: CICADA_STATS=1 counts calls and round trips, printed at exit */
extern int stats_on;
uint64_t stats_now(void);
void stats_sent(unsigned proc);
void stats_waited(unsigned proc, uint64_t ns);
void stats_driver_call(unsigned i, const char *name, uint64_t ns);
/* hostfn.c: host functions the worker calls back, and the bytes of
 * staged copies; one host side of a copy in the program's pageable
 * memory is shaped as CUDA_MEMCPY3D's (pitch, height 0: width, rows) */
struct stage_shape {
	char *base;
	size_t x, y, z, pitch, height;
	size_t width, rows, depth;
};
size_t stage_shape_rows(const struct stage_shape *s);
char *stage_shape_row(const struct stage_shape *s, size_t i);
int stage_shape_flat(const struct stage_shape *s);
uint64_t hostfn_register(CUhostFn fn, void *data, CUresult *err);
int hostfn_lookup(uint64_t id, CUhostFn *fn, void **data);
CUresult hostfn_stage_copy(CUstream stream, CUdeviceptr dev, void *host, size_t n, int to_device);
uint64_t hostfn_stage_node(const struct stage_shape *s, int to_device, CUresult *err);
/* graph_stage.c: graph copy nodes of pageable memory */
CUresult graph_stage_pack(uint64_t *v, unsigned side, const struct stage_shape *s, int to_device);
/* stream.c: the count of captures under way, and whether a stream captures */
void capture_begun(void);
void capture_ended(void);
int capture_running(void);
int stream_capturing(CUstream stream);
/* graph_node.c: a capture's dependencies, as node handles (graph.c) */
CUresult graph_capture_deps(CUstream stream, const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *n);
/* client.c: the session's token, and a migration's pre-copy rounds */
size_t client_token(char *buf, size_t len);
int client_set_token(const char *hex);
int client_precopy(int dirfd, const char *name, const char *parent, uint64_t out[3], char *err);   /* a migration's new token; NULL: the environment's */

/* current.c: the calling thread's current context (context.c makes and
 * destroys contexts, above it) */
CUcontext ctx_current(void);
void ctx_push(CUcontext ctx);
void ctx_forget(CUcontext ctx);

/* userobj.c: user objects, and the graphs that hold them */
void userobj_copy(uint64_t from, uint64_t to);
void userobj_gone(uint64_t owner);

/* ids.c: unique context and stream ids */
CUresult stream_id(CUcontext ctx, CUstream stream, int per_thread, unsigned long long *out);
void ids_forget_ctx(CUcontext ctx);
void ids_forget_stream(CUstream stream);

/* hostmem.c: pinned host memory */
struct host_range {
	unsigned region;                     /* shared with the server, or 0 */
	uint64_t offset;
};
int hostmem_find(const void *ptr, size_t size, struct host_range *out);
void *hostmem_region_ptr(unsigned region, uint64_t offset);
/* jit.c: an application's JIT options, and the logs written back */
struct jit_request {
	jit_option opts[CICADA_JIT_OPTIONS_MAX];
	unsigned n;
	void **values;                       /* the application's option values */
	char *info, *error;                  /* its log buffers */
	size_t info_size, error_size;
	int info_size_at, error_size_at, wall_at;
};
CUresult jit_read(struct jit_request *j, unsigned n, const CUjit_option *opts, void **values);
void jit_write_back(const struct jit_request *j, const jit_logs *logs);

/* module.c */
void *file_read(const char *path, size_t *len);

/* managed.c: managed memory, coherent between host pages and the device */
int managed_contains(const void *p, size_t n);
int managed_free(CUdeviceptr p);
CUdeviceptr managed_raw(CUdeviceptr p);      /* the allocation behind a managed range */
void managed_flush(void);
int managed_attribute(CUdevice_attribute attr, int *value);
void client_set_device_work_hook(void (*hook)(unsigned proc));
void client_set_synced_hook(void (*hook)(unsigned proc));
int device_work_writes(unsigned proc);      /* -1: no device work; 0: reads only; 1: may write */

/* mapped.c: mapped host memory the worker cannot reach, mirrored on the device */
CUresult mapped_add(char *host, size_t size, int read_only, CUdeviceptr *dev);
void mapped_remove(const char *host, int read_back);
CUresult mapped_adopt(char *host, size_t size, CUdeviceptr dev, CUcontext ctx);
void mapped_before_copy(const void *host, size_t n, int async);
void mapped_flush(void);

/* Whether [p, p + n) can be application memory at all: not NULL, no
 * wrap-around, below the top of user space. Garbage a program passes as
 * a host pointer is refused with an error, never dereferenced. */
static inline int host_range_valid(const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p, top = (uintptr_t)1 << 56;

	return p && a < top && n <= top - a;
}
int hostmem_attribute(CUdeviceptr ptr, CUpointer_attribute attr, void *data, CUresult *err, int map);

/* devmem.c: the device allocations the client knows of */
void devmem_note_alloc(CUdeviceptr ptr, size_t size);
void devmem_note_free(CUdeviceptr ptr);
void devmem_note_unmap(CUdeviceptr ptr, size_t size);
int devmem_contains(CUdeviceptr ptr);
CUresult devmem_alloc(CUdeviceptr *dptr, size_t size);
CUresult devmem_free(CUdeviceptr ptr);

/* transfer.c, copy_pool.c: the bytes of a copy, host memory taken as it is */
void copy_parallel(void *dst, const void *src, size_t len);
CUresult copy_htod_host(CUdeviceptr dst, const void *src, size_t n, CUstream stream, int async);
CUresult copy_dtoh_host(void *dst, CUdeviceptr src, size_t n, CUstream stream, int async);
CUresult copy_htod_device(CUdeviceptr dst, const void *src, size_t n);
CUresult copy_dtoh_device(void *dst, CUdeviceptr src, size_t n);
void copy_set_region_finder(int (*find)(const void *p, size_t n, struct host_range *out));

/* copy.c: copies as the program asks for them (array.c, above, has
 * those with an array on either side, and the 2D and 3D entry points) */
CUresult copy_2d(const CUDA_MEMCPY2D *p, CUstream stream, int async);

/* mempool.c: the stream-ordered allocator, from the current pool */
CUresult mempool_alloc_async(CUdeviceptr *dptr, size_t size, CUstream stream);
CUresult mempool_free_async(CUdeviceptr dptr, CUstream stream);

/* unsupported.c: one log line per missing name */
void log_missing_once(const char *what, const char *name, int called);

/* loader.c, proc_address.c, export_tables.c, integrity.c, compute_cache.c:
 * how the CUDA runtime and libraries find the driver */
void *interposer_self(void);
const void *export_table_find(const CUuuid *id);
const void *compute_cache_table(void);
void cls_forget(CUcontext ctx);
CUresult integrity_digest(uint32_t version, uint64_t seconds, const void *interface_table,
			  const void *integrity_table, const void *function, uint64_t out[2]);
void integrity_md2(const void *msg, size_t len, unsigned char out[16]);

/* launch.c: a launch configuration as the 7 scalars of generated calls */
CUresult launch_config_pack(const CUlaunchConfig *c, uint64_t *v);

/* module.c */
CUresult launch_pack(CUfunction f, void **params, void **extra, char *buf, unsigned *len);
void launch_forget_layouts(void);             /* after an unload: ids may be reused */
void launch_set_param_filter(CUresult (*filter)(char *buf, unsigned len));   /* hostmem.c's */

static inline float u64_to_float(uint64_t v)
{
	union { uint32_t u; float f; } x = { .u = (uint32_t)v };
	return x.f;
}

static inline uint64_t handle_id(const void *h)
{
	return (uint64_t)(uintptr_t)h;
}

#endif

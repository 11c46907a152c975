/*
 * Internal header of the CPU stand-in for libcuda.so.1 used by the tests.
 * Host memory plays device memory, every call runs synchronously, and the
 * "kernels" are C functions found by name in kernels.c.  This header holds
 * the types and helpers the files of the stand-in share: the handle
 * registry, the table of valid memory ranges, the context checks and the
 * kernel table.  Nothing here is exported from the library.
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <cuda.h>
#include <cudaProfiler.h>
#include <stddef.h>
#include <stdint.h>

/* Device memory: 16 GiB, or FAKECUDA_TOTAL_MIB MiB (tests of small GPUs). */
#define FC_TOTAL_MEM	fc_total_mem()
size_t fc_total_mem(void);
#define FC_GRANULARITY	(2UL << 20)
#define FC_MAX_DEVICES	8
#define FC_VERSION	13000
#define FC_MAX_PARAMS	8

#define FC_HIDDEN __attribute__((visibility("hidden")))

/* Early returns, so each entry point reads as its list of checks. */
#define TRY(expr)	do { CUresult r_ = (expr); if (r_) return r_; } while (0)
#define CHECK(ok, err)	do { if (!(ok)) return (err); } while (0)
#define CHECK_ARG(ok)	CHECK(ok, CUDA_ERROR_INVALID_VALUE)

struct fc_ctx {
	CUdevice dev;
	unsigned peers;                 /* devices whose contexts' memory it may use */
	unsigned flags;
	int primary;
	int live;
	size_t limits[16];
	int placed;                     /* its addresses are taken (fc_ctx_place) */
	char *globals;                  /* its module variables' window (module.c) */
	size_t globals_used, globals_room;
	unsigned streams, streams_most;  /* alive now, most ever alive at once (stream.c) */
	struct fc_ctx *base;            /* a green context's view: its primary (green.c) */
	const uint64_t *sms;            /* a view's SMs (NULL: every SM) */
};

#define FC_SM_WORDS 3
FC_HIDDEN unsigned fc_sm_of(const uint64_t *set, unsigned n, unsigned sms);
FC_HIDDEN void fc_ctx_forget(struct fc_ctx *c);
FC_HIDDEN CUresult fc_current_view(struct fc_ctx **out);
FC_HIDDEN const uint64_t *fc_stream_sms(CUstream s);

void fc_ctx_place(struct fc_ctx *c);
FC_HIDDEN void fc_ctx_stack(struct fc_ctx *c, size_t bytes);

/* Kinds of handles in the registry. */
enum { FC_CTX = 1, FC_STREAM, FC_EVENT, FC_MODULE, FC_LIBRARY, FC_FUNC, FC_VMM, FC_GRAPH, FC_GRAPH_EXEC,
       FC_ARRAY, FC_OBJECT, FC_NODE };

/* Kinds of memory ranges. */
enum { FC_MEM_DEVICE = 1, FC_MEM_HOST, FC_MEM_REGISTERED, FC_MEM_GLOBAL, FC_MEM_VMM };

struct fc_range {
	uintptr_t base;
	size_t size;
	int kind;
	int usable;
	struct fc_ctx *ctx;
	unsigned long long id;
	unsigned flags;                      /* host memory: as allocated or registered */
};

/* registry.c */
FC_HIDDEN int fc_obj_add(void *p, int kind, struct fc_ctx *ctx, void (*drop)(void *));
FC_HIDDEN int fc_obj_has(const void *p, int kind);
FC_HIDDEN int fc_obj_del(const void *p, int kind);
FC_HIDDEN void fc_obj_drop_ctx(struct fc_ctx *ctx);
FC_HIDDEN int fc_range_add(uintptr_t base, size_t size, int kind, struct fc_ctx *ctx, int usable);
FC_HIDDEN void fc_range_set_flags(uintptr_t base, unsigned flags);
FC_HIDDEN int fc_range_find(uintptr_t addr, struct fc_range *out);
FC_HIDDEN int fc_range_overlaps(uintptr_t base, size_t size);
FC_HIDDEN CUresult fc_range_check(uintptr_t addr, size_t n);
FC_HIDDEN int fc_range_del(uintptr_t base, int kind, struct fc_range *out);
FC_HIDDEN int fc_range_span(uintptr_t lo, size_t n, int kind, int usable, int del);
FC_HIDDEN void fc_range_drop_ctx(struct fc_ctx *ctx);
FC_HIDDEN size_t fc_mem_used(long long delta);

/* device.c, context.c, stream.c */
FC_HIDDEN CUresult fc_need_init(void);
FC_HIDDEN int fc_cc(void);
FC_HIDDEN CUresult fc_check_dev(CUdevice dev);
FC_HIDDEN int fc_ndev(void);
FC_HIDDEN int fc_vmm_access(uintptr_t addr, CUdevice dev);
FC_HIDDEN int fc_vmm_device(uintptr_t addr);
FC_HIDDEN CUresult fc_current(struct fc_ctx **out);
FC_HIDDEN CUresult fc_check_stream(CUstream s);

/* jit.c */
FC_HIDDEN CUresult fc_ptx_compile(const char *ptx, int valid);

/* kernels.c */
struct fc_dim { unsigned x, y, z; };

struct fc_launch {
	struct fc_dim grid, block;
	void **args;		/* args[i] points at the value of param i */
	void *mod;		/* for fc_global() */
	const uint64_t *sms;	/* the SMs it runs on (NULL: all; green.c) */
};

struct fc_kernel {
	const char *name;
	int nparams;
	size_t sizes[FC_MAX_PARAMS];
	void (*fn)(const struct fc_launch *l);
};

struct fc_global {
	const char *name;
	size_t size;
	const void *init;
};

FC_HIDDEN const struct fc_kernel *fc_kernel_at(int i);
FC_HIDDEN const struct fc_global *fc_global_at(int i);
FC_HIDDEN size_t fc_param_offset(const struct fc_kernel *k, int idx);
FC_HIDDEN size_t fc_kernel_stack(const struct fc_kernel *k);
FC_HIDDEN void *fc_global(const struct fc_launch *l, const char *name);

/* userobj.c: what user objects graphs hold */
FC_HIDDEN void fc_userobj_copy(const void *from, const void *to);
FC_HIDDEN void fc_userobj_gone(const void *owner);

/* graph.c, stream.c: stream capture */
struct fc_graph;
FC_HIDDEN struct fc_graph **fc_stream_capture(CUstream s);
FC_HIDDEN void fc_cond_set(CUgraphConditionalHandle h, unsigned value);   /* cudaGraphSetConditional */
FC_HIDDEN int fc_capture_copy(CUstream s, uintptr_t dst, int host_dst, uintptr_t src, int host_src, size_t n,
			      CUresult *err);
FC_HIDDEN CUresult fc_capture_launch(struct fc_graph *g, CUfunction f, const struct fc_kernel *k, struct fc_dim grid,
				     struct fc_dim block, unsigned shmem, void **args);

/* texture.c: element (x, y) behind a texture or surface object */
FC_HIDDEN void *fc_object_at(unsigned long long v, size_t x, size_t y);

/* module.c */
FC_HIDDEN CUresult fc_func(CUfunction f, const struct fc_kernel **k, void **mod, int *max_shmem);

#endif

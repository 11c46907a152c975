/*
 * worker.c: one worker process per client. It initialises CUDA before any
 * client arrives, waits for the gpu-server to hand it an authenticated
 * connection, then runs the client's session (session.c) until the
 * client goes away; the calls themselves go through dispatch.c. It makes
 * the worker: the core state.h declares and each part's own fields.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "front.h"

/* CUDA initialisation, paid before a client connects. */
static void CUDA_CB warm_host_func(void *arg)
{
}

/* The driver maps its PTX compiler (some 36 MiB) only when it compiles
 * PTX that its compute cache (~/.nv/ComputeCache) does not hold, so a
 * worker on a cold cache would have it in its default mapping area and
 * one on a warm cache not, and the module variables the driver places
 * below it would move by that much between a program's run and its
 * restore, or between two nodes. Every worker maps it itself before
 * CUDA starts, and NVVM with it (what the driver's JIT of LTO and NVVM
 * inputs maps); the driver's own dlopen then finds them there. Best
 * effort: a driver without them compiles none of that. */
static void map_jit_compiler(void)
{
	static const char *const libs[] = { "libnvidia-ptxjitcompiler.so.1", "libnvidia-nvvm.so.4" };

	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++)
		if (!dlopen(libs[i], RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE))
			log_debug("no %s to map before CUDA starts: %s", libs[i], dlerror());
}

/* What the driver would otherwise map only in the middle of a session
 * (its host-function thread, what a first PTX load sets up in a context)
 * is mapped when the worker starts on a GPU, the same in every worker,
 * and so is the module of device hashing (devhash.c): mapped later, they
 * would move the module variables loaded after them, and a restoring
 * worker, replaying the loads without them, would not (state/hostarea.c).
 * What every GPU's primary context does first, the same on each (so the
 * program's modules land at the same addresses on whichever GPU a
 * restore puts them). Best effort. */
static void warm_ctx(void)
{
	static const char ptx[] = ".version 7.0\n.target sm_50\n.address_size 64\n"
				  ".visible .entry cicada_warm_up()\n{\n\tret;\n}\n";
	CUmodule mod;
	CUstream s;

	if (!cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) {
		if (!cuLaunchHostFunc(s, warm_host_func, NULL))
			cuStreamSynchronize(s);
		cuStreamDestroy(s);
	}
	if (!cuModuleLoadData(&mod, ptx))
		cuModuleUnload(mod);
}

/* primary.c's hook, for the GPUs the worker takes after its first: each
 * one's place in the order the session's GPUs were taken is recorded, for
 * a restore takes them in that order (gpus.c). */
static void ready_gpu(struct worker *w, CUdevice dev)
{
	warm_ctx();
	devhash_load(dev);
	gpus_taken(w, dev);
}

/* The worker's start on GPU dev, its first context: the primary context,
 * the worker's pinned buffers there (portable: for copies to every GPU
 * the client may use), the arena's addresses, and what warm_ctx maps. */
static int start_on(struct worker *w, CUdevice dev)
{
	CUcontext ctx = primary_ctx(w, dev);
	CUresult err = ctx ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;

	if (err || (err = cuCtxSetCurrent(ctx)) ||
	    (err = cuMemHostAlloc(&w->calls->scratch_in, CICADA_CHUNK_MAX, CU_MEMHOSTALLOC_PORTABLE)) ||
	    (err = cuMemHostAlloc(&w->calls->scratch_out, CICADA_CHUNK_MAX, CU_MEMHOSTALLOC_PORTABLE)) ||
	    (err = devmem_init(w, 0, 0))) {
		const char *name = "?";
		cuGetErrorName(err, &name);
		log_error("worker cannot start CUDA on GPU %d: %s", (int)dev, name);
		return -1;
	}
	w->base_ctx = ctx;
	w->front->started = 1;
	w->front->start_gpu = dev;
	warm_ctx();
	devhash_load(dev);
	primary_on_take(ready_gpu);          /* other GPUs: before the program's modules */
	return 0;
}

/* gpus.c's hook (w->start_on): the session's first GPU. A worker of a
 * one-GPU node started there already; on a node of several it starts
 * now. It cannot start on GPU 0 beforehand and move: the driver places a
 * context, and the program's module variables after it, by how many
 * contexts came before, and does not give a context's addresses back, so
 * a program on another GPU would find its variables elsewhere than it
 * would on the first, and a restore onto another GPU could not put them
 * back where they were. */
static int start_session(struct worker *w, CUdevice dev)
{
	if (w->front->started)
		return dev == w->front->start_gpu ? 0 : -1;
	return start_on(w, dev);
}

/* cuInit and the server's NVML (before any context, where every worker
 * maps them); a node's only GPU is started on too. */
static int worker_prepare(struct worker *w)
{
	CUresult err;

	devhash_prepare();
	map_jit_compiler();
	if ((err = cuInit(0))) {
		const char *name = "?";
		cuGetErrorName(err, &name);
		log_error("worker cannot initialise CUDA: %s", name);
		return -1;
	}
	gpus_init(w);
	if (!w->nreal) {
		log_error("worker cannot initialise CUDA: no GPU");
		return -1;
	}
	nvml_prepare();
	w->start_on = start_session;
	return w->nreal == 1 ? start_on(w, 0) : 0;
}

int worker_main(int control_fd, const char *cache_dir, const char *run_dir)
{
	static struct worker w;
	static struct worker_calls calls;
	static struct worker_ckpt ckpt;
	static struct worker_front front;
	struct wire_buf hello = { 0 };
	struct handoff h = { 0 };
	char ready[2] = { 'R', 0 }, go;
	int fd;

	hostarea_enable();                   /* before CUDA: see state/hostarea.c */
	stat_open(&w);
	worker_index_procs();
	handles_on_load(replay_note_load);
	w.calls = &calls;                    /* each part's fields (state.h) */
	w.ckpt = &ckpt;
	w.front = &front;
	w.cache_dir = cache_dir;
	w.ckpt->owner_uid = (uid_t)-1;
	w.calls->run_dir = run_dir;
	w.calls->shm.fd = -1;
	w.sock = -1;
	w.front->session_fd = -1;
	w.calls->callback_fd = -1;
	if (output_capture())
		return 1;
	if (read(control_fd, &go, 1) != 1 || go != 'G')    /* the pool's word to start CUDA */
		return 1;
	if (worker_prepare(&w))
		return 1;
	ready[1] = (char)w.nreal;            /* for placement.c */
	green_describe(&w);                  /* for sm_share.c */
	if (write(control_fd, ready, 2) != 2)
		return 1;
	fd = handoff_receive(control_fd, &hello, &h);
	close(control_fd);
	if (fd < 0)
		return 1;
	gpus_assign(&w, h.gpus, h.ngpus);
	memcpy(w.sm_mask, h.sm_mask, sizeof(w.sm_mask));
	memcpy(w.front->token, h.token, sizeof(w.front->token));
	memcpy(w.front->tls_name, h.tls_name, sizeof(w.front->tls_name));
	session_run(&w, fd, &hello);
	wire_buf_free(&hello);
	return 0;
}

/*
 * restore.c: rebuilds a session from a snapshot in a fresh worker. The
 * arena is reserved at its old address; the replay log runs in order,
 * each call binding the handle id it had, and the chunks are mapped where
 * they were, as many before each call as there were when it was made, as
 * are the application's own virtual memory (vmm.c), texture objects and
 * executable graphs (objects_restore.c); the
 * module globals must come back at their old addresses; then
 * device memory is written back, every piece checked (but for what a
 * migration's pre-copy rounds preloaded: preload.c). Any failure leaves
 * nothing usable behind: the worker reports one line and exits.
 */
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include "checkpoint.h"
#include "snapshot.h"

/* Room for the snapshot's device memory: on the GPU, and under the
 * owner's quota (--memory-quota) where there is one. */
static int check_room(const struct worker *w, const Cicada__Manifest *m, char *err)
{
	size_t free_b = 0, total = 0;
	uint64_t need = 0;

	for (size_t i = 0; i < m->n_chunks; i++)
		need += m->chunks[i]->size;
	if (w->quota && need > w->quota - (w->charged < w->quota ? w->charged : w->quota)) {
		wire_fail(err, "the snapshot needs %.2f GiB of device memory; its owner's quota here is %.2f GiB",
			 need / 1073741824.0, w->quota / 1073741824.0);
		return -1;
	}
	if (cuMemGetInfo(&free_b, &total))
		return 0;
	if (need <= free_b)
		return 0;
	wire_fail(err, "the snapshot needs %.2f GiB of device memory; this GPU has %.2f GiB free",
		 need / 1073741824.0, free_b / 1073741824.0);
	return -1;
}

/* The GPUs the application used, by its ordinals, must all be here: the
 * GPUs this session was given (CICADA_RESTORE_GPUS picks and orders them).
 * Used: those whose contexts the worker took (gpu_order); older snapshots
 * say only how many it saw. */
static int check_gpus(const struct worker *w, const Cicada__Manifest *m, char *err)
{
	unsigned need = m->has_gpu_count ? m->gpu_count : 1;

	if (m->n_gpu_order) {
		need = 1;
		for (size_t i = 0; i < m->n_gpu_order; i++)
			if (m->gpu_order[i] + 1 > need)
				need = m->gpu_order[i] + 1;
		/* VMM memory made on, or opened to, a GPU the worker never took */
		for (size_t i = 0; i < m->n_vmm_access; i++)
			if (m->vmm_access[i]->location_type == CU_MEM_LOCATION_TYPE_DEVICE &&
			    m->vmm_access[i]->location_id >= 0 && (unsigned)m->vmm_access[i]->location_id + 1 > need)
				need = (unsigned)m->vmm_access[i]->location_id + 1;
		for (size_t i = 0; i < m->n_vmm_allocations; i++) {
			CUmemAllocationProp prop;
			if (m->vmm_allocations[i]->prop.len != sizeof(prop))
				continue;
			memcpy(&prop, m->vmm_allocations[i]->prop.data, sizeof(prop));
			if (prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE && prop.location.id >= 0 &&
			    (unsigned)prop.location.id + 1 > need)
				need = (unsigned)prop.location.id + 1;
		}
	}
	if (need <= (unsigned)w->ngpus)
		return 0;
	wire_fail(err, "the application used %u GPUs; this session has %d (the server's --gpus, "
		 "CICADA_RESTORE_GPUS)", need, w->ngpus);
	return -1;
}

static int reserve_arena(struct worker *w, const Cicada__Manifest *m, char *err)
{
	CUresult rc = devmem_init(w, m->arena_va, m->arena_size);

	/* older snapshots: each GPU's context before the program's modules */
	for (unsigned g = 0; !rc && !m->n_gpu_order && g < (m->has_gpu_count ? m->gpu_count : 1) &&
	     g < (unsigned)w->ngpus; g++)
		if (!primary_ctx(w, w->gpu[g]))
			rc = CUDA_ERROR_INVALID_DEVICE;
	if (!rc && cuCtxSetCurrent(w->base_ctx))
		rc = CUDA_ERROR_INVALID_CONTEXT;

	if (rc)
		wire_fail(err, "cannot reserve device addresses 0x%llx-0x%llx (error %d)",
			 (unsigned long long)m->arena_va, (unsigned long long)(m->arena_va + m->arena_size), rc);
	return rc ? -1 : 0;
}

/* Takes the contexts of the GPUs gpu_order names, in its order, until
 * upto of them are taken (the first, the session's own, already is):
 * where the worker that made the snapshot took them among the calls. */
static int take_gpus(struct worker *w, const Cicada__Manifest *m, size_t upto, size_t *taken, char *err)
{
	CUcontext cur = NULL;

	cuCtxGetCurrent(&cur);
	for (; *taken < upto && *taken < m->n_gpu_order; ++*taken) {
		uint32_t g = m->gpu_order[*taken];
		if (g >= (uint32_t)w->ngpus || !primary_ctx(w, w->gpu[g]))
			return wire_fail(err, "cannot start CUDA on the application's GPU %u", g);
	}
	cuCtxSetCurrent(cur);
	return 0;
}

/* Maps the snapshot's chunks, in address order, until upto are mapped. */
static int map_chunks(struct worker *w, const Cicada__Manifest *m, size_t upto, size_t *mapped, char *err)
{
	CUresult rc;

	for (; *mapped < upto && *mapped < m->n_chunks; ++*mapped) {
		const Cicada__Chunk *c = m->chunks[*mapped];
		if ((rc = devmem_restore_chunk(w, c->va, c->size))) {
			wire_fail(err, "cannot map device memory at 0x%llx (%llu bytes): error %d",
				 (unsigned long long)c->va, (unsigned long long)c->size, rc);
			return -1;
		}
	}
	return 0;
}

static int restore_allocations(struct worker *w, const Cicada__Manifest *m, char *err)
{
	for (size_t i = 0; i < m->n_allocations; i++)
		if (devmem_restore_alloc(w, m->allocations[i]->va, m->allocations[i]->size)) {
			wire_fail(err, "allocation at 0x%llx does not fit the snapshot's chunks",
				 (unsigned long long)m->allocations[i]->va);
			return -1;
		}
	return 0;
}

/* Replays one record; the call it made must bind the recorded handle. */
/* Why a module does not load here: no code for this GPU model. */
static int no_code(const Cicada__Manifest *m, const struct proc_desc *d, CUresult rc, char *err)
{
	int major = 0, minor = 0;

	if (rc != CUDA_ERROR_NO_BINARY_FOR_GPU && rc != CUDA_ERROR_UNSUPPORTED_PTX_VERSION &&
	    rc != CUDA_ERROR_INVALID_PTX)
		return 0;
	cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0);
	cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0);
	wire_fail(err, "this GPU (sm_%d%d) cannot run the program's kernels: built for sm_%d%d "
		 "without PTX it can compile (%s: %s)", major, minor, m->gpu ? m->gpu->cc_major : 0,
		 m->gpu ? m->gpu->cc_minor : 0, d->name,
		 rc == CUDA_ERROR_NO_BINARY_FOR_GPU ? "no code for this GPU" : "its PTX is refused");
	return 1;
}

static int replay_one(struct worker *w, const Cicada__Manifest *m, const Cicada__Record *rec, char *err)
{
	const struct proc_desc *d = worker_proc(rec->proc);
	union { char c[ARGS_MAX]; uint64_t align; } args, res;
	uint64_t out[CICADA_SCALARS_MAX];
	CUcontext ctx;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;
	XDR x;

	if (!d || !(d->flags & PROC_RECORD) || d->args_size > ARGS_MAX)
		goto fail;
	if (rec->ctx && !handle_get(w, H_CTX, rec->ctx, (void **)&ctx) && cuCtxSetCurrent(ctx) == CUDA_SUCCESS)
		w->current_ctx = rec->ctx;
	memset(&args, 0, sizeof(args));
	memset(&res, 0, sizeof(res));
	xdrmem_create(&x, (char *)rec->args.data, (unsigned)rec->args.len, XDR_DECODE);
	if (d->xargs(&x, &args)) {
		w->replay_id = rec->handle;
		rc = worker_execute(w, d, &args, &res, out);
		if (!rc && w->replay_id)
			rc = CUDA_ERROR_INVALID_HANDLE;
		w->replay_id = 0;
	}
	xdr_destroy(&x);
	xdr_free(d->xargs, (char *)&args);
	if (!d->scalar && d->xres)
		xdr_free(d->xres, (char *)&res);
	if (!rc)
		return 0;
	if (no_code(m, d, rc, err))
		return -1;
fail:
	wire_fail(err, "replaying call %llu (%s) failed with error %d",
		 (unsigned long long)rec->seq, d ? d->name : "unknown procedure", (int)rc);
	return -1;
}

/* Where a global of that size came back (0: none), for the log. */
static uint64_t same_size(const struct replay_global *g, unsigned n, uint64_t size)
{
	for (unsigned j = 0; j < n; j++)
		if (g[j].size == size)
			return g[j].va;
	return 0;
}

/* A snapshot's global of that size (0: none), for the log. */
static uint64_t same_size_in(const Cicada__Manifest *m, uint64_t size)
{
	for (size_t i = 0; i < m->n_globals; i++)
		if (m->globals[i]->size == size)
			return m->globals[i]->va;
	return 0;
}

/* The first global, of those the replay has found since *seen, that is
 * not where the snapshot says: logged once, with the record that found
 * it, since what the driver did differently happened before that record
 * (the log of the worker that made the snapshot, at debug level, names
 * each record it kept). */
static void first_moved(struct worker *w, const Cicada__Manifest *m, const Cicada__Record *rec, unsigned *seen,
			int *told)
{
	unsigned n;
	const struct replay_global *g = replay_globals(w, &n);

	for (; *seen < n && !*told; ++*seen) {
		size_t i;
		for (i = 0; i < m->n_globals; i++)
			if (m->globals[i]->va == g[*seen].va && m->globals[i]->size == g[*seen].size)
				break;
		if (i < m->n_globals)
			continue;
		log_info("the first module global that moved was found by record %llu (%s): 0x%llx (%llu bytes) is "
			 "not in the snapshot; one of its size there is at 0x%llx", (unsigned long long)rec->seq,
			 worker_proc(rec->proc) ? worker_proc(rec->proc)->name : "?", (unsigned long long)g[*seen].va,
			 (unsigned long long)g[*seen].size,
			 (unsigned long long)same_size_in(m, g[*seen].size));
		*told = 1;
	}
}

/* Module globals must sit where the client's pointers say. Each that
 * moved is logged (the first few), with how far a global of its size
 * lies, since the driver's own placement shifting shows there; the error
 * names the first and counts them. */
static int check_globals(struct worker *w, const Cicada__Manifest *m, char *err)
{
	unsigned n, j, moved = 0;
	const struct replay_global *g = replay_globals(w, &n);
	const Cicada__Global *first = NULL;

	for (size_t i = 0; i < m->n_globals; i++) {
		const Cicada__Global *x = m->globals[i];
		uint64_t other;
		for (j = 0; j < n && (g[j].va != x->va || g[j].size != x->size); j++)
			;
		if (j < n)
			continue;
		other = same_size(g, n, x->size);
		if (moved++ < 8)
			log_info("module global at 0x%llx (%llu bytes) did not come back there; one of its size is at "
				 "0x%llx (%+lld bytes)", (unsigned long long)x->va, (unsigned long long)x->size,
				 (unsigned long long)other, other ? (long long)(other - x->va) : 0ll);
		first = first ? first : x;
	}
	if (!moved)
		return 0;
	wire_fail(err, "module global at 0x%llx (%llu bytes) did not come back at its address (%u of %zu moved; "
		 "the log says where)", (unsigned long long)first->va, (unsigned long long)first->size, moved,
		 m->n_globals);
	return -1;
}

static int restore_from(struct worker *w, struct snap_reader *r, char *err)
{
	const Cicada__Manifest *m = snap_reader_manifest(r);
	struct snap_memory_ops ops;
	size_t mapped = 0, taken = 1;
	unsigned seen = 0;
	int told = 0;
	CUcontext ctx;
	int preloaded;
	uint64_t t0 = wire_now_ns(), t1, t2, t3;

	preloaded = preload_attach(w);       /* chunks written before the freeze, if any */
	if (check_gpus(w, m, err) || (!preloaded && check_room(w, m, err)) || worker_images_load(w, r, m, err) ||
	    reserve_arena(w, m, err))
		return -1;
	t1 = wire_now_ns();
	/* Calls and mappings in their original interleaving: where the driver
	 * places module variables depends on what was mapped before. */
	for (size_t i = 0; i < m->n_records; i++) {
		const Cicada__Record *rec = m->records[i];
		if (take_gpus(w, m, rec->has_gpus_before ? rec->gpus_before : m->n_gpu_order, &taken, err) ||
		    map_chunks(w, m, rec->has_chunks_before ? rec->chunks_before : m->n_chunks, &mapped, err) ||
		    vmm_restore_upto(w, m, rec->seq, err) || objects_restore_upto(w, m, rec->seq, err) ||
		    replay_one(w, m, rec, err))
			return -1;
		first_moved(w, m, rec, &seen, &told);
	}
	if (take_gpus(w, m, m->n_gpu_order, &taken, err) || map_chunks(w, m, m->n_chunks, &mapped, err) ||
	    restore_allocations(w, m, err))
		return -1;
	if (check_globals(w, m, err) || vmm_restore(w, m, err))
		return -1;
	t2 = wire_now_ns();
	worker_memory_ops(w, &ops);
	if (preloaded)
		ops.have = preload_in_place;
	if (snap_read_memory(r, &ops, err))
		return -1;
	t3 = wire_now_ns();
	if (objects_restore(w, m, err) || ipc_restore(w, m, err))
		return -1;
	log_debug("restore: images and arena %.3f s, replay and mappings %.3f s, memory %.3f s, objects %.3f s",
		  (t1 - t0) / 1e9, (t2 - t1) / 1e9, (t3 - t2) / 1e9, (wire_now_ns() - t3) / 1e9);
	w->current_ctx = m->current_ctx;
	if (m->current_ctx && !handle_get(w, H_CTX, m->current_ctx, (void **)&ctx))
		cuCtxSetCurrent(ctx);
	w->ckpt->regions_lost = 1;
	return 0;
}

/* A snapshot belongs to whoever's session it was: only that user (a unix
 * uid, or for a remote peer the token's holders), root or the server's
 * user may restore it from a directory. One made before owners were kept
 * must lie in the requesting user's own directory. A snapshot sent over
 * the connection is the requester's to give (it holds its bytes). The
 * session keeps its owner. */
/* The restored session's quota (--memory-quota) is its owner's: "uid N"
 * by that user and group, a token's as remote. Charged as it maps. The
 * operator sees it as its owner's (stat.c). */
static void owner_quota(struct worker *w)
{
	const char *policy = getenv("CICADA_MEMORY_QUOTA");
	int remote;
	unsigned uid;
	struct passwd *pw;

	remote = sscanf(w->ckpt->owner, "uid %u", &uid) != 1;
	if (policy && remote)
		quota_set(w, quota_for(policy, NULL, NULL, 1, 0, 0));
	if (policy && !remote) {
		pw = getpwuid((uid_t)uid);
		quota_set(w, quota_for(policy, NULL, NULL, 0, uid, pw ? (unsigned)pw->pw_gid : (unsigned)-1));
	}
	stat_session(w, 0, remote ? (uint32_t)-1 : uid, w->ckpt->owner[0] ? w->ckpt->owner : "remote");
}

static int owner_check(struct worker *w, struct snap_reader *r, char *err)
{
	const Cicada__Manifest *m = snap_reader_manifest(r);
	char who[48];
	uid_t dir_uid;

	if (w->ckpt->req_class == REQ_UNKNOWN)
		return wire_fail(err, "this snapshot belongs to another user");
	if (w->ckpt->req_class == REQ_USER)
		snprintf(who, sizeof(who), "uid %u", (unsigned)w->ckpt->req_uid);
	else
		snprintf(who, sizeof(who), "token");
	if (w->ckpt->req_stream && w->ckpt->req_class != REQ_PRIVILEGED) {
		snprintf(w->ckpt->owner, sizeof(w->ckpt->owner), "%s", who); /* theirs from now on */
		w->ckpt->owner_uid = w->ckpt->req_class == REQ_USER ? w->ckpt->req_uid : (uid_t)-1;
		return 0;
	}
	if (w->ckpt->req_class == REQ_PRIVILEGED || (m->owner && !strcmp(m->owner, who)) ||
	    (!m->owner && w->ckpt->req_class == REQ_USER && !snap_reader_dir_uid(r, &dir_uid) &&
	     dir_uid == w->ckpt->req_uid)) {
		if (m->owner)
			snprintf(w->ckpt->owner, sizeof(w->ckpt->owner), "%s", m->owner);
		if (m->has_owner_uid)
			w->ckpt->owner_uid = m->owner_uid;
		return 0;
	}
	log_warn("refused a restore by %s of a snapshot of %s", who, m->owner ? m->owner : "(no owner)");
	return wire_fail(err, "this snapshot belongs to another user");
}

int worker_restore(struct worker *w, int dirfd, const char *name, char *err)
{
	struct snap_reader *r = snap_reader_open(dirfd, name, err);
	int rc;

	if (!r)
		return -1;
	if (owner_check(w, r, err)) {
		snap_reader_close(r);
		return -1;
	}
	owner_quota(w);
	rc = restore_from(w, r, err);
	snap_reader_close(r);
	preload_end(w);
	if (rc)
		log_error("restore of %s failed: %s", name, err);
	return rc;
}

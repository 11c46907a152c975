/*
 * gpu_only.c: only the GPU state moves; the process stays where it is.
 * The application's control socket pauses its session (every CUDA call
 * waits), the source server writes the snapshot into a staging
 * directory, the target server restores it into a new worker, and the
 * process is told to resume there. To another node, with its token, the
 * device memory first goes over in pre-copy rounds while the program runs
 * (move_precopy; the target takes it as a migration, --accept-migrations),
 * so that only what changed since moves while the session is paused.
 * Until that RESUME is answered the source session is intact: any failure
 * closes the control connection and the application resumes on the
 * source; a target session already made is ended. A RESUME the process
 * could not follow (the target gone, its pinned memory refused there)
 * leaves it on the source too, as it answers. After the move the source
 * session is ended.
 *
 * Fault hooks for the tests (CICADA_MIGRATE_FAULT, see progress.c too):
 * cutfrozen breaks the link to the target once the session is paused,
 * cutrestore once the final part is sent (the target restores it), and
 * hold waits, before the RESUME, until the file CICADA_MIGRATE_HOLD names
 * exists (at most 60 s), having made that name with ".held" added.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "migrate.h"
#include "snapshot.h"

/* A fault hook: the test does something (kills the target's worker, or
 * gpu-migrate) while the session is paused and restored on the target. */
static void fault_hold(void)
{
	const char *path = getenv("CICADA_MIGRATE_HOLD");
	char held[1100];
	struct stat sb;

	if (!migrate_fault_is("hold") || !path)
		return;
	snprintf(held, sizeof(held), "%s.held", path);
	close(open(held, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	for (int i = 0; i < 600 && stat(path, &sb); i++)
		usleep(100000);
}

/* Tells the paused process to resume on the target; 0 once it has, -1 if
 * it answered that it could not (it went on on the source), -2 without an
 * answer (where it runs is not known: neither session may be ended). */
static int resume_on(struct gpu_session *src, const struct gpu_session *dst, char *err)
{
	char line[WIRE_CTL_LINE_MAX];
	struct wire_ctl_where to = { 0 };

	snprintf(to.ticket, sizeof(to.ticket), "%s", dst->ticket);
	snprintf(to.server, sizeof(to.server), "%s", dst->server);
	snprintf(to.token_hex, sizeof(to.token_hex), "%s", dst->token_hex);
	if (wire_ctl_send_resume(src->ctl, &to)) {
		wire_fail(err, "process %d did not take the resume", src->pid);
		return -1;
	}
	if (wire_read_line(src->ctl, line, sizeof(line))) {
		wire_fail(err, "process %d did not answer the resume: it runs on either server, and both "
			  "sessions are kept (the one it left ends once unclaimed)", src->pid);
		return -2;
	}
	if (strcmp(line, WIRE_CTL_RESUMED)) {
		wire_fail(err, "process %d could not reattach on %.150s (%.150s)", src->pid, dst->server,
			  wire_ctl_reason(line));
		return -1;
	}
	return 0;
}

/* The target's side of a paused source session: no ticket yet, the
 * target's address (local: the source's) and token. */
static void target_session(const struct migrate_opts *o, const struct gpu_session *src, struct gpu_session *dst)
{
	*dst = *src;
	dst->ctl = -1;
	dst->ticket[0] = 0;
	snprintf(dst->server, sizeof(dst->server), "%s", o->target[0] ? o->target : src->server);
	snprintf(dst->token_hex, sizeof(dst->token_hex), "%s", o->token_hex[0] ? o->token_hex : src->token_hex);
}

/* Ends a session made on the target for a move that failed. */
static void release_target(struct gpu_session *dst)
{
	char why[WIRE_ERRLEN];

	if (server_request(dst, OP_RELEASE, -1, NULL, why))
		fprintf(stderr, "gpu-migrate: ending the target session: %s\n", why);
}

/* Whether the snapshot names CUDA IPC exports or imports: the process
 * shares device memory with others, which a move of its GPU state alone
 * would part (the whole job moves together: whole.c). err says so. */
static int shares_memory(const struct migrate_opts *o, int dirfd, const char *name, char *err)
{
	char why[WIRE_ERRLEN];
	Cicada__Manifest *m = snap_manifest_load(dirfd, name, why);     /* (the process is frozen) */
	int shares = m && (m->n_ipc_exports || m->n_ipc_imports);

	for (size_t i = 0; m && !shares && i < m->n_vmm_allocations; i++)
		shares = m->vmm_allocations[i]->has_imported;
	snap_manifest_free(m);
	if (shares)
		wire_fail(err, "process %d shares device memory with other processes (CUDA IPC): its GPU "
			 "state cannot move without them; move the whole job (without --gpu-only)", o->pid);
	return shares;
}

/* With pre-copy, to another node's server (--accept-migrations): rounds
 * of the device memory go to a worker there that loads them while the
 * program runs; then the session pauses, the source writes only what
 * changed since the last round, and the target restores that into the
 * loaded worker, whose session's ticket comes back for the RESUME. */
static int move_precopy(const struct migrate_opts *o, struct gpu_session *src, struct gpu_session *dst,
			struct migrate_result *r, double *frozen, char *err)
{
	char key[CICADA_TICKET_LEN + 1] = "", last[32] = "", name[64];
	struct staging st = { .fd = -1 };
	int fds[SNAP_STREAMS_MAX], rc = -1, fd;
	hello_res res;

	for (int k = 0; k < SNAP_STREAMS_MAX; k++)
		fds[k] = -1;
	if ((fd = target_open(o, NULL, key, err)) < 0)
		return -1;
	fds[0] = fd;
	snapshot_name(o->pid, name, sizeof(name));
	if (streams_open(o, key, fds, r, err) || staging_make(o->work_dir, &st, err) || guard_start(0, &st, err) ||
	    precopy(o, &st, fds, r, last, err))
		goto out;
	*frozen = migrate_now();
	if ((rc = session_pause(src, err)) <= 0) {
		if (rc == 0)
			wire_fail(err, "process %d has no GPU session to move (is it running through Cicada?)",
				 o->pid);
		rc = -1;
		goto out;
	}
	rc = -1;
	target_session(o, src, dst);
	if (last[0])
		snprintf(src->parent, sizeof(src->parent), "../%s/%s", last, name);
	if (server_request(src, OP_CHECKPOINT, st.fd, NULL, err) || shares_memory(o, st.fd, name, err))
		goto out;
	r->dump_s = migrate_now() - *frozen;
	migrate_fault_cut("cutfrozen", fds);
	if (send_part(&st, fds, NULL, "precopy-", 'f', NULL, r, &r->final_bytes, err))
		goto out;
	r->send_s = migrate_now() - *frozen - r->dump_s;
	migrate_fault_cut("cutrestore", fds);
	if (target_answer(fd, o->timeout_s + 30, o->target, &res, err))
		goto out;
	snprintf(dst->ticket, sizeof(dst->ticket), "%s", res.message ? res.message : "");
	xdr_free((xdrproc_t)xdr_hello_res, (char *)&res);
	rc = 0;
out:
	streams_close(fds, SNAP_STREAMS_MAX);
	staging_remove(&st);
	guard_disarm();
	return rc;
}

int migrate_gpu_only(const struct migrate_opts *o, struct migrate_result *r, char *err)
{
	struct gpu_session src = { .pid = o->pid, .ctl = -1 }, dst;
	struct staging st = { .fd = -1 };
	char name[64], why[WIRE_ERRLEN];
	uint64_t device, stored;
	double t0 = migrate_now(), frozen = t0;
	int rc = -1, made = 0;

	r->mode = "gpu-only";
	r->pid = o->pid;
	if (o->precopy && o->target[0] && o->token_hex[0] && o->migration_token_hex[0]) {
		snprintf(r->target, sizeof(r->target), "%s", o->target);
		if (move_precopy(o, &src, &dst, r, &frozen, err))
			goto out;
		made = 1;
	} else {
		rc = session_pause(&src, err);
		if (rc == 0)
			wire_fail(err, "process %d has no GPU session to move (is it running through Cicada?)",
				 o->pid);
		if (rc <= 0)
			return -1;
		rc = -1;
		target_session(o, &src, &dst);
		snprintf(r->target, sizeof(r->target), "%s", dst.server);
		snapshot_name(o->pid, name, sizeof(name));
		if (staging_make(o->work_dir, &st, err) || guard_start(0, &st, err) ||
		    server_request(&src, OP_CHECKPOINT, st.fd, NULL, err) ||
		    shares_memory(o, st.fd, name, err))
			goto out;
		snapshot_sizes(st.fd, name, &device, &stored);
		r->wire_bytes = dir_bytes(st.fd, 0);
		r->state_bytes = r->wire_bytes - stored + device;
		if (server_request(&dst, OP_RESTORE, st.fd, dst.ticket, err))
			goto out;
		made = 1;
	}
	fault_hold();
	if ((rc = resume_on(&src, &dst, err))) {
		if (rc == -2)
			made = 0, r->in_doubt = 1;
		rc = -1;
		goto out;
	}
	made = 0;
	r->downtime_s = migrate_now() - frozen;
	if (r->dump_s > 0)
		r->restore_s = r->downtime_s - r->dump_s - r->send_s;
	if (server_request(&src, OP_RELEASE, -1, NULL, why))
		fprintf(stderr, "gpu-migrate: ending the source session: %s\n", why);
	rc = 0;
out:
	if (made)
		release_target(&dst);
	if (src.ctl >= 0)
		close(src.ctl);              /* if still paused, it resumes on the source */
	guard_disarm();
	staging_remove(&st);
	r->total_s = migrate_now() - t0;
	return rc;
}

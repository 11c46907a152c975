/*
 * whole.c: the whole application moves. The target's gpu-server is asked
 * first (hello OP_MIGRATE: token, --accept-migrations) and says it is
 * ready, with a key that further connections join with: the images go
 * over --streams connections at once. While the process runs, pre-copy
 * rounds send its device memory (the worker hashes it on the GPU):
 * its worker writes it into the staging directory (precopy-K/), each
 * round keeping only the pieces changed since the one before, and each
 * round goes to the target at once (its data freed here once sent);
 * rounds stop when one stores little or no less than the one before.
 * Only then is the process frozen: criu dump --leave-stopped with
 * Cicada's plugin writes its images and its GPU snapshot into a staging
 * directory (the GPU snapshot incremental on the last round: only what
 * changed since), and keeps the source GPU session paused. Its memory
 * pages go meanwhile straight to a criu page-server on the target, over
 * a connection of their own (--page-server --ps-socket): they are
 * neither written here nor sent after the dump (--no-page-server: they
 * travel with the images). The GPU
 * snapshot goes to the target as soon as it is written, while criu still
 * dumps, and the rest of the images after; the target's server restores
 * the process (GPU state into the worker that preloaded the rounds and
 * that snapshot). On success the frozen source is killed and its
 * session ended; on any failure it gets SIGCONT and goes on where it
 * was, its GPU session resuming on the source (a guard process does
 * that if gpu-migrate itself dies).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "migrate.h"
#include "snapshot.h"

/* Reads one hello_res within timeout_s; 0 if it says yes. */
int target_answer(int fd, int timeout_s, const char *target, hello_res *r, char *err)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct wire_stream st;
	struct wire_buf buf = { 0 };
	int rc = -1;

	memset(r, 0, sizeof(*r));
	wire_stream_init(&st, fd);
	if (poll(&p, 1, timeout_s * 1000) != 1 || wire_recv_record(&st, &buf, 65536) ||
	    wire_decode_reply(&buf, 1, (xdrproc_t)xdr_hello_res, r, err))
		wire_fail(err, "the target %s did not answer", target);
	else if (r->err)
		wire_fail(err, "the target %s: %s", target, r->message);
	else
		rc = 0;
	wire_buf_free(&buf);
	return rc;
}

/* The token a migration proves: the target's migration token, never the
 * tenants' (a unix target asks for none). */
const char *migrate_token(const struct migrate_opts *o)
{
	return o->migration_token_hex[0] ? o->migration_token_hex : o->token_hex;
}

/* Connects to the target and asks it to take a migration (join NULL),
 * or joins one as a further stream of its images (join: the key the
 * target's "ready" gave, into key on a new migration). */
static int target_open_as(const struct migrate_opts *o, const char *join, const char *kind, char *key, char *err)
{
	char token[CICADA_TOKEN_MAX], host[64] = "", name[] = "", devices[80] = "";
	uint8_t nonce[WIRE_NONCE_LEN], proof[WIRE_PROOF_LEN];
	hello_args h = { .proto_version = CICADA_PROTO_VERSION, .pid = (uint64_t)o->pid, .host = host,
			 .op = OP_MIGRATE, .ticket = join ? (char *)join : name,
			 .snapshot = o->gpu_only && !join ? "gpu-only" : kind ? (char *)kind : name, .stream = 1,
			 .parent = name, .devices = devices };
	struct wire_addr addr;
	struct wire_stream st;
	struct wire_buf buf = { 0 };
	hello_res r;
	int fd, bad;

	if (o->gpus[0] && !join)
		snprintf(devices, sizeof(devices), ">%s", o->gpus);     /* the target's GPUs for it */
	gethostname(host, sizeof(host) - 1);
	if (wire_parse_addr(o->target, &addr, err) || (fd = wire_dial(&addr, err)) < 0)
		return -1;
	if (wire_recv_challenge(fd, nonce, 30000, err)) {
		close(fd);
		return -1;
	}
	h.token.token_val = (char *)proof;
	h.token.token_len = (unsigned)wire_token_proof(token, token_from_hex(migrate_token(o), token, sizeof(token)),
						       nonce, proof);
	wire_stream_init(&st, fd);
	bad = wire_encode_call(&buf, 1, P_hello, (xdrproc_t)xdr_hello_args, &h) || wire_send_record(&st, &buf);
	wire_buf_free(&buf);
	if (bad) {
		wire_fail(err, "cannot reach the target %s", o->target);
	} else if (!(bad = target_answer(fd, 30, o->target, &r, err))) {
		if (key)
			snprintf(key, CICADA_TICKET_LEN + 1, "%s", r.ticket ? r.ticket : "");
		xdr_free((xdrproc_t)xdr_hello_res, (char *)&r);
		return fd;
	}
	xdr_free((xdrproc_t)xdr_hello_res, (char *)&r);
	close(fd);
	return -1;
}

int target_open(const struct migrate_opts *o, const char *join, char *key, char *err)
{
	return target_open_as(o, join, NULL, key, err);
}

/* The connection on which criu dump sends the process's pages to the
 * target's criu page-server, or -1 where there is none (--no-page-server,
 * a target that takes none): the pages then go with the images. To a TLS
 * target it is the plain end of wire/tls.c's relay, as every stream is. */
static int pages_open(const struct migrate_opts *o, const char *key)
{
	char err[WIRE_ERRLEN];
	int fd;

	if (!o->page_server || !key[0])
		return -1;
	if ((fd = target_open_as(o, key, "pages", NULL, err)) < 0)
		fprintf(stderr, "gpu-migrate: the pages go with the images: %s\n", err);
	return fd;
}

/* The bytes the page server's connection carried (TCP; 0 elsewhere). */
static uint64_t pages_sent(int fd)
{
	struct tcp_info ti;
	socklen_t n = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	return fd >= 0 && !getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &n) ? ti.tcpi_bytes_acked : 0;
}

/* The further streams of the images (a target that gives no key takes
 * one); their count goes first on the main connection. fds[0] is it. */
int streams_open(const struct migrate_opts *o, const char *key, int *fds, struct migrate_result *r,
			char *err)
{
	uint32_t n = 1;

	for (int k = 1; key[0] && k < o->streams; k++, n++)
		if ((fds[k] = target_open(o, key, NULL, err)) < 0)
			return -1;
	r->streams = (int)n;
	if (send(fds[0], &n, 4, MSG_NOSIGNAL) != 4)
		return wire_fail(err, "the link to the target broke");
	return 0;
}

void streams_close(int *fds, int n)
{
	for (int k = 0; k < n; k++)
		if (fds[k] >= 0)
			close(fds[k]);
}

/* The plugin's GPU snapshot, once it is in place (renamed there whole),
 * goes to the target while criu still dumps the rest ('g'): the target
 * loads it meanwhile. 1 once sent, 0 if not there yet, -1 with err. */
static int send_gpu_early(const struct staging *s, const int *fds, struct migrate_result *r, char *err)
{
	char name[64];
	uint64_t part = 0;
	struct stat st;

	snapshot_name(r->pid, name, sizeof(name));
	if (fstatat(s->fd, name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISDIR(st.st_mode))
		return 0;
	if (send_part(s, fds, name, NULL, 'g', NULL, r, &part, err))
		return -1;
	r->final_bytes += part;
	return 1;
}

/* A dump past its time: where it sends to a page server (a stalled
 * target), its link is cut first, so that criu fails its writes and takes
 * its parasite out of the process as it ends; it is killed only after 10
 * s more. */
static void stop_dump(pid_t child, int pages, int *status)
{
	if (pages >= 0) {
		shutdown(pages, SHUT_RDWR);
		for (int i = 0; i < 500; i++) {
			if (waitpid(child, status, WNOHANG) == child)
				return;
			usleep(20000);
		}
	}
	kill(child, SIGKILL);
	waitpid(child, status, 0);
}

/* criu dump of the process into the staging directory, left stopped,
 * its pages to the page server on pages if that is not -1; its GPU
 * snapshot is sent as soon as it is written. *gpu_sent says whether it
 * was. */
static int dump(const struct migrate_opts *o, const struct staging *s, const int *fds, int pages,
		struct migrate_result *r, int *gpu_sent, char *err)
{
	char pid[16], last[512] = "", kept[1100], ps[16] = "";
	pid_t child;
	int status = 0, waited = 0, sent = 0;
	double t0 = migrate_now();

	snprintf(pid, sizeof(pid), "%d", o->pid);
	if ((child = fork()) == 0) {
		int null = open("/dev/null", O_RDWR);
		if (null >= 0)
			dup2(null, 0), dup2(null, 1), dup2(null, 2);
		if (pages >= 0 && snprintf(ps, sizeof(ps), "%d", dup(pages)) > 0 && ps[0] == '-')
			_exit(126);                  /* (dup: not close-on-exec) */
		if (ps[0])
			execl(o->criu, o->criu, "dump", "-t", pid, "-D", s->path, "-L", o->plugins, "--leave-stopped",
			      "-o", "dump.log", "-v4", "--page-server", "--ps-socket", ps, (char *)NULL);
		else
			execl(o->criu, o->criu, "dump", "-t", pid, "-D", s->path, "-L", o->plugins, "--leave-stopped",
			      "-o", "dump.log", "-v4", (char *)NULL);
		_exit(127);
	}
	/* (a failed send lets criu finish: killed, it could leave its
	 * parasite in the process) */
	while (child > 0 && (waited = (int)waitpid(child, &status, WNOHANG)) == 0 &&
	       migrate_now() - t0 < o->timeout_s) {
		if (!sent)
			sent = send_gpu_early(s, fds, r, err);
		usleep(sent < 0 ? 20000 : 2000);
	}
	if (waited < 0)
		status = -1;
	if (child > 0 && waited == 0) {
		stop_dump(child, pages, &status);
		wire_fail(err, "criu dump ran past %d s and was stopped", o->timeout_s);
		return -1;
	}
	if (child > 0 && WIFEXITED(status) && !WEXITSTATUS(status)) {
		if (!sent)
			sent = send_gpu_early(s, fds, r, err);
		*gpu_sent = sent > 0;
		return sent < 0 ? -1 : 0;
	}
	if (sent < 0)
		return -1;                   /* (err says why: the link) */
	if (kill(o->pid, 0) && errno == ESRCH) {
		wire_fail(err, "process %d ended before it could be frozen; nothing was moved", o->pid);
		return -1;
	}
	snap_criu_reason(s->fd, "dump.log", last, sizeof(last));
	if (child < 0 || (WIFEXITED(status) && WEXITSTATUS(status) == 127)) {
		wire_fail(err, "cannot run %.400s", o->criu);
		return -1;
	}
	/* criu's whole log outlives the staging directory */
	snprintf(kept, sizeof(kept), "%s/gpu-migrate-%d-dump.log", o->work_dir, o->pid);
	if (renameat(s->fd, "dump.log", AT_FDCWD, kept))
		kept[0] = 0;
	wire_fail(err, "criu dump of process %d failed%s%.200s%s%.150s%s", o->pid, last[0] ? ": " : "",
		 last, kept[0] ? " (criu's log: " : "", kept, kept[0] ? ")" : "");
	return -1;
}

#define ROUNDS_MAX 6
#define ROUND_SMALL (16ull << 20)            /* a round this small ends pre-copy */

/* Sends a part of the staging directory (only, or all but skip's
 * prefixes) and its mark; counts its bytes, and what they hold
 * uncompressed (the GPU snapshot in it is name, under sub if not NULL;
 * sub "-": the part holds none). */
int send_part(const struct staging *st, const int *fds, const char *only, const char *skip, char mark,
		     const char *sub, struct migrate_result *r, uint64_t *part, char *err)
{
	struct snap_progress pr = { progress_update, NULL, 0 };
	char name[64];
	uint64_t n = 0, device, stored;
	int rc, fd = fds[0], sfd = sub ? openat(st->fd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : dup(st->fd);

	progress_start(0);
	rc = snap_send_trees(st->fd, fds, (unsigned)r->streams, only, skip, &pr, &n, err);
	progress_end();
	snapshot_name(r->pid, name, sizeof(name));
	snapshot_sizes(sfd, name, &device, &stored);
	if (sfd >= 0)
		close(sfd);
	r->wire_bytes += n;
	r->state_bytes += pr.logical - stored + device;
	if (part)
		*part = n;
	if (!rc && send(fd, &mark, 1, MSG_NOSIGNAL) != 1) {
		wire_fail(err, "the link to the target broke");
		rc = -1;
	}
	return rc;
}

/* A sent round's data is not read again (the next round's parent is its
 * manifest, and unchanged pieces are found by their device hashes): its
 * pages are freed at once rather than written back to disk. */
static void drop_round(const struct staging *st, const char *round, const char *name)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", round, name);
	if ((fd = openat(st->fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) >= 0) {
		snap_drop_data(fd);
		close(fd);
	}
}

/* Pre-copy rounds while the process runs; *last gets the last round's
 * directory ("" if none: a worker on another node, say, cannot). -1 only
 * if the link failed. */
int precopy(const struct migrate_opts *o, const struct staging *st, const int *fds, struct migrate_result *r,
		   char *last, char *err)
{
	char round[32], name[64], parent[128], why[WIRE_ERRLEN];
	uint64_t fig[3], first = 0, before = UINT64_MAX;
	int rc, rfd;

	last[0] = 0;
	if (!o->precopy)
		return 0;
	snapshot_name(o->pid, name, sizeof(name));
	for (int k = 1; k <= ROUNDS_MAX; k++) {
		snprintf(round, sizeof(round), "precopy-%d", k);
		snprintf(parent, sizeof(parent), k > 1 ? "../../precopy-%d/%s" : "", k - 1, name);
		/* ours (root's): the worker gets its descriptor, not its path */
		if (mkdirat(st->fd, round, 0700) ||
		    (rfd = openat(st->fd, round, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0)
			return 0;
		rc = session_precopy(o->pid, rfd, name, parent, fig, why);
		close(rfd);
		if (rc <= 0) {
			if (rc < 0 || k == 1)
				fprintf(stderr, "gpu-migrate: no pre-copy%s: %s\n", k > 1 ? " round" : "", why);
			return 0;
		}
		if (send_part(st, fds, round, NULL, 'p', round, r, NULL, err))
			return -1;
		drop_round(st, round, name);
		r->rounds = k;
		snprintf(last, 32, "%s", round);
		if (k == 1)
			first = fig[2];
		if (fig[2] <= ROUND_SMALL || fig[2] <= first / 20 || fig[2] >= before)
			break;
		before = fig[2];
	}
	return 0;
}

/* Ends the source's paused GPU session (its ticket is in the images). */
static void release_source(const struct staging *s, int pid)
{
	struct gpu_session g;
	char name[64], err[WIRE_ERRLEN];

	snprintf(name, sizeof(name), "cicada-session-%d.txt", pid);
	if (session_file_read(s->fd, name, &g, err))
		return;                      /* no GPU session was dumped */
	session_token_load(&g, NULL);       /* the token file the process used */
	if (server_request(&g, OP_RELEASE, -1, NULL, err))
		fprintf(stderr, "gpu-migrate: ending the source GPU session: %s\n", err);
}

/* Tells the target to run the restored copy; 0 once it says it does. */
static int go(int fd, const struct migrate_opts *o)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	const char *fault = getenv("CICADA_MIGRATE_FAULT");
	char c = 'c';

	if (fault && !strcmp(fault, "nogo"))
		_exit(9);                    /* tests: gpu-migrate dies before the go */
	if (send(fd, &c, 1, MSG_NOSIGNAL) != 1 || poll(&p, 1, 30000) != 1 || read(fd, &c, 1) != 1)
		return -1;
	return c == 'k' ? 0 : -1;
}

int migrate_whole(const struct migrate_opts *o, struct migrate_result *r, char *err)
{
	struct staging st = { .fd = -1 };
	char last[32], key[CICADA_TICKET_LEN + 1] = "", name[64], skip[96];
	double t0 = migrate_now(), frozen;
	uint64_t part = 0;
	hello_res res;
	int fds[SNAP_STREAMS_MAX], fd, pages = -1, rc = -1, stopped = 0, gpu_sent = 0;

	r->mode = "whole";
	r->pid = o->pid;
	snprintf(r->target, sizeof(r->target), "%s", o->target);
	if (kill(o->pid, 0)) {
		wire_fail(err, "no process %d here: %s", o->pid, strerror(errno));
		return -1;
	}
	if ((fd = target_open(o, NULL, key, err)) < 0)
		return -1;
	for (int k = 0; k < SNAP_STREAMS_MAX; k++)
		fds[k] = -1;
	fds[0] = fd;
	if (streams_open(o, key, fds, r, err) || staging_make(o->work_dir, &st, err) ||
	    precopy(o, &st, fds, r, last, err) || guard_start(o->pid, &st, err))
		goto out;
	if (last[0])
		setenv("CICADA_SNAPSHOT_PARENT", last, 1);      /* the plugin's parent: the last round */
	pages = pages_open(o, key);
	if (pages >= 0 && migrate_fault_is("cutpages"))
		shutdown(pages, SHUT_RDWR);          /* tests: the page server's link breaks */
	frozen = migrate_now();
	rc = dump(o, &st, fds, pages, r, &gpu_sent, err);
	part = pages_sent(pages);                /* (as they are: counted whole in the state too) */
	r->final_bytes += part;
	r->wire_bytes += part;
	r->state_bytes += part;
	if (pages >= 0)
		close(pages);                    /* (criu has said its last to the page server) */
	pages = -1;
	if (rc) {
		rc = -1;
		wire_signal_tree(o->pid, SIGCONT);  /* criu resumes it; a killed criu did not */
		goto out;
	}
	stopped = 1;
	r->dump_s = migrate_now() - frozen;
	snapshot_name(o->pid, name, sizeof(name));
	snprintf(skip, sizeof(skip), "precopy- %s", gpu_sent ? name : "");
	rc = send_part(&st, fds, NULL, skip, 'f', gpu_sent ? "-" : NULL, r, &part, err);
	r->final_bytes += part;
	r->send_s = migrate_now() - frozen - r->dump_s;
	migrate_fault_cut("cutrestore", fds);
	if (rc || target_answer(fd, o->timeout_s + 30, o->target, &res, err)) {
		rc = -1;
		goto out;
	}
	r->new_pid = (int)res.worker_pid;
	/* the target's answer says how long it waited for the page server and criu restore took */
	if (!res.message || sscanf(res.message, "restored as pid %*d (pages waited %lf s, criu restore %lf s)",
				   &r->target_pages_s, &r->target_criu_s) != 2 ||
	    !isfinite(r->target_pages_s) || !isfinite(r->target_criu_s))
		r->target_pages_s = r->target_criu_s = 0;
	xdr_free((xdrproc_t)xdr_hello_res, (char *)&res);
	/* The copy there waits, stopped, for the go: it runs only once the
	 * source is sure to end (a broken link before the go ends it there). */
	if (go(fd, o)) {
		guard_disarm();
		stopped = 0;                 /* in doubt: neither runs until someone looks */
		r->in_doubt = 1;
		wire_fail(err, "the target did not confirm the go: process %d is left stopped here; "
			 "if it runs on %s, kill -9 it, else kill -CONT it", o->pid, o->target);
		rc = -1;
		goto out;
	}
	wire_signal_tree(o->pid, SIGKILL);
	stopped = 0;
	r->downtime_s = migrate_now() - frozen;
	r->restore_s = r->downtime_s - r->dump_s - r->send_s;
	release_source(&st, o->pid);
	rc = 0;
out:
	if (stopped)
		wire_signal_tree(o->pid, SIGCONT);  /* it goes on where it was */
	guard_disarm();
	if (pages >= 0)
		close(pages);
	streams_close(fds, SNAP_STREAMS_MAX);
	staging_remove(&st);
	r->total_s = migrate_now() - t0;
	return rc;
}

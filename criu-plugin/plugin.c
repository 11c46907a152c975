/*
 * plugin.c: Cicada's CRIU plugin (cicada.so, loaded with -L). It moves the
 * GPU state of Cicada clients through a checkpoint:
 *
 *   dump     PAUSE_DEVICES       refuse what criu cannot dump (preflight.c),
 *                                else pause the process's session (its
 *                                worker finishes the device's work and
 *                                detaches)
 *            CHECKPOINT_DEVICES  the worker writes the snapshot into
 *                                CRIU's image directory
 *            DUMP_UNIX_SK        the control connection is ours to redo
 *            exit                resume (failure or --leave-running), or
 *                                end the paused session (the process dies;
 *                                over RPC, watch.c: once it does)
 *   restore  init                every snapshot is restored into a new
 *                                worker before any process is created
 *            RESTORE_UNIX_SK     a new control connection, which already
 *                                says where the session is now
 *            exit                on failure, end the restored sessions
 *
 * Restores go to CICADA_RESTORE_SERVER if set (another node, say), else to
 * the server the process used; CICADA_TOKEN_FILE gives its token (else
 * the token file the process used, which the images name).
 */
#include <criu/criu-plugin.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "cicada-criu.h"

#define MAX_SESSIONS 256

static struct {
	int off;                             /* pre-dump: nothing to do */
	int leave_running;
	int over_rpc;                        /* swrk: --leave-running unknown */
	struct gpu_session s[MAX_SESSIONS];
	int n;
} plugin;

static struct gpu_session *find(int pid)
{
	for (int i = 0; i < plugin.n; i++)
		if (plugin.s[i].pid == pid)
			return &plugin.s[i];
	return NULL;
}

/* A restored process by the pid it has in its own pid namespace, which is
 * what it says it is; another namespace than at its dump gives it other
 * pids as we see them. */
static struct gpu_session *find_vpid(int vpid)
{
	for (int i = 0; i < plugin.n; i++)
		if (plugin.s[i].vpid == vpid)
			return &plugin.s[i];
	return NULL;
}

/* The session of a restored process that criu names by pid. */
static struct gpu_session *find_restored(int pid)
{
	int ns = session_ns_pid(pid);

	return ns != pid ? find_vpid(ns) : find(pid);
}

static void fail_line(const char *err)
{
	plugin_error("%s", err);
	fprintf(stderr, "cicada: %s\n", err);
}

/* The value of criu's option name (--name VALUE or --name=VALUE) in out;
 * 0 if given. */
static int criu_option(const char *name, char *out, size_t len)
{
	char buf[8192];
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	size_t nl = strlen(name);

	if (fd >= 0)
		close(fd);
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buf + i) + 1) {
		const char *a = buf + i;
		if (!strncmp(a, name, nl) && a[nl] == '=')
			return snprintf(out, len, "%s", a + nl + 1), 0;
		if (!strcmp(a, name) && i + (ssize_t)nl + 1 < n)
			return snprintf(out, len, "%s", a + nl + 1), 0;
	}
	return -1;
}

/* An absolute previous image directory beside the new one (dirfd), as
 * the relative path a parent must be (snapshot-format: never absolute):
 * 0, or -1 where it lies elsewhere. */
static int prev_relative(int dirfd, char *prev, size_t len)
{
	char link[64], here[900], *slash, *base;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
	if ((n = readlink(link, here, sizeof(here) - 1)) <= 0)
		return -1;
	here[n] = 0;
	if (!(slash = strrchr(here, '/')) || !(base = strrchr(prev, '/')) || slash - here != base - prev ||
	    strncmp(here, prev, (size_t)(slash - here)) || 3 + strlen(base + 1) + 1 > len)
		return -1;
	memmove(prev + 3, base + 1, strlen(base + 1) + 1);
	memcpy(prev, "../", 3);
	return 0;
}

/* An incremental GPU snapshot: its parent is the same process's snapshot
 * in the previous image directory, CICADA_SNAPSHOT_PARENT or else criu's
 * --prev-images-dir (relative to the new image directory, as criu's is,
 * or absolute and beside it), when there is one; else it is written
 * whole. */
static void snapshot_parent(int dirfd, struct gpu_session *s)
{
	char prev[900], path[CICADA_PARENT_MAX], name[64], probe[CICADA_PARENT_MAX + 16];
	const char *env = getenv("CICADA_SNAPSHOT_PARENT");

	s->parent[0] = 0;
	if (env && env[0])
		snprintf(prev, sizeof(prev), "%s", env);
	else if (criu_option("--prev-images-dir", prev, sizeof(prev)))
		return;
	if (prev[0] == '/' && prev_relative(dirfd, prev, sizeof(prev))) {
		plugin_info("the GPU snapshot of process %d is written whole: %s is not beside this image directory",
			    s->pid, prev);
		return;
	}
	snapshot_name(s->pid, name, sizeof(name));
	snprintf(path, sizeof(path), "../%s/%s", prev, name);
	snprintf(probe, sizeof(probe), "%s/%s/manifest", prev, name);
	if (faccessat(dirfd, probe, R_OK, 0)) {
		plugin_info("no GPU snapshot of process %d in %s: this one is written whole", s->pid, prev);
		return;
	}
	snprintf(s->parent, sizeof(s->parent), "%s", path);
}

/* --leave-running is criu's option; its state is internal, its command
 * line is not. --leave-stopped (gpu-migrate) keeps the session too: the
 * process either resumes where it was or is killed once it runs elsewhere
 * (gpu-migrate then ends the paused session). */
static int leaving_running(void)
{
	char buf[8192];
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buf + i) + 1) {
		const char *a = buf + i;
		if (!strcmp(a, "--leave-running") || !strcmp(a, "--leave-stopped") || (a[0] == '-' && a[1] != '-' && strchr(a, 'R') &&
						      strspn(a + 1, "vR") == strlen(a + 1)))
			return 1;
	}
	return 0;
}

/* The token for a restore: CICADA_TOKEN_FILE in criu's environment, else
 * the file the process read it from (the images name the file, never
 * the token). */
static void token_override(struct gpu_session *s)
{
	session_token_load(s, getenv("CICADA_TOKEN_FILE"));
}

static void release_all(void)
{
	char err[WIRE_ERRLEN];

	for (int i = 0; i < plugin.n; i++)
		if (plugin.s[i].ticket[0] && server_request(&plugin.s[i], OP_RELEASE, -1, NULL, err))
			plugin_error("ending session of process %d: %s", plugin.s[i].pid, err);
}

/* For a gpu-server restoring a migrating process (CICADA_NOTE_RESTORED):
 * the new session's ticket, in its own private directory, so that it can
 * end the session should the process not be let run. */
static void note_restored(int dirfd, const struct gpu_session *s)
{
	char name[64], line[64];
	int fd, n;

	if (!getenv("CICADA_NOTE_RESTORED"))
		return;
	snprintf(name, sizeof(name), "cicada-restored-%d.txt", s->pid);
	n = snprintf(line, sizeof(line), "%s\n", s->ticket);
	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || write(fd, line, (size_t)n) != n)
		plugin_error("cannot note the restored session of process %d", s->pid);
	if (fd >= 0)
		close(fd);
}

/* A migration's target preloaded this process's device memory into a
 * worker: CICADA_RESTORE_TICKET=PID:TICKET names it, and the restore
 * goes there; else the ticket is empty (a fresh worker). */
static void preloaded_ticket(struct gpu_session *s)
{
	const char *env = getenv("CICADA_RESTORE_TICKET"), *colon = env ? strchr(env, ':') : NULL;

	s->ticket[0] = 0;
	if (colon && atoi(env) == s->pid && strlen(colon + 1) == CICADA_TICKET_LEN)
		snprintf(s->ticket, sizeof(s->ticket), "%s", colon + 1);
}

/* Restores every snapshot in the image directory, or none. */
static int restore_all(void)
{
	int dirfd = criu_get_image_dir(), scan = dup(dirfd);
	DIR *d = scan >= 0 ? fdopendir(scan) : NULL;
	const char *target = getenv("CICADA_RESTORE_SERVER");
	char err[WIRE_ERRLEN];
	struct dirent *e;
	int rc = 0;

	if (!d)
		return -1;
	while (!rc && (e = readdir(d)) && plugin.n < MAX_SESSIONS) {
		struct gpu_session *s = &plugin.s[plugin.n];
		if (session_file_pid(e->d_name) < 0)
			continue;
		if (session_file_read(dirfd, e->d_name, s, err)) {
			rc = -1;
			break;
		}
		if (find_vpid(s->vpid)) {
			wire_fail(err, "two GPU sessions in the images are of pid %d in its namespace (%s): "
				  "images of two dumps in one directory?", s->vpid, e->d_name);
			rc = -1;
			break;
		}
		if (target)
			snprintf(s->server, sizeof(s->server), "%s", target);
		token_override(s);
		plugin_info("restoring the GPU state of process %d on %s", s->pid, s->server);
		preloaded_ticket(s);
		if ((rc = server_request(s, OP_RESTORE, dirfd, s->ticket, err)))
			break;
		note_restored(dirfd, s);
		plugin.n++;
	}
	closedir(d);
	if (rc) {
		fail_line(err);
		release_all();
	}
	return rc;
}

static int cicada_init(int stage)
{
	log_init("cicada-criu");
	if (stage == CR_PLUGIN_STAGE__PRE_DUMP) {
		plugin.off = 1;
		return 0;
	}
	if (stage == CR_PLUGIN_STAGE__DUMP) {
		plugin.leave_running = leaving_running();
		plugin.over_rpc = criu_over_rpc();
		return 0;
	}
	return restore_all();
}

static void cicada_exit(int stage, int ret)
{
	char err[WIRE_ERRLEN];
	int watched = stage == CR_PLUGIN_STAGE__DUMP && ret == 0 && !plugin.leave_running && plugin.over_rpc &&
		      plugin.n && !watch_sessions(plugin.s, plugin.n);

	if (watched)
		plugin_info("the sessions of the dumped processes end if they do (criu over RPC: --leave-running unseen)");
	for (int i = 0; i < plugin.n; i++) {
		struct gpu_session *s = &plugin.s[i];
		if (stage == CR_PLUGIN_STAGE__DUMP && ret == 0 && !plugin.leave_running && !watched &&
		    server_request(s, OP_RELEASE, -1, NULL, err))
			plugin_error("ending session of process %d: %s", s->pid, err);
		if (stage == CR_PLUGIN_STAGE__RESTORE && ret != 0 &&
		    server_request(s, OP_RELEASE, -1, NULL, err))
			plugin_error("ending session of process %d: %s", s->pid, err);
		if (s->ctl >= 0)
			close(s->ctl);       /* a paused process resumes where it was */
		s->ctl = -1;
	}
	plugin.n = 0;
}

static int cicada_pause_devices(int pid)
{
	struct gpu_session *s = &plugin.s[plugin.n];
	char err[WIRE_ERRLEN];
	int rc;

	if (plugin.off || find(pid))
		return 0;
	if (task_dumpable(pid, err)) {
		fail_line(err);
		return -1;
	}
	if (plugin.n == MAX_SESSIONS) {
		fail_line("too many GPU processes in one dump");
		return -1;
	}
	memset(s, 0, sizeof(*s));
	s->pid = pid;
	rc = session_pause(s, err);
	if (rc < 0) {
		fail_line(err);
		return -1;
	}
	if (rc > 0) {
		plugin_info("process %d paused (session on %s)", pid, s->server);
		plugin.n++;
	}
	return 0;
}

static int cicada_checkpoint_devices(int pid)
{
	struct gpu_session *s = find(pid);
	int dirfd = criu_get_image_dir();
	char err[WIRE_ERRLEN];

	if (plugin.off || !s)
		return 0;
	snapshot_parent(dirfd, s);
	if (server_request(s, OP_CHECKPOINT, dirfd, NULL, err) || session_file_write(dirfd, s, err)) {
		fail_line(err);
		return -1;
	}
	plugin_info("GPU state of process %d written", pid);
	return 0;
}

/* Only our control connections: their local name is the process's
 * control socket. */
static int cicada_dump_unix_sk(int fd, int id)
{
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);

	if (getsockname(fd, (struct sockaddr *)&sa, &len) || len <= offsetof(struct sockaddr_un, sun_path) + 1 ||
	    sa.sun_path[0] || strncmp(sa.sun_path + 1, WIRE_CTL_PREFIX, strlen(WIRE_CTL_PREFIX)))
		return -ENOTSUP;
	return 0;
}

/* Runs in the process being restored, which criu forked: the plugin's
 * memory is criu's, with every session restore_all brought back. Its
 * control connection is one end of a socket pair whose other end has
 * already said where its session is now (the line waits until the
 * process runs) and is closed. Nothing has to reach criu: a container's
 * own network namespace has no way back to criu's. */
static int cicada_restore_unix_sk(int id)
{
	struct gpu_session *s = find_vpid((int)getpid());
	char err[WIRE_ERRLEN];
	int sv[2], rc;

	if (!s) {
		fail_line("a restored control connection belongs to no GPU session in the images");
		return -ENOTSUP;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return -errno;
	s->ctl = sv[1];
	rc = session_send_resume(s, err);
	close(sv[1]);
	s->ctl = -1;
	if (rc) {
		fail_line(err);
		close(sv[0]);
		return -ECONNREFUSED;
	}
	return sv[0];
}

static int cicada_resume_devices_late(int pid)
{
	struct gpu_session *s = find_restored(pid);

	if (s)
		plugin_info("process %d resumes on %s", pid, s->server);
	return 0;
}

CR_PLUGIN_REGISTER("cicada", cicada_init, cicada_exit)
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__PAUSE_DEVICES, cicada_pause_devices)
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__CHECKPOINT_DEVICES, cicada_checkpoint_devices)
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__DUMP_UNIX_SK, cicada_dump_unix_sk)
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESTORE_UNIX_SK, cicada_restore_unix_sk)
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESUME_DEVICES_LATE, cicada_resume_devices_late)

/*
 * privsep.c: a worker gives up the server's privileges before it serves
 * a tenant. The pool starts every worker as the server's user (root on a
 * GPU node), so that CUDA is up before any client comes; the first
 * request of an unprivileged peer (a session, a restore, a reattach)
 * makes the worker that peer's user for good: a unix peer's uid and
 * groups, a TCP or TLS peer's --user (the service user). Requests of
 * root or the server's user (CRIU's plugin, a migration) leave it as it
 * is, so a restore reads root's image directory; the tenant's own
 * reattach drops it afterwards. A server that is not root cannot drop:
 * its workers stay its user's, and say so.
 *
 * Before the drop, while it still may, the worker makes what it will
 * need as the tenant: a private scratch directory in the run directory
 * (<run_dir>/w-<pid>, for snapshots that travel over a connection; the
 * server removes it when the worker ends) and the tenant's own part of
 * the module cache (<cache_dir>/u<uid>), each held open and reached as
 * /proc/self/fd/N, so that the directories above need not let the
 * tenant through. After it, the worker is
 * non-dumpable and cannot gain privileges again (no_new_privs): the
 * tenant may kill its own worker, not read it.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "front.h"

static struct {
	char service_user[64];               /* --user: TCP and TLS tenants run as it */
} ps;

/* Notes who started the process, before anything may drop (main). */
void privsep_init(void)
{
	peer_set_server(getuid());
}

int privsep_set_user(const char *name, char *err)
{
	if (!name[0] || strlen(name) >= sizeof(ps.service_user))
		return wire_fail(err, "--user: a user name of 1 to %zu characters", sizeof(ps.service_user) - 1);
	snprintf(ps.service_user, sizeof(ps.service_user), "%s", name);
	return 0;
}

/* The user TCP and TLS tenants run as: --user, else "cicada" where that
 * user exists, else "nobody". */
static int service_ids(uid_t *uid, gid_t *gid, char *name, size_t len, char *err)
{
	static const char *const fallback[] = { "cicada", "nobody" };
	struct passwd *pw = NULL;

	if (ps.service_user[0] && !(pw = getpwnam(ps.service_user)))
		return wire_fail(err, "--user %s: no such user", ps.service_user);
	for (size_t i = 0; !pw && i < sizeof(fallback) / sizeof(fallback[0]); i++)
		pw = getpwnam(fallback[i]);
	if (!pw)
		return wire_fail(err, "no user for remote tenants (--user, or a user 'cicada' or 'nobody')");
	*uid = pw->pw_uid;
	*gid = pw->pw_gid;
	snprintf(name, len, "%s", pw->pw_name);
	return 0;
}

/* Who the peer on fd becomes: a unix peer's uid and gid, or the service
 * user for a remote one. 1 when it is root or the server's user (the
 * worker stays as it is), 0 with the ids, -1 on failure. */
int privsep_peer_ids(int fd, uid_t *uid, gid_t *gid, char *err)
{
	struct ucred cred;
	char name[64];

	if (!peer_cred(fd, &cred)) {
		if (peer_is_server(cred.uid))
			return 1;
		*uid = cred.uid;
		*gid = cred.gid;
		return 0;
	}
	return service_ids(uid, gid, name, sizeof(name), err);
}

/* A directory of the tenant's, made by us (never a link, never another's). */
static int own_dir(const char *path, uid_t uid, gid_t gid, char *err)
{
	struct stat st;

	if (mkdir(path, 0700) && errno != EEXIST)
		return wire_fail(err, "cannot create %s: %s", path, strerror(errno));
	if (lstat(path, &st) || !S_ISDIR(st.st_mode))
		return wire_fail(err, "%s is not a directory", path);
	if ((st.st_uid != uid && chown(path, uid, gid)) || chmod(path, 0700))
		return wire_fail(err, "cannot give %s to uid %u: %s", path, (unsigned)uid, strerror(errno));
	return 0;
}

/* path, opened now, as a path that reaches it later whatever the
 * directories above it let the tenant reach (our own descriptor's). */
static int hold_dir(const char *path, char *out, size_t len, char *err)
{
	int fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return wire_fail(err, "cannot open %s: %s", path, strerror(errno));
	snprintf(out, len, "/proc/self/fd/%d", fd);
	return 0;
}

/* The scratch and cache directories, while we still may make them. */
static int prepare_dirs(struct worker *w, uid_t uid, gid_t gid, char *err)
{
	static char scratch[64], cache[64];
	char path[1100];

	snprintf(path, sizeof(path), "%s/w-%d", w->calls->run_dir, (int)getpid());
	if (own_dir(path, uid, gid, err) || hold_dir(path, scratch, sizeof(scratch), err))
		return -1;
	w->front->scratch_dir = scratch;
	if (!w->cache_dir)
		return 0;
	snprintf(path, sizeof(path), "%s/u%u", w->cache_dir, (unsigned)uid);
	if (own_dir(path, uid, gid, err) || hold_dir(path, cache, sizeof(cache), err)) {
		log_warn("no module cache for uid %u: %s", (unsigned)uid, err);
		w->cache_dir = NULL;
		return 0;
	}
	w->cache_dir = cache;
	return 0;
}

/* The groups the user has (its passwd entry's), or gid alone. */
static int set_groups(uid_t uid, gid_t gid)
{
	struct passwd *pw = getpwuid(uid);

	if (pw && !initgroups(pw->pw_name, gid))
		return 0;
	return setgroups(1, &gid);
}

/* Becomes uid for good. 0, or -1 with err (the worker must then end). */
static int become(uid_t uid, gid_t gid, char *err)
{
	uid_t r, e, s;

	if (set_groups(uid, gid) || setresgid(gid, gid, gid) || setresuid(uid, uid, uid))
		return wire_fail(err, "cannot become uid %u: %s", (unsigned)uid, strerror(errno));
	if (getresuid(&r, &e, &s) || r != uid || e != uid || s != uid || (uid != 0 && !setuid(0)))
		return wire_fail(err, "uid %u could take its privileges back", (unsigned)uid);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	return 0;
}

/* Drops the worker to the user of the peer on fd, unless that peer is
 * privileged or the worker dropped already (then the peer must be the
 * one it dropped to, or privileged). 0; -1 with err for a peer refused;
 * -2 with err when the drop failed part-way (the worker must end). */
int privsep_drop_for(struct worker *w, int fd, char *err)
{
	uid_t uid;
	gid_t gid;
	int rc = privsep_peer_ids(fd, &uid, &gid, err);

	if (rc)
		return rc > 0 ? 0 : -1;
	if (w->front->dropped)
		return uid == w->front->run_uid ? 0 : wire_fail(err, "this session's worker runs as another user");
	if (geteuid() != 0) {                /* a server of one user's: nothing to drop to */
		log_warn("the server is not root: the worker of uid %u runs as the server's user (docs/security.md)",
			 (unsigned)uid);
		return 0;
	}
	if (prepare_dirs(w, uid, gid, err))
		return -1;
	if (become(uid, gid, err))
		return -2;
	w->front->dropped = 1;
	w->front->run_uid = uid;
	log_info("worker runs as uid %u from now on", (unsigned)uid);
	return 0;
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

/* The server's side: a worker ended; its scratch directory goes. */
void privsep_worker_ended(const char *run_dir, pid_t pid)
{
	char path[1100];
	struct stat st;

	snprintf(path, sizeof(path), "%s/w-%d", run_dir, (int)pid);
	if (lstat(path, &st) || !S_ISDIR(st.st_mode))
		return;
	if (nftw(path, remove_one, 8, FTW_DEPTH | FTW_PHYS | FTW_MOUNT))
		log_warn("cannot remove %s: %s", path, strerror(errno));
}

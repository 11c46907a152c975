/*
 * migrate_in.c: a process migrating to this node (gpu-migrate, whole
 * application). The front door hands over the connection after its hello
 * (OP_MIGRATE); a thread here answers "ready" and receives, into a
 * fresh directory under the run directory, first the pre-copy rounds of
 * the process's device memory, sent while it still runs (each a stream
 * followed by 'p'), then, once gpu-migrate has frozen it, its GPU
 * snapshot as soon as the plugin has written it (a stream followed by
 * 'g'; optional), then the rest of its CRIU image directory (a stream
 * followed by 'f'). It runs `criu restore` of that
 * (detached, with Cicada's plugin, whose restore of the GPU state comes
 * back to this server's unix listener), answers with the restored pid or
 * the reason it failed, and removes the images either way. Only servers
 * started with --accept-migrations take them: criu restores a process
 * with the credentials its images hold, so a token holder can then run
 * any process here as any user (root's criu does the restore).
 * The images may come over several connections at once: the "ready"
 * answer gives a key, with which gpu-migrate opens further streams
 * (migrate_in_join), and their count comes first on the main one. One
 * more joined connection (its hello's snapshot "pages"), opened as the
 * process is frozen, goes to a `criu page-server` into the images'
 * directory: criu dump sends the pages there while it dumps, and the
 * restore waits for it to end.
 * A worker taken from the pool at the start preloads each pre-copy round
 * into device memory as it arrives (preload.c), and the plugin's restore
 * goes to it (CICADA_RESTORE_TICKET): only what changed since the last
 * round is written while the process is frozen. GPUs the hello names
 * (gpu-migrate --gpu) are where both the preloader and the restore put
 * the program. A GPU-only move (gpu-migrate --gpu-only, its hello's
 * snapshot "gpu-only") ends with the session's own snapshot instead of
 * CRIU's images: it is restored into the preloader, and the answer names
 * the new session's ticket, for the process to resume with.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "session.h"
#include "front.h"
#include "snapshot.h"

#define MIGRATIONS_MAX 4
#define ROUNDS_MAX 64                        /* pre-copy rounds one migration may send */

struct incoming {
	const struct migrate_config *cfg;
	int fd;                              /* the main connection: fds[0] */
	uint32_t xid;
	pid_t pid;                           /* the process, as its source names it */
	char peer[80];
	char key[CICADA_TICKET_LEN + 1];     /* further streams join with it */
	int fds[SNAP_STREAMS_MAX];           /* the streams of the images */
	unsigned nfds;
	char devices[CICADA_NAME_MAX];       /* ">" and the GPUs to restore onto, or "" */
	int gpu_only;                        /* only the GPU state: no process to restore */
	int preload;                         /* the preloading worker's connection, or -1 */
	pid_t preloader;
	char ticket[CICADA_TICKET_LEN + 1];  /* its session */
	char dir[1100];                      /* the images' directory, once made */
	struct criu_run pages;               /* the page server, if one was joined */
	int pages_joined;
	double pages_s, criu_s;              /* waited for the page server; criu restore took */
};

static double mono_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int running;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t joined = PTHREAD_COND_INITIALIZER;
static struct incoming *coming[MIGRATIONS_MAX];

/* The preloading worker of the session of ticket, or 0 (admit.c routes a
 * restore naming it there). */
pid_t migrate_preloader(const char *ticket)
{
	pid_t pid = 0;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < MIGRATIONS_MAX && !pid; i++)
		if (coming[i] && coming[i]->preload >= 0 && !strcmp(coming[i]->ticket, ticket))
			pid = coming[i]->preloader;
	pthread_mutex_unlock(&lock);
	return pid;
}

static void coming_set(struct incoming *in, int on)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MIGRATIONS_MAX; i++)
		if (on ? !coming[i] : coming[i] == in) {
			coming[i] = on ? in : NULL;
			break;
		}
	pthread_mutex_unlock(&lock);
}

/* criu page-server into the images' directory on fd, which the source's
 * criu dump sends the pages to (called with lock held). */
static int pages_start(struct incoming *in, int fd, uint32_t xid, char *why, size_t len)
{
	char *argv[] = { (char *)in->cfg->criu, "page-server", "-D", in->dir, "--ps-socket", "3",
			 "-o", "page-server.log", NULL };
	char err[WIRE_ERRLEN];
	extern char **environ;

	if (!in->dir[0] || in->pages_joined || in->gpu_only) {
		snprintf(why, len, "this migration takes no page server now");
		return -1;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	if (criu_run_start(in->cfg->criu, argv, environ, fd, &in->pages, err)) {
		snprintf(why, len, "%s", err);
		return -1;
	}
	in->pages_joined = 1;
	log_info("migration from %s: its pages come to a criu page-server", in->peer);
	hello_reply(fd, xid, 0, 0, "joined");    /* (criu only answers what dump asks) */
	close(fd);
	return 0;
}

/* The page server's end, before the restore reads its pages: 0 if it
 * took them all (or none was joined), else -1 with err. */
static int pages_wait(struct incoming *in, int dirfd, char *err)
{
	char reason[400];
	int status, joined;
	double t0 = mono_now();

	pthread_mutex_lock(&lock);
	joined = in->pages_joined;
	in->dir[0] = 0;                          /* no page server joins from now */
	pthread_mutex_unlock(&lock);
	if (!joined)
		return 0;
	if (criu_run_wait(&in->pages, in->cfg->timeout_s * 1000, &status))
		return wire_fail(err, "criu page-server %s", in->pages.report < 0 ? "did not start" :
				 "did not end: the pages did not all come");
	in->pages_s = mono_now() - t0;
	if (WIFEXITED(status) && !WEXITSTATUS(status))
		return 0;
	snap_criu_reason(dirfd, "page-server.log", reason, sizeof(reason));
	return wire_fail(err, "criu page-server failed%s%.300s", reason[0] ? ": " : "", reason);
}

/* A further stream of a migration's images (its hello names the key the
 * migration's "ready" gave), or its page server's connection (kind
 * "pages"): 0 once the migration has it. */
int migrate_in_join(const char *key, const char *kind, int fd, uint32_t xid, char *why, size_t len)
{
	int rc = -1, pages = kind && !strcmp(kind, "pages");

	pthread_mutex_lock(&lock);
	for (int i = 0; i < MIGRATIONS_MAX && rc; i++) {
		struct incoming *in = coming[i];
		if (!in || strcmp(in->key, key))
			continue;
		if (pages) {
			rc = pages_start(in, fd, xid, why, len);
			pthread_mutex_unlock(&lock);
			return rc;
		}
		if (in->nfds >= SNAP_STREAMS_MAX)
			break;
		struct timeval idle = { in->cfg->timeout_s, 0 };
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof(idle));
		in->fds[in->nfds++] = fd;
		rc = 0;
	}
	pthread_cond_broadcast(&joined);
	pthread_mutex_unlock(&lock);
	if (rc)
		snprintf(why, len, "no migration here takes a stream of that key");
	else
		hello_reply(fd, xid, 0, 0, "joined");
	return rc;
}

/* How many streams carry the images (first on the main connection), and
 * the further ones joined: 0, or -1 with err. */
static int streams_wait(struct incoming *in, char *err)
{
	struct timespec until;
	uint32_t n = 0;
	int rc = 0;

	if (read(in->fd, &n, 4) != 4 || n < 1 || n > SNAP_STREAMS_MAX)
		return wire_fail(err, "the migration did not say how many streams it takes");
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 30;
	pthread_mutex_lock(&lock);
	while (in->nfds < n && !rc)
		rc = pthread_cond_timedwait(&joined, &lock, &until);
	if (in->nfds < n)
		wire_fail(err, "%u of the migration's %u streams came", in->nfds, n);
	else
		rc = 0;
	pthread_mutex_unlock(&lock);
	return in->nfds < n ? -1 : 0;
}

/* A key nobody can guess: joins prove they belong to this migration. */
static int key_make(char *key)
{
	unsigned char rnd[CICADA_TICKET_LEN / 2];

	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return -1;
	for (unsigned i = 0; i < sizeof(rnd); i++)
		sprintf(key + 2 * i, "%02x", rnd[i]);
	return 0;
}

/* Takes a worker to preload the rounds (OP_PRELOAD over a socket pair);
 * without one the restore writes everything, as ever. */
static void preloader_start(struct incoming *in)
{
	hello_args h = { .proto_version = CICADA_PROTO_VERSION, .pid = (uint64_t)in->pid, .host = "migrate-in",
			 .op = OP_PRELOAD, .ticket = "", .snapshot = "", .parent = "", .devices = in->devices };
	struct wire_buf b = { 0 }, body;
	struct wire_stream st;
	char err[WIRE_ERRLEN];
	hello_res r;
	int sv[2];

	in->preload = -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return;
	if (!wire_encode_call(&b, 1, P_hello, (xdrproc_t)xdr_hello_args, &h))      /* (the record, unmarked) */
		body = (struct wire_buf){ b.data + 4, b.len - 4, b.len - 4 };
	if (!b.len || (in->preloader = pool_hand_over(sv[1], NULL, NULL, NULL, &body, 0, 1, NULL, NULL, NULL, 0)) <= 0) {
		close(sv[0]);
		close(sv[1]);
		wire_buf_free(&b);
		return;
	}
	close(sv[1]);
	memset(&r, 0, sizeof(r));
	wire_stream_init(&st, sv[0]);
	b.len = 0;
	if (wire_recv_record(&st, &b, 65536) || wire_decode_reply(&b, 1, (xdrproc_t)xdr_hello_res, &r, err) ||
	    r.err || !ticket_valid(r.ticket)) {
		log_warn("migration from %s: no worker preloads its rounds", in->peer);
		close(sv[0]);
	} else {
		pthread_mutex_lock(&lock);          /* (migrate_preloader reads them) */
		snprintf(in->ticket, sizeof(in->ticket), "%s", r.ticket);
		in->preload = sv[0];
		pthread_mutex_unlock(&lock);
	}
	xdr_free((xdrproc_t)xdr_hello_res, (char *)&r);
	wire_buf_free(&b);
}

/* Hands the snapshot directory sfd to the preloader (tag 'R': a round,
 * 'G': the final snapshot), and closes it. */
static void preload_send(struct incoming *in, int sfd, char tag)
{
	if (sfd < 0)
		return;
	if (in->preload >= 0 && wire_send_fd_tagged(in->preload, sfd, tag))
		log_warn("migration from %s: the preloading worker is gone", in->peer);
	close(sfd);
}

/* Passes round k (its snapshot, precopy-K/NAME) to the preloader. */
static void preload_round(struct incoming *in, int dirfd, int k)
{
	char name[32];
	int rfd, sfd = -1;
	struct dirent *e;
	DIR *d;

	snprintf(name, sizeof(name), "precopy-%d", k);
	if (in->preload < 0 || (rfd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return;
	if (!(d = fdopendir(rfd))) {
		close(rfd);
		return;
	}
	while (sfd < 0 && (e = readdir(d)))
		if (e->d_name[0] != '.')
			sfd = openat(rfd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	closedir(d);
	preload_send(in, sfd, 'R');
}

/* Passes the frozen process's GPU snapshot (cicada-gpu-PID, at the top),
 * which came while criu still dumped it, to the preloader: loaded now,
 * the restore finds it in place. */
static void preload_final(struct incoming *in, int dirfd)
{
	char name[64];

	snapshot_name((int)in->pid, name, sizeof(name));
	if (in->preload >= 0)
		preload_send(in, openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW), 'G');
}

/* The preloader goes with the migration: unused, it ends. */
static void preloader_end(struct incoming *in)
{
	if (in->preload < 0)
		return;
	pthread_mutex_lock(&lock);
	close(in->preload);
	in->preload = -1;
	pthread_mutex_unlock(&lock);
}

static void answer(struct incoming *in, int err, uint64_t pid, const char *msg)
{
	hello_reply(in->fd, in->xid, err, pid, msg);
}

/* "ready", with the key for further streams. */
static void answer_ready(struct incoming *in)
{
	hello_res r = { .proto_version = CICADA_PROTO_VERSION, .message = "ready", .ticket = in->key };
	struct wire_buf out = { 0 };
	struct wire_stream st;

	wire_stream_init(&st, in->fd);
	if (!wire_encode_reply(&out, in->xid, WIRE_SUCCESS, (xdrproc_t)xdr_hello_res, &r))
		wire_send_record(&st, &out);
	wire_buf_free(&out);
}

/* Why criu restore failed; its log is kept in the run directory. */
static void criu_reason(int dirfd, const struct migrate_config *cfg, char *err)
{
	char reason[512], kept[1200];
	int runfd = open(cfg->run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	snap_criu_reason(dirfd, "restore.log", reason, sizeof(reason));
	snprintf(kept, sizeof(kept), "migrate-failed-%ld.log", (long)time(NULL));
	if (runfd < 0 || renameat(dirfd, "restore.log", runfd, kept))
		kept[0] = 0;
	else
		log_warn("criu's log of a failed restore is kept at %s/%s", cfg->run_dir, kept);
	if (runfd >= 0)
		close(runfd);
	wire_fail(err, "criu restore failed%s%.400s", reason[0] ? ": " : "", reason);
}

/* The environment criu runs in: the server's, with the plugin pointed at
 * this server's unix listener (built before fork: the child only execs). */
static char **criu_env(const struct migrate_config *cfg, const struct incoming *in)
{
	extern char **environ;
	char **env, *server = NULL, *ticket = NULL, *gpus = NULL;
	size_t n = 0, k = 0;

	while (environ[n])
		n++;
	if (!(env = calloc(n + 5, sizeof(*env))))
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "CICADA_RESTORE_SERVER=", 22) && strncmp(environ[i], "CICADA_TOKEN_FILE=", 18) &&
		    strncmp(environ[i], "CICADA_RESTORE_TICKET=", 22) && strncmp(environ[i], "CICADA_RESTORE_GPUS=", 20))
			env[k++] = environ[i];
	env[k++] = "CICADA_NOTE_RESTORED=1";      /* the plugin notes the new session's ticket */
	if (asprintf(&server, "CICADA_RESTORE_SERVER=%s", cfg->restore_server) < 0)
		server = NULL;
	if (in->preload >= 0 && asprintf(&ticket, "CICADA_RESTORE_TICKET=%d:%s", (int)in->pid, in->ticket) < 0)
		ticket = NULL;
	if (in->devices[0] == '>' && asprintf(&gpus, "CICADA_RESTORE_GPUS=%s", in->devices + 1) < 0)
		gpus = NULL;
	if (!server || (in->preload >= 0 && !ticket) || (in->devices[0] == '>' && !gpus)) {
		free(server);
		free(ticket);
		free(gpus);
		free(env);
		return NULL;
	}
	env[k++] = server;
	if (ticket)
		env[k++] = ticket;                /* the restore goes to the preloading worker */
	if (gpus)
		env[k++] = gpus;                  /* (the preloader has them already) */
	return env;
}

static void env_free(char **env)
{
	size_t n = 0;

	while (env[n])
		n++;
	for (size_t i = 0; i < n; i++)
		if (!strncmp(env[i], "CICADA_RESTORE_SERVER=", 22) || !strncmp(env[i], "CICADA_RESTORE_TICKET=", 22) ||
		    !strncmp(env[i], "CICADA_RESTORE_GPUS=", 20))
			free(env[i]);
	free(env);
}

/* Runs criu restore of dir; returns the restored pid, or 0 with err. */
static pid_t restore(const struct migrate_config *cfg, const struct incoming *in, const char *dir, int dirfd,
		     char *err)
{
	char **env = criu_env(cfg, in), buf[32] = "", pidfile[1200];
	char *argv[] = { (char *)cfg->criu, "restore", "-D", (char *)dir, "-L", (char *)cfg->plugins, "-d",
			 "--leave-stopped", "--pidfile", pidfile, "-o", "restore.log", "-v4", NULL };
	struct criu_run run;
	int status = -1, fd;

	if (!env) {
		wire_fail(err, "cannot start criu: out of memory");
		return 0;
	}
	snprintf(pidfile, sizeof(pidfile), "%s/restored.pid", dir);
	fd = criu_run_start(cfg->criu, argv, env, -1, &run, err);
	env_free(env);
	if (fd)
		return 0;
	if (criu_run_wait(&run, cfg->timeout_s * 1000, &status)) {
		criu_run_end(&run);
		wire_fail(err, "criu restore ran past %d s and was stopped", cfg->timeout_s);
		return 0;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		wire_fail(err, "cannot run %.400s", cfg->criu);
		return 0;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		criu_reason(dirfd, cfg, err);
		return 0;
	}
	fd = openat(dirfd, "restored.pid", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, buf, sizeof(buf) - 1) <= 0 || atoi(buf) <= 0) {
		wire_fail(err, "criu restore left no pid");
		if (fd >= 0)
			close(fd);
		return 0;
	}
	close(fd);
	return (pid_t)atoi(buf);
}

/* restore, its time noted for the answer */
static pid_t restore_timed(const struct migrate_config *cfg, struct incoming *in, const char *dir, int dirfd,
			   char *err)
{
	double t0 = mono_now();
	pid_t pid = restore(cfg, in, dir, dirfd, err);

	in->criu_s = mono_now() - t0;
	return pid;
}

/* Ends the GPU session the plugin restored for a copy that will not run
 * (its ticket noted in the images, cicada-restored-<pid>.txt), through
 * this server's own unix listener, as the plugin would (request.c): its
 * worker need not wait for the detach timeout holding the copy's memory. */
static void release_restored(const struct incoming *in, int dirfd, pid_t pid)
{
	struct gpu_session s = { .pid = (int)pid, .ctl = -1, .token_hex = "-" };
	char name[64], err[WIRE_ERRLEN];
	int tfd, n;

	snprintf(name, sizeof(name), "cicada-restored-%d.txt", (int)pid);
	if ((tfd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return;
	n = (int)read(tfd, s.ticket, CICADA_TICKET_LEN);
	close(tfd);
	s.ticket[n > 0 ? n : 0] = 0;
	s.ticket[strcspn(s.ticket, "\n")] = 0;
	snprintf(s.server, sizeof(s.server), "%s", in->cfg->restore_server);
	if (s.ticket[0] && !server_request(&s, OP_RELEASE, -1, NULL, err))
		log_info("migration from %s: the restored session %.8s is ended", in->peer, s.ticket);
}

/* The restored copy runs only on gpu-migrate's go ('c', answered 'k'),
 * which comes once the source is sure to end; without it (the link broke,
 * gpu-migrate died) the copy is ended, and the source goes on. Either
 * goes to the whole tree, whose processes may lead sessions of their own. */
static void signal_restored(pid_t pid, int sig)
{
	if (getpgid(pid) == pid)
		kill(-pid, sig);             /* (its group, should /proc name no children) */
	wire_signal_tree(pid, sig);
}

static void start_or_end(struct incoming *in, int dirfd, pid_t pid)
{
	struct pollfd p = { .fd = in->fd, .events = POLLIN };
	char c = 0;

	if (poll(&p, 1, 30000) == 1 && read(in->fd, &c, 1) == 1 && c == 'c') {
		signal_restored(pid, SIGCONT);
		c = 'k';
		if (send(in->fd, &c, 1, MSG_NOSIGNAL) != 1)
			log_warn("migration from %s: the go was not acknowledged, but pid %d runs", in->peer, (int)pid);
		return;
	}
	signal_restored(pid, SIGKILL);
	log_warn("migration from %s: no go from gpu-migrate; the restored pid %d is ended", in->peer, (int)pid);
	release_restored(in, dirfd, pid);
}

/* A GPU-only move: the session's snapshot (incremental on the last round)
 * restored into the preloading worker, or a fresh one, through this
 * server's own unix listener; the new session's ticket into ticket. */
static int restore_gpu(struct incoming *in, int dirfd, char *ticket, char *err)
{
	struct gpu_session s = { .pid = (int)in->pid, .ctl = -1, .token_hex = "-" };

	snprintf(s.server, sizeof(s.server), "%s", in->cfg->restore_server);
	pthread_mutex_lock(&lock);
	snprintf(s.ticket, sizeof(s.ticket), "%s", in->preload >= 0 ? in->ticket : "");
	pthread_mutex_unlock(&lock);
	if (in->devices[0] == '>')
		snprintf(s.gpus, sizeof(s.gpus), "%s", in->devices + 1);
	return server_request(&s, OP_RESTORE, dirfd, ticket, err);
}

/* The images' directory, where a page server joined later writes. */
static int dir_set(struct incoming *in, const char *dir)
{
	pthread_mutex_lock(&lock);
	snprintf(in->dir, sizeof(in->dir), "%s", dir);
	pthread_mutex_unlock(&lock);
	return 0;
}

/* The streams of a migration into dirfd, up to the final one. */
static int receive(struct incoming *in, int dirfd, uint64_t *bytes, char *err)
{
	uint64_t part;
	char mark = 0;
	int rounds = 0, final = 0;

	*bytes = 0;
	do {
		if (snap_recv_trees(in->fds, in->nfds, dirfd, &part, err))
			return -1;
		*bytes += part;
		if (read(in->fd, &mark, 1) != 1 || (mark != 'p' && mark != 'g' && mark != 'f'))
			return wire_fail(err, "the migration stream ended early (the link broke?)");
		if ((mark == 'p' && (final || ++rounds > ROUNDS_MAX)) || (mark == 'g' && final++))
			return wire_fail(err, "the migration stream is out of order, or has more than %d rounds", ROUNDS_MAX);
		if (mark == 'p') {
			log_info("migration from %s: pre-copy round %d, %llu bytes", in->peer, rounds,
				 (unsigned long long)part);
			preload_round(in, dirfd, rounds);
		} else if (mark == 'g') {
			log_info("migration from %s: the frozen process's GPU snapshot, %llu bytes", in->peer,
				 (unsigned long long)part);
			preload_final(in, dirfd);
		}
	} while (mark != 'f');
	return 0;
}

static void *incoming_thread(void *arg)
{
	struct incoming *in = arg;
	const struct migrate_config *cfg = in->cfg;
	char dir[1100], name[64], err[WIRE_ERRLEN], msg[120], why[WIRE_ERRLEN], ticket[CICADA_TICKET_LEN + 1] = "";
	int runfd = open(cfg->run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), dirfd = -1, gpu_done = 0;
	struct timeval idle = { cfg->timeout_s, 0 };
	uint64_t bytes = 0;
	pid_t pid = 0;

	/* Blocking from here, but a sender that stalls is given up on. */
	fcntl(in->fd, F_SETFL, fcntl(in->fd, F_GETFL) & ~O_NONBLOCK);
	setsockopt(in->fd, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof(idle));
	/* (the directory first: a page server may join as soon as "ready" goes) */
	snprintf(dir, sizeof(dir), "%s/migrate-in-XXXXXX", cfg->run_dir);
	if (runfd < 0 || !mkdtemp(dir) || (dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		wire_fail(err, "cannot make a directory for the images: %s", strerror(errno));
	else
		dir_set(in, dir);
	answer_ready(in);                    /* gpu-migrate freezes the process only now */
	preloader_start(in);
	if (dirfd >= 0 && !streams_wait(in, err) && !receive(in, dirfd, &bytes, err) && !pages_wait(in, dirfd, err)) {
		log_info("migration from %s: %llu bytes of images received; restoring", in->peer,
			 (unsigned long long)bytes);
		if (!in->gpu_only)
			pid = restore_timed(cfg, in, dir, dirfd, err);
		else if (!restore_gpu(in, dirfd, ticket, err))
			gpu_done = 1;
	}
	if (gpu_done) {
		log_info("migration from %s: its GPU session is restored (session %.8s)", in->peer, ticket);
		answer(in, 0, 0, ticket);        /* the process resumes here with it */
	} else if (pid) {
		snprintf(msg, sizeof(msg), "restored as pid %d (pages waited %.3f s, criu restore %.3f s)", (int)pid,
			 in->pages_s, in->criu_s);
		log_info("migration from %s: %s, stopped until gpu-migrate says go", in->peer, msg);
		answer(in, 0, (uint64_t)pid, msg);
		start_or_end(in, dirfd, pid);
	} else {
		log_warn("migration from %s failed: %s", in->peer, err);
		answer(in, CUDA_ERROR_OPERATING_SYSTEM, 0, err);
	}
	preloader_end(in);
	pthread_mutex_lock(&lock);
	in->dir[0] = 0;                          /* no page server joins from now */
	pthread_mutex_unlock(&lock);
	criu_run_end(&in->pages);                /* (one the migration did not wait for) */
	if (dirfd >= 0)
		close(dirfd);
	snprintf(name, sizeof(name), "%s", strrchr(dir, '/') + 1);
	if (runfd >= 0 && strncmp(name, "migrate-in-XXXXXX", 17) && snap_remove_dir(runfd, name, why))
		log_warn("%s", why);
	if (runfd >= 0)
		close(runfd);
	coming_set(in, 0);
	for (unsigned k = 0; k < in->nfds; k++)
		close(in->fds[k]);                   /* (the main connection among them) */
	free(in);
	pthread_mutex_lock(&lock);
	running--;
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* Takes fd (after its hello, whose xid is given) for a migration; -1
 * with why if it cannot (fd then stays the caller's). */
int migrate_in_start(const struct migrate_config *cfg, int fd, uint32_t xid, pid_t pid, const char *peer,
		     const char *devices, int gpu_only, char *why, size_t len)
{
	struct incoming *in = calloc(1, sizeof(*in));
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	pthread_mutex_lock(&lock);
	rc = running >= MIGRATIONS_MAX ? -1 : 0;
	running += !rc;
	pthread_mutex_unlock(&lock);
	if (rc || !in) {
		snprintf(why, len, "server busy: %d migrations are coming in already", MIGRATIONS_MAX);
		if (!rc) {
			pthread_mutex_lock(&lock);
			running--;
			pthread_mutex_unlock(&lock);
		}
		free(in);
		return -1;
	}
	*in = (struct incoming){ .cfg = cfg, .fd = fd, .xid = xid, .pid = pid, .nfds = 1, .preload = -1,
				 .pages = { .criu = -1, .report = -1 } };
	in->fds[0] = fd;
	snprintf(in->peer, sizeof(in->peer), "%s", peer);
	snprintf(in->devices, sizeof(in->devices), "%s", devices && devices[0] == '>' ? devices : "");
	in->gpu_only = gpu_only;
	if (key_make(in->key)) {
		snprintf(why, len, "no randomness for the migration's key");
		free(in);
		pthread_mutex_lock(&lock);
		running--;
		pthread_mutex_unlock(&lock);
		return -1;
	}
	coming_set(in, 1);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, incoming_thread, in);
	pthread_attr_destroy(&attr);
	if (rc) {
		snprintf(why, len, "cannot start a thread for the migration");
		coming_set(in, 0);
		free(in);
		pthread_mutex_lock(&lock);
		running--;
		pthread_mutex_unlock(&lock);
		return -1;
	}
	return 0;
}

/*
 * pool.c: the gpu-server's pool of pre-initialised workers. Each worker
 * re-executes this binary with --worker-fd, so CUDA is never initialised
 * in the parent, waits for 'G' on its control socket before it starts
 * CUDA, and says 'R' there once CUDA is up. A
 * taken worker gets the client's connection and hello, and serves that
 * one client. A thread refills the pool; another reaps every worker that
 * ends and tells the pool's user through its exit hook. Each worker has
 * a page of figures it shares with the server (state/stat.c), which the
 * operator's cicadactl reads and sets a quota through (admin.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "front.h"

#define SETTLE_MS 50                    /* how often the SMs' pages are read (sm_share.c) */
#define ROOM_WAIT_MS 5000               /* for the SMs of sessions ending (room_for) */
#define ROOM_WAITERS 4                  /* admissions waiting so at once */
#define MAX_POOL 64

struct pool_worker {
	pid_t pid;
	int control_fd;
	int gated;                           /* not yet told to start CUDA */
	struct session_stat *stat;           /* shared with it (stat.c), or NULL */
};

struct taken {
	pid_t pid;
	struct session_stat *stat;
	pid_t client;                        /* a local client's process (SO_PEERCRED), or 0 */
};

static struct {
	const char *cache_dir, *run_dir;
	const char *key_file;                /* keyed snapshots, or NULL */
	const char *user;                    /* --user, for the workers, or NULL */
	int randomize;                       /* --worker-aslr */
	int size;
	int refill_delay_ms;                 /* after a worker is taken */
	unsigned nreal;                      /* the node's GPUs, as the workers see them */
	uint64_t last_take_ns;
	struct pool_worker idle[MAX_POOL];
	int nidle;
	struct taken *taken;                 /* taken workers still running */
	unsigned active, cap_taken;
	void (*exit_hook)(pid_t pid);
	pthread_mutex_t lock;
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Lets a gated worker start CUDA. */
static void release(struct pool_worker *w)
{
	char go = 'G';

	if (w->gated && write(w->control_fd, &go, 1) != 1)
		log_warn("worker %d: cannot release it: %s", (int)w->pid, strerror(errno));
	w->gated = 0;
}

/* (in the new child) this binary again, as a worker */
static void exec_worker(const char *fdarg, const char *statarg)
{
	const char *argv[16] = { "gpu-server", "--worker-fd", fdarg, "--cache-dir", pool.cache_dir,
				 "--run-dir", pool.run_dir };
	int n = 7;

	if (statarg)
		argv[n++] = "--stat-fd", argv[n++] = statarg;
	if (pool.key_file)
		argv[n++] = "--snapshot-key-file", argv[n++] = pool.key_file;
	if (pool.user)
		argv[n++] = "--user", argv[n++] = pool.user;
	argv[n] = NULL;
	execv("/proc/self/exe", (char *const *)argv);
}

/* The page a worker shares with the server: its fd (for the worker) and
 * our mapping, or -1 and NULL (the worker runs without). */
static int stat_page(struct session_stat **map)
{
	int fd = memfd_create("cicada-stat", MFD_CLOEXEC);
	void *p;

	*map = NULL;
	if (fd < 0 || ftruncate(fd, sizeof(**map)) ||
	    (p = mmap(NULL, sizeof(**map), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*map = p;
	return fd;
}

static void stat_drop(struct session_stat *st)
{
	if (st)
		munmap(st, sizeof(*st));
}

static int spawn_worker(int gated)
{
	int sv[2], stat_fd;
	char fdarg[16], statarg[16];
	struct session_stat *st;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -1;
	stat_fd = stat_page(&st);
	snprintf(statarg, sizeof(statarg), "%d", stat_fd);
	snprintf(fdarg, sizeof(fdarg), "%d", sv[1]);
	pid = fork();
	if (pid == 0) {
		/* Every worker gets the same address-space layout, so objects the
		 * driver places itself (module globals) land at the same device
		 * addresses in a restoring worker as in the original (unless the
		 * operator asked for --worker-aslr: docs/security.md). */
		if (!pool.randomize)
			personality((unsigned long)personality(0xffffffff) | ADDR_NO_RANDOMIZE);
		close(sv[0]);
		fcntl(sv[1], F_SETFD, 0);
		exec_worker(fdarg, stat_fd >= 0 && !fcntl(stat_fd, F_SETFD, 0) ? statarg : NULL);
		_exit(127);
	}
	close(sv[1]);
	if (stat_fd >= 0)
		close(stat_fd);
	if (pid < 0) {
		close(sv[0]);
		stat_drop(st);
		return -1;
	}
	pool.idle[pool.nidle].pid = pid;
	pool.idle[pool.nidle].control_fd = sv[0];
	pool.idle[pool.nidle].gated = 1;
	pool.idle[pool.nidle].stat = st;
	if (!gated)
		release(&pool.idle[pool.nidle]);
	pool.nidle++;
	return 0;
}

/* Fills the pool; gated workers start only their host side. */
static void fill_pool(int gated)
{
	pthread_mutex_lock(&pool.lock);
	for (int i = 0; !gated && i < pool.nidle; i++)
		release(&pool.idle[i]);
	while (pool.nidle < pool.size)
		if (spawn_worker(gated)) {
			log_error("cannot start a worker: %s", strerror(errno));
			break;
		}
	pthread_mutex_unlock(&pool.lock);
}

/* A new worker's CUDA initialisation takes GPU time from the sessions
 * running (a new context time-slices the GPU with theirs: 20 ms off a
 * 0.35 s job on the H100). So CUDA starts in new workers only while no
 * session runs, or once no worker has been taken for --refill-delay. An
 * empty pool gets workers at once, but gated: they start the host side
 * (exec, libraries) and wait, and one that a client takes before then
 * starts CUDA at once. */
static void *refill_loop(void *arg)
{
	for (;;) {
		uint64_t quiet = (uint64_t)pool.refill_delay_ms * 1000000u;
		int short_of, empty, gated = 0, calm;

		usleep(100000);
		pthread_mutex_lock(&pool.lock);
		short_of = pool.nidle < pool.size;
		empty = !pool.nidle;
		calm = !pool.active || wire_now_ns() - pool.last_take_ns >= quiet;
		for (int i = 0; i < pool.nidle; i++)
			gated |= pool.idle[i].gated;
		pthread_mutex_unlock(&pool.lock);
		if (calm && (short_of || gated))
			fill_pool(0);
		else if (empty)
			fill_pool(1);
	}
	return NULL;
}

/* Reaps every worker that ends: idle ones leave the pool, the others are
 * reported to the exit hook (their session is over). */
static void *reap_loop(void *arg)
{
	for (;;) {
		int status, was_idle = 0;
		pid_t pid = waitpid(-1, &status, 0);

		if (pid < 0) {
			usleep(100000);
			continue;
		}
		pthread_mutex_lock(&pool.lock);
		for (int i = 0; i < pool.nidle; i++)
			if (pool.idle[i].pid == pid) {
				close(pool.idle[i].control_fd);
				stat_drop(pool.idle[i].stat);
				pool.idle[i] = pool.idle[--pool.nidle];
				was_idle = 1;
				break;
			}
		for (unsigned i = 0; !was_idle && i < pool.active; i++)
			if (pool.taken[i].pid == pid) {
				stat_drop(pool.taken[i].stat);
				pool.taken[i] = pool.taken[--pool.active];
				break;
			}
		pthread_mutex_unlock(&pool.lock);
		placement_release(pid);
		sm_share_release(pid);
		privsep_worker_ended(pool.run_dir, pid);
		if (was_idle)
			log_warn("idle worker %d ended (status %d)", (int)pid, status);
		else if (pool.exit_hook)
			pool.exit_hook(pid);
	}
	return NULL;
}

/* Workers to come load this snapshot key (before pool_start). */
void pool_key_file(const char *path)
{
	pool.key_file = path;
}

/* Workers to come run remote tenants as this user (before pool_start). */
void pool_user(const char *name)
{
	pool.user = name;
}

/* Workers to come get a random address layout (--worker-aslr). */
void pool_randomize(int on)
{
	pool.randomize = on;
}

static void *settle_loop(void *arg);

int pool_start(const char *cache_dir, const char *run_dir, int size, int refill_delay_ms,
	       void (*exit_hook)(pid_t pid))
{
	pthread_t t;

	pool.cache_dir = cache_dir;
	pool.run_dir = run_dir;
	pool.size = size;
	pool.refill_delay_ms = refill_delay_ms;
	pool.exit_hook = exit_hook;
	fill_pool(0);
	if (pthread_create(&t, NULL, reap_loop, NULL) || pthread_detach(t))
		return -1;
	if (pthread_create(&t, NULL, refill_loop, NULL) || pthread_detach(t))
		return -1;
	if (pthread_create(&t, NULL, settle_loop, NULL) || pthread_detach(t))
		return -1;
	return 0;
}

/* A taken worker runs a session until the reaper sees it end. */
static void note_taken(pid_t pid, struct session_stat *st)
{
	pthread_mutex_lock(&pool.lock);
	if (pool.active == pool.cap_taken) {
		unsigned cap = pool.cap_taken ? 2 * pool.cap_taken : 64;
		struct taken *t = realloc(pool.taken, cap * sizeof(*t));

		if (t)
			pool.taken = t, pool.cap_taken = cap;
	}
	if (pool.active < pool.cap_taken)
		pool.taken[pool.active++] = (struct taken){ pid, st, 0 };
	else
		stat_drop(st);
	pthread_mutex_unlock(&pool.lock);
}

/* Calls each for every taken worker whose session has started, with a
 * copy of its figures, under the pool's lock (the reaper unmaps them). */
void pool_each_session(void (*each)(pid_t pid, const struct session_stat *st, void *ctx), void *ctx)
{
	pthread_mutex_lock(&pool.lock);
	for (unsigned i = 0; i < pool.active; i++) {
		struct session_stat copy;
		if (!pool.taken[i].stat || !__atomic_load_n(&pool.taken[i].stat->started, __ATOMIC_ACQUIRE))
			continue;
		memcpy(&copy, pool.taken[i].stat, sizeof(copy));
		if (copy.quota_asked)            /* (the worker takes it at its next allocation) */
			copy.quota = copy.quota_asked == STAT_NO_QUOTA ? 0 : copy.quota_asked;
		if (copy.sm_ask_seq != copy.sm_ack)   /* (and its new SMs between two calls) */
			memcpy(copy.sm_mask, copy.sm_asked, sizeof(copy.sm_mask));
		copy.tenant[sizeof(copy.tenant) - 1] = 0;
		copy.gpus[sizeof(copy.gpus) - 1] = 0;
		each(pool.taken[i].pid, &copy, ctx);
	}
	pthread_mutex_unlock(&pool.lock);
}

/* Holds (on) or lets go (off) worker pid's session's calls; -1 with err
 * if there is no such session. */
int pool_set_paused(pid_t pid, int on, char *err)
{
	int rc = wire_fail(err, "no session %d on this server", (int)pid);

	pthread_mutex_lock(&pool.lock);
	for (unsigned i = 0; i < pool.active; i++) {
		struct session_stat *st = pool.taken[i].stat;
		if (pool.taken[i].pid == pid && st && __atomic_load_n(&st->started, __ATOMIC_ACQUIRE)) {
			__atomic_store_n(&st->paused, (uint32_t)on, __ATOMIC_RELEASE);
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&pool.lock);
	return rc;
}

/* Asks worker pid's session to take quota bytes (0: none) at its next
 * allocation. -1 with err if there is no such session, or if it holds
 * more than bytes already (lowering below use is refused). */
int pool_ask_quota(pid_t pid, uint64_t bytes, char *err)
{
	int rc = wire_fail(err, "no session %d on this server", (int)pid);

	pthread_mutex_lock(&pool.lock);
	for (unsigned i = 0; i < pool.active; i++) {
		struct session_stat *st = pool.taken[i].stat;
		if (pool.taken[i].pid != pid || !st || !__atomic_load_n(&st->started, __ATOMIC_ACQUIRE))
			continue;
		if (bytes && st->charged > bytes) {
			rc = wire_fail(err, "session %d holds %llu MiB, more than %llu MiB: it must free memory first",
				       (int)pid, (unsigned long long)(st->charged >> 20),
				       (unsigned long long)(bytes >> 20));
		} else {
			__atomic_store_n(&st->quota_asked, bytes ? bytes : STAT_NO_QUOTA, __ATOMIC_RELEASE);
			rc = 0;
		}
		break;
	}
	pthread_mutex_unlock(&pool.lock);
	return rc;
}

/* Kills worker pid if it is one of the pool's taken workers (never a
 * pid the reaper has let go); 0, or -1 if it is not. */
int pool_kill_taken(pid_t pid)
{
	int rc = -1;

	pthread_mutex_lock(&pool.lock);
	for (unsigned i = 0; i < pool.active && rc; i++)
		if (pool.taken[i].pid == pid)
			rc = kill(pid, SIGKILL);
	pthread_mutex_unlock(&pool.lock);
	return rc;
}

/* Takes a ready worker, waiting for one that is still initialising; its
 * word is 'R' and the number of GPUs its driver sees. */
static int take_worker(struct pool_worker *out, unsigned *ngpus)
{
	for (int tries = 0; tries < 4; tries++) {
		unsigned char ready[2];

		pthread_mutex_lock(&pool.lock);
		if (pool.nidle == 0 && spawn_worker(0)) {
			pthread_mutex_unlock(&pool.lock);
			return -1;
		}
		release(&pool.idle[0]);
		*out = pool.idle[0];
		memmove(&pool.idle[0], &pool.idle[1], (size_t)(--pool.nidle) * sizeof(pool.idle[0]));
		pool.last_take_ns = wire_now_ns();
		pthread_mutex_unlock(&pool.lock);
		if (wire_recv_all(out->control_fd, ready, 2) == 0 && ready[0] == 'R') {
			sm_share_learn(out->stat, ready[1]);   /* (the first one's word serves) */
			pool.nreal = ready[1];
			note_taken(out->pid, out->stat);
			*ngpus = ready[1];
			return 0;
		}
		log_error("worker %d failed to initialise", (int)out->pid);
		close(out->control_fd);
		stat_drop(out->stat);
		kill(out->pid, SIGKILL);
	}
	return -1;
}

/* Who connection fd's tenant is, for sm_share.c: the unix peer's user
 * and group; a TCP or relayed peer is remote (1). */
static int tenant_of(int fd, const char *remote, uid_t *uid, gid_t *gid)
{
	struct sockaddr_storage sa;
	socklen_t sl = sizeof(sa);
	char err[WIRE_ERRLEN];
	int unix_peer = !remote && !getsockname(fd, (struct sockaddr *)&sa, &sl) && sa.ss_family == AF_UNIX;

	*uid = 0;
	*gid = 0;
	return !unix_peer || privsep_peer_ids(fd, uid, gid, err);
}

/* The SMs of the session's GPUs its tenant gets (sm_share.c): by the
 * --token-dir token it proved (h->token), else by its verified TLS name
 * (h->tls_name), else by who it is (tenant_of);
 * a restore's or an incoming migration's, by its owner, later (by_owner). */
static int take_sms(int fd, const char *remote, pid_t pid, int by_owner, struct handoff *h, unsigned nreal,
		    char *why, size_t len)
{
	uid_t uid;
	gid_t gid;
	int is_remote = tenant_of(fd, remote, &uid, &gid);

	return sm_share_take(pid, h->token, h->tls_name, is_remote, uid, gid, by_owner, h->gpus, h->ngpus, nreal,
			     h->sm_mask, why, len);
}

/* Whether a taken worker's session is over: the worker said so, or its
 * local client's process is gone (a sleeping worker notices that only
 * at its next check of the connection). */
static int session_over(const struct taken *t)
{
	if (__atomic_load_n(&t->stat->ended, __ATOMIC_ACQUIRE))
		return 1;
	return t->client > 0 && kill(t->client, 0) && errno == ESRCH;
}

/* Whether a session that is over still holds SM groups: its worker is
 * ending, and they are free once it is reaped. */
static int shares_ending(void)
{
	int n = 0;

	pthread_mutex_lock(&pool.lock);
	for (unsigned i = 0; i < pool.active && !n; i++) {
		struct session_stat *st = pool.taken[i].stat;
		if (!st || !session_over(&pool.taken[i]))
			continue;
		for (unsigned g = 0; g < CICADA_MAX_GPUS && !n; g++)
			n = st->sm_mask[g] != 0;
	}
	pthread_mutex_unlock(&pool.lock);
	return n;
}

/* Notes worker pid's local client (fd's peer), for session_over. */
static void note_client(pid_t pid, int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) || cred.pid <= 0)
		return;
	pthread_mutex_lock(&pool.lock);
	for (unsigned i = 0; i < pool.active; i++)
		if (pool.taken[i].pid == pid)
			pool.taken[i].client = cred.pid;
	pthread_mutex_unlock(&pool.lock);
}

/* Room for the session's SMs, waiting (at most ROOM_WAIT_MS) for those
 * of sessions that have just ended: a client that starts again as its
 * last session ends must not be refused for the SMs it held itself.
 * 0 if there is room, else -1 with why. */
static int room_for(const struct handoff *h, int is_remote, uid_t uid, gid_t gid, char *why, size_t len)
{
	static _Atomic int waiting;          /* (a few handover threads at most) */
	int rc = -1;

	if (!sm_share_room(h->token, h->tls_name, is_remote, uid, gid, why, len))
		return 0;
	if (!shares_ending())
		return -1;
	if (atomic_fetch_add(&waiting, 1) >= ROOM_WAITERS) {
		atomic_fetch_sub(&waiting, 1);
		return -1;
	}
	for (int waited = 0; rc && waited < ROOM_WAIT_MS && shares_ending(); waited += 10) {
		usleep(10000);
		pool_settle();
		rc = sm_share_room(h->token, h->tls_name, is_remote, uid, gid, why, len) ? -1 : 0;
	}
	atomic_fetch_sub(&waiting, 1);
	return rc;
}

/* Hands connection fd and its hello to a ready worker, with the GPUs
 * placement.c gives a session that asked for want of them, and the SMs
 * there sm_share.c gives. taken (if set) is called with the worker's pid
 * before the worker can see the connection. Returns the pid, or -1 (-2:
 * no room for its SMs, with why). */
pid_t pool_hand_over(int fd, const char *remote, const char *token, const char *tls_name,
		     const struct wire_buf *hello, unsigned want, int by_owner, void (*taken)(pid_t pid, void *arg),
		     void *arg, char *why, size_t len)
{
	struct handoff h = { .remote = remote };
	struct pool_worker w;
	unsigned nreal;
	pid_t rc = -1;
	int n;

	snprintf(h.token, sizeof(h.token), "%s", token ? token : "");
	snprintf(h.tls_name, sizeof(h.tls_name), "%s", tls_name ? tls_name : "");
	pool_settle();                       /* (groups given back are free now) */
	if (!by_owner) {                     /* (no room anywhere: refused before a worker is taken) */
		uid_t uid;
		gid_t gid;
		int is_remote = tenant_of(fd, remote, &uid, &gid);

		if (room_for(&h, is_remote, uid, gid, why, len))
			return -2;
	}
	if (take_worker(&w, &nreal))
		return -1;
	if ((n = placement_choose(w.pid, want, nreal, h.gpus)) < 0) {
		kill(w.pid, SIGKILL);            /* (reaped, as any worker) */
		close(w.control_fd);
		return -1;
	}
	h.ngpus = (unsigned)n;
	if (take_sms(fd, remote, w.pid, by_owner, &h, nreal, why, len)) {
		kill(w.pid, SIGKILL);            /* (reaped: its GPUs are let go there) */
		close(w.control_fd);
		return -2;
	}
	if (!remote)
		note_client(w.pid, fd);
	if (taken)
		taken(w.pid, arg);
	if (!handoff_send(w.control_fd, fd, &h, hello))
		rc = w.pid;
	else
		kill(w.pid, SIGKILL);
	close(w.control_fd);
	return rc;
}

int pool_max(void)
{
	return MAX_POOL;
}

/* cicadactl resize --sms: worker pid's session moves to sms SMs of each
 * of its GPUs (0: whole GPUs) between two of its calls. -1 with err if
 * there is no such session, or no room. */
int pool_ask_sms(pid_t pid, unsigned sms, char *err)
{
	int rc = wire_fail(err, "no session %d on this server", (int)pid);

	pool_settle();
	pthread_mutex_lock(&pool.lock);
	for (unsigned i = 0; i < pool.active; i++) {
		struct session_stat *st = pool.taken[i].stat;
		if (pool.taken[i].pid != pid || !st || !__atomic_load_n(&st->started, __ATOMIC_ACQUIRE))
			continue;
		rc = sm_share_resize(pid, st, sms, pool.nreal, err);
		break;
	}
	pthread_mutex_unlock(&pool.lock);
	return rc;
}

/* What the workers' pages say of their SMs now (sm_share.c): at every
 * admission and resize, and every SETTLE_MS. */
void pool_settle(void)
{
	pthread_mutex_lock(&pool.lock);
	for (unsigned i = 0; i < pool.active; i++)
		if (pool.taken[i].stat)
			sm_share_settle(pool.taken[i].pid, pool.taken[i].stat, pool.nreal);
	pthread_mutex_unlock(&pool.lock);
}

static void *settle_loop(void *arg)
{
	(void)arg;
	for (;;) {
		usleep(SETTLE_MS * 1000);
		pool_settle();
	}
	return NULL;
}

/*
 * front.h: the daemon and the worker process: the listening
 * front door (admission, authentication, placement, the pool of
 * workers, incoming migrations), the handing over of connections, a
 * worker's session and its privilege separation, with the worker's
 * fields only they use (struct worker_front). Above every other part.
 */
#ifndef CICADA_GPU_SERVER_FRONT_H
#define CICADA_GPU_SERVER_FRONT_H

#include "checkpoint/checkpoint.h"

/* The worker's fields of front/ alone (w->front). */
struct worker_front {
	int started;                         /* base_ctx is made (on start_gpu) */
	CUdevice start_gpu;
	int dropped;                         /* runs as run_uid for good (privsep.c) */
	uid_t run_uid;
	const char *scratch_dir;             /* private, for snapshots that travel (privsep.c) */
	int session_fd;                      /* detached: listening session socket */
	char token[64];                      /* the --token-dir token its client proved, or "" */
	char tls_name[WIRE_TLS_NAME_MAX];    /* its client's verified TLS name, or "" */
};

/* worker.c: the worker process (above session.c) */
int worker_main(int control_fd, const char *cache_dir, const char *run_dir);
/* session.c: what a handed-over connection is for, and detached life */
struct handoff {
	const char *remote;                  /* the client host a TLS relay serves */
	char token[64];                      /* the --token-dir token the client proved, or "" */
	char tls_name[WIRE_TLS_NAME_MAX];    /* the client's verified TLS name (--tls-client-ca), or "" */
	uint32_t gpus[CICADA_MAX_GPUS];      /* the GPUs given (placement.c) */
	unsigned ngpus;
	uint64_t sm_mask[CICADA_MAX_GPUS];   /* by real ordinal: SM groups given (sm_share.c) */
};
void session_run(struct worker *w, int fd, struct wire_buf *hello);

/* handoff.c: handed connections (below session.c, preload.c, pool.c) */
int handoff_send(int sock, int fd, const struct handoff *h, const struct wire_buf *hello);
int handoff_receive(int from, struct wire_buf *hello, struct handoff *h);
int handoff_pass(const char *run_dir, const char *ticket, int fd, const char *remote, const struct wire_buf *hello,
		 pid_t *worker);
int ticket_valid(const char *ticket);
struct sockaddr_un;
/* A session socket's address (abstract: no file), and its length. */
unsigned handoff_path(const char *run_dir, const char *ticket, struct sockaddr_un *sa);
int handoff_from_server(int conn);       /* whether conn's peer is the server */
int handoff_accept(int lfd, struct wire_buf *hello);   /* -2: a stranger, refused */
#define HANDOFF_TIMEOUT_MS 2000

/* privsep.c: workers run as their tenant */
int privsep_set_user(const char *name, char *err);
void privsep_init(void);
int privsep_peer_ids(int fd, uid_t *uid, gid_t *gid, char *err);
int privsep_drop_for(struct worker *w, int fd, char *err);
void privsep_worker_ended(const char *run_dir, pid_t pid);
/* auth.c */
/* The daemon (main.c): a listening socket. */
struct listener {
	struct wire_addr addr;
	int fd;
};

/* The pool of pre-initialised workers (pool.c). */
int pool_start(const char *cache_dir, const char *run_dir, int size, int refill_delay_ms,
	       void (*exit_hook)(pid_t pid));
pid_t pool_hand_over(int fd, const char *remote, const char *token, const char *tls_name,
		     const struct wire_buf *hello, unsigned want, int by_owner, void (*taken)(pid_t pid, void *arg),
		     void *arg, char *why, size_t len);
/* placement.c: the GPUs a new session gets */
int placement_set_gpus(const char *list, char *err);
void placement_set_per_client(unsigned n);
int placement_choose(pid_t pid, unsigned want, unsigned nreal, uint32_t *out);
void placement_release(pid_t pid);
unsigned placement_gpus(pid_t pid, uint32_t *gpus);
int pool_max(void);
/* sm_share.c: the SMs a session gets (--sm-share) */
int sm_share_set_policy(const char *policy, char *err);
void sm_share_set_overcommit(int on);
void sm_share_learn(const struct session_stat *st, unsigned nreal);
int sm_share_take(pid_t pid, const char *token, const char *tls_name, int remote, unsigned uid, unsigned gid,
		  int privileged, const uint32_t *gpus, unsigned n, unsigned nreal, uint64_t *masks, char *why, size_t len);
int sm_share_resize(pid_t pid, struct session_stat *st, unsigned sms, unsigned nreal, char *err);
void sm_share_settle(pid_t pid, struct session_stat *st, unsigned nreal);
int sm_share_room(const char *token, const char *tls_name, int remote, unsigned uid, unsigned gid, char *why,
		  size_t len);
void sm_share_release(pid_t pid);
unsigned sm_share_count(unsigned d, uint64_t mask);
int pool_ask_sms(pid_t pid, unsigned sms, char *err);
void pool_settle(void);
/* admin.c: the operator's socket (cicadactl) */
int admin_start(const char *run_dir, char *err);
void pool_each_session(void (*each)(pid_t pid, const struct session_stat *st, void *ctx), void *ctx);
int pool_ask_quota(pid_t pid, uint64_t bytes, char *err);
int pool_set_paused(pid_t pid, int on, char *err);
int pool_kill_taken(pid_t pid);
void pool_key_file(const char *path);
void pool_user(const char *name);
void pool_randomize(int on);

/* The front door (admit.c): hellos, caps, the queue. */
/* Migrations coming in (migrate_in.c): criu, its plugin folder, the
 * server the plugin restores GPU state to (our unix listener). */
struct migrate_config {
	char criu[1200], plugins[1200], restore_server[300];
	const char *run_dir;
	int timeout_s;
};
int migrate_in_start(const struct migrate_config *cfg, int fd, uint32_t xid, pid_t pid, const char *peer,
		     const char *devices, int gpu_only, char *why, size_t len);
pid_t migrate_preloader(const char *ticket);
int migrate_in_join(const char *key, const char *kind, int fd, uint32_t xid, char *why, size_t len);

/* criu_run.c: criu for a migration coming in, in a grandchild. */
struct criu_run {
	pid_t criu;
	int report;                          /* its pid, then its wait status, come here */
};
int criu_run_start(const char *criu, char *const argv[], char **env, int keep, struct criu_run *run, char *err);
int criu_run_wait(struct criu_run *run, int ms, int *status);
void criu_run_end(struct criu_run *run);

struct admit_config {
	const char *token, *run_dir;
	const struct migrate_config *migrate;   /* NULL: migrations refused */
	const struct allow_list *allow;         /* unix clients */
	const char *migration_token;            /* OP_MIGRATE over TCP; NULL: refused */
	int max_sessions, max_per_client, max_pending, queue_len;
	int max_requests, max_requests_per_client;   /* requests for paused sessions in hand */
	int hello_timeout_ms, queue_timeout_ms;
};
int admit_serve(const struct admit_config *cfg, const struct listener *ls, int nls);
void admit_worker_ended(pid_t pid);

/* hello.c: a hello answered here, not by a worker */
void hello_reply(int fd, uint32_t xid, int err, uint64_t pid, const char *msg);

int token_load(const char *path, char *token, size_t len, char *err);

/* tokens.c: tokens of their own for jobs (--token-dir), each named by its
 * file; sessions tagged by the token they proved end when it goes. */
#define TOKEN_NAME_MAX 64
int tokens_start(const char *dir, char *err);
int tokens_enabled(void);
int tokens_match(const uint8_t nonce[WIRE_NONCE_LEN], const void *proof, size_t len, char name[TOKEN_NAME_MAX],
		 uint64_t *print);
void tokens_tag(pid_t worker, const char *name, uint64_t print);
void tokens_untag(pid_t worker);
int tokens_tag_of(pid_t worker, char name[TOKEN_NAME_MAX]);
int tokens_revoke(const char *name);

#define ALLOW_MAX 64
struct allow_list {
	int set;
	uid_t uids[ALLOW_MAX];
	gid_t gids[ALLOW_MAX];
	int nuids, ngids;
};
int allow_parse(struct allow_list *a, const char *list, int groups, char *err);
int allow_peer(const struct allow_list *a, uid_t uid, gid_t gid);
int dir_check(const char *path, const char *what, char *err);

#endif

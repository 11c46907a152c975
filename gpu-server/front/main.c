/*
 * main.c: the gpu-server daemon: its options, listeners and run directory.
 * The pool of pre-initialised workers is pool.c's; the front door, which
 * reads hellos and admits sessions under the caps, is admit.c's. One
 * worker serves one client and exits with it.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "front.h"
#include "session.h"
#include "snapshot.h"

#define MAX_LISTENERS 8

struct server {
	struct listener listeners[MAX_LISTENERS];
	int nlisteners;
	char token[CICADA_TOKEN_MAX + 1];
	char migration_token[CICADA_TOKEN_MAX + 1];   /* --migration-token-file */
	char cache_dir[1024];
	char run_dir[1024];
	int pool_size;
	int refill_delay_ms;
	int accept_migrations;
	int mps;                             /* --mps: workers are MPS clients */
	struct migrate_config migrate;
	struct allow_list allow;
	const char *key_file;                /* keyed snapshots */
	const char *user;                    /* --user: remote tenants' workers run as it */
	const char *tls_cert, *tls_key;      /* for tls: listeners */
	const char *tls_client_ca;           /* tls: clients must present a certificate of it */
	const char *token_dir;               /* --token-dir */
	int gpus_per_client;
	struct admit_config admit;
};

static struct server srv = {
	.pool_size = 2, .refill_delay_ms = 5000, .migrate = { .timeout_s = 120 },
	.admit = { .max_sessions = 64, .max_per_client = 0, .max_pending = 256, .queue_len = 256,
		   .max_requests = 64, .max_requests_per_client = 8,
		   .hello_timeout_ms = 10000, .queue_timeout_ms = 60000 },
};

/* Paused sessions listen here: private to the server's user. */
static int make_run_dir(struct server *s)
{
	char err[WIRE_ERRLEN];

	if (!s->run_dir[0]) {
		snprintf(s->run_dir, sizeof(s->run_dir), "%s/cicada-run-XXXXXX",
			 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		if (!mkdtemp(s->run_dir)) {
			fprintf(stderr, "gpu-server: cannot create %s: %s\n", s->run_dir, strerror(errno));
			return -1;
		}
	} else if (mkdir(s->run_dir, 0700) && errno != EEXIST) {
		fprintf(stderr, "gpu-server: cannot use --run-dir %s: %s\n", s->run_dir, strerror(errno));
		return -1;
	}
	if (dir_check(s->run_dir, "--run-dir", err)) {
		fprintf(stderr, "gpu-server: %s; use a directory of this user's that only it may write\n", err);
		return -1;
	}
	log_info("paused sessions live in %s", s->run_dir);
	return 0;
}

#define HELP 3                                /* parse_args: --help was printed */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpu-server --listen ADDR [--listen ADDR]... [--token-file FILE] [--token-dir DIR]\n"
		"                  [--workers N] [--refill-delay MS] [--cache-dir DIR] [--run-dir DIR]\n"
		"                  [--max-sessions N] [--max-sessions-per-client N] [--queue N]\n"
		"                  [--queue-timeout MS] [--max-pending N] [--hello-timeout MS]\n"
		"                  [--accept-migrations [--criu PATH] [--criu-plugins DIR] [--migrate-timeout S]]\n"
		"                  [--allow-users U,...] [--allow-groups G,...] [--snapshot-key-file FILE]\n"
		"                  [--cache-quota SIZE] [--shared-module-cache] [--tls-cert FILE --tls-key FILE]\n"
		"                  [--tls-client-ca FILE] [--gpus I,J,...] [--gpus-per-client N] [--user NAME] [--worker-aslr]\n"
		"                  [--migration-token-file FILE] [--max-requests N] [--max-requests-per-client N]\n"
		"                  [--max-staged SIZE] [--memory-quota POLICY] [--sm-share POLICY [--overcommit] [--mps]]\n"
		"  ADDR is unix:/path, tcp:host:port (tcp:port binds 127.0.0.1) or tls:host:port\n"
		"  (TCP with TLS, which needs --tls-cert and --tls-key, PEM files).\n"
		"  --tls-client-ca: tls: clients must present a certificate of this CA (PEM);\n"
		"  its subject CN names the client for tls:NAME rules.\n"
		"  TCP and TLS listeners require --token-file or --token-dir. CICADA_LOG=debug|info|warn|error.\n"
		"  --token-dir: each file holds a token of its own (a job's); a session that\n"
		"  proved one ends once its file is removed or rewritten.\n"
		"  Unix clients: the server's own user, and with --allow-users/--allow-groups\n"
		"  only those users and members of those groups (names or numbers).\n"
		"  --snapshot-key-file: snapshots are signed with this secret, and only signed\n"
		"  ones are restored.\n"
		"  --accept-migrations: gpu-migrate may restore whole processes here (as this\n"
		"  server's user; needs a unix listener); criu defaults to the one beside this\n"
		"  program (criu or cicada-criu), else a system criu, and its plugins to ../lib/criu beside it. Over\n"
		"  TCP a migration proves --migration-token-file's token (never the tenants').\n"
		"  Workers run as their tenant: a unix client's user, or for TCP and TLS\n"
		"  clients --user (default: 'cicada', else 'nobody'). --worker-aslr gives\n"
		"  workers a random address layout (their restores then refuse snapshots whose\n"
		"  module variables move; see docs/security.md).\n"
		"  --memory-quota: device memory per session, by tenant: rules token:NAME=SIZE\n"
		"  (a --token-dir token the session proved), tls:NAME=SIZE (a TLS client's\n"
		"  certificate CN, with --tls-client-ca), uid:N=SIZE,\n"
		"  user:NAME=SIZE, gid:N=SIZE, group:NAME=SIZE, remote=SIZE (TCP and TLS\n"
		"  tenants), default=SIZE, comma-separated (SIZE: bytes, or with K, M, G, T).\n"
		"  --sm-share: SMs of each GPU per session, by tenant, rules as --memory-quota's\n"
		"  with N (SMs) or P%% for values: whole groups of SMs (8 on an H100), none of them\n"
		"  another session's; past the GPU's, a session is refused, unless --overcommit.\n"
		"  --mps: the node runs NVIDIA's MPS control daemon (CUDA_MPS_PIPE_DIRECTORY):\n"
		"  the workers are its clients, so that sessions on their own SMs run at once.\n"
		"  --max-requests(-per-client): requests for paused sessions handed on at once.\n"
		"  --gpus: serve only these GPUs of the node (all by default). A client sees\n"
		"  them all, or with --gpus-per-client N (or its own CICADA_GPUS=N) the N\n"
		"  least loaded; its CUDA_VISIBLE_DEVICES picks among what it was given.\n");
}

static int add_listener(struct server *s, const char *text, char *err)
{
	char buf[512];

	if (s->nlisteners == MAX_LISTENERS) {
		wire_fail(err, "too many listeners");
		return -1;
	}
	if ((!strncmp(text, "tcp:", 4) || !strncmp(text, "tls:", 4)) && !strchr(text + 4, ':')) {
		snprintf(buf, sizeof(buf), "%.3s:127.0.0.1:%s", text, text + 4);
		text = buf;
	}
	return wire_parse_addr(text, &s->listeners[s->nlisteners++].addr, err);
}

/* A whole-number option between lo and hi. */
static int number(const char *text, const char *name, int lo, int hi, int *out, char *err)
{
	char *end;
	long v = strtol(text, &end, 10);

	if (!*text || *end || v < lo || v > hi) {
		wire_fail(err, "%s must be a whole number from %d to %d", name, lo, hi);
		return -1;
	}
	*out = (int)v;
	return 0;
}

/* --accept-migrations: where criu and its plugin are, and our unix
 * listener, through which the plugin restores the GPU state. */
static int migrate_setup(struct server *s, char *err)
{
	for (int i = 0; i < s->nlisteners && !s->migrate.restore_server[0]; i++)
		if (s->listeners[i].addr.kind == WIRE_UNIX)
			wire_format_addr(&s->listeners[i].addr, s->migrate.restore_server,
					 sizeof(s->migrate.restore_server));
	if (!s->migrate.restore_server[0]) {
		wire_fail(err, "--accept-migrations needs a unix listener (criu's plugin restores through it)");
		return -1;
	}
	criu_default_paths(s->migrate.criu, sizeof(s->migrate.criu), s->migrate.plugins,
			   sizeof(s->migrate.plugins));
	if (access(s->migrate.criu, X_OK)) {
		wire_fail(err, "--accept-migrations: no criu at %.400s (--criu PATH)", s->migrate.criu);
		return -1;
	}
	return 0;
}

/* --cache-quota SIZE and --max-staged SIZE (bytes, or with K, M, G or T):
 * for the workers, through the environment (CICADA_CACHE_QUOTA: module
 * images beyond it are evicted; CICADA_STAGED_MAX: the pinned memory a
 * worker holds to stage its client's pageable copies). */
static int size_option(const char *text, const char *option, const char *var, char *err)
{
	char buf[32];
	uint64_t v;

	if (wire_parse_size(text, &v)) {
		wire_fail(err, "%s takes a size above 0: bytes, or a number with K, M, G or T", option);
		return -1;
	}
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	return setenv(var, buf, 1);
}

static int parse_option(struct server *s, int c, const char *arg, int *worker_fd, char *err)
{
	struct admit_config *a = &s->admit;

	switch (c) {
	case 'l': return add_listener(s, arg, err);
	case 't': return token_load(arg, s->token, sizeof(s->token), err);
	case 'J': s->token_dir = arg; return 0;
	case 'w': return number(arg, "--workers", 1, pool_max(), &s->pool_size, err);
	case 'D': return number(arg, "--refill-delay", 0, 3600000, &s->refill_delay_ms, err);
	case 'c': snprintf(s->cache_dir, sizeof(s->cache_dir), "%s", arg); return 0;
	case 'W': *worker_fd = atoi(arg); return 0;
	case 'r': snprintf(s->run_dir, sizeof(s->run_dir), "%s", arg); return 0;
	case 'S': return number(arg, "--max-sessions", 1, 100000, &a->max_sessions, err);
	case 'C': return number(arg, "--max-sessions-per-client", 1, 100000, &a->max_per_client, err);
	case 'Q': return number(arg, "--queue", 0, 100000, &a->queue_len, err);
	case 'T': return number(arg, "--queue-timeout", 0, 3600000, &a->queue_timeout_ms, err);
	case 'P': return number(arg, "--max-pending", 1, 100000, &a->max_pending, err);
	case 'H': return number(arg, "--hello-timeout", 100, 600000, &a->hello_timeout_ms, err);
	case 'M': s->accept_migrations = 1; return 0;
	case 'R': snprintf(s->migrate.criu, sizeof(s->migrate.criu), "%s", arg); return 0;
	case 'L': snprintf(s->migrate.plugins, sizeof(s->migrate.plugins), "%s", arg); return 0;
	case 'm': return number(arg, "--migrate-timeout", 1, 3600, &s->migrate.timeout_s, err);
	case 'K': s->key_file = arg; return snap_key_load(arg, err);
	case 'q': return size_option(arg, "--cache-quota", "CICADA_CACHE_QUOTA", err);
	case 'Z': return size_option(arg, "--max-staged", "CICADA_STAGED_MAX", err);
	case 'O': return quota_policy_check(arg, err) ? -1 : setenv("CICADA_MEMORY_QUOTA", arg, 1);
	case 'B': return sm_share_set_policy(arg, err);
	case 'o': sm_share_set_overcommit(1); return 0;
	case 'p': s->mps = 1; return 0;
	case 'X': return setenv("CICADA_STAT_FD", arg, 1);   /* (a worker's page: pool.c) */
	case 's': return setenv("CICADA_CACHE_SHARED", "1", 1);
	case 'U': return allow_parse(&s->allow, arg, 0, err);
	case 'G': return allow_parse(&s->allow, arg, 1, err);
	case 'x': s->tls_cert = arg; return 0;
	case 'y': s->tls_key = arg; return 0;
	case 'A': s->tls_client_ca = arg; return 0;
	case 'g': return placement_set_gpus(arg, err);
	case 'n': return number(arg, "--gpus-per-client", 0, CICADA_MAX_GPUS, &s->gpus_per_client, err);
	case 'u': s->user = arg; return privsep_set_user(arg, err);
	case 'a': pool_randomize(1); return 0;
	case 'k': return token_load(arg, s->migration_token, sizeof(s->migration_token), err);
	case 'e': return number(arg, "--max-requests", 1, 100000, &a->max_requests, err);
	case 'E': return number(arg, "--max-requests-per-client", 1, 100000, &a->max_requests_per_client, err);
	case 'h': usage(stdout); return HELP;
	}
	usage(stderr);
	return 1;
}

static int parse_args(struct server *s, int argc, char **argv, int *worker_fd)
{
	static const struct option opts[] = {
		{ "listen", required_argument, 0, 'l' }, { "token-file", required_argument, 0, 't' },
		{ "workers", required_argument, 0, 'w' }, { "cache-dir", required_argument, 0, 'c' },
		{ "worker-fd", required_argument, 0, 'W' }, { "run-dir", required_argument, 0, 'r' },
		{ "refill-delay", required_argument, 0, 'D' }, { "max-sessions", required_argument, 0, 'S' },
		{ "max-sessions-per-client", required_argument, 0, 'C' }, { "queue", required_argument, 0, 'Q' },
		{ "queue-timeout", required_argument, 0, 'T' }, { "max-pending", required_argument, 0, 'P' },
		{ "hello-timeout", required_argument, 0, 'H' }, { "help", no_argument, 0, 'h' },
		{ "accept-migrations", no_argument, 0, 'M' }, { "criu", required_argument, 0, 'R' },
		{ "criu-plugins", required_argument, 0, 'L' }, { "migrate-timeout", required_argument, 0, 'm' },
		{ "allow-users", required_argument, 0, 'U' }, { "allow-groups", required_argument, 0, 'G' },
		{ "snapshot-key-file", required_argument, 0, 'K' }, { "cache-quota", required_argument, 0, 'q' },
		{ "shared-module-cache", no_argument, 0, 's' }, { "tls-cert", required_argument, 0, 'x' },
		{ "tls-key", required_argument, 0, 'y' }, { "gpus", required_argument, 0, 'g' },
		{ "gpus-per-client", required_argument, 0, 'n' }, { "user", required_argument, 0, 'u' },
		{ "worker-aslr", no_argument, 0, 'a' }, { "migration-token-file", required_argument, 0, 'k' },
		{ "max-requests", required_argument, 0, 'e' }, { "max-requests-per-client", required_argument, 0, 'E' },
		{ "max-staged", required_argument, 0, 'Z' }, { "memory-quota", required_argument, 0, 'O' },
		{ "stat-fd", required_argument, 0, 'X' }, { "sm-share", required_argument, 0, 'B' },
		{ "overcommit", no_argument, 0, 'o' }, { "mps", no_argument, 0, 'p' },
		{ "token-dir", required_argument, 0, 'J' }, { "tls-client-ca", required_argument, 0, 'A' }, { 0 } };
	char err[WIRE_ERRLEN];
	int c, has_tcp = 0, has_tls = 0, rc;

	snprintf(s->cache_dir, sizeof(s->cache_dir), "/var/tmp/cicada-modules");
	while ((c = getopt_long(argc, argv, "l:t:w:c:h", opts, NULL)) != -1)
		if ((rc = parse_option(s, c, optarg, worker_fd, err)))
			goto bad;
	if (*worker_fd >= 0)
		return 0;
	placement_set_per_client((unsigned)s->gpus_per_client);
	if (!s->admit.max_per_client || s->admit.max_per_client > s->admit.max_sessions)
		s->admit.max_per_client = s->admit.max_sessions;
	for (int i = 0; i < s->nlisteners; i++) {
		has_tcp |= s->listeners[i].addr.kind == WIRE_TCP;
		has_tls |= s->listeners[i].addr.tls;
	}
	if (!s->nlisteners) {
		usage(stderr);
		return -1;
	}
	if (has_tcp && !s->token[0] && !s->token_dir) {
		snprintf(err, sizeof(err), "a TCP listener requires --token-file or --token-dir");
		rc = -1;
		goto bad;
	}
	if (has_tls && (!s->tls_cert || !s->tls_key)) {
		snprintf(err, sizeof(err), "a tls: listener requires --tls-cert and --tls-key");
		rc = -1;
		goto bad;
	}
	if (s->tls_client_ca && !has_tls) {
		snprintf(err, sizeof(err), "--tls-client-ca is for tls: listeners, and there is none");
		rc = -1;
		goto bad;
	}
	if (has_tls && wire_tls_server_init(s->tls_cert, s->tls_key, s->tls_client_ca, err)) {
		rc = -1;
		goto bad;
	}
	if (s->accept_migrations && migrate_setup(s, err)) {
		rc = -1;
		goto bad;
	}
	if (s->migration_token[0] && s->token[0] && !strcmp(s->migration_token, s->token)) {
		snprintf(err, sizeof(err), "--migration-token-file must differ from --token-file "
			 "(a tenant must not be able to migrate processes here)");
		rc = -1;
		goto bad;
	}
	if (s->admit.max_requests_per_client > s->admit.max_requests)
		s->admit.max_requests_per_client = s->admit.max_requests;
	return 0;
bad:
	if (rc < 0)
		fprintf(stderr, "gpu-server: %s\n", err);
	return rc == HELP ? HELP : -1;
}

/* TCP listeners first: once a unix socket exists (what scripts wait
 * for), every address takes connections. */
static int open_listeners(struct server *s)
{
	char err[WIRE_ERRLEN], text[300];

	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < s->nlisteners; i++) {
			struct listener *l = &s->listeners[i];

			if ((l->addr.kind == WIRE_UNIX) != pass)
				continue;
			if ((l->fd = wire_listen(&l->addr, err)) < 0) {
				fprintf(stderr, "gpu-server: %s\n", err);
				return -1;
			}
			wire_format_addr(&l->addr, text, sizeof(text));
			log_info("listening on %s", text);
		}
	return 0;
}

/* --mps: the MPS control daemon's socket is there, for the workers to
 * become its clients when they start CUDA. Without MPS the GPU runs
 * different processes' contexts in turns, so sessions on disjoint SMs
 * (--sm-share) would not run side by side. */
static int mps_check(char *err)
{
	const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
	char path[600];
	struct stat st;

	snprintf(path, sizeof(path), "%s/control", dir && *dir ? dir : "/tmp/nvidia-mps");
	if (stat(path, &st) || !S_ISSOCK(st.st_mode))
		return wire_fail(err, "--mps: no MPS control daemon at %s (start nvidia-cuda-mps-control -d, "
				 "with CUDA_MPS_PIPE_DIRECTORY as the server has it)", path);
	log_info("workers are clients of the MPS control daemon at %s", path);
	return 0;
}

int main(int argc, char **argv)
{
	char err[WIRE_ERRLEN];
	int worker_fd = -1, rc;

	signal(SIGPIPE, SIG_IGN);
	privsep_init();
	log_init("gpu-server");
	if (!getenv("CICADA_LOG"))
		setenv("CICADA_LOG", "info", 0), log_init("gpu-server");
	if ((rc = parse_args(&srv, argc, argv, &worker_fd)))
		return rc == HELP ? 0 : 2;
	if (worker_fd >= 0) {
		signal(SIGCHLD, SIG_IGN);
		log_init("gpu-worker");
		return worker_main(worker_fd, srv.cache_dir, srv.run_dir);
	}
	if (srv.mps && mps_check(err)) {
		fprintf(stderr, "gpu-server: %s\n", err);
		return 1;
	}
	if (make_run_dir(&srv))
		return 1;
	if (mkdir(srv.cache_dir, 0700) && errno != EEXIST)
		log_warn("cannot create module cache %s: %s", srv.cache_dir, strerror(errno));
	else if (dir_check(srv.cache_dir, "--cache-dir", err)) {
		fprintf(stderr, "gpu-server: %s; use a directory of this user's that only it may write\n", err);
		return 1;
	}
	if (srv.token_dir && tokens_start(srv.token_dir, err)) {
		fprintf(stderr, "gpu-server: %s\n", err);
		return 1;
	}
	if (open_listeners(&srv))
		return 1;
	log_info("at most %d sessions (%d per client), %d waiting; hellos within %d ms, at most %d at once",
		 srv.admit.max_sessions, srv.admit.max_per_client, srv.admit.queue_len, srv.admit.hello_timeout_ms,
		 srv.admit.max_pending);
	srv.admit.token = srv.token;
	srv.admit.migration_token = srv.migration_token[0] ? srv.migration_token : NULL;
	srv.admit.run_dir = srv.run_dir;
	srv.admit.allow = &srv.allow;
	pool_key_file(srv.key_file);
	pool_user(srv.user);
	if (srv.accept_migrations) {
		srv.migrate.run_dir = srv.run_dir;
		srv.admit.migrate = &srv.migrate;
		log_info("accepting migrations (criu %s, plugins %s)", srv.migrate.criu, srv.migrate.plugins);
	}
	if (pool_start(srv.cache_dir, srv.run_dir, srv.pool_size, srv.refill_delay_ms, admit_worker_ended)) {
		log_error("cannot start the worker pool: %s", strerror(errno));
		return 1;
	}
	if (admin_start(srv.run_dir, err)) {
		log_error("%s", err);
		return 1;
	}
	if (admit_serve(&srv.admit, srv.listeners, srv.nlisteners)) {
		log_error("the front door failed: %s", strerror(errno));
		return 1;
	}
	return 0;
}

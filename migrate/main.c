/*
 * main.c: gpu-migrate's command line and report.
 *
 *   gpu-migrate PID --to HOST:PORT|tcp:HOST:PORT|tls:HOST:PORT|unix:PATH [--gpu-only]
 *   gpu-migrate PID --to local --gpu N[,M]   (GPU state only, this node's GPU N)
 *       [--token-file FILE] [--migration-token-file FILE] [--json] [--work-dir DIR] [--timeout S]
 *       [--criu PATH] [--criu-plugins DIR] [--no-precopy] [--no-page-server] [--streams N]
 *
 * It ends with one summary line (downtime, total time, bytes moved,
 * compression ratio, pre-copy rounds), or with --json the same as one
 * JSON object; on failure, one line saying why, exit status 1, and the
 * application still running on the source.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "migrate.h"
#include "snapshot.h"

#define HELP 3                                /* parse: --help was printed */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpu-migrate PID --to HOST:PORT|tcp:HOST:PORT|tls:HOST:PORT|unix:PATH|local [--gpu-only]\n"
		"                   [--gpu N[,M...]]\n"
		"                   [--token-file FILE] [--migration-token-file FILE] [--json] [--work-dir DIR]\n"
		"                   [--timeout S] [--criu PATH] [--criu-plugins DIR] [--no-precopy] [--no-page-server]\n"
		"                   [--streams N]\n"
		"  Moves a process that runs through Cicada, with its GPU state, to the gpu-server\n"
		"  at the target (started with --accept-migrations), or with --gpu-only moves only\n"
		"  its GPU state. The token is the target's tenants' (default: CICADA_TOKEN_FILE);\n"
		"  the migration token the target's --migration-token-file (default:\n"
		"  CICADA_MIGRATION_TOKEN_FILE), which a move over TCP needs (a --gpu-only move\n"
		"  without it sends the snapshot as a tenant would, without pre-copy rounds).\n"
		"  --gpu: the target server's GPU for the application's GPU 0 (then its GPU 1...;\n"
		"  the server's other GPUs follow); with --to local, another GPU of this node.\n"
		"  Without it, the target places the application as it places new sessions.\n"
		"  A whole move sends the process's memory pages straight to a criu page-server\n"
		"  on the target while criu dumps them; --no-page-server sends them with the\n"
		"  images, after the dump, compressed (better on a slow link). A tls: target is\n"
		"  checked against CICADA_TLS_CA (else the system's trust store); a program moved\n"
		"  --gpu-only reattaches there with the CA it was started with.\n");
}

/* criu and its plugins as gpu-server finds them (session/criu_path.c). */
static void default_paths(struct migrate_opts *o)
{
	criu_default_paths(o->criu, sizeof(o->criu), o->plugins, sizeof(o->plugins));
	if (!o->work_dir[0])
		snprintf(o->work_dir, sizeof(o->work_dir), "%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
}

/* host:port means tcp:host:port; tls:host:port is TCP with TLS. */
static int set_target(struct migrate_opts *o, const char *to, char *err)
{
	struct wire_addr a;

	if (!strcmp(to, "local"))
		return o->target[0] = 0, 0;
	if (strncmp(to, "tcp:", 4) && strncmp(to, "unix:", 5) && strncmp(to, "tls:", 4))
		snprintf(o->target, sizeof(o->target), "tcp:%s", to);
	else
		snprintf(o->target, sizeof(o->target), "%s", to);
	return wire_parse_addr(o->target, &a, err);
}

static int parse(int argc, char **argv, struct migrate_opts *o, char *err)
{
	static const struct option opts[] = {
		{ "to", required_argument, 0, 't' }, { "gpu-only", no_argument, 0, 'g' },
		{ "gpu", required_argument, 0, 'G' }, { "token-file", required_argument, 0, 'k' },
		{ "json", no_argument, 0, 'j' }, { "work-dir", required_argument, 0, 'w' },
		{ "timeout", required_argument, 0, 'T' }, { "criu", required_argument, 0, 'c' },
		{ "criu-plugins", required_argument, 0, 'L' }, { "no-precopy", no_argument, 0, 'P' },
		{ "streams", required_argument, 0, 'S' }, { "help", no_argument, 0, 'h' },
		{ "migration-token-file", required_argument, 0, 'm' }, { "no-page-server", no_argument, 0, 'N' },
		{ 0 } };
	const char *to = NULL, *token = getenv("CICADA_TOKEN_FILE"), *mtoken = getenv("CICADA_MIGRATION_TOKEN_FILE");
	char *end;
	int c;

	*o = (struct migrate_opts){ .gpu = -1, .timeout_s = 120, .precopy = 1, .streams = MIGRATE_STREAMS,
				    .page_server = 1 };
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 't': to = optarg; break;
		case 'g': o->gpu_only = 1; break;
		case 'G':
			o->gpu = strlen(optarg) && strlen(optarg) < sizeof(o->gpus) &&
				 strspn(optarg, "0123456789,abcdefABCDEF-GPU") == strlen(optarg) ? 0 : -2;
			snprintf(o->gpus, sizeof(o->gpus), "%s", optarg);
			break;
		case 'k': token = optarg; break;
		case 'm': mtoken = optarg; break;
		case 'j': o->json = 1; break;
		case 'w': snprintf(o->work_dir, sizeof(o->work_dir), "%s", optarg); break;
		case 'T': o->timeout_s = atoi(optarg) > 0 ? atoi(optarg) : 120; break;
		case 'c': snprintf(o->criu, sizeof(o->criu), "%s", optarg); break;
		case 'L': snprintf(o->plugins, sizeof(o->plugins), "%s", optarg); break;
		case 'P': o->precopy = 0; break;
		case 'N': o->page_server = 0; break;
		case 'S': o->streams = (int)strtol(optarg, &end, 10); if (*end) o->streams = 0; break;
		case 'h': usage(stdout); return HELP;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1 || !to) {
		usage(stderr);
		return 2;
	}
	o->pid = (int)strtol(argv[optind], &end, 10);
	if (*end || o->pid <= 0)
		return wire_fail(err, "'%s' is not a process id", argv[optind]);
	if (o->gpu == -2)
		return wire_fail(err, "--gpu takes GPU indices or UUIDs, first the one for the "
				"application's GPU 0: 1, or 1,0");
	if (o->streams < 1 || o->streams > SNAP_STREAMS_MAX)
		return wire_fail(err, "--streams takes 1 to %d", SNAP_STREAMS_MAX);
	if (set_target(o, to, err))
		return -1;
	if (!o->target[0] && !o->gpu_only && o->gpu < 0)
		return wire_fail(err, "--to local moves GPU state only: give --gpu N");
	if (!o->target[0])
		o->gpu_only = 1;
	snprintf(o->token_hex, sizeof(o->token_hex), "%s", o->target[0] && !o->gpu_only ? "-" : "");
	if (token && o->target[0] && token_file_hex(token, o->token_hex, sizeof(o->token_hex), err))
		return -1;
	if (mtoken && o->target[0] &&
	    token_file_hex(mtoken, o->migration_token_hex, sizeof(o->migration_token_hex), err))
		return -1;
	default_paths(o);
	return 0;
}

static void report(const struct migrate_opts *o, const struct migrate_result *r)
{
	double ratio = r->wire_bytes ? (double)r->state_bytes / (double)r->wire_bytes : 1.0;

	if (o->json) {
		printf("{\"ok\":true,\"pid\":%d,\"mode\":\"%s\",\"target\":\"%s\",\"new_pid\":%d,\"downtime_s\":%.3f,"
		       "\"total_s\":%.3f,\"bytes\":%llu,\"frozen_bytes\":%llu,\"state_bytes\":%llu,"
		       "\"compression_ratio\":%.2f,\"rounds\":%d,\"dump_s\":%.3f,\"send_s\":%.3f,\"restore_s\":%.3f,"
		       "\"target_pages_wait_s\":%.3f,\"target_criu_restore_s\":%.3f,\"streams\":%d}\n",
		       o->pid, r->mode, r->target, r->new_pid, r->downtime_s, r->total_s,
		       (unsigned long long)r->wire_bytes, (unsigned long long)r->final_bytes,
		       (unsigned long long)r->state_bytes, ratio, r->rounds, r->dump_s, r->send_s, r->restore_s,
		       r->target_pages_s, r->target_criu_s, r->streams);
		return;
	}
	printf("gpu-migrate: process %d moved (%s) to %s%s: downtime %.3f s, total %.3f s, %.1f MiB moved, "
	       "compression %.2fx, %d pre-copy rounds\n", o->pid, r->mode, r->target,
	       r->new_pid ? "" : "", r->downtime_s, r->total_s, r->wire_bytes / 1048576.0, ratio, r->rounds);
	if (r->new_pid)
		printf("gpu-migrate: it runs there as pid %d\n", r->new_pid);
}

int main(int argc, char **argv)
{
	struct migrate_opts o;
	struct migrate_result r = { 0 };
	char err[WIRE_ERRLEN] = "";
	int rc;

	log_init("gpu-migrate");
	rc = parse(argc, argv, &o, err);
	if (rc == HELP)
		return 0;
	if (rc > 0)
		return rc;
	if (!rc && o.gpus[0] && setenv("CICADA_RESTORE_GPUS", o.gpus, 1)) {     /* read by the restore's request */
		wire_fail(err, "out of memory");
		rc = -1;
	}
	if (!rc)
		session_ctl_wait(o.pid, SESSION_CTL_WAIT_MS);   /* (one just checkpointed listens again a moment later) */
	if (!rc)
		rc = o.gpu_only ? migrate_gpu_only(&o, &r, err) : migrate_whole(&o, &r, err);
	if (rc) {
		if (o.json)
			printf("{\"ok\":false,\"pid\":%d,\"error\":\"%s\"}\n", o.pid, err);
		fprintf(stderr, "gpu-migrate: %s%s\n", err, r.in_doubt ? "" : "; the application goes on where it was");
		return 1;
	}
	report(&o, &r);
	return 0;
}

/*
 * verbs.c: the verbs that change a session. resize sets its memory
 * quota through the server (raised at once; lowered only to what it
 * holds or more) and its SMs (between two of its calls); checkpoint runs criu with Cicada's plugin on the
 * session's process, which goes on (--leave-running); migrate runs
 * gpu-migrate on it; drain migrates every session on a GPU, one after
 * the other; pause holds a session's calls until resume; revoke ends
 * every session that proved a --token-dir token. checkpoint,
 * migrate and drain need the process on this node: a remote tenant's
 * runs where its client does.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cicadactl.h"
#include "session.h"

#define RUN_DEADLINE_S 3600                   /* criu, gpu-migrate (which has its own --timeout) */

/* One request to the server, its OK (into ok, if set: what follows it)
 * or its ERROR said; 0 or 1. */
static int ask_ok(const struct ctl_opts *o, const char *request, char *ok, size_t len)
{
	char answer[512], err[512];

	if (ctl_ask(o, request, answer, sizeof(answer), err, sizeof(err))) {
		fprintf(stderr, "cicadactl: %s\n", err);
		return 1;
	}
	if (strncmp(answer, "OK", 2)) {
		answer[strcspn(answer, "\n")] = 0;
		fprintf(stderr, "cicadactl: %s\n", strncmp(answer, "ERROR ", 6) ? answer : answer + 6);
		return 1;
	}
	if (ok && len) {
		size_t n = strnlen(answer + 2, len - 1);
		memcpy(ok, answer + 2, n);
		ok[n] = 0;
	}
	return 0;
}

/* resize --sms N|all: the session's SMs on each of its GPUs. */
static int resize_sms(const struct ctl_opts *o, long worker)
{
	char request[96], *end;
	unsigned long n = strcmp(o->sms, "all") ? strtoul(o->sms, &end, 10) : 0;

	if (strcmp(o->sms, "all") && (end == o->sms || *end || !n || n > 65535 || o->sms[0] == '-')) {
		fprintf(stderr, "cicadactl: --sms takes a number of SMs, or 'all'\n");
		return 2;
	}
	snprintf(request, sizeof(request), "SMS %ld %lu", worker, n);
	if (ask_ok(o, request, NULL, 0))
		return 1;
	if (n)
		printf("session %ld: %lu SMs (whole groups) from its next call\n", worker, n);
	else
		printf("session %ld: whole GPUs from its next call\n", worker);
	return 0;
}

int ctl_resize(const struct ctl_opts *o, long worker)
{
	char request[96];
	uint64_t bytes;

	if (!o->memory[0] && !o->sms[0]) {
		fprintf(stderr, "cicadactl: resize needs --memory SIZE|none or --sms N|all\n");
		return 2;
	}
	if (!o->memory[0])
		return resize_sms(o, worker);
	if (!strcmp(o->memory, "none")) {
		bytes = 0;
	} else if (wire_parse_size(o->memory, &bytes)) {
		fprintf(stderr, "cicadactl: resize needs --memory SIZE (bytes, or with K, M, G, T; 'none': no quota)\n");
		return 2;
	}
	snprintf(request, sizeof(request), "QUOTA %ld %llu", worker, (unsigned long long)bytes);
	if (ask_ok(o, request, NULL, 0))
		return 1;
	if (bytes)
		printf("session %ld: memory quota %llu MiB\n", worker, (unsigned long long)(bytes >> 20));
	else
		printf("session %ld: no memory quota\n", worker);
	return o->sms[0] ? resize_sms(o, worker) : 0;
}

/* pause (on) or resume a session: its calls held by its worker, or let
 * go; what already runs on the GPU goes on. */
int ctl_pause(const struct ctl_opts *o, long worker, int on)
{
	char request[64];

	snprintf(request, sizeof(request), "%s %ld", on ? "PAUSE" : "RESUME", worker);
	if (ask_ok(o, request, NULL, 0))
		return 1;
	printf("session %ld: %s\n", worker, on ? "paused (its calls wait)" : "resumed");
	return 0;
}

/* Runs argv (argv[0] a path) within RUN_DEADLINE_S; its exit status
 * (127: not run, or killed at the deadline, said in one line). */
static int run(char **argv)
{
	char err[WIRE_ERRLEN];
	int status;

	if (session_exec(argv, -1, RUN_DEADLINE_S, &status, err)) {
		fprintf(stderr, "cicadactl: %s\n", err);
		return 127;
	}
	return status;
}

/* The session's process, on this node; -1 with a line if it is not. */
static long local_process(const struct ctl_opts *o, long worker)
{
	struct ctl_session s;
	char err[512];

	if (ctl_find(o, worker, &s, err, sizeof(err))) {
		fprintf(stderr, "cicadactl: %s\n", err);
		return -1;
	}
	if (s.uid < 0 || s.client <= 0 || kill((pid_t)s.client, 0) < 0) {
		fprintf(stderr, "cicadactl: session %ld's process is not on this node (a remote tenant's): act where "
			"it runs\n", worker);
		return -1;
	}
	return s.client;
}

/* Whether pid leads its own session (else criu needs --shell-job). */
static int session_leader(long pid)
{
	return getsid((pid_t)pid) == (pid_t)pid;
}

int ctl_checkpoint(const struct ctl_opts *o, long worker, const char *dir)
{
	char criu[512] = "", plugins[512] = "", pid[24];
	long client = local_process(o, worker);
	char *argv[] = { criu, "dump", "-t", pid, "-D", (char *)dir, "-L", plugins, "--leave-running", "-o", "dump.log",
			 NULL, NULL };
	int rc;

	if (client < 0)
		return 1;
	session_ctl_wait((int)client, SESSION_CTL_WAIT_MS);  /* (one just checkpointed listens again a moment later) */
	criu_default_paths(criu, sizeof(criu), plugins, sizeof(plugins));
	snprintf(pid, sizeof(pid), "%ld", client);
	if (!session_leader(client))
		argv[11] = "--shell-job";
	if ((rc = run(argv))) {
		fprintf(stderr, "cicadactl: criu dump of process %ld failed (exit %d; its log: %s/dump.log); it goes on\n",
			client, rc, dir);
		return 1;
	}
	printf("session %ld: process %ld checkpointed into %s; it goes on\n", worker, client, dir);
	return 0;
}

/* gpu-migrate, beside this program. */
static void migrate_path(char *out, size_t len)
{
	char self[512];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	self[n > 0 ? n : 0] = 0;
	slash = strrchr(self, '/');
	if (slash)
		*slash = 0;
	snprintf(out, len, "%s/gpu-migrate", n > 0 ? self : ".");
}

int ctl_migrate(const struct ctl_opts *o, long worker, char **extra)
{
	char path[600], pid[24], *argv[64] = { path, pid, "--to", (char *)o->to };
	long client;
	int n = 4;

	if (!o->to[0]) {
		fprintf(stderr, "cicadactl: migrate needs --to TARGET (as gpu-migrate takes it)\n");
		return 2;
	}
	if ((client = local_process(o, worker)) < 0)
		return 1;
	migrate_path(path, sizeof(path));
	snprintf(pid, sizeof(pid), "%ld", client);
	while (extra && *extra && n < 62)
		argv[n++] = *extra++;
	argv[n] = NULL;
	return run(argv) ? 1 : 0;
}

/* Whether list (the GPUs "0,2") holds gpu. */
static int on_gpu(const char *list, int gpu)
{
	char copy[32], *save = NULL;

	snprintf(copy, sizeof(copy), "%s", list);
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
		if (atoi(t) == gpu && isdigit((unsigned char)*t))
			return 1;
	return 0;
}

int ctl_drain(const struct ctl_opts *o, char **extra)
{
	static struct ctl_session s[CTL_MAX_SESSIONS];
	char err[512];
	int n, moved = 0, tried = 0;

	if (o->gpu < 0 || !o->to[0]) {
		fprintf(stderr, "cicadactl: drain needs --gpu N and --to TARGET\n");
		return 2;
	}
	if ((n = ctl_sessions(o, s, CTL_MAX_SESSIONS, err, sizeof(err))) < 0) {
		fprintf(stderr, "cicadactl: %s\n", err);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		if (!on_gpu(s[i].gpus, o->gpu))
			continue;
		tried++;
		if (!ctl_migrate(o, s[i].worker, extra))
			moved++;
	}
	printf("drained GPU %d: %d of %d sessions moved to %s\n", o->gpu, moved, tried, o->to);
	return moved == tried ? 0 : 1;
}

/* Ends now every session that proved the --token-dir token named token
 * (the file itself is the operator's, or the batch system's, to remove). */
int ctl_revoke(const struct ctl_opts *o, const char *token)
{
	char request[96], rest[64];
	int n;

	if (!token || !*token || strlen(token) > 63 || strchr(token, ' ')) {
		fprintf(stderr, "cicadactl: revoke needs a token's name (a file of the server's --token-dir)\n");
		return 2;
	}
	snprintf(request, sizeof(request), "REVOKE %s", token);
	if (ask_ok(o, request, rest, sizeof(rest)))
		return 1;
	if (sscanf(rest, "%d", &n) != 1) {
		fprintf(stderr, "cicadactl: the server's answer to revoke has no count\n");
		return 1;
	}
	printf("token %s: %d session%s ended\n", token, n, n == 1 ? "" : "s");
	return 0;
}

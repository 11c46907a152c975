/*
 * admin.c: the operator's socket, <run-dir>/admin.sock (0600: root and
 * the server's user; cicadactl speaks it). One thread answers one text
 * line a connection, each within a deadline:
 *
 *   LIST                 -> a SESSION line a session, then END
 *       SESSION <worker-pid> <client-pid> <uid|-> <gpus|-> <quota> <used> <calls>
 *               <running|paused> <sms|-> <tenant> <token|->   (sms: on its first shared GPU)
 *   QUOTA <worker-pid> <bytes>   (0: no quota)
 *   SMS <worker-pid> <n>         (0: whole GPUs; sm_share.c)
 *   PAUSE <worker-pid>, RESUME <worker-pid>   (the session's calls held, let go)
 *                        -> OK | ERROR <reason>
 *   REVOKE <token-name>  -> OK <n>: the sessions that proved that --token-dir
 *                           token end now (n of them)
 *
 * A quota is raised at once (the session's next allocation or memory
 * query sees it); lowering it below what the session holds is refused.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "front.h"

#define ADMIN_IO_MS 2000

static int admin_fd = -1;

/* One SESSION line; tenant and gpus are the worker's words, kept to
 * printable characters without blanks. */
static void session_line(pid_t pid, const struct session_stat *st, void *ctx)
{
	FILE *f = ctx;
	char tenant[sizeof(st->tenant)], gpus[sizeof(st->gpus)], uid[16] = "-", sms[16] = "-", token[TOKEN_NAME_MAX] = "-";

	snprintf(tenant, sizeof(tenant), "%s", st->tenant);
	snprintf(gpus, sizeof(gpus), "%s", st->gpus[0] ? st->gpus : "-");
	for (char *p = tenant; *p; p++)
		if (*p <= ' ' || *p > '~')
			*p = '_';
	for (char *p = gpus; *p; p++)
		if ((*p < '0' || *p > '9') && *p != ',' && *p != '-')
			*p = '_';
	if (st->uid != (uint32_t)-1)
		snprintf(uid, sizeof(uid), "%u", st->uid);
	for (unsigned d = 0; d < CICADA_MAX_GPUS && !strcmp(sms, "-"); d++)
		if (st->sm_mask[d])
			snprintf(sms, sizeof(sms), "%u", sm_share_count(d, st->sm_mask[d]));
	tokens_tag_of(pid, token);       /* (a file name of --token-dir: no blanks) */
	fprintf(f, "SESSION %d %llu %s %s %llu %llu %llu %s %s %s %s\n", (int)pid, (unsigned long long)st->client_pid,
		uid, gpus, (unsigned long long)st->quota, (unsigned long long)st->charged, (unsigned long long)st->calls,
		st->paused ? "paused" : "running", sms, tenant, token);
}

static void say(FILE *f, int rc, const char *err)
{
	if (rc)
		fprintf(f, "ERROR %s\n", err);
	else
		fprintf(f, "OK\n");
}

static void answer(int fd, const char *line)
{
	FILE *f = fdopen(dup(fd), "w");
	char err[WIRE_ERRLEN], name[TOKEN_NAME_MAX];
	unsigned long long bytes;
	unsigned sms;
	int pid;

	if (!f)
		return;
	if (!strcmp(line, "LIST")) {
		pool_each_session(session_line, f);
		fprintf(f, "END\n");
	} else if (sscanf(line, "QUOTA %d %llu", &pid, &bytes) == 2 && pid > 0) {
		say(f, pool_ask_quota(pid, bytes, err), err);
	} else if (sscanf(line, "SMS %d %u", &pid, &sms) == 2 && pid > 0) {
		say(f, pool_ask_sms(pid, sms, err), err);
	} else if ((sscanf(line, "PAUSE %d", &pid) == 1 || sscanf(line, "RESUME %d", &pid) == 1) && pid > 0) {
		say(f, pool_set_paused(pid, line[0] == 'P', err), err);
	} else if (sscanf(line, "REVOKE %63s", name) == 1) {
		fprintf(f, "OK %d\n", tokens_revoke(name));
	} else {
		fprintf(f, "ERROR unknown request (LIST, QUOTA PID BYTES, SMS PID N, PAUSE PID, RESUME PID, REVOKE NAME)\n");
	}
	fclose(f);
}

static void *admin_loop(void *arg)
{
	(void)arg;
	for (;;) {
		char line[128];
		struct ucred c;
		socklen_t len = sizeof(c);
		int fd = accept4(admin_fd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno != EINTR && errno != ECONNABORTED)
				usleep(100000);
			continue;
		}
		if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) && peer_is_server(c.uid) &&
		    !wire_set_timeouts(fd, ADMIN_IO_MS) && !wire_read_line(fd, line, sizeof(line)))
			answer(fd, line);
		close(fd);
	}
	return NULL;
}

int admin_start(const char *run_dir, char *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	pthread_t t;

	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/admin.sock", run_dir) >= sizeof(sa.sun_path))
		return wire_fail(err, "the run directory's name is too long for admin.sock");
	unlink(sa.sun_path);
	admin_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (admin_fd < 0 || bind(admin_fd, (struct sockaddr *)&sa, sizeof(sa)) || chmod(sa.sun_path, 0600) ||
	    listen(admin_fd, 16))
		return wire_fail(err, "cannot listen at %s: %s", sa.sun_path, strerror(errno));
	if (pthread_create(&t, NULL, admin_loop, NULL) || pthread_detach(t))
		return wire_fail(err, "cannot start the operator's thread");
	log_info("operator's socket: %s (cicadactl)", sa.sun_path);
	return 0;
}

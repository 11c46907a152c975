/*
 * control.c: the control socket through which Cicada's CRIU plugin pauses
 * the process's GPU session before a checkpoint and resumes it after, on
 * the same worker or on a restored one anywhere. It is the abstract unix
 * socket "\0cicada-ctl.<pid>", served by one thread that sleeps in
 * accept() and answers only root or the process's own user.
 *
 * Requests and answers are text lines:
 *   PAUSE                   -> PAUSED <ticket> <server> <token-hex> <token-file|->
 *                              | IDLE (no GPU session) | ERROR <reason>
 *   RESUME <ticket> <server> [<token-hex>]
 *                           -> RESUMED | ERROR <reason>
 * (the token, when given, is the new server's: gpu-migrate's)
 *   PRECOPY <name> <parent|->, then a directory's descriptor (SCM_RIGHTS)
 *                           -> PRECOPIED <pieces> <unchanged> <stored-bytes>
 *                              | IDLE | ERROR <reason>
 * (a migration's pre-copy round, while the program runs: the worker
 * writes its device memory in that directory, see gpu-server/precopy.c)
 * While paused, the thread holds the client lock, so every CUDA call
 * waits. The pause ends with RESUME or when the plugin's connection
 * closes: that resumes the session where it was, so a checkpoint that
 * fails or is killed costs the program nothing. After a restore, CRIU's
 * plugin hands this thread a new connection in place of the old one
 * (DUMP_UNIX_SK/RESTORE_UNIX_SK), and the RESUME names the new worker.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "interposer.h"

#define LINE_MAX_LEN 1024

static void say(int fd, const char *line)
{
	send(fd, line, strlen(line), MSG_NOSIGNAL);
}

static void token_hex(char *out, size_t len)
{
	char token[CICADA_TOKEN_MAX];
	size_t n = client_token(token, sizeof(token));

	if (!n || 2 * n + 1 > len) {
		snprintf(out, len, "-");
		explicit_bzero(token, sizeof(token));
		return;
	}
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", (unsigned char)token[i]);
	explicit_bzero(token, sizeof(token));
}

/* Paused: waits for RESUME (or the end of the connection), then resumes.
 * A RESUME elsewhere that fails resumes where the session was. */
static void paused(int fd, const char *ticket, const char *server)
{
	char line[LINE_MAX_LEN], t[128], s[600], tok[2 * CICADA_TOKEN_MAX + 2] = "", err[WIRE_ERRLEN];
	int got = wire_read_line(fd, line, sizeof(line)) == 0 &&
		  sscanf(line, "RESUME %127s %599s %513s", t, s, tok) >= 2;

	if (!got) {
		snprintf(t, sizeof(t), "%s", ticket);
		snprintf(s, sizeof(s), "%s", server);
		log_info("checkpoint ended; resuming the GPU session at %s", s);
	}
	if (got && tok[0] && client_set_token(tok)) {
		say(fd, "ERROR malformed token\n");
		got = 0;
		snprintf(t, sizeof(t), "%s", ticket);
		snprintf(s, sizeof(s), "%s", server);
	}
	if (!client_resume(s, t, err)) {
		if (got)
			say(fd, "RESUMED\n");
		return;
	}
	log_error("%s", err);
	if (!got)
		return;
	client_set_token(NULL);
	if (client_resume(server, ticket, err)) {
		log_error("%s", err);
		say(fd, "ERROR cannot reattach, nor resume where it was\n");
	} else {
		log_info("resumed the GPU session where it was, at %s", server);
		say(fd, "ERROR cannot reattach; resumed where it was\n");
	}
}

static void precopy(int fd, const char *line)
{
	char name[200], parent[600], err[WIRE_ERRLEN], out[WIRE_ERRLEN + 32];
	uint64_t fig[3];
	int rc, dirfd = wire_recv_fd(fd);

	if (dirfd < 0 || sscanf(line, "PRECOPY %199s %599s", name, parent) != 2) {
		say(fd, "ERROR malformed request\n");
		if (dirfd >= 0)
			close(dirfd);
		return;
	}
	rc = client_precopy(dirfd, name, strcmp(parent, "-") ? parent : "", fig, err);
	close(dirfd);
	if (rc != 0)
		snprintf(out, sizeof(out), "ERROR %s\n", err);
	else
		snprintf(out, sizeof(out), "PRECOPIED %llu %llu %llu\n", (unsigned long long)fig[0],
			 (unsigned long long)fig[1], (unsigned long long)fig[2]);
	say(fd, out);
}

static void serve_one(int fd)
{
	char line[LINE_MAX_LEN], ticket[CICADA_TICKET_LEN + 8], server[300], err[WIRE_ERRLEN];
	char out[2 * CICADA_TOKEN_MAX + 1300], token[2 * CICADA_TOKEN_MAX + 2];
	int rc;

	if (wire_read_line(fd, line, sizeof(line)))
		return;
	if (!strncmp(line, "PRECOPY ", 8)) {
		precopy(fd, line);
		return;
	}
	if (strcmp(line, "PAUSE")) {
		say(fd, "ERROR unknown request\n");
		return;
	}
	client_lock();
	managed_flush();                     /* the snapshot takes the device copy */
	rc = client_pause(ticket, sizeof(ticket), server, sizeof(server), err);
	if (rc) {
		snprintf(out, sizeof(out), rc > 0 ? "IDLE\n" : "ERROR %s\n", err);
		say(fd, out);
	} else {
		const char *file = getenv("CICADA_TOKEN_FILE");

		token_hex(token, sizeof(token));
		snprintf(out, sizeof(out), "PAUSED %s %s %s %.400s\n", ticket, server, token,
			 file && file[0] == '/' && !strchr(file, ' ') ? file : "-");
		say(fd, out);
		paused(fd, ticket, server);
	}
	client_unlock();
}

static int peer_allowed(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	return !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) &&
	       (cred.uid == 0 || cred.uid == getuid());
}

static void *control_thread(void *arg)
{
	int lfd = (int)(intptr_t)arg;

	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			log_warn("control socket: %s; checkpoints are off", strerror(errno));
			return NULL;
		}
		if (peer_allowed(fd))
			serve_one(fd);
		close(fd);
	}
}

static void control_start(void)
{
	static int started;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len;
	sigset_t all, old;
	pthread_t t;
	int fd;

	if (started)
		return;
	started = 1;
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			  snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "cicada-ctl.%d", (int)getpid()));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, len) || listen(fd, 4)) {
		log_warn("no control socket (%s): this process cannot be checkpointed", strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	/* The application's signals go to its own threads, never this one. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (pthread_create(&t, NULL, control_thread, (void *)(intptr_t)fd))
		close(fd);
	else
		pthread_detach(t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static const struct client_hooks control_hooks = { .connected = control_start };

__attribute__((constructor)) static void control_hook(void)
{
	client_add_hooks(&control_hooks);
}

/*
 * control.c: the control socket through which Cicada's CRIU plugin pauses
 * the process's GPU session before a checkpoint and resumes it after, on
 * the same worker or on a restored one anywhere. It is the abstract unix
 * socket "\0cicada-ctl.<pid>" (a tagged name if another holds that one:
 * the plugin finds it among the process's sockets), served by one thread
 * that sleeps in accept() and answers only root or the process's own
 * user. It is closed while paused and made again at the resume, so that
 * a checkpoint carries none: copies restored from one checkpoint side by
 * side (pid namespaces, gpu-template) would otherwise all bind one name.
 *
 * The protocol is wire/control.c's: PAUSE, RESUME and PRECOPY (a
 * migration's pre-copy round, while the program runs: the worker writes
 * its device memory in the directory passed along, see
 * gpu-server/checkpoint/precopy.c).
 *
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

static int listen_fd = -1;              /* the control socket; -1 while paused */

/* The process's token as hex, or "-". */
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

/* The answer to a RESUME, once the control socket listens again (one
 * try: control_thread tries on, outside the client lock). */
static void resumed_say(int fd, const char *line)
{
	if (listen_fd < 0)
		listen_fd = wire_ctl_listen((int)getpid());
	wire_ctl_send(fd, "%s", line);
}

/* Paused: waits for RESUME (or the end of the connection), then resumes.
 * A RESUME elsewhere that fails resumes where the session was. */
static void paused(int fd, const char *ticket, const char *server)
{
	char line[WIRE_CTL_LINE_MAX], err[WIRE_ERRLEN];
	struct wire_ctl_where to;
	int got = wire_read_line(fd, line, sizeof(line)) == 0 && wire_ctl_parse_resume(line, &to) == 0;

	if (got && to.token_hex[0] && client_set_token(to.token_hex)) {
		wire_ctl_send(fd, "ERROR malformed token");
		got = 0;
	}
	if (!got) {
		snprintf(to.ticket, sizeof(to.ticket), "%s", ticket);
		snprintf(to.server, sizeof(to.server), "%s", server);
		log_info("checkpoint ended; resuming the GPU session at %s", server);
	}
	if (!client_resume(to.server, to.ticket, err)) {
		if (got)
			resumed_say(fd, WIRE_CTL_RESUMED);
		return;
	}
	log_error("%s", err);
	if (!got)
		return;
	client_set_token(NULL);
	if (client_resume(server, ticket, err)) {
		log_error("%s", err);
		resumed_say(fd, "ERROR cannot reattach, nor resume where it was");
	} else {
		log_info("resumed the GPU session where it was, at %s", server);
		resumed_say(fd, "ERROR cannot reattach; resumed where it was");
	}
}

static void precopy(int fd, const char *line)
{
	char name[200], parent[600], err[WIRE_ERRLEN];
	uint64_t fig[3];
	int rc, dirfd = wire_recv_fd(fd);

	if (dirfd < 0 || wire_ctl_parse_precopy(line, name, sizeof(name), parent, sizeof(parent))) {
		wire_ctl_send(fd, "ERROR malformed request");
		if (dirfd >= 0)
			close(dirfd);
		return;
	}
	rc = client_precopy(dirfd, name, parent, fig, err);
	close(dirfd);
	if (rc != 0)
		wire_ctl_send(fd, "ERROR %s", err);
	else
		wire_ctl_send_precopied(fd, fig);
}

static void serve_one(int fd)
{
	char line[WIRE_CTL_LINE_MAX], err[WIRE_ERRLEN];
	const char *file = getenv("CICADA_TOKEN_FILE");
	struct wire_ctl_where at;
	int rc;

	if (wire_read_line(fd, line, sizeof(line)))
		return;
	if (!strncmp(line, "PRECOPY ", 8)) {
		precopy(fd, line);
		return;
	}
	if (strcmp(line, WIRE_CTL_PAUSE)) {
		wire_ctl_send(fd, "ERROR unknown request");
		return;
	}
	client_lock();
	managed_flush();                     /* the snapshot takes the device copy */
	mapped_flush();
	rc = client_pause(at.ticket, sizeof(at.ticket), at.server, sizeof(at.server), err);
	if (rc > 0) {
		wire_ctl_send(fd, WIRE_CTL_IDLE);
	} else if (rc < 0) {
		wire_ctl_send(fd, "ERROR %s", err);
	} else {
		token_hex(at.token_hex, sizeof(at.token_hex));
		close(listen_fd);            /* (made again by control_thread) */
		listen_fd = -1;
		snprintf(at.token_file, sizeof(at.token_file), "%s",
			 file && file[0] == '/' && !strchr(file, ' ') && strlen(file) < sizeof(at.token_file) ? file : "-");
		if (wire_ctl_send_paused(fd, &at))       /* the asker gives up: resumed here */
			wire_ctl_send(fd, "ERROR the session's address does not fit a control line");
		paused(fd, at.ticket, at.server);
	}
	explicit_bzero(at.token_hex, sizeof(at.token_hex));
	client_unlock();
}

static int peer_allowed(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	return !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) &&
	       (cred.uid == 0 || cred.uid == getuid());
}

/* The control socket again after a pause; tried every second until it
 * is (out of descriptors, say), said once. */
static void listen_again(void)
{
	int said = 0;

	while ((listen_fd = wire_ctl_listen((int)getpid())) < 0) {
		if (!said++)
			log_warn("no control socket after a pause (%s): checkpoints wait until there is one",
				 strerror(errno));
		sleep(1);
	}
}

static void *control_thread(void *arg)
{
	(void)arg;
	for (;;) {
		int fd;
		if (listen_fd < 0)
			listen_again();
		fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
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
	sigset_t all, old;
	pthread_t t;
	int fd;

	if (started)
		return;
	started = 1;
	if ((fd = wire_ctl_listen((int)getpid())) < 0) {
		log_warn("no control socket (%s): this process cannot be checkpointed", strerror(errno));
		return;
	}
	listen_fd = fd;
	/* The application's signals go to its own threads, never this one. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (pthread_create(&t, NULL, control_thread, NULL)) {
		close(fd);
		listen_fd = -1;
	} else {
		pthread_detach(t);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* A forked child has no control thread: the copy of its parent's socket
 * would be dumped with the child, and answer for no one. */
static void child_closes(void)
{
	if (listen_fd >= 0)
		close(listen_fd);
	listen_fd = -1;
}

static const struct client_hooks control_hooks = { .connected = control_start };

__attribute__((constructor)) static void control_hook(void)
{
	client_add_hooks(&control_hooks);
	pthread_atfork(NULL, NULL, child_closes);
}

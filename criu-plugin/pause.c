/*
 * pause.c: the plugin's side of the application's control socket
 * ("\0cicada-ctl.<pid>", see interposer/control.c). A pause leaves the
 * connection open: its end (our exit, or a crash of criu) resumes the
 * application where it was, unless a RESUME came first.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "cicada-criu.h"

static int dial_control(int pid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "cicada-ctl.%d", pid);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* The real uid of pid (from /proc; the user whose files it may name). */
static unsigned process_uid(int pid)
{
	char path[64], line[256];
	unsigned uid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (!(f = fopen(path, "r")))
		return (unsigned)-1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "Uid:", 4) && sscanf(line + 4, "%u", &uid) == 1)
			break;
	fclose(f);
	return uid;
}

/* 1: paused; 0: not a Cicada process (or one without a GPU session);
 * -1: it is one, and it could not be paused. */
int session_pause(struct gpu_session *s, char *err)
{
	char line[2 * TOKEN_HEX_MAX + 512];

	s->ctl = dial_control(s->pid);
	if (s->ctl < 0)
		return 0;
	if (send(s->ctl, "PAUSE\n", 6, MSG_NOSIGNAL) != 6 || wire_read_line(s->ctl, line, sizeof(line))) {
		wire_fail(err, "process %d did not answer the pause request", s->pid);
		goto fail;
	}
	if (!strcmp(line, "IDLE")) {
		close(s->ctl);
		s->ctl = -1;
		return 0;
	}
	snprintf(s->token_file, sizeof(s->token_file), "-");
	s->uid = process_uid(s->pid);
	if (sscanf(line, "PAUSED %32s %299s %512s %419s", s->ticket, s->server, s->token_hex, s->token_file) < 3) {
		wire_fail(err, "process %d: %.200s", s->pid, strncmp(line, "ERROR ", 6) ? line : line + 6);
		goto fail;
	}
	return 1;
fail:
	close(s->ctl);
	s->ctl = -1;
	return -1;
}

/* A migration's pre-copy round (gpu-migrate): the process's worker writes
 * its device memory as snapshot name in the directory dirfd (passed
 * along, never named by path) while it runs. 1 done
 * (fig: pieces, unchanged, bytes stored), 0 not possible (no Cicada
 * process, no session, or a remote worker: err says why), -1 failed. */
int session_precopy(int pid, int dirfd, const char *name, const char *parent, uint64_t fig[3], char *err)
{
	char line[WIRE_ERRLEN + 1900];
	unsigned long long a, b, c;
	int fd = dial_control(pid), n;

	if (fd < 0) {
		wire_fail(err, "process %d has no Cicada control socket", pid);
		return 0;
	}
	n = snprintf(line, sizeof(line), "PRECOPY %s %s\n", name, parent[0] ? parent : "-");
	if (send(fd, line, (size_t)n, MSG_NOSIGNAL) != n || wire_send_fd(fd, dirfd) ||
	    wire_read_line(fd, line, sizeof(line))) {
		close(fd);
		wire_fail(err, "process %d did not answer the pre-copy request", pid);
		return -1;
	}
	close(fd);
	if (sscanf(line, "PRECOPIED %llu %llu %llu", &a, &b, &c) == 3) {
		fig[0] = a, fig[1] = b, fig[2] = c;
		return 1;
	}
	wire_fail(err, "%.400s", strncmp(line, "ERROR ", 6) ? line : line + 6);
	return strstr(line, "needs a client on the server's node") || strstr(line, "no GPU session") ? 0 : -1;
}

/* Tells the (restored) process where its session lives now. Its threads
 * are still stopped: the line waits in the socket until they run. */
int session_send_resume(struct gpu_session *s, char *err)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "RESUME %s %s\n", s->ticket, s->server);

	if (send(s->ctl, line, (size_t)n, MSG_NOSIGNAL) != n) {
		wire_fail(err, "cannot tell process %d to resume: %s", s->pid, strerror(errno));
		return -1;
	}
	return 0;
}

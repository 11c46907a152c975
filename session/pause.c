/*
 * pause.c: the plugin's side of the application's control socket
 * (found and proven the process's own by ctl_find.c; the protocol is
 * wire/control.c's). A pause
 * leaves the connection open: its end (our exit, or a crash of criu)
 * resumes the application where it was, unless a RESUME came first.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "session.h"

/* The real uid of pid (from /proc; the user whose files it may name). */
static unsigned process_uid(int pid)
{
	char value[128];
	unsigned uid = 0;

	if (session_proc_status(pid, "Uid", value, sizeof(value)))
		return (unsigned)-1;
	sscanf(value, "%u", &uid);
	return uid;
}

/* 1: paused; 0: not a Cicada process (or one without a GPU session);
 * -1: it is one, and it could not be paused. */
int session_pause(struct gpu_session *s, char *err)
{
	char line[WIRE_CTL_LINE_MAX];
	struct wire_ctl_where at;

	s->ctl = session_ctl_dial(s->pid);
	if (s->ctl < 0)
		return 0;
	if (wire_ctl_send(s->ctl, WIRE_CTL_PAUSE) || wire_read_line(s->ctl, line, sizeof(line))) {
		wire_fail(err, "process %d did not answer the pause request", s->pid);
		goto fail;
	}
	if (!strcmp(line, WIRE_CTL_IDLE)) {
		close(s->ctl);
		s->ctl = -1;
		return 0;
	}
	s->uid = process_uid(s->pid);
	s->vpid = session_ns_pid(s->pid);
	if (wire_ctl_parse_paused(line, &at)) {
		wire_fail(err, "process %d: %.200s", s->pid, wire_ctl_reason(line));
		goto fail;
	}
	snprintf(s->ticket, sizeof(s->ticket), "%s", at.ticket);
	snprintf(s->server, sizeof(s->server), "%s", at.server);
	snprintf(s->token_hex, sizeof(s->token_hex), "%s", at.token_hex);
	snprintf(s->token_file, sizeof(s->token_file), "%s", at.token_file);
	explicit_bzero(&at, sizeof(at));
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
	char line[WIRE_CTL_LINE_MAX];
	int fd = session_ctl_dial(pid);

	if (fd < 0) {
		wire_fail(err, "process %d has no Cicada control socket", pid);
		return 0;
	}
	if (wire_ctl_send_precopy(fd, name, parent, dirfd) || wire_read_line(fd, line, sizeof(line))) {
		close(fd);
		wire_fail(err, "process %d did not answer the pre-copy request", pid);
		return -1;
	}
	close(fd);
	if (!wire_ctl_parse_precopied(line, fig))
		return 1;
	wire_fail(err, "%.400s", wire_ctl_reason(line));
	return strstr(line, "needs a client on the server's node") || strstr(line, "no GPU session") ? 0 : -1;
}

/* Tells the (restored) process where its session lives now. Its threads
 * are still stopped: the line waits in the socket until they run. */
int session_send_resume(struct gpu_session *s, char *err)
{
	struct wire_ctl_where to = { 0 };

	snprintf(to.ticket, sizeof(to.ticket), "%s", s->ticket);
	snprintf(to.server, sizeof(to.server), "%s", s->server);
	if (wire_ctl_send_resume(s->ctl, &to)) {
		wire_fail(err, "cannot tell process %d to resume: %s", s->pid, strerror(errno));
		return -1;
	}
	return 0;
}

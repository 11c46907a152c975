/*
 * ask.c: cicadactl's requests on the server's admin socket, one line
 * each, answered by lines (admin.c); and the sessions LIST gives.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include "cicadactl.h"

static int dial(const struct ctl_opts *o, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 5 };
	int fd;

	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/admin.sock", o->run_dir) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "the run directory's name is too long");
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		snprintf(err, errlen, "cannot reach the gpu-server at %s: %s (--run-dir: the server's)", sa.sun_path,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

int ctl_ask(const struct ctl_opts *o, const char *request, char *buf, size_t len, char *err, size_t errlen)
{
	size_t n = 0;
	ssize_t got;
	int fd = dial(o, err, errlen);

	if (fd < 0)
		return -1;
	if (dprintf(fd, "%s\n", request) < 0) {
		snprintf(err, errlen, "cannot send the request: %s", strerror(errno));
		close(fd);
		return -1;
	}
	while (n + 1 < len && (got = read(fd, buf + n, len - n - 1)) > 0)
		n += (size_t)got;
	buf[n] = 0;
	close(fd);
	if (!n) {
		snprintf(err, errlen, "the gpu-server did not answer (is it root's or yours?)");
		return -1;
	}
	return 0;
}

int ctl_sessions(const struct ctl_opts *o, struct ctl_session *s, int max, char *err, size_t errlen)
{
	static char buf[CTL_MAX_SESSIONS * 200];
	char *save = NULL, *line, uid[16];
	int n = 0;

	if (ctl_ask(o, "LIST", buf, sizeof(buf), err, errlen))
		return -1;
	for (line = strtok_r(buf, "\n", &save); line && n < max; line = strtok_r(NULL, "\n", &save)) {
		struct ctl_session *x = &s[n];
		snprintf(x->token, sizeof(x->token), "-");
		if (sscanf(line, "SESSION %ld %ld %15s %31s %llu %llu %llu %15s %15s %47s %63s", &x->worker, &x->client, uid,
			   x->gpus, (unsigned long long *)&x->quota, (unsigned long long *)&x->used,
			   (unsigned long long *)&x->calls, x->state, x->sms, x->tenant, x->token) < 10)
			continue;
		x->uid = strcmp(uid, "-") ? atol(uid) : -1;
		n++;
	}
	return n;
}

int ctl_find(const struct ctl_opts *o, long worker, struct ctl_session *out, char *err, size_t errlen)
{
	static struct ctl_session s[CTL_MAX_SESSIONS];
	int n = ctl_sessions(o, s, CTL_MAX_SESSIONS, err, errlen);

	for (int i = 0; i < n; i++)
		if (s[i].worker == worker) {
			*out = s[i];
			return 0;
		}
	if (n >= 0)
		snprintf(err, errlen, "no session %ld on this server (cicadactl list)", worker);
	return -1;
}

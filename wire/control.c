/*
 * control.c: the control protocol of a Cicada process, one source for
 * both sides. The interposer (interposer/control.c) serves it on the
 * abstract unix socket "\0cicada-ctl.<pid>"; CRIU's plugin
 * (session/pause.c) and gpu-migrate ask. A message is one text line:
 *
 *   PAUSE                  -> PAUSED <ticket> <server> <token-hex|-> <token-file|->
 *                             | IDLE (no GPU session) | ERROR <reason>
 *   RESUME <ticket> <server> [<token-hex>]
 *                          -> RESUMED | ERROR <reason>
 *   PRECOPY <name> <parent|->, then a directory's descriptor (SCM_RIGHTS)
 *                          -> PRECOPIED <pieces> <unchanged> <stored-bytes>
 *                             | IDLE | ERROR <reason>
 *
 * Parsers take only well-formed lines: every field present, none longer
 * than its buffer.
 */
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "wire.h"

/* "\0cicada-ctl.<pid>", or with ".<tag>" after it when tag is not 0. */
static socklen_t ctl_addr(int pid, unsigned tag, struct sockaddr_un *sa)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (tag)
		n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "%s%d.%08x", WIRE_CTL_PREFIX, pid, tag);
	else
		n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "%s%d", WIRE_CTL_PREFIX, pid);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static int listen_at(int pid, unsigned tag)
{
	struct sockaddr_un sa;
	socklen_t len = ctl_addr(pid, tag, &sa);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd >= 0 && (bind(fd, (struct sockaddr *)&sa, len) || listen(fd, 4))) {
		int e = errno;
		close(fd);
		errno = e;
		fd = -1;
	}
	return fd;
}

/* The plain name, else (taken: another user's squat, or a process of the
 * same pid in another pid namespace) a name with a random tag: whoever
 * dials checks the listener's credentials and can find the socket among
 * the process's own (session/ctl_find.c). */
int wire_ctl_listen(int pid)
{
	int fd = listen_at(pid, 0);
	unsigned tag;

	for (int i = 0; fd < 0 && errno == EADDRINUSE && i < 8; i++)
		if (getrandom(&tag, sizeof(tag), 0) == (ssize_t)sizeof(tag))
			fd = listen_at(pid, tag | 1);
	return fd;
}

int wire_ctl_dial(int pid)
{
	struct sockaddr_un sa;
	socklen_t len = ctl_addr(pid, 0, &sa);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, len)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

int wire_ctl_send(int fd, const char *fmt, ...)
{
	char line[WIRE_CTL_LINE_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof(line) - 1)
		return -1;
	line[n++] = '\n';
	return send(fd, line, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -1;
}

const char *wire_ctl_reason(const char *line)
{
	return strncmp(line, "ERROR ", 6) ? line : line + 6;
}

/* Splits a copy of line into at most max words (word[0] the verb): how
 * many, or -1 if there are more. */
static int words(const char *line, char *copy, size_t len, char **word, int max)
{
	char *save = NULL, *t;
	int n = 0;

	snprintf(copy, len, "%s", line);
	for (t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		if (n == max)
			return -1;
		word[n++] = t;
	}
	return n;
}

/* Copies a word into a field of size len; -1 if it does not fit. */
static int field(char *out, size_t len, const char *word)
{
	if (strlen(word) >= len)
		return -1;
	memcpy(out, word, strlen(word) + 1);
	return 0;
}

int wire_ctl_parse_paused(const char *line, struct wire_ctl_where *w)
{
	char copy[WIRE_CTL_LINE_MAX], *v[5];
	int n = words(line, copy, sizeof(copy), v, 5);

	if ((n != 4 && n != 5) || strcmp(v[0], "PAUSED") || field(w->ticket, sizeof(w->ticket), v[1]) ||
	    field(w->server, sizeof(w->server), v[2]) || field(w->token_hex, sizeof(w->token_hex), v[3]) ||
	    field(w->token_file, sizeof(w->token_file), n == 5 ? v[4] : "-"))
		return -1;
	return 0;
}

int wire_ctl_parse_resume(const char *line, struct wire_ctl_where *w)
{
	char copy[WIRE_CTL_LINE_MAX], *v[4];
	int n = words(line, copy, sizeof(copy), v, 4);

	if ((n != 3 && n != 4) || strcmp(v[0], "RESUME") || field(w->ticket, sizeof(w->ticket), v[1]) ||
	    field(w->server, sizeof(w->server), v[2]) || field(w->token_hex, sizeof(w->token_hex), n == 4 ? v[3] : ""))
		return -1;
	w->token_file[0] = 0;
	return 0;
}

int wire_ctl_parse_precopy(const char *line, char *name, size_t nlen, char *parent, size_t plen)
{
	char copy[WIRE_CTL_LINE_MAX], *v[3];

	if (words(line, copy, sizeof(copy), v, 3) != 3 || strcmp(v[0], "PRECOPY") || field(name, nlen, v[1]) ||
	    field(parent, plen, strcmp(v[2], "-") ? v[2] : ""))
		return -1;
	return 0;
}

int wire_ctl_parse_precopied(const char *line, uint64_t fig[3])
{
	char copy[WIRE_CTL_LINE_MAX], *v[4], *end;
	int n = words(line, copy, sizeof(copy), v, 4);

	if (n != 4 || strcmp(v[0], "PRECOPIED"))
		return -1;
	for (int i = 0; i < 3; i++) {
		if (v[i + 1][0] < '0' || v[i + 1][0] > '9')
			return -1;
		fig[i] = strtoull(v[i + 1], &end, 10);
		if (*end)
			return -1;
	}
	return 0;
}

/* A field that can travel: one word. */
static int word_ok(const char *s)
{
	return s[0] && !strpbrk(s, " \n\r");
}

int wire_ctl_send_paused(int fd, const struct wire_ctl_where *w)
{
	if (!word_ok(w->ticket) || !word_ok(w->server) || !word_ok(w->token_hex) || !word_ok(w->token_file))
		return -1;
	return wire_ctl_send(fd, "PAUSED %s %s %s %s", w->ticket, w->server, w->token_hex, w->token_file);
}

int wire_ctl_send_resume(int fd, const struct wire_ctl_where *w)
{
	if (!word_ok(w->ticket) || !word_ok(w->server) || (w->token_hex[0] && !word_ok(w->token_hex)))
		return -1;
	return wire_ctl_send(fd, "RESUME %s %s%s%s", w->ticket, w->server, w->token_hex[0] ? " " : "", w->token_hex);
}

int wire_ctl_send_precopy(int fd, const char *name, const char *parent, int dirfd)
{
	if (!word_ok(name) || (parent[0] && !word_ok(parent)))
		return -1;
	if (wire_ctl_send(fd, "PRECOPY %s %s", name, parent[0] ? parent : "-"))
		return -1;
	return wire_send_fd(fd, dirfd);
}

int wire_ctl_send_precopied(int fd, const uint64_t fig[3])
{
	return wire_ctl_send(fd, "PRECOPIED %llu %llu %llu", (unsigned long long)fig[0], (unsigned long long)fig[1],
			     (unsigned long long)fig[2]);
}

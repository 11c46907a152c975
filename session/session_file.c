/*
 * session_file.c: one small text file per process in CRIU's image
 * directory, cicada-session-<pid>.txt, holding the server and ticket of
 * its GPU session at checkpoint time, and the path of the token file the
 * process used (never the token: whoever reads the images must not learn
 * it), and the pid the process has in its own pid namespace (what it
 * says it is when restored); its snapshot lives next to
 * it as cicada-gpu-<pid>/. A restore reads these to know what to restore.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "session.h"

#define FILE_PREFIX "cicada-session-"
#define FILE_SUFFIX ".txt"

void snapshot_name(int pid, char *buf, size_t len)
{
	snprintf(buf, len, "cicada-gpu-%d", pid);
}

int session_file_write(int dirfd, const struct gpu_session *s, char *err)
{
	char name[64], tmp[80];
	FILE *f;
	int fd;

	snprintf(name, sizeof(name), FILE_PREFIX "%d" FILE_SUFFIX, s->pid);
	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		if (fd >= 0)
			close(fd);
		wire_fail(err, "cannot write %s in the image directory", tmp);
		return -1;
	}
	fprintf(f, "server %s\nticket %s\ntoken-file %s\nuid %u\nvpid %d\n", s->server, s->ticket,
		s->token_file[0] ? s->token_file : "-", s->uid, s->vpid > 0 ? s->vpid : s->pid);
	if (fclose(f) || renameat(dirfd, tmp, dirfd, name)) {
		wire_fail(err, "cannot write %s in the image directory", name);
		return -1;
	}
	return 0;
}

/* The pid a session file names, or -1 if name is not one. */
int session_file_pid(const char *name)
{
	size_t pl = strlen(FILE_PREFIX), n = strlen(name);
	char *end;
	long pid;

	if (strncmp(name, FILE_PREFIX, pl) || n < pl + 5 || strcmp(name + n - 4, FILE_SUFFIX))
		return -1;
	pid = strtol(name + pl, &end, 10);
	return end == name + n - 4 && pid > 0 && pid < (1 << 22) ? (int)pid : -1;
}

int session_file_read(int dirfd, const char *name, struct gpu_session *s, char *err)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	int got;

	if (!f) {
		if (fd >= 0)
			close(fd);
		wire_fail(err, "cannot read %s", name);
		return -1;
	}
	memset(s, 0, sizeof(*s));
	s->ctl = -1;
	s->pid = session_file_pid(name);
	got = fscanf(f, "server %299s ticket %32s token-file %419s uid %u", s->server, s->ticket, s->token_file,
		     &s->uid);
	if (got == 4 && (fscanf(f, " vpid %d", &s->vpid) != 1 || s->vpid <= 0 || s->vpid >= (1 << 22)))
		s->vpid = s->pid;            /* (written before pid namespaces were kept) */
	fclose(f);
	snprintf(s->token_hex, sizeof(s->token_hex), "-");
	if (got != 4) {
		wire_fail(err, "%s is malformed", name);
		return -1;
	}
	return 0;
}

/* Reads the token of path, else of the file the process used, into
 * s->token_hex (left as it is if there is neither). The process's file
 * is read only if it is the process's user's: the images, which the
 * process wrote, must not make root read (and prove) another's secret. */
void session_token_load(struct gpu_session *s, const char *path)
{
	char err[WIRE_ERRLEN];
	struct stat st;

	if (!path && strcmp(s->token_file, "-") && s->token_file[0]) {
		if (stat(s->token_file, &st) || st.st_uid != s->uid)
			return;
		path = s->token_file;
	}
	if (path)
		token_file_hex(path, s->token_hex, sizeof(s->token_hex), err);   /* else left as it is */
}

/* A token file's bytes (trailing blanks cut) as hex in hex[len], "-" if
 * it is empty; -1 with err if it cannot be read or is too long. */
int token_file_hex(const char *path, char *hex, size_t len, char *err)
{
	char token[CICADA_TOKEN_MAX];
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f) {
		wire_fail(err, "cannot read the token file %s: %s", path, strerror(errno));
		return -1;
	}
	n = fread(token, 1, sizeof(token), f);
	fclose(f);
	while (n && (token[n - 1] == '\n' || token[n - 1] == ' ' || token[n - 1] == '\r'))
		n--;
	if (2 * n + 1 > len) {
		wire_fail(err, "the token file %s is too long", path);
		explicit_bzero(token, sizeof(token));
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		sprintf(hex + 2 * i, "%02x", (unsigned char)token[i]);
	if (!n)
		snprintf(hex, len, "-");
	explicit_bzero(token, sizeof(token));
	return 0;
}

/* The bytes of a token in hex ("-": none) into out; their count. */
size_t token_from_hex(const char *hex, char *out, size_t len)
{
	size_t n = 0;
	unsigned v;

	if (!strcmp(hex, "-"))
		return 0;
	while (n < len && hex[2 * n] && sscanf(hex + 2 * n, "%2x", &v) == 1)
		out[n++] = (char)v;
	return n;
}

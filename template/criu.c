/*
 * criu.c: gpu-template's criu runs, each within a deadline (session's
 * exec.c), with why one failed from its log; and the
 * template's small file beside the images (template.txt: which file the
 * template's stdout and stderr were, as criu names it, so that each copy
 * can be given its own in its place).
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "session.h"
#include "template.h"

/* Why criu failed, from its log (log: a path), into err. */
static void criu_reason(const char *log, const char *what, char *err, size_t len)
{
	char why[400] = "";
	const char *slash = strrchr(log, '/');
	char dir[512];
	int dirfd;

	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - log) : 1, slash ? log : ".");
	if ((dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		snap_criu_reason(dirfd, slash ? slash + 1 : log, why, sizeof(why));
		close(dirfd);
	}
	snprintf(err, len, "%s%s%s (criu's log: %s)", what, why[0] ? ": " : "", why, log);
}

int template_criu(const struct template_opts *o, char **argv, int keep_fd, const char *log, char *err, size_t len)
{
	char why[WIRE_ERRLEN];
	int status;

	argv[0] = (char *)o->criu;
	if (session_exec(argv, keep_fd, o->timeout_s, &status, why)) {
		snprintf(err, len, "%s (its log: %s)", why, log);
		return -1;
	}
	if (!status)
		return 0;
	criu_reason(log, "criu failed", err, len);
	return -1;
}

int template_file_write(const char *dir, const char *log_key, char *err, size_t len)
{
	char path[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/" TEMPLATE_FILE, dir);
	if (!(f = fopen(path, "w")) || fprintf(f, "log %s\n", log_key[0] ? log_key : "-") < 0 || fclose(f)) {
		snprintf(err, len, "cannot write %s", path);
		return -1;
	}
	return 0;
}

int template_file_read(const char *dir, char *log_key, size_t key_len, char *err, size_t len)
{
	char path[600], key[512];
	FILE *f;
	int got;

	snprintf(path, sizeof(path), "%s/" TEMPLATE_FILE, dir);
	if (!(f = fopen(path, "r"))) {
		snprintf(err, len, "%s is not a template (no %s: make one with gpu-template save)", dir, TEMPLATE_FILE);
		return -1;
	}
	got = fscanf(f, "log %511s", key);
	fclose(f);
	if (got != 1) {
		snprintf(err, len, "%s is malformed", path);
		return -1;
	}
	snprintf(log_key, key_len, "%s", strcmp(key, "-") ? key : "");
	return 0;
}

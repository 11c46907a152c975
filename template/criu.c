/*
 * criu.c: gpu-template's criu runs, each within a deadline, and the
 * template's small file beside the images (template.txt: which file the
 * template's stdout and stderr were, as criu names it, so that each copy
 * can be given its own in its place).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "criu_images.h"
#include "template.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The child: keep_fd as fd 3, then criu. */
static void exec_criu(const struct template_opts *o, char **argv, int keep_fd)
{
	if (keep_fd >= 0 && (dup2(keep_fd, 3) < 0 || fcntl(3, F_SETFD, 0) < 0))
		_exit(127);
	argv[0] = (char *)o->criu;
	execv(o->criu, argv);
	fprintf(stderr, "gpu-template: cannot run %s: %s\n", o->criu, strerror(errno));
	_exit(127);
}

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
	double end = now_s() + o->timeout_s;
	pid_t pid = fork();
	int st = 0;

	if (pid < 0) {
		snprintf(err, len, "cannot fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0)
		exec_criu(o, argv, keep_fd);
	for (;;) {
		pid_t got = waitpid(pid, &st, WNOHANG);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			snprintf(err, len, "cannot wait for criu: %s", strerror(errno));
			return -1;
		}
		if (got == pid)
			break;
		if (now_s() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			snprintf(err, len, "criu did not finish within %d s (its log: %s)", o->timeout_s, log);
			return -1;
		}
		usleep(5000);
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
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

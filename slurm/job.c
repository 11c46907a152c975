/*
 * job.c: a job's files, made as root by the prolog or the step's first
 * hook, removed by the epilog whatever ended the job.
 *
 *   <tokens>/job-ID        the token, for the gpu-servers (--token-dir): 0600, root's
 *   <state>/ID/            root's, 0711
 *   <state>/ID/token       the same token, for the tasks: 0400, the job user's
 *   <state>/ID/server      "ADDRESS NODE": the server the job's steps use
 *                          (cicada-slurm drain rewrites it when it moves them)
 *   <state>/ID/batch.pid   the batch script's pid (cicada-slurm checkpoint)
 *
 * A token is 32 random bytes in hex. A job on several nodes sharing
 * <tokens> has one token: the first node to write it wins, the others
 * read it. Removing <tokens>/job-ID revokes it: every gpu-server ends the
 * sessions that proved it within a second.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cicada_spank.h"

#define TOKEN_HEX 64

int cs_job_path(const struct cs_config *c, uint32_t job, const char *file, char *out, size_t len)
{
	return (size_t)snprintf(out, len, "%s/%u%s%s", c->state, job, file ? "/" : "", file ? file : "") < len ? 0 : -1;
}

static int read_small(const char *path, char *out, size_t len)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, out, len - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	out[n] = 0;
	out[strcspn(out, "\n")] = 0;
	return 0;
}

int cs_job_read(const struct cs_config *c, uint32_t job, const char *file, char *out, size_t len)
{
	char path[CS_PATH + 64];

	return cs_job_path(c, job, file, path, sizeof(path)) ? -1 : read_small(path, out, len);
}

/* Writes text to path through a file beside it, renamed in (mode, owner). */
static int write_file(const char *path, const char *text, mode_t mode, uid_t uid, gid_t gid)
{
	char tmp[CS_PATH + 80];
	size_t n = strlen(text);
	int fd, ok;

	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	ok = write(fd, text, n) == (ssize_t)n && !fchown(fd, uid, gid) && !fchmod(fd, mode) && !fsync(fd);
	close(fd);
	if (!ok || rename(tmp, path)) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

int cs_job_write(const struct cs_config *c, uint32_t job, const char *file, const char *text)
{
	char path[CS_PATH + 64];

	return cs_job_path(c, job, file, path, sizeof(path)) ? -1 : write_file(path, text, 0644, 0, 0);
}

/* <state> and <state>/ID exist, root's directories. */
static int job_dir(const struct cs_config *c, uint32_t job, char *err, size_t len)
{
	char dir[CS_PATH + 64];
	struct stat st;

	if (mkdir(c->state, 0755) && errno != EEXIST)
		goto fail;
	cs_job_path(c, job, NULL, dir, sizeof(dir));
	if (mkdir(dir, 0711) && errno != EEXIST)
		goto fail;
	if (lstat(dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != 0) {
		snprintf(err, len, "%s is not root's folder", dir);
		return -1;
	}
	return 0;
fail:
	snprintf(err, len, "cannot make the job's folder in %s: %s", c->state, strerror(errno));
	return -1;
}

static void new_token(char *hex)
{
	unsigned char raw[TOKEN_HEX / 2];

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		abort();                     /* (the kernel's pool never fails at this size) */
	for (size_t i = 0; i < sizeof(raw); i++)
		sprintf(hex + 2 * i, "%02x", raw[i]);
	hex[TOKEN_HEX] = '\n';
	hex[TOKEN_HEX + 1] = 0;
	explicit_bzero(raw, sizeof(raw));
}

/* The servers' copy: the one there, or a new one (first writer wins). */
static int server_token(const struct cs_config *c, uint32_t job, char *hex, char *err, size_t len)
{
	char path[CS_PATH + 32], tmp[CS_PATH + 64];
	int fd, ok;

	snprintf(path, sizeof(path), "%s/job-%u", c->tokens, job);
	if (!read_small(path, hex, TOKEN_HEX + 2) && strlen(hex) == TOKEN_HEX) {
		strcat(hex, "\n");
		return 0;
	}
	new_token(hex);
	snprintf(tmp, sizeof(tmp), "%s/.job-%u.%d", c->tokens, job, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	ok = fd >= 0 && write(fd, hex, TOKEN_HEX + 1) == TOKEN_HEX + 1 && !fsync(fd);
	if (fd >= 0)
		close(fd);
	if (ok && link(tmp, path) && errno == EEXIST) {
		unlink(tmp);                 /* (another node's came first) */
		if (!read_small(path, hex, TOKEN_HEX + 2) && strlen(hex) == TOKEN_HEX) {
			strcat(hex, "\n");
			return 0;
		}
		snprintf(err, len, "%s holds no token", path);
		return -1;
	}
	unlink(tmp);
	if (!ok || access(path, F_OK)) {
		snprintf(err, len, "cannot write the job's token in %s: %s", c->tokens, strerror(errno));
		return -1;
	}
	return 0;
}

int cs_job_token(const struct cs_config *c, uint32_t job, uid_t uid, gid_t gid, char *err, size_t len)
{
	char hex[TOKEN_HEX + 2], have[TOKEN_HEX + 2], path[CS_PATH + 64];
	int rc = -1;

	if (job_dir(c, job, err, len) || server_token(c, job, hex, err, len))
		return -1;
	cs_job_path(c, job, "token", path, sizeof(path));
	if (!read_small(path, have, sizeof(have)) && !strncmp(have, hex, TOKEN_HEX))
		rc = 0;                      /* (an earlier step's) */
	else if (write_file(path, hex, 0400, uid, gid))
		snprintf(err, len, "cannot write %s: %s", path, strerror(errno));
	else
		rc = 0;
	explicit_bzero(hex, sizeof(hex));
	explicit_bzero(have, sizeof(have));
	return rc;
}

void cs_job_remove(const struct cs_config *c, uint32_t job)
{
	static const char *const files[] = { "token", "server", "batch.pid" };
	char path[CS_PATH + 64];

	snprintf(path, sizeof(path), "%s/job-%u", c->tokens, job);
	unlink(path);                        /* (the token is revoked: its sessions end) */
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (!cs_job_path(c, job, files[i], path, sizeof(path)))
			unlink(path);
	if (!cs_job_path(c, job, NULL, path, sizeof(path)))
		rmdir(path);
}

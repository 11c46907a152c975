/*
 * tokens.c: tokens of their own for jobs (--token-dir DIR). Each regular
 * file NAME in DIR holds a tenant token, as --token-file's does; a TCP
 * client that proves one of them is admitted as with the server's token,
 * and its session is tagged NAME (a unix client that proves one is
 * tagged too; it needs none to come in). Removing or rewriting the file
 * revokes the token: a thread looks every TOKENS_SWEEP_MS and ends the
 * sessions tagged with a token that is gone or changed (their workers are
 * killed), and cicadactl revoke NAME ends them at once. A batch system's
 * prolog writes a job's file and its epilog removes it (slurm/).
 *
 * DIR is checked as the run directory is (the server's own, written by
 * nobody else), and so is every file read: a regular file of the
 * server's user, not a link, that nobody else may write, of 16 to
 * CICADA_TOKEN_MAX characters. Names are [A-Za-z0-9_.-], not starting
 * with '.', so a file written beside under a dotted name and renamed in
 * is never read half-written.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include "front.h"

#define TOKENS_SWEEP_MS 1000
#define TOKENS_MAX_FILES 4096                /* read at one hello, at most */

struct tag {
	pid_t worker;
	char name[TOKEN_NAME_MAX];
	uint64_t print;                      /* the token's fingerprint when it was proved */
};

static struct {
	int dirfd;                           /* -1: no --token-dir */
	struct tag *tags;
	unsigned ntags, cap;
	pthread_mutex_t lock;
} tk = { .dirfd = -1, .lock = PTHREAD_MUTEX_INITIALIZER };

static int name_ok(const char *n)
{
	size_t len = strspn(n, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-");

	return n[0] && n[0] != '.' && !n[len] && len < TOKEN_NAME_MAX;
}

/* The token in DIR/name into buf: its length, or 0 (none there, or not
 * one the server may trust). */
static size_t token_read(const char *name, char *buf, size_t cap)
{
	struct stat st;
	ssize_t n;
	int fd;

	if (!name_ok(name) || (fd = openat(tk.dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0)
		return 0;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022) ||
	    st.st_size > (off_t)cap) {
		close(fd);
		return 0;
	}
	n = read(fd, buf, cap);
	close(fd);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		n--;
	if (n < 16) {
		explicit_bzero(buf, cap);
		return 0;
	}
	return (size_t)n;
}

/* The fingerprint of DIR/name's token now, or 0 if there is none. */
static uint64_t token_print(const char *name)
{
	char t[CICADA_TOKEN_MAX];
	size_t n = token_read(name, t, sizeof(t));
	uint64_t h = n ? XXH3_64bits(t, n) | 1 : 0;

	explicit_bzero(t, sizeof(t));
	return h;
}

int tokens_match(const uint8_t nonce[WIRE_NONCE_LEN], const void *proof, size_t len, char name[TOKEN_NAME_MAX],
		 uint64_t *print)
{
	struct dirent *e;
	int fd, found = 0, seen = 0;
	DIR *d;

	if (tk.dirfd < 0 || !len || (fd = openat(tk.dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return 0;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return 0;
	}
	while (!found && seen++ < TOKENS_MAX_FILES && (e = readdir(d))) {
		char t[CICADA_TOKEN_MAX];
		size_t n = token_read(e->d_name, t, sizeof(t));

		if (n && wire_proof_ok(t, n, nonce, proof, len)) {
			memcpy(name, e->d_name, strlen(e->d_name) + 1);   /* (name_ok: shorter than TOKEN_NAME_MAX) */
			*print = XXH3_64bits(t, n) | 1;
			found = 1;
		}
		explicit_bzero(t, sizeof(t));
	}
	closedir(d);
	return found;
}

void tokens_tag(pid_t worker, const char *name, uint64_t print)
{
	unsigned i;

	if (!name[0] || worker <= 0)
		return;
	pthread_mutex_lock(&tk.lock);
	for (i = 0; i < tk.ntags && tk.tags[i].worker != worker; i++)
		;
	if (i == tk.ntags && tk.ntags == tk.cap) {
		unsigned cap = tk.cap ? 2 * tk.cap : 64;
		struct tag *t = realloc(tk.tags, cap * sizeof(*t));

		if (t)
			tk.tags = t, tk.cap = cap;
	}
	if (i < tk.cap) {
		tk.tags[i].worker = worker;
		snprintf(tk.tags[i].name, sizeof(tk.tags[i].name), "%s", name);
		tk.tags[i].print = print;
		tk.ntags += i == tk.ntags;
	} else {
		log_warn("worker %d: cannot keep its token's name (%s): out of memory", (int)worker, name);
	}
	pthread_mutex_unlock(&tk.lock);
}

void tokens_untag(pid_t worker)
{
	pthread_mutex_lock(&tk.lock);
	for (unsigned i = 0; i < tk.ntags; i++)
		if (tk.tags[i].worker == worker) {
			tk.tags[i] = tk.tags[--tk.ntags];
			break;
		}
	pthread_mutex_unlock(&tk.lock);
}

int tokens_tag_of(pid_t worker, char name[TOKEN_NAME_MAX])
{
	int found = 0;

	pthread_mutex_lock(&tk.lock);
	for (unsigned i = 0; i < tk.ntags && !found; i++)
		if (tk.tags[i].worker == worker) {
			snprintf(name, TOKEN_NAME_MAX, "%s", tk.tags[i].name);
			found = 1;
		}
	pthread_mutex_unlock(&tk.lock);
	return found;
}

/* Ends the sessions tagged name whose token is not print (0: every one);
 * how many. Under tk.lock. */
static int end_tagged(const char *name, uint64_t print, const char *why)
{
	int n = 0;

	for (unsigned i = 0; i < tk.ntags;) {
		struct tag *t = &tk.tags[i];

		if (strcmp(t->name, name) || (print && t->print == print)) {
			i++;
			continue;
		}
		log_info("token %s %s: its session (worker %d) ends", t->name, why, (int)t->worker);
		pool_kill_taken(t->worker);      /* (the reaper ends the session) */
		*t = tk.tags[--tk.ntags];
		n++;
	}
	return n;
}

int tokens_revoke(const char *name)
{
	int n;

	pthread_mutex_lock(&tk.lock);
	n = end_tagged(name, 0, "revoked by the operator");
	pthread_mutex_unlock(&tk.lock);
	return n;
}

/* Every TOKENS_SWEEP_MS: the sessions of tokens removed or rewritten end. */
static void *sweep_loop(void *arg)
{
	(void)arg;
	for (;;) {
		char name[TOKEN_NAME_MAX];
		uint64_t print;
		unsigned i = 0;

		usleep(TOKENS_SWEEP_MS * 1000);
		for (;;) {
			/* one tag's name at a time, its file read outside the lock */
			pthread_mutex_lock(&tk.lock);
			if (i >= tk.ntags) {
				pthread_mutex_unlock(&tk.lock);
				break;
			}
			snprintf(name, sizeof(name), "%s", tk.tags[i++].name);
			pthread_mutex_unlock(&tk.lock);
			print = token_print(name);
			pthread_mutex_lock(&tk.lock);
			if (end_tagged(name, print ? print : 0, print ? "was replaced" : "is gone"))
				i = 0;               /* (the table moved) */
			pthread_mutex_unlock(&tk.lock);
		}
	}
	return NULL;
}

int tokens_start(const char *dir, char *err)
{
	pthread_t t;

	if (dir_check(dir, "--token-dir", err))
		return -1;
	if ((tk.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return wire_fail(err, "--token-dir %s: %s", dir, strerror(errno));
	if (pthread_create(&t, NULL, sweep_loop, NULL) || pthread_detach(t))
		return wire_fail(err, "cannot start the token thread");
	log_info("tokens of their own in %s (a session ends once its token's file is gone)", dir);
	return 0;
}

int tokens_enabled(void)
{
	return tk.dirfd >= 0;
}

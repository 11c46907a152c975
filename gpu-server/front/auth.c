/*
 * auth.c: who may use the server. TCP clients prove that they hold the
 * shared-secret token (wire/auth.c: a challenge and an HMAC; the token
 * never crosses the wire); unix clients are known by their credentials
 * (SO_PEERCRED) and may be limited to an allow list of users and groups.
 * The server's own directories must be its own.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "front.h"

int token_load(const char *path, char *token, size_t len, char *err)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f) {
		wire_fail(err, "cannot read token file %s: %s", path, strerror(errno));
		return -1;
	}
	n = fread(token, 1, len - 1, f);
	fclose(f);
	while (n && (token[n - 1] == '\n' || token[n - 1] == '\r' || token[n - 1] == ' '))
		n--;
	token[n] = 0;
	if (n < 16) {
		wire_fail(err, "token in %s is shorter than 16 characters", path);
		return -1;
	}
	return 0;
}

/* Adds the users (or groups) of a comma-separated list of names or
 * numbers to the allow list. */
int allow_parse(struct allow_list *a, const char *list, int groups, char *err)
{
	char buf[1024], *save = NULL, *end;

	snprintf(buf, sizeof(buf), "%s", list);
	a->set = 1;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		unsigned long id = strtoul(t, &end, 10);
		struct passwd *pw;
		struct group *gr;

		if ((groups ? a->ngids : a->nuids) == ALLOW_MAX) {
			wire_fail(err, "at most %d %s in an allow list", ALLOW_MAX, groups ? "groups" : "users");
			return -1;
		}
		if (*t && !*end) {
			/* a number */
		} else if (!groups && (pw = getpwnam(t))) {
			id = pw->pw_uid;
		} else if (groups && (gr = getgrnam(t))) {
			id = gr->gr_gid;
		} else {
			wire_fail(err, "no %s named '%.64s'", groups ? "group" : "user", t);
			return -1;
		}
		if (groups)
			a->gids[a->ngids++] = (gid_t)id;
		else
			a->uids[a->nuids++] = (uid_t)id;
	}
	return 0;
}

static int has_gid(const struct allow_list *a, gid_t g)
{
	for (int i = 0; i < a->ngids; i++)
		if (a->gids[i] == g)
			return 1;
	return 0;
}

/* Whether a unix peer may use the server: always its own user; with an
 * allow list, only the users on it and the members of its groups. */
int allow_peer(const struct allow_list *a, uid_t uid, gid_t gid)
{
	struct passwd pw, *found = NULL;
	gid_t groups[256];
	int n = 256;
	char buf[4096];

	if (!a || !a->set || uid == geteuid() || has_gid(a, gid))
		return 1;
	for (int i = 0; i < a->nuids; i++)
		if (a->uids[i] == uid)
			return 1;
	if (!a->ngids || getpwuid_r(uid, &pw, buf, sizeof(buf), &found) || !found ||
	    getgrouplist(found->pw_name, gid, groups, &n) < 0)
		return 0;
	for (int i = 0; i < n; i++)
		if (has_gid(a, groups[i]))
			return 1;
	return 0;
}

/* A run or cache directory must be the server's own: a directory (not a
 * link), owned by its user, that nobody else may write. */
int dir_check(const char *path, const char *what, char *err)
{
	struct stat st;

	if (lstat(path, &st)) {
		wire_fail(err, "%s %s: %s", what, path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		wire_fail(err, "%s %s is not a directory", what, path);
		return -1;
	}
	if (st.st_uid != geteuid()) {
		wire_fail(err, "%s %s belongs to uid %u, not to this server's user (uid %u)", what, path,
			 (unsigned)st.st_uid, (unsigned)geteuid());
		return -1;
	}
	if (st.st_mode & 022) {
		wire_fail(err, "%s %s may be written by others (mode %04o)", what, path,
			 (unsigned)(st.st_mode & 07777));
		return -1;
	}
	return 0;
}

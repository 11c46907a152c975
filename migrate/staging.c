/*
 * staging.c: the directory in which gpu-migrate gathers what it moves
 * (CRIU's images, the GPU snapshot), made under --work-dir and removed
 * whatever happens.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "migrate.h"
#include "snapshot.h"

int staging_make(const char *work_dir, struct staging *s, char *err)
{
	snprintf(s->path, sizeof(s->path), "%s/gpu-migrate-XXXXXX", work_dir);
	s->fd = -1;
	if (!mkdtemp(s->path) || (s->fd = open(s->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		wire_fail(err, "cannot make a staging directory in %s: %s", work_dir, strerror(errno));
		s->path[0] = 0;
		return -1;
	}
	return 0;
}

void staging_remove(struct staging *s)
{
	char parent[1100], why[WIRE_ERRLEN], *slash;
	int pfd;

	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	if (!s->path[0] || !(slash = strrchr(s->path, '/')))
		return;
	snprintf(parent, sizeof(parent), "%.*s", (int)(slash - s->path), s->path);
	if ((pfd = open(parent[0] ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		if (snap_remove_dir(pfd, slash + 1, why))
			fprintf(stderr, "gpu-migrate: %s\n", why);
		close(pfd);
	}
	s->path[0] = 0;
}

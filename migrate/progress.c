/*
 * progress.c: what gpu-migrate shows while it moves bytes (a bar with
 * bytes, rate and round, on a terminal only), the sizes it reports, and
 * the fault hooks the tests use: CICADA_MIGRATE_FAULT=cut:N breaks the
 * link after N bytes, stall:N stops sending after N bytes (until killed),
 * and nogo (whole.c) dies after the target restored, before the go;
 * cutrestore (both kinds of move) and cutfrozen (gpu_only.c) break it at
 * those points.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "migrate.h"
#include "snapshot.h"

static struct {
	int tty;
	uint64_t expected, last_shown;
	double t0;
	char fault[16];
	uint64_t fault_at;
} pg;

double migrate_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

void progress_start(uint64_t expected)
{
	const char *f = getenv("CICADA_MIGRATE_FAULT");
	unsigned long long at = 0;

	pg.tty = isatty(2);
	pg.expected = expected;
	pg.last_shown = 0;
	pg.t0 = migrate_now();
	pg.fault[0] = 0;
	if (f && sscanf(f, "%15[a-z]:%llu", pg.fault, &at) == 2)
		pg.fault_at = at;
}

int progress_update(void *ctx, uint64_t bytes)
{
	double dt = migrate_now() - pg.t0;
	int width = 30, done;

	if (pg.fault[0] && bytes >= pg.fault_at) {
		if (!strcmp(pg.fault, "cut"))
			return 1;
		if (!strcmp(pg.fault, "stall"))
			for (;;)
				pause();
	}
	if (!pg.tty || bytes - pg.last_shown < (4u << 20))
		return 0;
	pg.last_shown = bytes;
	done = pg.expected ? (int)(width * (bytes > pg.expected ? pg.expected : bytes) / pg.expected) : 0;
	fprintf(stderr, "\r[%.*s%*s] %8.1f MiB  %7.1f MiB/s  round 1", done,
		"##############################", width - done, "", bytes / 1048576.0,
		dt > 0 ? bytes / 1048576.0 / dt : 0.0);
	return 0;
}

void progress_end(void)
{
	if (pg.tty && pg.last_shown)
		fprintf(stderr, "\r%*s\r", 72, "");
}

/* Bytes of the regular files under dirfd, one level of subdirectories. */
uint64_t dir_bytes(int dirfd, int depth)
{
	int scan = dup(dirfd);
	DIR *d = scan >= 0 ? fdopendir(scan) : NULL;
	struct dirent *e;
	struct stat st;
	uint64_t n = 0;

	if (!d) {
		if (scan >= 0)
			close(scan);
		return 0;
	}
	rewinddir(d);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (S_ISREG(st.st_mode)) {
			n += (uint64_t)st.st_size;
		} else if (S_ISDIR(st.st_mode) && depth == 0) {
			int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (sub >= 0) {
				n += dir_bytes(sub, 1);
				close(sub);
			}
		}
	}
	closedir(d);
	return n;
}

/* The device bytes a snapshot stores itself (not those left to a
 * parent) and what they take stored. */
void snapshot_sizes(int dirfd, const char *name, uint64_t *device, uint64_t *stored)
{
	char err[WIRE_ERRLEN];
	struct snap_reader *r = snap_reader_open(dirfd, name, err);
	const Cicada__Manifest *m = r ? snap_reader_manifest(r) : NULL;

	*device = *stored = 0;
	for (size_t i = 0; m && i < m->n_pieces; i++) {
		if (m->pieces[i]->in_parent)
			continue;
		*device += m->pieces[i]->size;
		*stored += m->pieces[i]->stored_size;
	}
	if (r)
		snap_reader_close(r);
}

int migrate_fault_is(const char *what)
{
	const char *f = getenv("CICADA_MIGRATE_FAULT");

	return f && !strcmp(f, what);
}

/* A fault hook: the link to the target breaks here. */
void migrate_fault_cut(const char *what, const int *fds)
{
	if (!migrate_fault_is(what))
		return;
	for (int k = 0; k < SNAP_STREAMS_MAX; k++)
		if (fds[k] >= 0)
			shutdown(fds[k], SHUT_RDWR);
}

/*
 * util.c: the snapshot library's small helpers: one-line errors, whole
 * reads and writes, opening by name without following symbolic links or
 * leaving the caller's directory, the temporary-directory-then-rename
 * rule, the strict set of file and parent names, the thread and
 * compression knobs, and the dropping of a migration round's data once
 * it is used.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <zstd.h>
#include "internal.h"

#define NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"

int snap_fail(char *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, SNAP_ERRLEN, fmt, ap);
	va_end(ap);
	for (char *p = err; *p; p++)             /* one line, as wire_fail */
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
	return -1;
}

uint64_t snap_get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | p[n];
	return v;
}

void snap_put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

/* "8 MiB", "1.5 GiB", "123 bytes". */
const char *snap_size_str(char *buf, size_t len, uint64_t n)
{
	static const char *units[] = { "bytes", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int u = 0;

	while (u < 5 && n >> (10 * (u + 1)))
		u++;
	if (n % (1ull << (10 * u)) == 0)
		snprintf(buf, len, "%llu %s", (unsigned long long)(n >> (10 * u)), units[u]);
	else
		snprintf(buf, len, "%.1f %s", (double)n / (double)(1ull << (10 * u)), units[u]);
	return buf;
}

/* Writes all of buf at off, or at the file position (SNAP_AT_POSITION). */
int snap_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;

	while (len) {
		ssize_t n = off == SNAP_AT_POSITION ? write(fd, p, len) : pwrite(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= n;
		if (off != SNAP_AT_POSITION)
			off += n;
	}
	return 0;
}

int snap_write_all(int fd, const void *buf, size_t len)
{
	return snap_pwrite_all(fd, buf, len, SNAP_AT_POSITION);
}

/* Reads up to len bytes at off; fewer only at end of file. */
ssize_t snap_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += n;
	}
	return (ssize_t)got;
}

/* A failed open's reason: a symbolic link where a snapshot's file or
 * directory should be is refused as such. */
const char *snap_open_why(int e)
{
	return e == ELOOP ? "is a symbolic link; refused" : strerror(e);
}

/* openat of one component with O_NOFOLLOW; a symbolic link fails with
 * ELOOP (O_DIRECTORY alone says ENOTDIR for one). */
static int open_one(int dirfd, const char *name, int flags, mode_t mode)
{
	struct stat st;
	int fd, e;

	if (!strcmp(name, ".."))
		return errno = EXDEV, -1;
	fd = openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0 && (e = errno) == ENOTDIR)
		errno = !fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) && S_ISLNK(st.st_mode) ? ELOOP : e;
	return fd;
}

/* Without openat2: path component by component, each directory opened
 * with O_NOFOLLOW | O_DIRECTORY. */
static int open_walk(int dirfd, const char *path, int flags, mode_t mode)
{
	char buf[PATH_MAX], *p = buf, *slash;
	int fd = dirfd, next, e;

	if (path[0] == '/')
		return errno = EXDEV, -1;
	if (strlen(path) >= sizeof(buf))
		return errno = ENAMETOOLONG, -1;
	strcpy(buf, path);
	for (; (slash = strchr(p, '/')); p = slash + 1) {
		if (slash == p)
			continue;                /* "a//b" */
		*slash = 0;
		next = open_one(fd, p, O_RDONLY | O_DIRECTORY, 0);
		e = errno;
		if (fd != dirfd)
			close(fd);
		if (next < 0)
			return errno = e, -1;
		fd = next;
	}
	next = open_one(fd, *p ? p : ".", flags, mode);
	e = errno;
	if (fd != dirfd)
		close(fd);
	errno = e;
	return next;
}

/* Opens path (relative; no "..") beneath dirfd, following no symbolic
 * link on the way or at the end: openat2 with RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS, else (an older kernel, or a sandbox that refuses
 * the call) component by component with O_NOFOLLOW. A link fails with
 * ELOOP, a way out of dirfd with EXDEV. O_CLOEXEC is added to flags. */
int snap_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	static atomic_int no_openat2;
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC),   /* a last link: ELOOP */
				.mode = flags & O_CREAT ? mode : 0,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS };
	long fd;

	if (!atomic_load(&no_openat2)) {
		fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
		if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
			return (int)fd;
		if (errno == ENOSYS)
			atomic_store(&no_openat2, 1);
	}
	return open_walk(dirfd, path, flags, mode);
}

int snap_read_file(int dirfd, const char *name, size_t max, void **buf, size_t *len, char *err)
{
	int fd = snap_openat(dirfd, name, O_RDONLY | O_NONBLOCK, 0);
	struct stat st;
	ssize_t n = -1;

	*buf = NULL;
	if (fd < 0)
		return snap_fail(err, "%s: %s", name, snap_open_why(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		close(fd);
		return snap_fail(err, "%s: not a regular file of at most %zu bytes", name, max);
	}
	*buf = malloc(st.st_size ? st.st_size : 1);
	if (*buf)
		n = snap_pread_full(fd, *buf, st.st_size, 0);
	close(fd);
	if (n == st.st_size) {
		*len = n;
		return 0;
	}
	free(*buf);
	*buf = NULL;
	return snap_fail(err, "%s: %s", name, n < 0 ? strerror(errno) : "changed while read");
}

/* Creates name (it must not exist yet: never through a link) and writes buf. */
int snap_write_file(int dirfd, const char *name, const void *buf, size_t len, char *err)
{
	int fd = snap_openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL, 0600);

	if (fd < 0 || snap_write_all(fd, buf, len)) {
		snap_fail(err, "writing %s: %s", name, snap_open_why(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* Removes name under dirfd and everything below it; never follows links. */
int snap_rmtree(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct dirent *e;
	DIR *d;

	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return unlinkat(dirfd, name, 0);
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    unlinkat(fd, e->d_name, 0) && errno == EISDIR)
			snap_rmtree(fd, e->d_name);
	closedir(d);
	return unlinkat(dirfd, name, AT_REMOVEDIR);
}

/* The snapshot's directory name: name, or SNAP_DIR_NAME for NULL; NULL
 * if name is not a plain file name. */
const char *snap_dir_name(const char *name, char *err)
{
	if (!name)
		return SNAP_DIR_NAME;
	if (name[0] && name[0] != '.' && !strchr(name, '/') && strlen(name) <= SNAP_NAME_LEN)
		return name;
	snap_fail(err, "'%.40s' is not a valid snapshot name", name);
	return NULL;
}

/* Creates <name>.tmp.<pid>.<n> under dirfd (replacing a stale one), puts
 * its name in tmpname (SNAP_PATH_MAX) and returns a descriptor for it. */
int snap_make_tmpdir(int dirfd, const char *name, char *tmpname, char *err)
{
	static atomic_uint counter;
	int fd;

	snprintf(tmpname, SNAP_PATH_MAX, "%s.tmp.%d.%u", name, (int)getpid(),
		 atomic_fetch_add(&counter, 1));
	snap_rmtree(dirfd, tmpname);
	if (mkdirat(dirfd, tmpname, 0700))
		return snap_fail(err, "creating %s: %s", tmpname, strerror(errno));
	fd = openat(dirfd, tmpname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		snap_fail(err, "opening %s: %s", tmpname, strerror(errno));
		unlinkat(dirfd, tmpname, AT_REMOVEDIR);
	}
	return fd;
}

/* Renames tmpname to name, atomically replacing an older snapshot; file
 * systems without renameat2 flags get a short window with no snapshot
 * (never a partial one). */
int snap_install(int dirfd, const char *tmpname, const char *name, char *err)
{
	char old[SNAP_PATH_MAX];

	if (!renameat2(dirfd, tmpname, dirfd, name, RENAME_NOREPLACE))
		return 0;
	if (errno == EEXIST && !renameat2(dirfd, tmpname, dirfd, name, RENAME_EXCHANGE)) {
		snap_rmtree(dirfd, tmpname);
		return 0;
	}
	if (errno != EINVAL)
		return snap_fail(err, "renaming %s into place: %s", tmpname, strerror(errno));
	snprintf(old, sizeof(old), "%s.old.%d", name, (int)getpid());
	if (renameat(dirfd, name, dirfd, old) && errno != ENOENT)
		return snap_fail(err, "moving the old snapshot aside: %s", strerror(errno));
	if (renameat(dirfd, tmpname, dirfd, name))
		return snap_fail(err, "renaming %s into place: %s", tmpname, strerror(errno));
	snap_rmtree(dirfd, old);
	return 0;
}

/* The snapshot directory: name under dirfd, else (no such name) dirfd
 * itself; a symbolic link of that name is refused, not followed. */
int snap_open_dir(int dirfd, const char *name, char *err)
{
	int fd = snap_openat(dirfd, name, O_RDONLY | O_DIRECTORY, 0);

	if (fd < 0 && errno == ENOENT)
		fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && errno == ELOOP)
		snap_fail(err, "snapshot %.200s: is a symbolic link; refused", name);
	else if (fd < 0)
		snap_fail(err, "opening the snapshot directory: %s", strerror(errno));
	return fd;
}

/* A parent snapshot's path, relative to its child's directory: at most
 * two leading "..", then one or two names of NAME_CHARS not starting
 * with '.', each at most SNAP_NAME_LEN long: (../){0,2}NAME(/NAME)?. */
int snap_parent_ok(const char *path)
{
	int ups = 0, names = 0;

	while (ups < 2 && !strncmp(path, "../", 3)) {
		path += 3;
		ups++;
	}
	for (;;) {
		size_t n = strspn(path, NAME_CHARS);

		if (!n || n > SNAP_NAME_LEN || path[0] == '.')
			return 0;
		names++;
		path += n;
		if (!*path)
			return 1;
		if (*path != '/' || names == 2)
			return 0;
		path++;
	}
}

void snap_image_name(char *buf, uint64_t hash_lo, uint64_t hash_hi)
{
	snprintf(buf, SNAP_NAME_MAX, "module-%016llx%016llx.bin",
		 (unsigned long long)hash_hi, (unsigned long long)hash_lo);
}

uint64_t snap_drop_data(int dirfd)
{
	char name[SNAP_NAME_MAX];
	uint64_t freed = 0;
	struct stat st;
	int fd;

	for (size_t k = 0;; k++) {
		snap_data_name(name, k);
		if ((fd = snap_openat(dirfd, name, O_WRONLY | O_NONBLOCK, 0)) < 0)
			break;
		if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_size > 0 &&
		    !fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, st.st_size))
			freed += (uint64_t)st.st_size;
		close(fd);
	}
	return freed;
}

/* Data file k: device-memory.img, then device-memory-<k>.img. */
void snap_data_name(char *buf, size_t k)
{
	if (k)
		snprintf(buf, SNAP_NAME_MAX, "device-memory-%zu.img", k);
	else
		snprintf(buf, SNAP_NAME_MAX, "%s", SNAP_DATA_NAME);
}

/* manifest, a data file name or module-<32 lower-case hex>.bin. */
int snap_name_ok(const char *name)
{
	char data[SNAP_NAME_MAX];
	unsigned k;
	size_t i;

	if (!strcmp(name, SNAP_MANIFEST_NAME) || !strcmp(name, SNAP_DATA_NAME) || !strcmp(name, SNAP_MAC_NAME))
		return 1;
	if (sscanf(name, "device-memory-%3u.img", &k) == 1 && k && k < SNAP_MAX_THREADS) {
		snap_data_name(data, k);
		return !strcmp(name, data);
	}
	if (strlen(name) != 43 || strncmp(name, "module-", 7) || strcmp(name + 39, ".bin"))
		return 0;
	for (i = 7; i < 39; i++)
		if (!strchr("0123456789abcdef", name[i]))
			return 0;
	return 1;
}

static long env_long(const char *name, long lo, long hi, long dflt)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return dflt;
	errno = 0;
	v = strtol(s, &end, 10);
	return *end || errno || v < lo || v > hi ? dflt : v;
}

/* CICADA_SNAPSHOT_THREADS, else online CPUs up to 16; never more than jobs. */
int snap_threads(size_t jobs)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	long n = env_long("CICADA_SNAPSHOT_THREADS", 1, SNAP_MAX_THREADS,
			  cpus < 1 ? 1 : cpus > 16 ? 16 : cpus);

	return (size_t)n > jobs ? (int)(jobs ? jobs : 1) : (int)n;
}

int snap_zstd_level(void)
{
	return (int)env_long("CICADA_ZSTD_LEVEL", ZSTD_minCLevel(), ZSTD_maxCLevel(), 1);
}

int snap_worth_compressing(ZSTD_CCtx *c, void *scratch, size_t cap, const void *data, size_t size, int level)
{
	const size_t sample = 32u << 10;

	if (size < 4 * sample)
		return 1;
	for (int i = 0; i < 3; i++) {
		size_t off = (size - sample) / 2 * (size_t)i;
		size_t z = ZSTD_compressCCtx(c, scratch, cap, (const char *)data + off, sample, level);

		if (!ZSTD_isError(z) && z < sample / 10 * 9)
			return 1;
	}
	return 0;
}

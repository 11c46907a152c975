/*
 * tree.c: a whole CRIU image directory over a connection, for moving a
 * process to another node: its top-level files (CRIU's images, the
 * plugin's session files) and the files of its subdirectories (the GPU
 * snapshots), two levels down at most (a migration's pre-copy rounds:
 * precopy-1/cicada-gpu-42/). The stream: "CICADAIM", u32 version, u32
 * reserved; per file a u32 name length, the name ("a", "dir/a" or
 * "dir/sub/a"), a u64 size and a mode byte, then the bytes: as they are
 * (mode 0), or (mode 1, CRIU's page images, where zstd pays) in chunks
 * of at most 4 MiB, each a u32 of its stored length (the top bit set if
 * it is a zstd frame) and its bytes. The stream ends with a zero name
 * length and the XXH3-64 of everything before it (little endian). The receiver accepts only plain
 * names (letters, digits, '.', '_', '-', '+', no part starting with '.',
 * at most two '/'), creates each file anew, and fails on a bad checksum;
 * the caller removes what a failed receive left.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>
#include "internal.h"

#define TREE_MAGIC "CICADAIM"
#define TREE_VERSION 2
#define ZCHUNK_FLAG 0x80000000u
#define TREE_CHUNK (4u << 20)
#define TREE_NAME_MAX 256
#define TREE_FILES_MAX 100000u

struct tree {
	int fd;
	XXH3_state_t *sum;
	uint8_t *buf, *z;                 /* a chunk, and a zstd frame */
	size_t zcap;
	uint64_t moved;                   /* bytes so far, for progress */
	struct snap_progress *progress;
	char *err;
};

static int tree_init(struct tree *t, int fd, struct snap_progress *p, char *err)
{
	memset(t, 0, sizeof(*t));
	t->fd = fd;
	t->err = err;
	t->progress = p;
	t->sum = XXH3_createState();
	t->buf = malloc(TREE_CHUNK);
	t->zcap = ZSTD_compressBound(TREE_CHUNK);
	t->z = malloc(t->zcap);
	if (!t->sum || !t->buf || !t->z || XXH3_64bits_reset(t->sum) != XXH_OK)
		return snap_fail(err, "out of memory for the image stream");
	return 0;
}

static void tree_free(struct tree *t)
{
	XXH3_freeState(t->sum);
	free(t->buf);
	free(t->z);
}

/* Counts bytes for the progress callback, which may stop the transfer. */
static int tree_count(struct tree *t, size_t len)
{
	t->moved += len;
	if (t->progress && t->progress->fn && t->progress->fn(t->progress->ctx, t->moved)) {
		shutdown(t->fd, SHUT_RDWR);
		return snap_fail(t->err, "the transfer was stopped after %llu bytes",
				 (unsigned long long)t->moved);
	}
	return 0;
}

static int tree_put(struct tree *t, const void *p, size_t len)
{
	const uint8_t *b = p;

	XXH3_64bits_update(t->sum, p, len);
	for (size_t left = len; left;) {
		ssize_t n = send(t->fd, b, left, MSG_NOSIGNAL);

		if (n < 0 && errno == ENOTSOCK)
			n = write(t->fd, b, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return snap_fail(t->err, "sending the images: %s", n < 0 ? strerror(errno) : "closed");
		b += n;
		left -= (size_t)n;
	}
	return tree_count(t, len);
}

static int tree_get(struct tree *t, void *p, size_t len)
{
	for (size_t got = 0; got < len;) {
		ssize_t n = read(t->fd, (char *)p + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return snap_fail(t->err, "the image stream stalled: nothing came for too long");
		if (n < 0)
			return snap_fail(t->err, "receiving the images: %s", strerror(errno));
		if (n == 0)
			return snap_fail(t->err, "the image stream ended early (the link broke?)");
		got += (size_t)n;
	}
	XXH3_64bits_update(t->sum, p, len);
	return tree_count(t, len);
}

static int name_ok(const char *name)
{
	size_t n = strlen(name);
	int slashes = 0;

	if (!n || n >= TREE_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-+/", name[i]))
			return 0;
		if ((i == 0 || name[i - 1] == '/') && (name[i] == '.' || name[i] == '/'))
			return 0;                /* an empty part, or one starting with '.' */
		slashes += name[i] == '/';
	}
	return slashes <= 2 && name[n - 1] != '/';
}

/* CRIU's page images are worth compressing; GPU snapshot data is
 * compressed already, the other images are small. */
static int compressible(const char *name)
{
	const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;

	return !strncmp(base, "pages-", 6);
}

/* One chunk of a mode-1 file: a zstd frame if it is smaller, else raw. */
static int put_chunk(struct tree *t, size_t n)
{
	size_t z = ZSTD_compress(t->z, t->zcap, t->buf, n, 1);
	uint8_t word[4];
	int packed = !ZSTD_isError(z) && z < n / 10 * 9;

	snap_put_le(word, packed ? (uint32_t)z | ZCHUNK_FLAG : (uint32_t)n, 4);
	if (tree_put(t, word, 4))
		return -1;
	return tree_put(t, packed ? t->z : t->buf, packed ? z : n);
}

static int send_one(struct tree *t, int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), rc, mode = compressible(name);
	uint8_t hdr[13 + TREE_NAME_MAX];
	size_t nlen = strlen(name);
	struct stat st;

	if (fd < 0 || fstat(fd, &st)) {
		rc = snap_fail(t->err, "%s: %s", name, strerror(errno));
		goto out;
	}
	snap_put_le(hdr, nlen, 4);
	memcpy(hdr + 4, name, nlen);
	snap_put_le(hdr + 4 + nlen, (uint64_t)st.st_size, 8);
	hdr[12 + nlen] = (uint8_t)mode;
	rc = tree_put(t, hdr, 13 + nlen);
	for (uint64_t off = 0, n; !rc && off < (uint64_t)st.st_size; off += n) {
		n = (uint64_t)st.st_size - off < TREE_CHUNK ? (uint64_t)st.st_size - off : TREE_CHUNK;
		if (snap_pread_full(fd, t->buf, n, off) != (ssize_t)n)
			rc = snap_fail(t->err, "%s: changed while sent", name);
		else
			rc = mode ? put_chunk(t, n) : tree_put(t, t->buf, n);
		if (!rc && t->progress)
			t->progress->logical += n;
	}
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Sends the regular files of dirfd's directory prefix ("", "dir/" or
 * "dir/sub/") and those of its subdirectories, down to depth 2; at the
 * top, only the entry named only (if not NULL) and none starting with
 * skip (if not NULL). */
static int send_level(struct tree *t, int dirfd, const char *prefix, int depth, const char *only,
		      const char *skip)
{
	int scan = openat(dirfd, prefix[0] ? prefix : ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = scan >= 0 ? fdopendir(scan) : NULL;
	char name[TREE_NAME_MAX + 8];
	struct dirent *e;
	struct stat st;
	int rc = 0;

	if (!d) {
		if (scan >= 0)
			close(scan);
		return snap_fail(t->err, "cannot read the image directory: %s", strerror(errno));
	}
	while (!rc && (e = readdir(d))) {
		if (e->d_name[0] == '.' || strstr(e->d_name, ".tmp."))
			continue;
		if (depth == 0 && ((only && strcmp(e->d_name, only)) || (skip && !strncmp(e->d_name, skip, strlen(skip)))))
			continue;
		snprintf(name, sizeof(name), "%s%s", prefix, e->d_name);
		if (!name_ok(name) || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (S_ISREG(st.st_mode)) {
			rc = send_one(t, dirfd, name);
		} else if (S_ISDIR(st.st_mode) && depth < 2) {
			strcat(name, "/");
			rc = send_level(t, dirfd, name, depth + 1, NULL, NULL);
		}
	}
	closedir(d);
	return rc;
}

int snap_send_tree(int dirfd, int fd, const char *only, const char *skip, struct snap_progress *p,
		   uint64_t *bytes, char *err)
{
	uint8_t hdr[16] = TREE_MAGIC, end[8] = { 0 };
	struct tree t;
	int rc;

	if (tree_init(&t, fd, p, err)) {
		tree_free(&t);
		return -1;
	}
	snap_put_le(hdr + 8, TREE_VERSION, 4);
	rc = tree_put(&t, hdr, sizeof(hdr)) || send_level(&t, dirfd, "", 0, only, skip) || tree_put(&t, end, 4);
	if (!rc) {
		snap_put_le(end, XXH3_64bits_digest(t.sum), 8);
		rc = tree_put(&t, end, 8);
	}
	if (bytes)
		*bytes = t.moved;
	tree_free(&t);
	return rc ? -1 : 0;
}

/* The next n bytes of a mode-1 file into t->buf. */
static int get_chunk(struct tree *t, size_t n)
{
	uint8_t word[4];
	uint32_t w, len;
	size_t got;

	if (tree_get(t, word, 4))
		return -1;
	w = (uint32_t)snap_get_le(word, 4);
	len = w & ~ZCHUNK_FLAG;
	if (!(w & ZCHUNK_FLAG))
		return len == n ? tree_get(t, t->buf, n) : snap_fail(t->err, "the image stream is malformed");
	if (len > t->zcap || tree_get(t, t->z, len))
		return len > t->zcap ? snap_fail(t->err, "the image stream is malformed") : -1;
	got = ZSTD_decompress(t->buf, TREE_CHUNK, t->z, len);
	if (ZSTD_isError(got) || got != n)
		return snap_fail(t->err, "the image stream holds a chunk that does not decompress");
	return 0;
}

static int recv_one(struct tree *t, int dirfd, char *name, uint64_t size, int mode)
{
	int fd, rc = 0;

	for (char *slash = strchr(name, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = 0;
		if (mkdirat(dirfd, name, 0700) && errno != EEXIST)
			return snap_fail(t->err, "creating %s: %s", name, strerror(errno));
		*slash = '/';
	}
	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return snap_fail(t->err, "creating %s: %s", name, strerror(errno));
	for (uint64_t left = size, n; !rc && left; left -= n) {
		n = left < TREE_CHUNK ? left : TREE_CHUNK;
		rc = mode ? get_chunk(t, n) : tree_get(t, t->buf, n);
		if (!rc && snap_write_all(fd, t->buf, n))
			rc = snap_fail(t->err, "writing %s: %s", name, strerror(errno));
	}
	close(fd);
	return rc;
}

int snap_recv_tree(int fd, int dirfd, struct snap_progress *p, uint64_t *bytes, char *err)
{
	char name[TREE_NAME_MAX];
	uint8_t b[16];
	uint64_t nlen, want;
	struct tree t;
	int rc = -1;

	if (tree_init(&t, fd, p, err) || tree_get(&t, b, 16))
		goto out;
	if (memcmp(b, TREE_MAGIC, 8) || snap_get_le(b + 8, 4) != TREE_VERSION) {
		snap_fail(err, "not a Cicada image stream of version %d", TREE_VERSION);
		goto out;
	}
	for (unsigned files = 0;; files++) {
		if (tree_get(&t, b, 4))
			goto out;
		if (!(nlen = snap_get_le(b, 4)))
			break;
		if (nlen >= TREE_NAME_MAX || files >= TREE_FILES_MAX) {
			snap_fail(err, "the image stream is malformed");
			goto out;
		}
		if (tree_get(&t, name, nlen))
			goto out;
		name[nlen] = 0;
		if (strlen(name) != nlen || !name_ok(name)) {
			snap_fail(err, "the image stream names a file it may not write");
			goto out;
		}
		if (tree_get(&t, b, 9))
			goto out;
		if (b[8] > 1) {
			snap_fail(err, "the image stream is malformed");
			goto out;
		}
		if (recv_one(&t, dirfd, name, snap_get_le(b, 8), b[8]))
			goto out;
	}
	want = XXH3_64bits_digest(t.sum);
	if (tree_get(&t, b, 8))
		goto out;
	if (snap_get_le(b, 8) != want) {
		snap_fail(err, "the image stream's checksum does not match: corrupted");
		goto out;
	}
	rc = 0;
out:
	if (bytes)
		*bytes = t.moved;
	tree_free(&t);
	return rc;
}

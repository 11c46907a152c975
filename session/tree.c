/*
 * tree.c: a whole CRIU image directory over a connection, for moving a
 * process to another node (gpu-migrate sends it, a gpu-server taking the
 * migration receives it; criu_images.h declares it): its top-level files
 * (CRIU's images, the plugin's session files) and the files of its
 * subdirectories (the GPU snapshots), two levels down at most (a
 * migration's pre-copy rounds: precopy-1/cicada-gpu-42/). The stream:
 * "CICADAIM", u32 version, u32 reserved; per file a u32 name length, the
 * name ("a", "dir/a" or "dir/sub/a"), a u64 size and a mode byte, then
 * the bytes: as they are (mode 0), or (mode 1, CRIU's page images, where
 * zstd pays) in chunks of at most 4 MiB, each a u32 of its stored length
 * (the top bit set if it is a zstd frame) and its bytes, packed by
 * several threads (tree_pack.c). The stream ends with a zero name
 * length and the XXH3-64 of everything before it (little endian). Several
 * such streams may carry one directory at once (snap_send_trees), its
 * files shared out among them by size. The receiver accepts only plain
 * names (letters, digits, '.', '_', '-', '+', no part starting with '.',
 * at most two '/'), creates each file anew, and fails on a bad checksum;
 * the caller removes what a failed receive left. Neither side opens or
 * creates anything through a symbolic link.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>
#include "criu_images.h"
#include "snapshot.h"
#include "tree_pack.h"

#define TREE_MAGIC "CICADAIM"
#define TREE_VERSION 2
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

static int put_for_pack(void *ctx, const void *p, size_t len)
{
	return tree_put(ctx, p, len);
}

static int send_one(struct tree *t, int dirfd, const char *name)
{
	int fd = snap_openat(dirfd, name, O_RDONLY | O_NONBLOCK, 0), rc, mode = compressible(name);
	uint8_t hdr[13 + TREE_NAME_MAX];
	size_t nlen = strlen(name);
	struct stat st;

	if (fd < 0 || fstat(fd, &st)) {
		rc = snap_fail(t->err, "%s: %s", name, snap_open_why(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = snap_fail(t->err, "%s: not a regular file", name);
		goto out;
	}
	snap_put_le(hdr, nlen, 4);
	memcpy(hdr + 4, name, nlen);
	snap_put_le(hdr + 4 + nlen, (uint64_t)st.st_size, 8);
	hdr[12 + nlen] = (uint8_t)mode;
	rc = tree_put(t, hdr, 13 + nlen);
	if (!rc && mode) {
		struct tree_pack_out out = { put_for_pack, t, t->progress ? &t->progress->logical : NULL };

		rc = tree_pack_send(fd, (uint64_t)st.st_size, TREE_CHUNK, &out, name, t->err);
		goto out;
	}
	for (uint64_t off = 0, n; !rc && off < (uint64_t)st.st_size; off += n) {
		n = (uint64_t)st.st_size - off < TREE_CHUNK ? (uint64_t)st.st_size - off : TREE_CHUNK;
		if (snap_pread_full(fd, t->buf, n, off) != (ssize_t)n)
			rc = snap_fail(t->err, "%s: changed while sent", name);
		else
			rc = tree_put(t, t->buf, n);
		if (!rc && t->progress)
			t->progress->logical += n;
	}
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

typedef int (*file_fn)(void *ctx, int dirfd, const char *name, uint64_t size);

/* Calls fn for the regular files of dirfd's directory prefix ("", "dir/"
 * or "dir/sub/") and those of its subdirectories, down to depth 2; at the
 * top, only the entry named only (if not NULL) and none starting with
 * one of skip's prefixes (if not NULL; separated by spaces). */
static int skipped(const char *name, const char *skip)
{
	for (const char *p = skip; p && *p; p += strcspn(p, " "), p += strspn(p, " ")) {
		size_t n = strcspn(p, " ");
		if (n && !strncmp(name, p, n))
			return 1;
	}
	return 0;
}

static int walk(int dirfd, const char *prefix, int depth, const char *only, const char *skip, file_fn fn,
		void *ctx, char *err)
{
	int scan = snap_openat(dirfd, prefix[0] ? prefix : ".", O_RDONLY | O_DIRECTORY, 0);
	DIR *d = scan >= 0 ? fdopendir(scan) : NULL;
	char name[TREE_NAME_MAX + 8];
	struct dirent *e;
	struct stat st;
	int rc = 0;

	if (!d) {
		if (scan >= 0)
			close(scan);
		return snap_fail(err, "cannot read the image directory: %s", strerror(errno));
	}
	while (!rc && (e = readdir(d))) {
		if (e->d_name[0] == '.' || strstr(e->d_name, ".tmp."))
			continue;
		if (depth == 0 && ((only && strcmp(e->d_name, only)) || skipped(e->d_name, skip)))
			continue;
		snprintf(name, sizeof(name), "%s%s", prefix, e->d_name);
		if (!name_ok(name) || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (S_ISREG(st.st_mode)) {
			rc = fn(ctx, dirfd, name, (uint64_t)st.st_size);
		} else if (S_ISDIR(st.st_mode) && depth < 2) {
			strcat(name, "/");
			rc = walk(dirfd, name, depth + 1, NULL, NULL, fn, ctx, err);
		}
	}
	closedir(d);
	return rc;
}

static int send_file(void *ctx, int dirfd, const char *name, uint64_t size)
{
	return send_one(ctx, dirfd, name);
}

static int stream_begin(struct tree *t)
{
	uint8_t hdr[16] = TREE_MAGIC;

	snap_put_le(hdr + 8, TREE_VERSION, 4);
	return tree_put(t, hdr, sizeof(hdr));
}

static int stream_end(struct tree *t)
{
	uint8_t end[8] = { 0 };

	if (tree_put(t, end, 4))
		return -1;
	snap_put_le(end, XXH3_64bits_digest(t->sum), 8);
	return tree_put(t, end, 8);
}

int snap_send_tree(int dirfd, int fd, const char *only, const char *skip, struct snap_progress *p,
		   uint64_t *bytes, char *err)
{
	struct tree t;
	int rc;

	if (tree_init(&t, fd, p, err)) {
		tree_free(&t);
		return -1;
	}
	rc = stream_begin(&t) || walk(dirfd, "", 0, only, skip, send_file, &t, err) || stream_end(&t);
	if (bytes)
		*bytes = t.moved;
	tree_free(&t);
	return rc ? -1 : 0;
}

/* --- several streams at once: the files shared out by size --- */

struct file {
	char name[TREE_NAME_MAX];
	uint64_t size;
	unsigned stream;
};

struct share {
	int dirfd;
	struct file *files;
	size_t n, cap;
	struct snap_progress *progress;   /* the caller's: told the sum of all */
	_Atomic uint64_t moved, logical;
	pthread_mutex_t lock;
	_Atomic int failed;
	char *err;
};

struct lane {
	struct share *sh;
	unsigned index;
	int fd;
	uint64_t moved, last;
	struct snap_progress p;
	char err[SNAP_ERRLEN];
};

static int add_file(void *ctx, int dirfd, const char *name, uint64_t size)
{
	struct share *sh = ctx;

	if (sh->n == sh->cap) {
		size_t cap = sh->cap ? 2 * sh->cap : 64;
		struct file *f = cap <= TREE_FILES_MAX ? realloc(sh->files, cap * sizeof(*f)) : NULL;
		if (!f)
			return snap_fail(sh->err, "too many files to send");
		sh->files = f;
		sh->cap = cap;
	}
	snprintf(sh->files[sh->n].name, TREE_NAME_MAX, "%s", name);
	sh->files[sh->n++].size = size;
	return 0;
}

static int bigger_first(const void *a, const void *b)
{
	const struct file *x = a, *y = b;

	return x->size < y->size ? 1 : x->size > y->size ? -1 : strcmp(x->name, y->name);
}

/* Each file to the stream with the fewest bytes so far, biggest first. */
static void share_out(struct share *sh, unsigned n)
{
	uint64_t load[SNAP_STREAMS_MAX] = { 0 };

	qsort(sh->files, sh->n, sizeof(*sh->files), bigger_first);
	for (size_t i = 0; i < sh->n; i++) {
		unsigned best = 0;
		for (unsigned k = 1; k < n; k++)
			if (load[k] < load[best])
				best = k;
		sh->files[i].stream = best;
		load[best] += sh->files[i].size;
	}
}

/* A lane's progress adds into the whole's, told to the caller in turn. */
static int lane_progress(void *ctx, uint64_t bytes)
{
	struct lane *l = ctx;
	struct snap_progress *p = l->sh->progress;
	uint64_t total = atomic_fetch_add(&l->sh->moved, bytes - l->last) + bytes - l->last;
	int rc = 0;

	l->last = bytes;
	if (atomic_load(&l->sh->failed))
		return 1;                    /* another lane failed: this one stops too */
	if (p && p->fn) {
		pthread_mutex_lock(&l->sh->lock);
		rc = p->fn(p->ctx, total);
		pthread_mutex_unlock(&l->sh->lock);
	}
	return rc;
}

static void *lane_run(void *arg)
{
	struct lane *l = arg;
	struct share *sh = l->sh;
	struct tree t;
	int rc;

	l->p = (struct snap_progress){ lane_progress, l, 0 };
	rc = tree_init(&t, l->fd, &l->p, l->err) || stream_begin(&t);
	for (size_t i = 0; !rc && i < sh->n; i++)
		if (sh->files[i].stream == l->index)
			rc = send_one(&t, sh->dirfd, sh->files[i].name);
	rc = rc || stream_end(&t);
	l->moved = t.moved;
	atomic_fetch_add(&sh->logical, l->p.logical);
	tree_free(&t);
	/* the first failure is the one told; the others stop at their next
	 * progress call */
	if (rc && !atomic_exchange(&sh->failed, 1)) {
		pthread_mutex_lock(&sh->lock);
		snprintf(sh->err, SNAP_ERRLEN, "%s", l->err);
		pthread_mutex_unlock(&sh->lock);
	}
	return NULL;
}

int snap_send_trees(int dirfd, const int *fds, unsigned nfds, const char *only, const char *skip,
		    struct snap_progress *p, uint64_t *bytes, char *err)
{
	struct share sh = { .dirfd = dirfd, .progress = p, .err = err };
	struct lane lanes[SNAP_STREAMS_MAX];
	pthread_t tids[SNAP_STREAMS_MAX];
	unsigned started = 1;
	uint64_t moved = 0;

	if (!nfds || nfds > SNAP_STREAMS_MAX)
		return snap_fail(err, "%u streams: 1 to %d may carry images", nfds, SNAP_STREAMS_MAX);
	if (nfds == 1)
		return snap_send_tree(dirfd, fds[0], only, skip, p, bytes, err);
	if (walk(dirfd, "", 0, only, skip, add_file, &sh, err)) {
		free(sh.files);
		return -1;
	}
	share_out(&sh, nfds);
	pthread_mutex_init(&sh.lock, NULL);
	for (unsigned k = 0; k < nfds; k++)
		lanes[k] = (struct lane){ .sh = &sh, .index = k, .fd = fds[k] };
	for (; started < nfds; started++)
		if (pthread_create(&tids[started], NULL, lane_run, &lanes[started]))
			break;
	if (started < nfds) {                /* a lane without a thread: its stream ends at once */
		atomic_store(&sh.failed, 1);
		snap_fail(err, "cannot start a thread for a stream");
	}
	lane_run(&lanes[0]);
	for (unsigned k = 1; k < started; k++)
		pthread_join(tids[k], NULL);
	for (unsigned k = 0; k < nfds; k++)
		moved += lanes[k].moved;
	if (p)
		p->logical += atomic_load(&sh.logical);
	if (bytes)
		*bytes = moved;
	pthread_mutex_destroy(&sh.lock);
	free(sh.files);
	return atomic_load(&sh.failed) ? -1 : 0;
}

struct recv_lane {
	int fd, dirfd, rc;
	uint64_t moved;
	char err[SNAP_ERRLEN];
};

static void *recv_lane(void *arg)
{
	struct recv_lane *l = arg;

	l->rc = snap_recv_tree(l->fd, l->dirfd, NULL, &l->moved, l->err);
	if (l->rc)
		shutdown(l->fd, SHUT_RDWR);      /* (its sender stops too) */
	return NULL;
}

int snap_recv_trees(const int *fds, unsigned nfds, int dirfd, uint64_t *bytes, char *err)
{
	struct recv_lane lanes[SNAP_STREAMS_MAX];
	pthread_t tids[SNAP_STREAMS_MAX];
	unsigned started = 1;
	int rc = 0;

	if (!nfds || nfds > SNAP_STREAMS_MAX)
		return snap_fail(err, "%u streams: 1 to %d may carry images", nfds, SNAP_STREAMS_MAX);
	for (unsigned k = 0; k < nfds; k++)
		lanes[k] = (struct recv_lane){ .fd = fds[k], .dirfd = dirfd };
	for (; started < nfds; started++)
		if (pthread_create(&tids[started], NULL, recv_lane, &lanes[started]))
			break;
	recv_lane(&lanes[0]);
	for (unsigned k = 1; k < started; k++)
		pthread_join(tids[k], NULL);
	if (bytes)
		*bytes = 0;
	for (unsigned k = 0; k < nfds; k++) {
		if (bytes)
			*bytes += lanes[k].moved;
		if (!rc && (k >= started || lanes[k].rc)) {
			snprintf(err, SNAP_ERRLEN, "%s", k >= started ? "cannot start a thread for a stream" : lanes[k].err);
			rc = -1;
		}
	}
	return rc;
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
	len = w & ~TREE_ZCHUNK_FLAG;
	if (!(w & TREE_ZCHUNK_FLAG))
		return len == n ? tree_get(t, t->buf, n) : snap_fail(t->err, "the image stream is malformed");
	if (len > t->zcap || tree_get(t, t->z, len))
		return len > t->zcap ? snap_fail(t->err, "the image stream is malformed") : -1;
	got = ZSTD_decompress(t->buf, TREE_CHUNK, t->z, len);
	if (ZSTD_isError(got) || got != n)
		return snap_fail(t->err, "the image stream holds a chunk that does not decompress");
	return 0;
}

/* The directory that holds name's last part under dirfd, made as needed
 * a part at a time, never through a link; *base gets the last part. */
static int make_dirs(struct tree *t, int dirfd, char *name, char **base)
{
	int fd = dirfd, next, e;
	char *p = name, *slash;

	for (; (slash = strchr(p, '/')); p = slash + 1) {
		*slash = 0;
		next = mkdirat(fd, p, 0700) && errno != EEXIST ? -1 : snap_openat(fd, p, O_RDONLY | O_DIRECTORY, 0);
		e = errno;
		*slash = '/';
		if (fd != dirfd)
			close(fd);
		if (next < 0)
			return snap_fail(t->err, "creating %s: %s", name, snap_open_why(e));
		fd = next;
	}
	*base = p;
	return fd;
}

static int recv_one(struct tree *t, int dirfd, char *name, uint64_t size, int mode)
{
	int dfd, fd, rc = 0;
	char *base = NULL;

	if ((dfd = make_dirs(t, dirfd, name, &base)) < 0)
		return -1;
	fd = snap_openat(dfd, base, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		snap_fail(t->err, "creating %s: %s", name, snap_open_why(errno));
	if (dfd != dirfd)
		close(dfd);
	if (fd < 0)
		return -1;
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

/*
 * reader.c: opening a snapshot: the manifest is read, checked and
 * validated, and the files it names are checked to exist with the sizes
 * it gives; contents are read (and their checksums checked) on demand.
 * An incremental snapshot opens its parent chain too: each parent must be
 * the very snapshot it was made from (its manifest checksum), reached by
 * a short relative path without links, owned by the same user as its
 * child, and every piece left to the chain must be found there. Nothing
 * is opened through a symbolic link: a snapshot names hostile things.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include "internal.h"

/* Opens the data files, each at least as long as the manifest says. */
static int open_data(struct snap_reader *r, char *err)
{
	const Cicada__Manifest *m = r->m;
	char name[SNAP_NAME_MAX];
	struct stat st;
	int fd;

	for (size_t k = 0; k < m->n_data_sizes; k++) {
		snap_data_name(name, k);
		fd = snap_openat(r->fd, name, O_RDONLY | O_NONBLOCK, 0);
		if (fd < 0 || fstat(fd, &st)) {
			snap_fail(err, "%s: %s", name, snap_open_why(errno));
			if (fd >= 0)
				close(fd);
			return -1;
		}
		r->datafd[r->n_data++] = fd;
		if (!S_ISREG(st.st_mode))
			return snap_fail(err, "%s: not a regular file", name);
		if ((uint64_t)st.st_size < m->data_sizes[k])
			return snap_fail(err, "%s truncated (%lld of %llu bytes)", name,
					 (long long)st.st_size, (unsigned long long)m->data_sizes[k]);
	}
	return 0;
}

static int stat_images(struct snap_reader *r, char *err)
{
	struct stat st;

	for (size_t i = 0; i < r->m->n_images; i++) {
		const Cicada__ModuleImage *im = r->m->images[i];

		if (fstatat(r->fd, im->file, &st, AT_SYMLINK_NOFOLLOW))
			return snap_fail(err, "%s: %s", im->file, strerror(errno));
		if (S_ISLNK(st.st_mode))
			return snap_fail(err, "%s: %s", im->file, snap_open_why(ELOOP));
		if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != im->size)
			return snap_fail(err, "%s: %lld bytes, the manifest says %llu", im->file,
					 (long long)st.st_size, (unsigned long long)im->size);
	}
	return 0;
}

/* Keyed: the manifest file must carry its code under our key. */
static int manifest_signed(struct snap_reader *r, const void *buf, size_t len, char *err)
{
	ProtobufCBinaryData mac = { 0 };
	size_t n = 0;
	void *code = NULL;
	int ok;

	if (snap_read_file(r->fd, SNAP_MAC_NAME, SNAP_MAC_LEN, &code, &n, err))
		return snap_fail(err, "the snapshot carries no code of this server's key (%s): not accepted", SNAP_MAC_NAME);
	mac.data = code;
	mac.len = n;
	ok = snap_mac_ok(len, 0, buf, len, &mac);
	free(code);
	return ok ? 0 : snap_fail(err, "the snapshot's manifest does not match this server's key: forged or changed");
}

static int load_manifest(struct snap_reader *r, const char *name, char *err)
{
	struct stat st;
	void *buf;
	size_t len;

	if (fstatat(r->fd, SNAP_MANIFEST_NAME, &st, AT_SYMLINK_NOFOLLOW) && errno == ENOENT)
		return snap_fail(err, "no Cicada GPU snapshot here (no %s/ and no %s)",
				 name, SNAP_MANIFEST_NAME);
	if (snap_read_file(r->fd, SNAP_MANIFEST_NAME, SNAP_MANIFEST_MAX, &buf, &len, err))
		return -1;
	if (snap_key.set && manifest_signed(r, buf, len, err)) {
		free(buf);
		return -1;
	}
	r->m = snap_manifest_parse(buf, len, err);
	if (r->m)
		r->sum = snap_get_le((const uint8_t *)buf + 24, 8);
	free(buf);
	return r->m ? 0 : -1;
}

Cicada__Manifest *snap_manifest_load(int dirfd, const char *name, char *err)
{
	Cicada__Manifest *m = NULL;
	void *buf;
	size_t len;
	int fd;

	if (!(name = snap_dir_name(name, err)) || (fd = snap_open_dir(dirfd, name, err)) < 0)
		return NULL;
	if (!snap_read_file(fd, SNAP_MANIFEST_NAME, SNAP_MANIFEST_MAX, &buf, &len, err)) {
		m = snap_manifest_parse(buf, len, err);
		free(buf);
	}
	close(fd);
	return m;
}

static int cmp_va(const void *key, const void *elem)
{
	uint64_t va = *(const uint64_t *)key, pva = (*(Cicada__Piece *const *)elem)->va;

	return va < pva ? -1 : va > pva;
}

/* The piece of r's own manifest at va with this size, or NULL. */
const Cicada__Piece *snap_piece_at(const struct snap_reader *r, uint64_t va, uint64_t size)
{
	Cicada__Piece *const *p = bsearch(&va, r->m->pieces, r->m->n_pieces, sizeof(*r->m->pieces), cmp_va);

	return p && (*p)->size == size ? *p : NULL;
}

/* The stored piece of the chain from r with this va, size and checksum
 * (following in_parent pieces down), and the reader holding its bytes. */
const Cicada__Piece *snap_chain_find(const struct snap_reader *r, uint64_t va, uint64_t size, uint64_t sum,
				     struct snap_reader **owner)
{
	for (; r; r = r->parent) {
		const Cicada__Piece *p = snap_piece_at(r, va, size);

		if (!p || p->checksum != sum)
			return NULL;
		if (!p->in_parent) {
			*owner = (struct snap_reader *)r;
			return p;
		}
	}
	return NULL;
}

static struct snap_reader *open_at(int dirfd, const char *name, int depth, int *loaded, char *err);

/* The parent snapshot directory path names from the snapshot directory
 * fd, opened a component at a time without following links (path is
 * snap_parent_ok: ".." only leading), and owned by fd's owner; -1 else. */
static int open_parent_dir(int fd, const char *path)
{
	char part[SNAP_NAME_LEN + 1];
	struct stat child, st;
	int cur = fd, next;

	if (!snap_parent_ok(path) || fstat(fd, &child))
		return -1;
	while (*path) {
		size_t n = strcspn(path, "/");

		memcpy(part, path, n);
		part[n] = 0;
		next = openat(cur, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cur != fd)
			close(cur);
		if (next < 0)
			return -1;
		cur = next;
		path += n + (path[n] == '/');
	}
	if (fstat(cur, &st) || !S_ISDIR(st.st_mode) || st.st_uid != child.st_uid) {
		close(cur);
		return -1;
	}
	return cur;
}

/* The parent snapshot path of the snapshot directory fd, at depth in its
 * chain. Whatever keeps it from being opened as a snapshot says only
 * SNAP_PARENT_REFUSED; what is wrong with a parent that is one (its
 * manifest read) is told. */
struct snap_reader *snap_parent_open(int fd, const char *path, int depth, char *err)
{
	char why[SNAP_ERRLEN];
	struct snap_reader *p = NULL;
	int pfd = open_parent_dir(fd, path), loaded = 0;

	if (pfd >= 0) {
		p = open_at(pfd, NULL, depth, &loaded, why);
		close(pfd);
	}
	if (!p && loaded)
		snap_fail(err, "its parent snapshot %.200s: %s", path, why);
	else if (!p)
		snap_fail(err, "its parent snapshot %.200s " SNAP_PARENT_REFUSED, path);
	return p;
}

/* Opens r's parent chain and finds each in_parent piece's bytes. */
static int open_chain(struct snap_reader *r, int depth, char *err)
{
	const Cicada__Manifest *m = r->m;

	if (!m->parent)
		return 0;
	if (depth >= SNAP_CHAIN_MAX)
		return snap_fail(err, "the snapshot chain is longer than %d", SNAP_CHAIN_MAX);
	if (!(r->parent = snap_parent_open(r->fd, m->parent, depth + 1, err)))
		return -1;
	if (r->parent->sum != m->parent_checksum)
		return snap_fail(err, "its parent snapshot %.200s " SNAP_PARENT_REFUSED, m->parent);
	if (!(r->src = calloc(m->n_pieces + 1, sizeof(*r->src))))
		return snap_fail(err, "out of memory for the snapshot chain");
	for (size_t i = 0; i < m->n_pieces; i++) {
		const Cicada__Piece *pc = m->pieces[i];

		if (pc->in_parent && !(r->src[i].pc = snap_chain_find(r->parent, pc->va, pc->size, pc->checksum,
								     &r->src[i].r)))
			return snap_fail(err, "its piece at 0x%llx is in no parent snapshot",
					 (unsigned long long)pc->va);
	}
	return 0;
}

/* A snapshot directory: name under dirfd, or (name NULL) dirfd itself.
 * *loaded (if not NULL) says whether its manifest was read and valid. */
static struct snap_reader *open_at(int dirfd, const char *name, int depth, int *loaded, char *err)
{
	struct snap_reader *r = calloc(1, sizeof(*r));

	if (!r) {
		snap_fail(err, "out of memory for a snapshot reader");
		return NULL;
	}
	r->fd = name ? snap_open_dir(dirfd, name, err) : openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r->fd < 0 && !name)
		snap_fail(err, "cannot open the snapshot: %s", strerror(errno));
	if (r->fd < 0 || load_manifest(r, name ? name : ".", err)) {
		snap_reader_close(r);
		return NULL;
	}
	if (loaded)
		*loaded = 1;
	if (open_data(r, err) || stat_images(r, err) || open_chain(r, depth, err)) {
		snap_reader_close(r);
		return NULL;
	}
	return r;
}

struct snap_reader *snap_reader_open(int dirfd, const char *name, char *err)
{
	if (!(name = snap_dir_name(name, err)))
		return NULL;
	return open_at(dirfd, name, 0, NULL, err);
}

struct snap_reader *snap_reader_open_path(int dirfd, const char *path, char *err)
{
	int fd = snap_openat(dirfd, path, O_RDONLY | O_DIRECTORY, 0);
	struct snap_reader *r;

	if (fd < 0) {
		snap_fail(err, "%.200s: %s", path, errno == EXDEV ? "not beneath the directory; refused" :
			  snap_open_why(errno));
		return NULL;
	}
	r = open_at(fd, NULL, 0, NULL, err);
	close(fd);
	return r;
}

int snap_reader_dir_uid(const struct snap_reader *r, uid_t *uid)
{
	struct stat st;

	if (fstat(r->fd, &st))
		return -1;
	*uid = st.st_uid;
	return 0;
}

const Cicada__Manifest *snap_reader_manifest(const struct snap_reader *r)
{
	return r->m;
}

int snap_read_image(struct snap_reader *r, size_t index, void **data, size_t *size, char *err)
{
	const Cicada__ModuleImage *im;

	if (index >= r->m->n_images)
		return snap_fail(err, "no module image %zu (the snapshot has %zu)", index, r->m->n_images);
	im = r->m->images[index];
	if (snap_read_file(r->fd, im->file, im->size, data, size, err))
		return -1;
	if (*size == im->size && snap_key.set && !snap_mac_ok(im->size, 0, *data, *size, &im->mac)) {
		free(*data);
		*data = NULL;
		return snap_fail(err, "%s does not match this server's key: forged or changed", im->file);
	}
	if (*size == im->size && XXH3_64bits(*data, *size) == im->checksum)
		return 0;
	free(*data);
	*data = NULL;
	if (*size != im->size)
		return snap_fail(err, "%s truncated (%zu of %llu bytes)", im->file, *size,
				 (unsigned long long)im->size);
	return snap_fail(err, "%s: checksum mismatch: corrupted", im->file);
}

void snap_reader_close(struct snap_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	for (unsigned k = 0; k < r->n_data; k++)
		close(r->datafd[k]);
	snap_reader_close(r->parent);
	free(r->src);
	snap_manifest_free(r->m);
	free(r);
}

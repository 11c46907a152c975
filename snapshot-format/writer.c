/*
 * writer.c: building a snapshot: a temporary directory under CRIU's image
 * directory receives the module images and the data files (memory.c
 * fills them), then the manifest, last; then the directory is renamed
 * into place. Any failure removes the temporary directory. With a parent
 * (snap_writer_parent) the snapshot is incremental. Files are created
 * afresh (O_EXCL), never through a link.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include "internal.h"

static void free_writer(struct snap_writer *w)
{
	for (unsigned k = 0; k < w->n_data; k++)
		close(w->data[k].fd);
	close(w->fd);
	free(w->images);
	for (size_t i = 0; w->pieces && i < w->n_pieces; i++)
		free(w->pieces[i].mac.data);
	free(w->pieces);
	snap_reader_close(w->parent);
	free(w);
}

int snap_writer_parent(struct snap_writer *w, const char *path, char *err)
{
	if (!path || strlen(path) > SNAP_PARENT_MAX || !snap_parent_ok(path))
		return snap_fail(err, "'%.200s' is not a parent snapshot's path: (../){0,2}NAME(/NAME)?, never absolute",
				 path ? path : "");
	snap_reader_close(w->parent);
	/* relative to the temporary directory, a sibling of the final one */
	if (!(w->parent = snap_parent_open(w->fd, path, 1, err)))
		return -1;
	snprintf(w->parent_path, sizeof(w->parent_path), "%s", path);
	return 0;
}

size_t snap_writer_skipped(const struct snap_writer *w)
{
	return atomic_load(&w->skipped);
}

size_t snap_writer_unread(const struct snap_writer *w)
{
	return atomic_load(&w->unread);
}

struct snap_writer *snap_writer_begin(int dirfd, const char *name, char *err)
{
	struct snap_writer *w;

	if (!(name = snap_dir_name(name, err)))
		return NULL;
	w = calloc(1, sizeof(*w));
	if (!w) {
		snap_fail(err, "out of memory for a snapshot writer");
		return NULL;
	}
	w->dirfd = dirfd;
	snprintf(w->name, sizeof(w->name), "%s", name);
	w->fd = snap_make_tmpdir(dirfd, name, w->tmpname, err);
	if (w->fd < 0) {
		free(w);
		return NULL;
	}
	return w;
}

int snap_write_image(struct snap_writer *w, uint64_t hash_lo, uint64_t hash_hi,
		     const void *data, size_t size, char *err)
{
	struct snap_image *im;
	size_t n = w->n_images;

	for (size_t i = 0; i < n; i++)
		if (w->images[i].mi.hash_lo == hash_lo && w->images[i].mi.hash_hi == hash_hi)
			return 0;
	if (n == SNAP_MAX_IMAGES || size > SNAP_IMAGE_MAX)
		return snap_fail(err, "module image %zu (%zu bytes) is over the limits", n, size);
	if (!(n & (n - 1))) {             /* capacity doubles at powers of two */
		im = realloc(w->images, (n ? 2 * n : 1) * sizeof(*im));
		if (!im)
			return snap_fail(err, "out of memory for module images");
		w->images = im;
	}
	im = &w->images[n];
	im->mi = (Cicada__ModuleImage)CICADA__MODULE_IMAGE__INIT;
	im->mi.hash_lo = hash_lo;
	im->mi.hash_hi = hash_hi;
	im->mi.size = size;
	im->mi.checksum = XXH3_64bits(data, size);
	if (snap_key.set && snap_mac(size, 0, data, size, im->mac))
		return snap_fail(err, "cannot sign module image %zu", n);
	snap_image_name(im->file, hash_lo, hash_hi);
	if (snap_write_file(w->fd, im->file, data, size, err))
		return -1;
	w->n_images++;
	return 0;
}

static int cmp_piece(const void *a, const void *b)
{
	const Cicada__Piece *x = a, *y = b;

	return x->va < y->va ? -1 : x->va > y->va;
}

static int write_manifest(struct snap_writer *w, const Cicada__Manifest *m, char *err)
{
	char why[SNAP_ERRLEN];
	uint8_t *buf;
	size_t len;
	int rc;

	if (snap_manifest_check(m, why))
		return snap_fail(err, "not writing an invalid snapshot: %s", why);
	buf = snap_manifest_pack(m, &len, err);
	if (!buf)
		return -1;
	rc = snap_write_file(w->fd, SNAP_MANIFEST_NAME, buf, len, err);
	if (!rc && snap_key.set) {
		uint8_t mac[SNAP_MAC_LEN];

		rc = snap_mac(len, 0, buf, len, mac) ? snap_fail(err, "cannot sign the manifest") :
						       snap_write_file(w->fd, SNAP_MAC_NAME, mac, sizeof(mac), err);
	}
	free(buf);
	return rc;
}

/* Points m at the writer's images, pieces and data files, writes it,
 * then unhooks. */
static int fill_and_write(struct snap_writer *w, Cicada__Manifest *m,
			  Cicada__ModuleImage **images, Cicada__Piece **pieces, char *err)
{
	uint64_t sizes[SNAP_MAX_THREADS];
	struct timespec ts;
	int rc;

	if (w->n_pieces)
		qsort(w->pieces, w->n_pieces, sizeof(*w->pieces), cmp_piece);
	for (size_t i = 0; i < w->n_images; i++) {
		w->images[i].mi.file = w->images[i].file;
		if (snap_key.set) {
			w->images[i].mi.has_mac = 1;
			w->images[i].mi.mac = (ProtobufCBinaryData){ SNAP_MAC_LEN, w->images[i].mac };
		}
		images[i] = &w->images[i].mi;
	}
	for (size_t i = 0; i < w->n_pieces; i++)
		pieces[i] = &w->pieces[i];
	m->data_size = 0;
	for (unsigned k = 0; k < w->n_data; k++)
		m->data_size += sizes[k] = w->data[k].size;
	clock_gettime(CLOCK_REALTIME, &ts);
	m->format_version = SNAP_FORMAT_VERSION;
	m->producer = (char *)SNAP_PRODUCER;
	m->created_unix_ns = (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
	m->n_images = w->n_images;
	m->images = images;
	m->n_pieces = w->n_pieces;
	m->pieces = pieces;
	m->data_file = w->n_data ? (char *)SNAP_DATA_NAME : NULL;
	m->has_data_size = 1;
	m->n_data_sizes = w->n_data;
	m->data_sizes = sizes;
	m->parent = w->parent ? w->parent_path : NULL;
	m->has_parent_checksum = !!w->parent;
	m->parent_checksum = w->parent ? w->parent->sum : 0;
	rc = write_manifest(w, m, err);
	m->parent = NULL;
	m->has_parent_checksum = 0;
	m->producer = m->data_file = NULL;
	m->images = NULL;
	m->pieces = NULL;
	m->data_sizes = NULL;
	m->n_images = m->n_pieces = m->n_data_sizes = 0;
	return rc;
}

int snap_writer_commit(struct snap_writer *w, Cicada__Manifest *m, char *err)
{
	Cicada__ModuleImage **images = calloc(w->n_images + 1, sizeof(*images));
	Cicada__Piece **pieces = calloc(w->n_pieces + 1, sizeof(*pieces));
	int rc = -1;

	if (!images || !pieces)
		snap_fail(err, "out of memory for the manifest");
	else if (!fill_and_write(w, m, images, pieces, err))
		rc = snap_install(w->dirfd, w->tmpname, w->name, err);
	free(images);
	free(pieces);
	if (rc)
		snap_writer_abort(w);
	else
		free_writer(w);
	return rc;
}

void snap_writer_abort(struct snap_writer *w)
{
	if (!w)
		return;
	snap_rmtree(w->dirfd, w->tmpname);
	free_writer(w);
}

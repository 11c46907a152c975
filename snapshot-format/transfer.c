/*
 * transfer.c: a snapshot directory over a connection (socket or pipe).
 * The stream: "CICADAGX", u32 version, u32 reserved; per file a u32
 * name length, the name, a u64 size and the bytes; then a zero name
 * length and the XXH3-64 of everything before it (little endian). The
 * receiver accepts only the snapshot's own file names, writes into a
 * temporary directory and renames it into place only after the checksum
 * and the received manifest check out. An incremental snapshot goes over
 * whole (the receiver has no parents): the bytes its parent chain holds
 * follow its own data files as one more data file, and the manifest sent
 * names that file instead of the parent. Files are opened and created by
 * name only, never through a link (created afresh: a name sent twice is
 * refused).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include "internal.h"

#define STREAM_MAGIC "CICADAGX"
#define STREAM_VERSION 1
#define STREAM_CHUNK (4u << 20)

struct stream {
	int fd;
	XXH3_state_t *sum;                /* of every byte so far */
	uint8_t *buf;
	char *err;
};

static int stream_init(struct stream *s, int fd, char *err)
{
	s->fd = fd;
	s->err = err;
	s->sum = XXH3_createState();
	s->buf = malloc(STREAM_CHUNK);
	if (!s->sum || !s->buf || XXH3_64bits_reset(s->sum) != XXH_OK)
		return snap_fail(err, "out of memory for the snapshot stream");
	return 0;
}

static void stream_free(struct stream *s)
{
	XXH3_freeState(s->sum);
	free(s->buf);
}

/* Like write, but a closed socket is an error, not SIGPIPE. */
static int send_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == ENOTSOCK)
			return snap_write_all(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

static int put(struct stream *s, const void *p, size_t len)
{
	XXH3_64bits_update(s->sum, p, len);
	if (send_all(s->fd, p, len))
		return snap_fail(s->err, "sending the snapshot: %s", strerror(errno));
	return 0;
}

static int get(struct stream *s, void *p, size_t len)
{
	for (size_t got = 0; got < len;) {
		ssize_t n = read(s->fd, (char *)p + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return snap_fail(s->err, "receiving the snapshot: %s", strerror(errno));
		if (n == 0)
			return snap_fail(s->err, "snapshot stream truncated (it ended early)");
		got += n;
	}
	XXH3_64bits_update(s->sum, p, len);
	return 0;
}

static int send_file(struct stream *s, int dirfd, const char *name)
{
	int fd = snap_openat(dirfd, name, O_RDONLY | O_NONBLOCK, 0), rc;
	size_t nlen = strlen(name);
	uint8_t hdr[12 + SNAP_NAME_MAX];
	struct stat st;

	if (fd < 0 || fstat(fd, &st)) {
		rc = snap_fail(s->err, "%s: %s", name, snap_open_why(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = snap_fail(s->err, "%s: not a regular file", name);
		goto out;
	}
	snap_put_le(hdr, nlen, 4);
	memcpy(hdr + 4, name, nlen);
	snap_put_le(hdr + 4 + nlen, st.st_size, 8);
	rc = put(s, hdr, 12 + nlen);
	for (uint64_t off = 0, n; !rc && off < (uint64_t)st.st_size; off += n) {
		n = st.st_size - off < STREAM_CHUNK ? st.st_size - off : STREAM_CHUNK;
		if (snap_pread_full(fd, s->buf, n, off) != (ssize_t)n)
			rc = snap_fail(s->err, "%s: changed while sent", name);
		else
			rc = put(s, s->buf, n);
	}
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

static int send_end(struct stream *s)
{
	uint8_t end[8] = { 0 };

	if (put(s, end, 4))
		return -1;
	snap_put_le(end, XXH3_64bits_digest(s->sum), 8);
	return put(s, end, 8);
}

static int send_bytes(struct stream *s, const char *name, const void *p, size_t len)
{
	uint8_t hdr[12 + SNAP_NAME_MAX];
	size_t nlen = strlen(name);

	snap_put_le(hdr, nlen, 4);
	memcpy(hdr + 4, name, nlen);
	snap_put_le(hdr + 4 + nlen, len, 8);
	return put(s, hdr, 12 + nlen) || put(s, p, len) ? -1 : 0;
}

/* The stored bytes of r's pieces that its parents hold, as data file k
 * (in piece order), and m's pieces pointed there. */
static int send_parent_pieces(struct stream *s, struct snap_reader *r, Cicada__Manifest *m, unsigned k)
{
	char name[SNAP_NAME_MAX];
	uint8_t hdr[12 + SNAP_NAME_MAX];
	uint64_t total = 0, off = 0;
	size_t nlen;

	for (size_t i = 0; i < m->n_pieces; i++)
		if (m->pieces[i]->in_parent)
			total += r->src[i].pc->stored_size;
	snap_data_name(name, k);
	nlen = strlen(name);
	snap_put_le(hdr, nlen, 4);
	memcpy(hdr + 4, name, nlen);
	snap_put_le(hdr + 4 + nlen, total, 8);
	if (put(s, hdr, 12 + nlen))
		return -1;
	for (size_t i = 0; i < m->n_pieces; i++) {
		Cicada__Piece *pc = m->pieces[i];
		const Cicada__Piece *st = r->src[i].pc;

		if (!pc->in_parent)
			continue;
		for (uint64_t done = 0, n; done < st->stored_size; done += n) {
			n = st->stored_size - done < STREAM_CHUNK ? st->stored_size - done : STREAM_CHUNK;
			if (snap_pread_full(r->src[i].r->datafd[st->file], s->buf, n, st->offset + done) != (ssize_t)n)
				return snap_fail(s->err, "a parent snapshot's data file is truncated");
			if (put(s, s->buf, n))
				return -1;
		}
		if (st->has_mac && st->mac.len) {       /* a copy: m frees its own */
			if (!(pc->mac.data = malloc(st->mac.len)))
				return snap_fail(s->err, "out of memory");
			memcpy(pc->mac.data, st->mac.data, st->mac.len);
			pc->mac.len = st->mac.len;
			pc->has_mac = 1;
		}
		pc->has_in_parent = pc->in_parent = 0;
		pc->has_file = pc->has_compressed = 1;
		pc->file = k;
		pc->offset = off;
		pc->stored_size = st->stored_size;
		pc->compressed = st->compressed;
		off += st->stored_size;
	}
	return 0;
}

/* The manifest, made whole if the snapshot is incremental. */
static int send_manifest(struct stream *s, struct snap_reader *r)
{
	Cicada__Manifest *m = r->m;
	uint64_t *sizes = NULL;
	uint8_t *buf;
	size_t len;
	int rc;

	if (!m->parent)
		return send_file(s, r->fd, SNAP_MANIFEST_NAME) ||
		       (snap_key.set && send_file(s, r->fd, SNAP_MAC_NAME)) ? -1 : 0;
	if (m->n_data_sizes >= SNAP_MAX_THREADS || !(sizes = malloc((m->n_data_sizes + 1) * sizeof(*sizes))))
		return snap_fail(s->err, "cannot send the snapshot whole");
	memcpy(sizes, m->data_sizes, m->n_data_sizes * sizeof(*sizes));
	free(m->data_sizes);
	m->data_sizes = sizes;
	if (send_parent_pieces(s, r, m, (unsigned)m->n_data_sizes))
		return -1;
	sizes[m->n_data_sizes] = 0;
	for (size_t i = 0; i < m->n_pieces; i++)
		if (m->pieces[i]->file == m->n_data_sizes && m->pieces[i]->has_file)
			sizes[m->n_data_sizes] += m->pieces[i]->stored_size;
	m->data_size += sizes[m->n_data_sizes++];
	if (!m->data_file)
		m->data_file = strdup(SNAP_DATA_NAME);
	free(m->parent);
	m->parent = NULL;
	m->has_parent_checksum = 0;
	if (!(buf = snap_manifest_pack(m, &len, s->err)))
		return -1;
	rc = send_bytes(s, SNAP_MANIFEST_NAME, buf, len);
	if (!rc && snap_key.set) {
		uint8_t mac[SNAP_MAC_LEN];

		rc = snap_mac(len, 0, buf, len, mac) ? snap_fail(s->err, "cannot sign the manifest") :
						       send_bytes(s, SNAP_MAC_NAME, mac, sizeof(mac));
	}
	free(buf);
	return rc;
}

/* Sends the files the (valid) manifest names, the manifest last. */
int snap_send_dir(int dirfd, const char *name, int fd, char *err)
{
	struct snap_reader *r = snap_reader_open(dirfd, name, err);
	struct stream s = { 0 };
	uint8_t hdr[16] = STREAM_MAGIC;
	char data[SNAP_NAME_MAX];
	int rc;

	if (!r)
		return -1;
	snap_put_le(hdr + 8, STREAM_VERSION, 4);
	rc = stream_init(&s, fd, err) || put(&s, hdr, sizeof(hdr));
	for (size_t k = 0; !rc && k < r->m->n_data_sizes; k++) {
		snap_data_name(data, k);
		rc = send_file(&s, r->fd, data);
	}
	for (size_t i = 0; !rc && i < r->m->n_images; i++)
		rc = send_file(&s, r->fd, r->m->images[i]->file);
	if (!rc)
		rc = send_manifest(&s, r) || send_end(&s);
	stream_free(&s);
	snap_reader_close(r);      /* its manifest may have been made whole: not reused */
	return rc ? -1 : 0;
}

static int recv_file(struct stream *s, int dirfd, const char *name, uint64_t size)
{
	int fd = snap_openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL, 0600), rc = 0;

	if (fd < 0)
		return snap_fail(s->err, "creating %s: %s", name, snap_open_why(errno));
	for (uint64_t left = size, n; !rc && left; left -= n) {
		n = left < STREAM_CHUNK ? left : STREAM_CHUNK;
		rc = get(s, s->buf, n);
		if (!rc && snap_write_all(fd, s->buf, n))
			rc = snap_fail(s->err, "writing %s: %s", name, strerror(errno));
	}
	close(fd);
	return rc;
}

static int recv_header(struct stream *s)
{
	uint8_t b[16];

	if (get(s, b, 16))
		return -1;
	if (memcmp(b, STREAM_MAGIC, 8))
		return snap_fail(s->err, "not a Cicada GPU snapshot stream");
	if (snap_get_le(b + 8, 4) != STREAM_VERSION)
		return snap_fail(s->err, "snapshot stream version %llu is not supported (this build reads %d)",
				 (unsigned long long)snap_get_le(b + 8, 4), STREAM_VERSION);
	return 0;
}

static int recv_files(struct stream *s, int dirfd)
{
	char name[SNAP_NAME_MAX];
	uint64_t nlen;
	uint8_t b[8];

	for (unsigned files = 0;; files++) {
		if (get(s, b, 4))
			return -1;
		nlen = snap_get_le(b, 4);
		if (!nlen)
			return 0;
		if (nlen >= SNAP_NAME_MAX || files > SNAP_MAX_IMAGES + SNAP_MAX_THREADS)
			return snap_fail(s->err, "snapshot stream is malformed");
		if (get(s, name, nlen))
			return -1;
		name[nlen] = 0;
		if (!snap_name_ok(name))
			return snap_fail(s->err, "snapshot stream carries a file that is not part of a snapshot");
		if (get(s, b, 8) || recv_file(s, dirfd, name, snap_get_le(b, 8)))
			return -1;
	}
}

static int recv_end(struct stream *s, int dirfd)
{
	uint64_t want = XXH3_64bits_digest(s->sum);
	char why[SNAP_ERRLEN];
	struct snap_reader *r;
	uint8_t b[8];

	if (get(s, b, 8))
		return -1;
	if (snap_get_le(b, 8) != want)
		return snap_fail(s->err, "snapshot stream checksum mismatch: corrupted");
	r = snap_reader_open(dirfd, NULL, why);
	if (!r)
		return snap_fail(s->err, "received snapshot is not valid: %s", why);
	snap_reader_close(r);
	return 0;
}

int snap_recv_dir(int fd, int dirfd, const char *name, char *err)
{
	char tmp[SNAP_PATH_MAX];
	struct stream s = { 0 };
	int tfd, rc = -1;

	if (!(name = snap_dir_name(name, err)) || (tfd = snap_make_tmpdir(dirfd, name, tmp, err)) < 0)
		return -1;
	if (!stream_init(&s, fd, err) && !recv_header(&s) && !recv_files(&s, tfd) &&
	    !recv_end(&s, tfd))
		rc = snap_install(dirfd, tmp, name, err);
	stream_free(&s);
	close(tfd);
	if (rc)
		snap_rmtree(dirfd, tmp);
	return rc;
}

int snap_remove_dir(int dirfd, const char *name, char *err)
{
	if (!(name = snap_dir_name(name, err)))
		return -1;
	if (snap_rmtree(dirfd, name))
		return snap_fail(err, "removing %s: %s", name, strerror(errno));
	return 0;
}

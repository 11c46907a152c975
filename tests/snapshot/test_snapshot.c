/*
 * test_snapshot.c: tests of the snapshot library on host buffers standing
 * in for device memory: round trips, image dedup, verification, refusal
 * of corrupted snapshots and manifests, atomic replacement, aborted
 * writers, and moving a snapshot over a socketpair; also session/'s image
 * stream and criu log reader, which use the library's file helpers.
 * Prints "PASS name" or "FAIL name: reason" per case, then "N passed, M
 * failed".
 * Hostile snapshots too: symbolic links where a snapshot, its files or
 * its parent's path should be, parents by odd paths or of another owner.
 * "test_snapshot sample DIR" writes the sample snapshot under DIR (for
 * test_cli.sh; keyed under CICADA_SNAPSHOT_KEY_FILE if set) and exits;
 * "test_snapshot chain DIR" writes DIR/base/cicada-gpu and, on it, the
 * incremental DIR/incr/cicada-gpu; "test_snapshot reseal DIR" changes
 * the manifest of the snapshot DIR and writes it back with a right
 * checksum but no key, as a forger would (for the keyed-snapshot tests);
 * "test_snapshot reseal-owner DIR" does so making its owner "uid 0".
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "internal.h"
#include "criu_images.h"

#define MiB (1u << 20)
#define NREGIONS 4
#define SNAP "cicada-gpu/"

struct region {
	uint64_t va;
	size_t size;
	uint8_t *mem;
};

/* The fake device: a few regions; fail_read makes every read fail. */
struct device {
	struct region r[NREGIONS];
	int fail_read;
};

static char why[1024];
static char base[64] = "/tmp/cicada-snaptest.XXXXXX";
static int basefd;
static const uint8_t image_a[] = "\x7f" "ELF fake cubin A, not really a module";
static uint8_t image_b[100000];

#define CHECK(cond, ...) do { if (!(cond)) { snprintf(why, sizeof(why), __VA_ARGS__); return why; } } while (0)

/* --- the fake device --- */

static uint8_t *dev_at(struct device *d, uint64_t va, size_t size)
{
	for (int i = 0; i < NREGIONS; i++)
		if (va >= d->r[i].va && va + size <= d->r[i].va + d->r[i].size)
			return d->r[i].mem + (va - d->r[i].va);
	return NULL;
}

static void *host_alloc(void *ctx, size_t size)
{
	return malloc(size);
}

static void host_free(void *ctx, void *buf, size_t size)
{
	free(buf);
}

static int dev_read(void *ctx, uint64_t va, void *buf, size_t size)
{
	struct device *d = ctx;
	uint8_t *p = dev_at(d, va, size);

	if (!p || d->fail_read)
		return -1;
	memcpy(buf, p, size);
	return 0;
}

static int dev_write(void *ctx, uint64_t va, const void *buf, size_t size)
{
	uint8_t *p = dev_at(ctx, va, size);

	if (!p)
		return -1;
	memcpy(p, buf, size);
	return 0;
}

static struct snap_memory_ops ops_for(struct device *d)
{
	return (struct snap_memory_ops){ .ctx = d, .alloc_host = host_alloc, .free_host = host_free, .read = dev_read,
					  .write = dev_write };
}

/* Compressible text, random bytes, zeros, one byte; sizes off the piece
 * size. fill = 0 leaves the regions zeroed (a device to restore into). */
static void dev_init(struct device *d, int fill)
{
	static const size_t sizes[NREGIONS] = { 20 * MiB + 123, 5 * MiB + 7, 8 * MiB, 1 };
	uint64_t x = 88172645463325252ull;

	memset(d, 0, sizeof(*d));
	for (int i = 0; i < NREGIONS; i++) {
		d->r[i] = (struct region){ 0x7f0000000000ull + ((uint64_t)i << 28), sizes[i],
					   calloc(1, sizes[i]) };
		for (size_t k = 0; fill && i != 2 && k < sizes[i]; k++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			d->r[i].mem[k] = i == 1 ? (uint8_t)x : (uint8_t)("cicada snapshot "[k % 16] + k / 4096 % 7);
		}
	}
}

static void dev_free(struct device *d)
{
	for (int i = 0; i < NREGIONS; i++)
		free(d->r[i].mem);
}

/* --- writing the sample snapshot --- */

static void sample_manifest(Cicada__Manifest *m, struct device *d)
{
	static Cicada__Gpu gpu = CICADA__GPU__INIT;
	static Cicada__Record rec[3] = { CICADA__RECORD__INIT, CICADA__RECORD__INIT, CICADA__RECORD__INIT };
	static Cicada__Record *recs[3] = { &rec[0], &rec[1], &rec[2] };
	static Cicada__Allocation al[NREGIONS];
	static Cicada__Allocation *als[NREGIONS];
	static Cicada__Global global = CICADA__GLOBAL__INIT, *globals[1] = { &global };
	static uint8_t uuid[16] = { 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };
	static uint8_t args[24] = { 1 };
	static const char *names[3] = { "cuCtxCreate", "cuModuleLoadData", "cuMemAlloc" };

	gpu.name = "Fake GPU \"H100\"";
	gpu.uuid = (ProtobufCBinaryData){ sizeof(uuid), uuid };
	gpu.has_uuid = gpu.has_driver_version = gpu.has_total_memory = gpu.has_cc_major = gpu.has_cc_minor = 1;
	gpu.driver_version = 12040;
	gpu.total_memory = 80ull << 30;
	gpu.cc_major = 9;
	for (int i = 0; i < 3; i++) {
		rec[i].seq = i * 2 + 1;
		rec[i].proc = 10 + i;
		rec[i].name = (char *)names[i];
		rec[i].has_handle = rec[i].has_ctx = rec[i].has_parent = 1;
		rec[i].handle = i + 1;
		rec[i].parent = i ? 1 : 0;
		rec[i].ctx = i ? 1 : 0;
		rec[i].has_args = 1;
		rec[i].args = (ProtobufCBinaryData){ sizeof(args) - i, args };
	}
	for (int i = 0; i < NREGIONS; i++) {
		al[i] = (Cicada__Allocation)CICADA__ALLOCATION__INIT;
		al[i].va = d->r[i].va;
		al[i].size = d->r[i].size;
		als[i] = &al[i];
	}
	global.va = d->r[3].va;
	global.size = d->r[3].size;
	global.parent = 2;
	*m = (Cicada__Manifest)CICADA__MANIFEST__INIT;
	m->gpu = &gpu;
	m->n_globals = 1;
	m->globals = globals;
	m->n_records = 3;
	m->records = recs;
	m->n_allocations = NREGIONS;
	m->allocations = als;
	m->has_arena_va = m->has_arena_size = m->has_current_ctx = 1;
	m->arena_va = 0x7f0000000000ull;
	m->arena_size = 1ull << 30;
	m->current_ctx = 1;
	m->owner = "uid 1000";
	m->has_owner_uid = 1;
	m->owner_uid = 1000;
}

static int write_sample_from(int dirfd, const char *name, struct device *d, const char *parent, size_t *skipped,
			     char *err)
{
	struct snap_writer *w = snap_writer_begin(dirfd, name, err);
	struct snap_memory_ops ops = ops_for(d);
	struct snap_range ranges[NREGIONS];
	Cicada__Manifest m;

	if (!w)
		return -1;
	if (parent && snap_writer_parent(w, parent, err)) {
		snap_writer_abort(w);
		return -1;
	}
	for (int i = 0; i < NREGIONS; i++)
		ranges[i] = (struct snap_range){ d->r[i].va, d->r[i].size };
	sample_manifest(&m, d);
	if (snap_write_image(w, 1, 0xa, image_a, sizeof(image_a), err) ||
	    snap_write_image(w, 2, 0xb, image_b, sizeof(image_b), err) ||
	    snap_write_image(w, 1, 0xa, image_a, sizeof(image_a), err) ||
	    snap_write_memory(w, ranges, 2, &ops, err) ||
	    snap_write_memory(w, ranges + 2, NREGIONS - 2, &ops, err)) {
		snap_writer_abort(w);
		return -1;
	}
	if (skipped)
		*skipped = snap_writer_skipped(w);
	return snap_writer_commit(w, &m, err);
}

static int write_sample(int dirfd, const char *name, struct device *d, char *err)
{
	return write_sample_from(dirfd, name, d, NULL, NULL, err);
}

/* --- helpers --- */

/* A fresh directory under the test directory. */
static int fresh_dir(const char *name)
{
	snap_rmtree(basefd, name);
	mkdirat(basefd, name, 0700);
	return openat(basefd, name, O_RDONLY | O_DIRECTORY);
}

/* A fresh directory holding the sample snapshot, or -1. */
static int sample_dir(const char *name, struct device *d, char *err)
{
	int fd = fresh_dir(name);

	dev_init(d, 1);
	if (write_sample(fd, NULL, d, err)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Names in dirfd other than . and .., joined by spaces. */
static const char *entries(int dirfd)
{
	static char list[512];
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY);
	DIR *dir = fdopendir(fd);
	struct dirent *e;

	list[0] = 0;
	while (dir && (e = readdir(dir)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
				 list[0] ? " " : "", e->d_name);
	if (dir)
		closedir(dir);
	return list;
}

static void flip(int dirfd, const char *path, uint64_t off)
{
	int fd = openat(dirfd, path, O_RDWR);
	uint8_t b = 0;

	if (pread(fd, &b, 1, off) == 1) {
		b ^= 0x5a;
		if (pwrite(fd, &b, 1, off) != 1)
			perror(path);
	}
	close(fd);
}

static void patch(int dirfd, const char *path, uint64_t off, const void *bytes, size_t len)
{
	int fd = openat(dirfd, path, O_RDWR);

	if (pwrite(fd, bytes, len, off) != (ssize_t)len)
		perror(path);
	close(fd);
}

static off_t file_size(int dirfd, const char *path)
{
	struct stat st;

	return fstatat(dirfd, path, &st, 0) ? -1 : st.st_size;
}

static void cut(int dirfd, const char *path, off_t by)
{
	int fd = openat(dirfd, path, O_RDWR);

	if (ftruncate(fd, file_size(dirfd, path) - by))
		perror(path);
	close(fd);
}

/* err is one non-empty line containing want. */
static int refused(const char *err, const char *want)
{
	return err[0] && !strchr(err, '\n') && strstr(err, want);
}

static const char *same_memory(struct device *a, struct device *b)
{
	for (int i = 0; i < NREGIONS; i++)
		CHECK(!memcmp(a->r[i].mem, b->r[i].mem, a->r[i].size), "region %d differs", i);
	return NULL;
}

/* The snapshot under dirfd opens and verifies. */
static int snapshot_ok(int dirfd, char *err)
{
	struct snap_reader *r = snap_reader_open(dirfd, NULL, err);
	int rc = r ? snap_verify(r, err) : -1;

	snap_reader_close(r);
	return rc;
}

/* Opening dirfd fails with an error containing want. */
static const char *open_refused(int dirfd, const char *want)
{
	char err[SNAP_ERRLEN] = "";
	struct snap_reader *r = snap_reader_open(dirfd, NULL, err);

	snap_reader_close(r);
	CHECK(!r, "opened a snapshot that should be refused");
	CHECK(refused(err, want), "error '%s' does not say '%s'", err, want);
	return NULL;
}

/* Verifying dirfd fails with an error containing want. */
static const char *verify_refused(int dirfd, const char *want)
{
	char err[SNAP_ERRLEN] = "";
	struct snap_reader *r = snap_reader_open(dirfd, NULL, err);
	int rc;

	CHECK(r, "open: %s", err);
	rc = snap_verify(r, err);
	snap_reader_close(r);
	CHECK(rc, "verify passed a corrupted snapshot");
	CHECK(refused(err, want), "error '%s' does not say '%s'", err, want);
	return NULL;
}

static const Cicada__Piece *find_piece(const Cicada__Manifest *m, uint64_t va)
{
	for (size_t i = 0; i < m->n_pieces; i++)
		if (m->pieces[i]->va == va)
			return m->pieces[i];
	return NULL;
}

/* The path of data file k of the snapshot under a directory. */
static const char *data_path(size_t k)
{
	static char path[SNAP_NAME_MAX + 16];

	snprintf(path, sizeof(path), SNAP);
	snap_data_name(path + strlen(path), k);
	return path;
}

/* The sample snapshot with the data file of the piece at va damaged: a
 * byte of the piece flipped (verify must fail), or the file cut short
 * (open must fail). */
static const char *damage_piece(const char *name, uint64_t va, int compressed, int cut_it,
				const char *want)
{
	char err[SNAP_ERRLEN];
	struct device d;
	struct snap_reader *r;
	const Cicada__Piece *p;
	const char *res;
	int fd = sample_dir(name, &d, err);

	dev_free(&d);
	CHECK(fd >= 0, "write: %s", err);
	r = snap_reader_open(fd, NULL, err);
	CHECK(r, "open: %s", err);
	p = find_piece(snap_reader_manifest(r), va);
	CHECK(p && p->compressed == compressed, "no %s piece at 0x%llx",
	      compressed ? "compressed" : "raw", (unsigned long long)va);
	if (cut_it)
		cut(fd, data_path(p->file), 1000);
	else
		flip(fd, data_path(p->file), p->offset + p->stored_size / 2);
	snap_reader_close(r);
	res = cut_it ? open_refused(fd, want) : verify_refused(fd, want);
	close(fd);
	return res;
}

/* --- the cases --- */

static const char *t_round_trip(void)
{
	char err[SNAP_ERRLEN];
	struct device d, back;
	struct snap_memory_ops ops = ops_for(&back);
	const Cicada__Manifest *m;
	struct snap_reader *r;
	const char *res;
	int fd = sample_dir("rt", &d, err);

	CHECK(fd >= 0, "write: %s", err);
	r = snap_reader_open(fd, NULL, err);
	CHECK(r, "open: %s", err);
	m = snap_reader_manifest(r);
	CHECK(m->n_pieces == 6, "%zu pieces, expected 6", m->n_pieces);
	CHECK(m->pieces[0]->compressed && !m->pieces[3]->compressed, "compression not as expected");
	dev_init(&back, 0);
	CHECK(!snap_read_memory(r, &ops, err), "read: %s", err);
	snap_reader_close(r);
	res = same_memory(&d, &back);
	dev_free(&d);
	dev_free(&back);
	close(fd);
	return res;
}

static const char *t_round_trip_3_threads_level_5(void)
{
	const char *res;

	setenv("CICADA_SNAPSHOT_THREADS", "3", 1);
	setenv("CICADA_ZSTD_LEVEL", "5", 1);
	res = t_round_trip();
	unsetenv("CICADA_SNAPSHOT_THREADS");
	unsetenv("CICADA_ZSTD_LEVEL");
	return res;
}

static const char *t_manifest_fields(void)
{
	char err[SNAP_ERRLEN], path[128];
	uint64_t total = 0;
	uid_t uid = (uid_t)-1;
	int fd = openat(basefd, "rt/" SNAP_DIR_NAME, O_RDONLY | O_DIRECTORY);
	struct snap_reader *r = snap_reader_open(fd, NULL, err);
	const Cicada__Manifest *m;

	close(fd);
	CHECK(r, "open of the snapshot directory itself: %s", err);
	m = snap_reader_manifest(r);
	CHECK(!strcmp(m->producer, SNAP_PRODUCER) && m->format_version == SNAP_FORMAT_VERSION,
	      "producer or version wrong");
	CHECK(m->n_records == 3 && m->records[2]->seq == 5 && !strcmp(m->records[1]->name, "cuModuleLoadData"),
	      "records not kept");
	CHECK(m->gpu && m->gpu->driver_version == 12040 && m->n_allocations == NREGIONS, "gpu or allocations lost");
	CHECK(m->n_globals == 1 && m->globals[0]->parent == 2, "globals lost");
	for (size_t k = 0; k < m->n_data_sizes; k++) {
		snprintf(path, sizeof(path), "rt/%s", data_path(k));
		CHECK(m->data_sizes[k] == (uint64_t)file_size(basefd, path), "%s: size wrong", path);
		total += m->data_sizes[k];
	}
	CHECK(m->n_data_sizes && m->data_size == total, "data size wrong");
	CHECK(m->created_unix_ns > 1700000000ull * 1000000000ull, "created time not set");
	CHECK(m->owner && !strcmp(m->owner, "uid 1000") && m->has_owner_uid && m->owner_uid == 1000,
	      "owner not kept: '%s', uid %u", m->owner ? m->owner : "(none)", m->owner_uid);
	CHECK(!snap_reader_dir_uid(r, &uid) && uid == geteuid(), "directory owner %u, expected %u", (unsigned)uid,
	      (unsigned)geteuid());
	snap_reader_close(r);
	return NULL;
}

static const char *t_images_dedup(void)
{
	char err[SNAP_ERRLEN];
	int fd = openat(basefd, "rt", O_RDONLY | O_DIRECTORY);
	struct snap_reader *r = snap_reader_open(fd, NULL, err);
	const void *want[2] = { image_a, image_b };
	size_t sizes[2] = { sizeof(image_a), sizeof(image_b) }, size;
	void *data;

	close(fd);
	CHECK(r, "open: %s", err);
	CHECK(snap_reader_manifest(r)->n_images == 2, "%zu images, expected 2",
	      snap_reader_manifest(r)->n_images);
	for (size_t i = 0; i < 2; i++) {
		CHECK(!snap_read_image(r, i, &data, &size, err), "image %zu: %s", i, err);
		CHECK(size == sizes[i] && !memcmp(data, want[i], size), "image %zu differs", i);
		free(data);
	}
	snap_reader_close(r);
	return NULL;
}

static const char *t_verify(void)
{
	char err[SNAP_ERRLEN];
	int fd = openat(basefd, "rt", O_RDONLY | O_DIRECTORY);
	int rc = snapshot_ok(fd, err);

	close(fd);
	CHECK(!rc, "%s", err);
	return NULL;
}

static const char *t_flipped_raw_piece(void)
{
	return damage_piece("flip-raw", 0x7f0010000000ull, 0, 0,
			    "device memory piece at 0x7f0010000000 (5.0 MiB): checksum mismatch");
}

static const char *t_flipped_compressed_piece(void)
{
	return damage_piece("flip-z", 0x7f0000800000ull, 1, 0,
			    "device memory piece at 0x7f0000800000 (8 MiB): ");
}

static const char *t_truncated_data_file(void)
{
	return damage_piece("cut-data", 0x7f0010000000ull, 0, 1, ".img truncated (");
}

/* Writes the sample under name, applies damage to it, expects open to fail. */
static const char *damaged(const char *name, void (*damage)(int fd), const char *want)
{
	char err[SNAP_ERRLEN];
	struct device d;
	const char *res;
	int fd = sample_dir(name, &d, err);

	dev_free(&d);
	CHECK(fd >= 0, "write: %s", err);
	damage(fd);
	res = open_refused(fd, want);
	close(fd);
	return res;
}

static void cut_manifest(int fd) { cut(fd, SNAP SNAP_MANIFEST_NAME, 5); }
static void bad_magic(int fd) { patch(fd, SNAP SNAP_MANIFEST_NAME, 0, "CICADAXX", 8); }
static void version_3(int fd) { patch(fd, SNAP SNAP_MANIFEST_NAME, 8, "\3", 1); }
static void flip_manifest(int fd) { flip(fd, SNAP SNAP_MANIFEST_NAME, 40); }
static void cut_image(int fd) { cut(fd, SNAP "module-000000000000000b0000000000000002.bin", 1); }

static const char *t_truncated_manifest(void)
{
	return damaged("cut-manifest", cut_manifest, "manifest truncated");
}

static const char *t_wrong_magic(void)
{
	return damaged("magic", bad_magic, "not a Cicada GPU snapshot");
}

static const char *t_header_version_3(void)
{
	return damaged("version", version_3, "snapshot format version 3 is not supported (this build reads 1 to 2)");
}

static const char *t_manifest_bit_flip(void)
{
	return damaged("flip-manifest", flip_manifest, "manifest checksum mismatch: corrupted");
}

static const char *t_image_size_wrong(void)
{
	return damaged("cut-image", cut_image, "module-000000000000000b0000000000000002.bin: 99999 bytes");
}

static const char *t_corrupted_image(void)
{
	char err[SNAP_ERRLEN];
	struct device d;
	const char *res;
	void *data = NULL;
	size_t size;
	struct snap_reader *r;
	int fd = sample_dir("flip-image", &d, err);

	dev_free(&d);
	CHECK(fd >= 0, "write: %s", err);
	flip(fd, SNAP "module-000000000000000b0000000000000002.bin", 5000);
	r = snap_reader_open(fd, NULL, err);
	CHECK(r, "open: %s", err);
	CHECK(snap_read_image(r, 1, &data, &size, err) && !data, "read a corrupted image");
	snap_reader_close(r);
	CHECK(refused(err, "module-000000000000000b0000000000000002.bin: checksum mismatch"), "error: %s", err);
	res = verify_refused(fd, "checksum mismatch");
	close(fd);
	return res;
}

static void set_piece(Cicada__Piece *p, uint64_t va, uint64_t size, uint64_t offset)
{
	*p = (Cicada__Piece)CICADA__PIECE__INIT;
	p->va = va;
	p->size = p->stored_size = size;
	p->offset = offset;
}

/* A manifest with one thing wrong, packed with a valid header. */
static const char *parse_refused(Cicada__Manifest *m, const char *want)
{
	char err[SNAP_ERRLEN] = "";
	size_t len;
	uint8_t *buf = snap_manifest_pack(m, &len, err);
	Cicada__Manifest *got;

	CHECK(buf, "pack: %s", err);
	got = snap_manifest_parse(buf, len, err);
	free(buf);
	snap_manifest_free(got);
	CHECK(!got, "accepted a manifest without '%s'", want);
	CHECK(refused(err, want), "error '%s' does not say '%s'", err, want);
	return NULL;
}

/* CUDA IPC entries: 64-byte handles, an owner, and format version 2. */
static const char *ipc_refused(Cicada__Manifest *m)
{
	uint8_t handle[SNAP_IPC_HANDLE_SIZE] = { 0 };
	Cicada__IpcEntry e = CICADA__IPC_ENTRY__INIT, *es[1] = { &e };
	const char *res;

	e.handle.data = handle;
	e.handle.len = 10;
	m->n_ipc_imports = 1;
	m->ipc_imports = es;
	m->has_ipc_owner = 1;
	m->ipc_owner = 7;
	if ((res = parse_refused(m, "IPC import 0 is no handle (10 bytes")))
		return res;
	e.handle.len = sizeof(handle);
	if ((res = parse_refused(m, "IPC import 0 is no handle")))      /* no kind's magic */
		return res;
	memcpy(handle, "CICADA01", 8);
	m->ipc_owner = 0;
	if ((res = parse_refused(m, "no owner")))
		return res;
	m->ipc_owner = 7;
	m->format_version = 1;
	if ((res = parse_refused(m, "format version 1 names CUDA IPC")))
		return res;
	m->format_version = SNAP_FORMAT_VERSION;
	m->n_ipc_imports = 0;
	m->has_ipc_owner = 0;
	return NULL;
}

/* The manifest parses (m is otherwise valid). */
static const char *parse_ok(Cicada__Manifest *m)
{
	char err[SNAP_ERRLEN] = "";
	size_t len;
	uint8_t *buf = snap_manifest_pack(m, &len, err);
	Cicada__Manifest *got = buf ? snap_manifest_parse(buf, len, err) : NULL;

	free(buf);
	snap_manifest_free(got);
	CHECK(got, "refused a valid manifest: %s", err);
	return NULL;
}

/* Paths a parent may and may not have: (../){0,2}NAME(/NAME)?. */
static const char *const good_parents[] = {
	"base", "../base", "../prev/cicada-gpu-42", "../../precopy-1/cicada-gpu-42", "../../dump1/cicada-gpu-42",
	"a/b", "../a_b-c.d", NULL
};
static const char *const bad_parents[] = {
	"", "/tmp/base", "/", "..", "../..", "../../..", "../../../base", "../../../a/b", "../a/b/c", "a/b/c",
	"./base", "../.hidden", ".base", "a//b", "a/", "../base/", "a/../b", "a/./b", "..//base", "ba se",
	"base\n", "../ba:se", "~/base", "../../a/..", NULL
};

/* The owner (printable, at most 128 characters) and the parent's path. */
static const char *owner_parent_refused(Cicada__Manifest *m)
{
	char owner[SNAP_NAME_LEN + 8];
	const char *res;

	m->owner = "uid 1000\n";
	if ((res = parse_refused(m, "owner is not printable text")))
		return res;
	memset(owner, 'a', 129);
	owner[129] = 0;
	m->owner = owner;
	if ((res = parse_refused(m, "owner is not printable text")))
		return res;
	owner[128] = 0;
	if ((res = parse_ok(m)))
		return res;
	m->owner = NULL;
	for (int i = 0; bad_parents[i]; i++) {
		m->parent = (char *)bad_parents[i];
		if ((res = parse_refused(m, "names a parent that is not a path of the form")))
			return res;
	}
	for (int i = 0; good_parents[i]; i++) {
		m->parent = (char *)good_parents[i];
		if ((res = parse_ok(m)))
			return res;
	}
	memset(owner, 'n', sizeof(owner));
	memcpy(owner, "../", 3);
	owner[3 + SNAP_NAME_LEN] = 0;
	m->parent = owner;                   /* a name of SNAP_NAME_LEN */
	if ((res = parse_ok(m)))
		return res;
	owner[3 + SNAP_NAME_LEN] = 'n';
	owner[4 + SNAP_NAME_LEN] = 0;
	if ((res = parse_refused(m, "names a parent that is not a path of the form")))
		return res;
	m->parent = NULL;
	return NULL;
}

static const char *t_invalid_manifests(void)
{
	Cicada__ModuleImage im = CICADA__MODULE_IMAGE__INIT, *ims[1] = { &im };
	Cicada__Piece pc[2], *pcs[2] = { &pc[0], &pc[1] };
	Cicada__Manifest m = CICADA__MANIFEST__INIT;
	uint64_t sizes[1] = { 100 };
	char err[SNAP_ERRLEN];
	const char *res;

	m.format_version = SNAP_FORMAT_VERSION;
	m.producer = "test";
	m.n_images = 1;
	m.images = ims;
	im.file = "../../etc/passwd";
	if ((res = parse_refused(&m, "file name is not module-")))
		return res;
	m.n_images = 0;
	m.data_file = SNAP_DATA_NAME;
	m.has_data_size = 1;
	m.data_size = 100;
	m.n_data_sizes = 1;
	m.data_sizes = sizes;
	m.n_pieces = 2;
	m.pieces = pcs;
	set_piece(&pc[0], 0x1000, 64, 0);
	set_piece(&pc[1], 0x1020, 64, 64);
	if ((res = parse_refused(&m, "not sorted or overlapping")))
		return res;
	pc[1].va = 0x2000;
	if ((res = parse_refused(&m, "beyond its data file")))
		return res;
	set_piece(&pc[1], 0x2000, SNAP_PIECE_SIZE + 1, 0);
	if ((res = parse_refused(&m, "out of range")))
		return res;
	set_piece(&pc[1], 0x2000, 36, 64);
	pc[1].has_file = pc[1].file = 1;
	if ((res = parse_refused(&m, "no data file 1")))
		return res;
	m.data_size = 99;
	if ((res = parse_refused(&m, "is not its files' 100 bytes")))
		return res;
	m.n_pieces = 0;
	m.data_file = "../device-memory.img";
	if ((res = parse_refused(&m, "expected device-memory.img")))
		return res;
	m.data_file = SNAP_DATA_NAME;
	m.data_size = 100;
	if ((res = ipc_refused(&m)))
		return res;
	if ((res = owner_parent_refused(&m)))
		return res;
	CHECK(!snap_manifest_parse("CICADAGS", 8, err) && refused(err, "truncated"), "short header: %s", err);
	CHECK(!snap_manifest_parse("", 0, err) && refused(err, "not a Cicada"), "empty: %s", err);
	return NULL;
}

/* The sample, then a second snapshot over it with one image only. */
static const char *t_commit_replaces(void)
{
	char err[SNAP_ERRLEN];
	Cicada__Manifest m = CICADA__MANIFEST__INIT, *lm;
	struct device d;
	struct snap_reader *r;
	struct snap_writer *w;
	int fd = sample_dir("replace", &d, err);

	dev_free(&d);
	CHECK(fd >= 0, "write: %s", err);
	w = snap_writer_begin(fd, NULL, err);
	CHECK(w, "begin: %s", err);
	CHECK(!snap_write_image(w, 7, 7, image_a, 10, err), "image: %s", err);
	CHECK(!snap_writer_commit(w, &m, err), "commit: %s", err);
	CHECK(!m.images && !m.pieces && !m.producer && m.data_size == 0, "commit left m pointing at its memory");
	CHECK(!strcmp(entries(fd), SNAP_DIR_NAME), "left behind: %s", entries(fd));
	r = snap_reader_open(fd, NULL, err);
	CHECK(r, "open: %s", err);
	CHECK(snap_reader_manifest(r)->n_images == 1 && !snap_reader_manifest(r)->n_pieces, "old snapshot still there");
	snap_reader_close(r);
	lm = snap_manifest_load(fd, NULL, err);      /* the manifest alone */
	CHECK(lm && lm->n_images == 1 && !lm->n_pieces, "manifest load: %s", lm ? "wrong manifest" : err);
	snap_manifest_free(lm);
	CHECK(!snap_manifest_load(fd, "no-such-snapshot", err) && err[0], "loaded a manifest that is not there");
	close(fd);
	return NULL;
}

/* A failing writer, then an aborted one: the snapshot stays, no temp dir. */
static const char *t_abort_keeps_old(void)
{
	char err[SNAP_ERRLEN], before[SNAP_ERRLEN];
	struct device d;
	struct snap_memory_ops ops = ops_for(&d);
	struct snap_range range = { 0x7f0000000000ull, 9 * MiB };
	struct snap_writer *w;
	int fd = sample_dir("abort", &d, err), rc;

	CHECK(fd >= 0, "write: %s", err);
	snprintf(before, sizeof(before), "%s", entries(fd));
	w = snap_writer_begin(fd, NULL, err);
	CHECK(w, "begin: %s", err);
	d.fail_read = 1;
	rc = snap_write_memory(w, &range, 1, &ops, err);
	CHECK(rc && refused(err, "reading device memory failed"), "failing read: %s", rc ? err : "accepted");
	snap_writer_abort(w);
	w = snap_writer_begin(fd, NULL, err);
	CHECK(w, "begin: %s", err);
	d.fail_read = 0;
	CHECK(!snap_write_memory(w, &range, 1, &ops, err), "write: %s", err);
	snap_writer_abort(w);
	dev_free(&d);
	CHECK(!strcmp(entries(fd), before), "entries now '%s'", entries(fd));
	rc = snapshot_ok(fd, err);
	close(fd);
	CHECK(!rc, "old snapshot: %s", err);
	return NULL;
}

static const char *t_commit_refuses_invalid(void)
{
	char err[SNAP_ERRLEN];
	Cicada__Manifest m;
	struct device d;
	struct snap_writer *w;
	int fd = sample_dir("invalid", &d, err), rc;

	CHECK(fd >= 0, "write: %s", err);
	w = snap_writer_begin(fd, NULL, err);
	CHECK(w, "begin: %s", err);
	sample_manifest(&m, &d);
	m.records[2]->seq = 2;
	rc = snap_writer_commit(w, &m, err);
	m.records[2]->seq = 5;
	dev_free(&d);
	CHECK(rc && refused(err, "not writing an invalid snapshot: manifest record 2"), "commit: %s",
	      rc ? err : "accepted");
	CHECK(!strcmp(entries(fd), SNAP_DIR_NAME), "left behind: %s", entries(fd));
	close(fd);
	return NULL;
}

struct sender {
	const char *name;
	int dirfd, fd, rc;
	char err[SNAP_ERRLEN];
};

static void *send_thread(void *arg)
{
	struct sender *s = arg;

	s->rc = snap_send_dir(s->dirfd, s->name, s->fd, s->err);
	close(s->fd);
	return NULL;
}

static const char *same_file(int a, int b, const char *path)
{
	char err[SNAP_ERRLEN];
	void *x, *y;
	size_t nx, ny;
	int same;

	CHECK(!snap_read_file(a, path, 1u << 30, &x, &nx, err), "%s", err);
	CHECK(!snap_read_file(b, path, 1u << 30, &y, &ny, err), "%s", err);
	same = nx == ny && !memcmp(x, y, nx);
	free(x);
	free(y);
	CHECK(same, "%s differs after the transfer", path);
	return NULL;
}

static const char *t_send_recv(void)
{
	char err[SNAP_ERRLEN];
	struct sender s = { .dirfd = openat(basefd, "rt", O_RDONLY | O_DIRECTORY) };
	int sv[2], fd = fresh_dir("recv"), rc;
	pthread_t t;

	CHECK(!socketpair(AF_UNIX, SOCK_STREAM, 0, sv), "socketpair");
	s.fd = sv[0];
	pthread_create(&t, NULL, send_thread, &s);
	rc = snap_recv_dir(sv[1], fd, NULL, err);
	pthread_join(t, NULL);
	close(sv[1]);
	CHECK(!s.rc, "send: %s", s.err);
	CHECK(!rc, "recv: %s", err);
	CHECK(!strcmp(entries(fd), SNAP_DIR_NAME), "left behind: %s", entries(fd));
	CHECK(!snapshot_ok(fd, err), "received snapshot: %s", err);
	if (same_file(s.dirfd, fd, SNAP SNAP_MANIFEST_NAME) || same_file(s.dirfd, fd, data_path(0)))
		return why;
	close(s.dirfd);
	close(fd);
	return NULL;
}

/* The sample's stream in a file, damaged, then received: refused, and
 * nothing is left in the receiving directory. */
static const char *recv_refused(const char *name, off_t cut_by, off_t flip_at, const char *want)
{
	char err[SNAP_ERRLEN];
	int src = openat(basefd, "rt", O_RDONLY | O_DIRECTORY), fd = fresh_dir(name), rc;
	int file = openat(fd, "stream", O_RDWR | O_CREAT | O_TRUNC, 0600);

	rc = snap_send_dir(src, NULL, file, err);
	close(src);
	CHECK(!rc, "send: %s", err);
	if (cut_by)
		cut(fd, "stream", cut_by);
	if (flip_at)
		flip(fd, "stream", flip_at < 0 ? file_size(fd, "stream") + flip_at : flip_at);
	lseek(file, 0, SEEK_SET);
	rc = snap_recv_dir(file, fd, NULL, err);
	close(file);
	CHECK(rc, "received a damaged stream");
	CHECK(refused(err, want), "error '%s' does not say '%s'", err, want);
	CHECK(!strcmp(entries(fd), "stream"), "left behind: %s", entries(fd));
	close(fd);
	return NULL;
}

static const char *t_recv_truncated(void)
{
	return recv_refused("recv-cut", 4096, 0, "snapshot stream truncated");
}

static const char *t_recv_corrupted(void)
{
	return recv_refused("recv-flip", 0, -13, "snapshot stream checksum mismatch: corrupted");
}

static const char *t_recv_bad_name(void)
{
	static const char stream[] = "CICADAGX\1\0\0\0\0\0\0\0" "\x0b\0\0\0" "../manifest" "\0\0\0\0\0\0\0\0";
	char err[SNAP_ERRLEN];
	int sv[2], fd = fresh_dir("recv-name"), rc;

	CHECK(!socketpair(AF_UNIX, SOCK_STREAM, 0, sv), "socketpair");
	CHECK(write(sv[0], stream, sizeof(stream) - 1) == sizeof(stream) - 1, "write");
	close(sv[0]);
	rc = snap_recv_dir(sv[1], fd, NULL, err);
	close(sv[1]);
	CHECK(rc && refused(err, "not part of a snapshot"), "recv: %s", rc ? err : "accepted");
	CHECK(!entries(fd)[0], "left behind: %s", entries(fd));
	close(fd);
	return NULL;
}

/* Two named snapshots side by side (one per process), one moved by name,
 * one removed; names that are not plain file names are refused. */
static const char *t_named_snapshots(void)
{
	char err[SNAP_ERRLEN];
	Cicada__Manifest m = CICADA__MANIFEST__INIT;
	struct sender s = { .name = "cicada-gpu-100" };
	struct snap_writer *w;
	struct snap_reader *r;
	struct device d;
	int fd = fresh_dir("named"), to = fresh_dir("named-recv"), sv[2], rc;
	pthread_t t;

	dev_init(&d, 1);
	rc = write_sample(fd, "cicada-gpu-100", &d, err);
	dev_free(&d);
	CHECK(!rc, "write: %s", err);
	CHECK((w = snap_writer_begin(fd, "cicada-gpu-200", err)), "begin: %s", err);
	CHECK(!snap_writer_commit(w, &m, err), "commit: %s", err);
	r = snap_reader_open(fd, "cicada-gpu-100", err);
	CHECK(r && snap_reader_manifest(r)->n_pieces == 6, "open by name: %s", r ? "wrong snapshot" : err);
	snap_reader_close(r);
	if (open_refused(fd, "no Cicada GPU snapshot here (no cicada-gpu/"))
		return why;
	CHECK(!snap_writer_begin(fd, "../x", err) && refused(err, "not a valid snapshot name"), "../x: %s", err);
	CHECK(!snap_reader_open(fd, ".hidden", err) && snap_remove_dir(fd, "a/b", err) &&
	      snap_remove_dir(fd, "", err), "odd names accepted");
	CHECK(!socketpair(AF_UNIX, SOCK_STREAM, 0, sv), "socketpair");
	s.dirfd = fd;
	s.fd = sv[0];
	pthread_create(&t, NULL, send_thread, &s);
	rc = snap_recv_dir(sv[1], to, "cicada-gpu-100", err);
	pthread_join(t, NULL);
	close(sv[1]);
	CHECK(!s.rc && !rc, "transfer: %s", s.rc ? s.err : err);
	CHECK(!strcmp(entries(to), "cicada-gpu-100"), "received: %s", entries(to));
	CHECK(!snap_remove_dir(fd, "cicada-gpu-200", err) && !strcmp(entries(fd), "cicada-gpu-100"),
	      "remove: %s", entries(fd));
	close(fd);
	close(to);
	return NULL;
}

static const char *t_remove_dir(void)
{
	char err[SNAP_ERRLEN];
	int fd = openat(basefd, "recv", O_RDONLY | O_DIRECTORY);

	CHECK(!snap_remove_dir(fd, NULL, err) && !entries(fd)[0], "remove: %s", err);
	CHECK(!snap_remove_dir(fd, NULL, err), "remove of nothing: %s", err);
	close(fd);
	return NULL;
}

/* --- incremental snapshots --- */

static uint64_t data_size_of(int dirfd, const char *name)
{
	char err[SNAP_ERRLEN];
	struct snap_reader *r = snap_reader_open(dirfd, name, err);
	uint64_t n = r ? snap_reader_manifest(r)->data_size : UINT64_MAX;

	snap_reader_close(r);
	return n;
}

/* Reads snapshot name under dirfd into a zeroed device; compares with d. */
static const char *reads_back(int dirfd, const char *name, struct device *d)
{
	char err[SNAP_ERRLEN];
	struct device back;
	struct snap_memory_ops ops = ops_for(&back);
	struct snap_reader *r = snap_reader_open(dirfd, name, err);
	const char *res;

	CHECK(r, "open %s: %s", name, err);
	dev_init(&back, 0);
	res = snap_read_memory(r, &ops, err) || snap_verify(r, err) ? err : same_memory(d, &back);
	snap_reader_close(r);
	dev_free(&back);
	CHECK(!res, "%s: %s", name, res);
	return NULL;
}

/* --- image directories (tree.c) --- */

struct tree_sender {
	int dirfd, fd, rc;
	const char *skip;                    /* top-level prefixes left out */
	uint64_t bytes;
	struct snap_progress pr;
	char err[SNAP_ERRLEN];
};

static void *tree_send_thread(void *arg)
{
	struct tree_sender *s = arg;

	s->rc = snap_send_tree(s->dirfd, s->fd, NULL, s->skip, &s->pr, &s->bytes, s->err);
	close(s->fd);
	return NULL;
}

/* Sends s's directory over a socket pair into out; the receiver's
 * result (s->rc has the sender's), -1 with err if no pair was made. */
static int tree_pass(struct tree_sender *s, int out, uint64_t *got, char *err)
{
	pthread_t t;
	int sv[2], rc;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return snprintf(err, SNAP_ERRLEN, "socketpair"), -1;
	s->fd = sv[0];
	pthread_create(&t, NULL, tree_send_thread, s);
	rc = snap_recv_tree(sv[1], out, NULL, got, err);
	pthread_join(t, NULL);
	close(sv[1]);
	return rc;
}

/* A CRIU-like image directory (compressible page images, a random file,
 * a snapshot two levels down) arrives byte for byte, the page images
 * compressed on the way. */
static const char *t_tree_stream(void)
{
	static uint8_t pages[10 * MiB + 5], rnd[MiB];
	char err[SNAP_ERRLEN];
	struct tree_sender s = { 0 };
	uint64_t got = 0;
	uint64_t x = 88172645463325252ull;
	int out = fresh_dir("tree-out"), rc;

	for (size_t i = 0; i < sizeof(pages); i++)
		pages[i] = (uint8_t)(i / 512);
	for (size_t i = 0; i < sizeof(rnd); i++)
		x ^= x << 13, x ^= x >> 7, x ^= x << 17, rnd[i] = (uint8_t)x;
	s.dirfd = fresh_dir("tree-in");
	mkdirat(s.dirfd, "precopy-1", 0700);
	mkdirat(s.dirfd, "precopy-1/cicada-gpu-1", 0700);
	CHECK(!snap_write_file(s.dirfd, "pages-1.img", pages, sizeof(pages), err) &&
	      !snap_write_file(s.dirfd, "core-1.img", rnd, sizeof(rnd), err) &&
	      !snap_write_file(s.dirfd, "precopy-1/cicada-gpu-1/manifest", rnd, 100, err), "write: %s", err);
	rc = tree_pass(&s, out, &got, err);
	CHECK(!s.rc, "send: %s", s.err);
	CHECK(!rc, "recv: %s", err);
	if (same_file(s.dirfd, out, "pages-1.img") || same_file(s.dirfd, out, "core-1.img") ||
	    same_file(s.dirfd, out, "precopy-1/cicada-gpu-1/manifest"))
		return why;
	CHECK(s.pr.logical == sizeof(pages) + sizeof(rnd) + 100, "logical bytes %llu", (unsigned long long)s.pr.logical);
	CHECK(got == s.bytes && got < sizeof(pages) / 4 + sizeof(rnd) + 4096,
	      "%llu bytes crossed for %zu: the page images were not compressed", (unsigned long long)got,
	      sizeof(pages) + sizeof(rnd));
	/* again, leaving out what starts with either of two prefixes */
	close(out);
	out = fresh_dir("tree-out-skip");
	s.skip = "precopy- core-";
	rc = tree_pass(&s, out, &got, err);
	CHECK(!s.rc && !rc, "send with skip: %s", s.rc ? s.err : err);
	if (same_file(s.dirfd, out, "pages-1.img"))
		return why;
	CHECK(faccessat(out, "core-1.img", F_OK, 0) && faccessat(out, "precopy-1", F_OK, 0),
	      "a skipped entry was sent");
	close(s.dirfd);
	close(out);
	return NULL;
}

/* --- keyed snapshots --- */

static int use_key(const char *text)
{
	char err[SNAP_ERRLEN];
	int fd = openat(basefd, "key", O_WRONLY | O_CREAT | O_TRUNC, 0600), rc;

	rc = fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text);
	close(fd);
	return rc || snap_key_load(strcat(strcpy((char[128]){ 0 }, base), "/key"), err);
}

/* The manifest of the snapshot under dirfd, changed by change and
 * re-checksummed (without the key), as a forger would. */
static int rewrite(int dirfd, void (*change)(Cicada__Manifest *m, const char *arg), const char *arg)
{
	char err[SNAP_ERRLEN];
	void *buf;
	size_t len;
	uint8_t *out;
	Cicada__Manifest *m;
	int rc;

	if (snap_read_file(dirfd, SNAP_MANIFEST_NAME, SNAP_MANIFEST_MAX, &buf, &len, err))
		return -1;
	m = len > SNAP_HEADER_SIZE ? cicada__manifest__unpack(NULL, len - SNAP_HEADER_SIZE,
							       (uint8_t *)buf + SNAP_HEADER_SIZE) : NULL;
	free(buf);
	if (!m)
		return -1;
	change(m, arg);
	out = snap_manifest_pack(m, &len, err);
	snap_manifest_free(m);
	rc = !out || unlinkat(dirfd, SNAP_MANIFEST_NAME, 0) ||
	     snap_write_file(dirfd, SNAP_MANIFEST_NAME, out, len, err);
	free(out);
	return rc ? -1 : 0;
}

static void later(Cicada__Manifest *m, const char *arg)
{
	m->created_unix_ns += 1;             /* any change: a forged replay log, say */
}

static void set_owner(Cicada__Manifest *m, const char *arg)
{
	free(m->owner);
	m->owner = strdup(arg);
	m->has_owner_uid = 1;
	m->owner_uid = (uint32_t)atoi(arg + 4);      /* "uid N" */
}

static void set_parent(Cicada__Manifest *m, const char *arg)
{
	free(m->parent);
	m->parent = strdup(arg);
}

static int reseal(int dirfd)
{
	return rewrite(dirfd, later, NULL);
}

/* Keyed: a signed snapshot reads back; one changed and re-checksummed
 * without the key, one with a piece's bytes changed, one unsigned, and
 * one signed with another key are refused with one line. */
static const char *t_keyed(void)
{
	char err[SNAP_ERRLEN] = "";
	struct device d;
	struct snap_reader *r;
	const char *res = NULL;
	int fd = fresh_dir("keyed"), rc;

	dev_init(&d, 1);
	CHECK(!write_sample_from(fd, "plain", &d, NULL, NULL, err), "plain: %s", err);
	CHECK(!use_key("the cluster's secret, 32 bytes.."), "cannot load the key");
	if (write_sample_from(fd, "signed", &d, NULL, NULL, err) || write_sample_from(fd, "forged", &d, NULL, NULL, err) ||
	    write_sample_from(fd, "flipped", &d, NULL, NULL, err))
		res = "writing signed snapshots failed";
	if (!res)
		res = reads_back(fd, "signed", &d);
	if (!res && (r = snap_reader_open(fd, "plain", err), snap_reader_close(r), r || !refused(err, "carries no code")))
		res = "an unsigned snapshot was not refused";
	if (!res) {
		int sub = openat(fd, "forged", O_RDONLY | O_DIRECTORY);
		rc = reseal(sub);
		close(sub);
		r = snap_reader_open(fd, "forged", err);
		snap_reader_close(r);
		if (rc || r || !refused(err, "does not match this server's key"))
			res = "a re-checksummed manifest was not refused";
	}
	if (!res) {
		flip(fd, "flipped/" SNAP_DATA_NAME, 100);
		r = snap_reader_open(fd, "flipped", err);
		rc = r ? snap_verify(r, err) : -1;
		snap_reader_close(r);
		if (!rc || !refused(err, "does not match this server's key"))
			res = "a changed piece was not refused by its code";
	}
	if (!res) {
		int sub;

		rc = write_sample_from(fd, "owned", &d, NULL, NULL, err);
		sub = rc ? -1 : openat(fd, "owned", O_RDONLY | O_DIRECTORY);
		rc = rc || rewrite(sub, set_owner, "uid 0");
		close(sub);
		r = snap_reader_open(fd, "owned", err);
		snap_reader_close(r);
		if (rc || r || !refused(err, "does not match this server's key"))
			res = "a snapshot whose owner was changed was not refused";
	}
	if (!res && !use_key("another server's secret, 32 byte")) {
		r = snap_reader_open(fd, "signed", err);
		snap_reader_close(r);
		if (r || !refused(err, "does not match this server's key"))
			res = "a snapshot of another key was not refused";
	}
	snap_key.set = 0;
	dev_free(&d);
	close(fd);
	return res;
}

/* An incremental snapshot over a connection arrives whole: no parent,
 * the same bytes. */
static const char *sent_whole(int dirfd, const char *name, struct device *d)
{
	char err[SNAP_ERRLEN];
	struct sender s = { .dirfd = dirfd, .name = name };
	struct snap_reader *r;
	int sv[2], fd = fresh_dir("incr-recv"), rc, whole, owned;
	pthread_t t;

	CHECK(!socketpair(AF_UNIX, SOCK_STREAM, 0, sv), "socketpair");
	s.fd = sv[0];
	pthread_create(&t, NULL, send_thread, &s);
	rc = snap_recv_dir(sv[1], fd, name, err);
	pthread_join(t, NULL);
	close(sv[1]);
	CHECK(!s.rc, "send: %s", s.err);
	CHECK(!rc, "recv: %s", err);
	r = snap_reader_open(fd, name, err);
	CHECK(r, "received: %s", err);
	whole = !snap_reader_manifest(r)->parent;
	owned = snap_reader_manifest(r)->owner && !strcmp(snap_reader_manifest(r)->owner, "uid 1000") &&
		snap_reader_manifest(r)->owner_uid == 1000;
	snap_reader_close(r);
	CHECK(whole, "the received snapshot still names a parent");
	CHECK(owned, "the received snapshot lost its owner");
	rc = reads_back(fd, name, d) != NULL;      /* its reason is in why */
	close(fd);
	return rc ? why : NULL;
}

/* base, then incr (one piece changed) and incr2 (another changed) on it:
 * each stores only what changed, and reads back whole through the chain. */
static const char *t_incremental_chain(void)
{
	char err[SNAP_ERRLEN];
	struct device d;
	size_t skipped = 0, skipped2 = 0;
	const char *res;
	int fd = fresh_dir("incr");

	dev_init(&d, 1);
	CHECK(!write_sample_from(fd, "base", &d, NULL, NULL, err), "base: %s", err);
	d.r[0].mem[100] ^= 1;                 /* piece 0 of region 0 */
	CHECK(!write_sample_from(fd, "incr", &d, "../base", &skipped, err), "incr: %s", err);
	d.r[1].mem[5 * MiB] ^= 1;             /* the second piece of region 1 */
	CHECK(!write_sample_from(fd, "incr2", &d, "../incr", &skipped2, err), "incr2: %s", err);
	CHECK(skipped == 5 && skipped2 == 5, "%zu and %zu pieces left to the parents, expected 5 and 5",
	      skipped, skipped2);
	CHECK(data_size_of(fd, "incr") < data_size_of(fd, "base") / 4, "incr stores %llu bytes, base %llu",
	      (unsigned long long)data_size_of(fd, "incr"), (unsigned long long)data_size_of(fd, "base"));
	res = reads_back(fd, "incr2", &d);
	if (!res)
		res = sent_whole(fd, "incr2", &d);
	dev_free(&d);
	close(fd);
	return res;
}

/* A migration round's data dropped (snap_drop_data): its files keep their
 * sizes but not their blocks; a child still opens, reading a piece left
 * to the dropped parent is refused, and a new child on it is still made
 * (unchanged pieces are found by the parent's checksums, not its data). */
static const char *t_drop_data(void)
{
	char err[SNAP_ERRLEN] = "";
	struct device d, back;
	struct snap_memory_ops ops;
	struct snap_reader *r;
	struct stat before, after;
	size_t skipped = 0;
	int fd = fresh_dir("drop"), base, rc;
	uint64_t freed;

	dev_init(&d, 1);
	CHECK(!write_sample_from(fd, "base", &d, NULL, NULL, err), "base: %s", err);
	d.r[0].mem[100] ^= 1;
	CHECK(!write_sample_from(fd, "incr", &d, "../base", NULL, err), "incr: %s", err);
	base = openat(fd, "base", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(base >= 0 && !fstatat(base, SNAP_DATA_NAME, &before, 0), "no data file in base");
	freed = snap_drop_data(base);
	CHECK(!fstatat(base, SNAP_DATA_NAME, &after, 0), "the data file went");
	close(base);
	CHECK(freed > 0 && after.st_size == before.st_size && after.st_blocks < before.st_blocks,
	      "freed %llu bytes; size %lld to %lld, blocks %lld to %lld", (unsigned long long)freed,
	      (long long)before.st_size, (long long)after.st_size, (long long)before.st_blocks,
	      (long long)after.st_blocks);
	r = snap_reader_open(fd, "incr", err);
	CHECK(r, "incr no longer opens: %s", err);
	dev_init(&back, 0);
	ops = ops_for(&back);
	rc = snap_read_memory(r, &ops, err);
	snap_reader_close(r);
	dev_free(&back);
	CHECK(rc && (strstr(err, "checksum") || strstr(err, "decompress")), "incr read back over dropped data: %s",
	      rc ? err : "no error");
	CHECK(!write_sample_from(fd, "incr2", &d, "../base", &skipped, err), "incr2: %s", err);
	CHECK(skipped > 0, "incr2 left no piece to its dropped parent");
	dev_free(&d);
	close(fd);
	return NULL;
}

/* A parent changed since (a snapshot written again under its name), a
 * parent gone, and a parent's piece damaged: refused with one line. */
static const char *t_incremental_broken_parents(void)
{
	char err[SNAP_ERRLEN] = "";
	struct device d, e;
	struct snap_reader *r;
	int fd = fresh_dir("incr-bad"), rc;

	dev_init(&d, 1);
	CHECK(!write_sample_from(fd, "base", &d, NULL, NULL, err), "base: %s", err);
	d.r[0].mem[100] ^= 1;
	CHECK(!write_sample_from(fd, "incr", &d, "../base", NULL, err), "incr: %s", err);
	r = snap_reader_open(fd, "base", err);
	CHECK(r, "base: %s", err);
	for (size_t i = 0; i < snap_reader_manifest(r)->n_pieces; i++) {
		const Cicada__Piece *pc = snap_reader_manifest(r)->pieces[i];
		char file[SNAP_NAME_MAX + 8] = "base/";

		if (pc->va != 0x7f0010000000ull)     /* region 1, which incr left to base */
			continue;
		snap_data_name(file + 5, pc->file);
		flip(fd, file, pc->offset + 7);
	}
	snap_reader_close(r);
	r = snap_reader_open(fd, "incr", err);
	rc = r ? snap_verify(r, err) : -1;
	snap_reader_close(r);
	CHECK(rc && refused(err, "checksum mismatch"), "a damaged parent piece: %s", rc ? err : "accepted");
	dev_init(&e, 1);
	CHECK(!write_sample_from(fd, "base", &e, NULL, NULL, err), "base again: %s", err);
	r = snap_reader_open(fd, "incr", err);
	CHECK(!r && refused(err, "its parent snapshot ../base " SNAP_PARENT_REFUSED), "a replaced parent: %s",
	      r ? "accepted" : err);
	snap_rmtree(fd, "base");
	r = snap_reader_open(fd, "incr", err);
	CHECK(!r && refused(err, "its parent snapshot ../base " SNAP_PARENT_REFUSED), "a missing parent: %s",
	      r ? "accepted" : err);
	CHECK(write_sample_from(fd, "other", &d, "../base", NULL, err) != 0 &&
	      refused(err, "its parent snapshot ../base " SNAP_PARENT_REFUSED), "a writer given a missing parent: %s", err);
	dev_free(&d);
	dev_free(&e);
	close(fd);
	return NULL;
}

/* --- hostile snapshots: links, parents, owners --- */

/* Opening snapshot name under dirfd fails with an error containing want. */
static const char *name_refused(int dirfd, const char *name, const char *want)
{
	char err[SNAP_ERRLEN] = "";
	struct snap_reader *r = snap_reader_open(dirfd, name, err);

	snap_reader_close(r);
	CHECK(!r, "opened %s, which should be refused", name ? name : "the snapshot");
	CHECK(refused(err, want), "%s: error '%s' does not say '%s'", name ? name : "the snapshot", err, want);
	return NULL;
}

/* A snapshot directory that is a symbolic link (to a good snapshot, to
 * one outside, to nothing) is refused by name, by default name and by
 * path; nothing is moved or loaded through it. */
static const char *t_symlink_snapshot_dir(void)
{
	char err[SNAP_ERRLEN] = "", target[128];
	struct snap_reader *r;
	struct device d;
	Cicada__Manifest *m;
	const char *res;
	int fd = fresh_dir("symdir"), rc;

	dev_init(&d, 1);
	rc = write_sample(fd, "real", &d, err);
	dev_free(&d);
	CHECK(!rc, "write: %s", err);
	snprintf(target, sizeof(target), "%s/symdir/real", base);
	CHECK(!symlinkat("real", fd, "cicada-gpu-7") && !symlinkat(target, fd, "cicada-gpu-8") &&
	      !symlinkat("/nonexistent", fd, "cicada-gpu-9") && !symlinkat("real", fd, SNAP_DIR_NAME), "symlink");
	if ((res = name_refused(fd, "cicada-gpu-7", "snapshot cicada-gpu-7: is a symbolic link; refused")) ||
	    (res = name_refused(fd, "cicada-gpu-8", "is a symbolic link; refused")) ||
	    (res = name_refused(fd, "cicada-gpu-9", "is a symbolic link; refused")) ||
	    (res = name_refused(fd, NULL, "snapshot " SNAP_DIR_NAME ": is a symbolic link; refused")))
		return res;
	m = snap_manifest_load(fd, "cicada-gpu-7", err);
	snap_manifest_free(m);
	CHECK(!m && refused(err, "is a symbolic link; refused"), "manifest loaded through a link: %s", err);
	CHECK(snap_send_dir(fd, "cicada-gpu-7", -1, err) && refused(err, "is a symbolic link; refused"),
	      "sent through a link: %s", err);
	r = snap_reader_open_path(basefd, "symdir/cicada-gpu-7", err);
	snap_reader_close(r);
	CHECK(!r && refused(err, "is a symbolic link; refused"), "opened by a path through a link: %s", err);
	r = snap_reader_open_path(fd, "../symdir/real", err);
	snap_reader_close(r);
	CHECK(!r && refused(err, "not beneath"), "opened by a path out of its directory: %s", err);
	r = snap_reader_open_path(basefd, "symdir/real", err);
	snap_reader_close(r);
	CHECK(r, "the real snapshot by path: %s", err);
	close(fd);
	return NULL;
}

/* Replaces file (under dirfd) by a symbolic link to a copy of it. */
static int link_in_place(int dirfd, const char *file)
{
	char copy[SNAP_NAME_MAX + 8];

	snprintf(copy, sizeof(copy), "%s.real", file);
	return renameat(dirfd, file, dirfd, copy) || symlinkat(copy, dirfd, file);
}

static int unlink_in_place(int dirfd, const char *file)
{
	char copy[SNAP_NAME_MAX + 8];

	snprintf(copy, sizeof(copy), "%s.real", file);
	return unlinkat(dirfd, file, 0) || renameat(dirfd, copy, dirfd, file);
}

/* A data file, the manifest, a module image or (keyed) the manifest's
 * code that is a symbolic link, even to the right bytes, is refused; so
 * is a data file that is a FIFO (without hanging on it). */
static const char *t_symlink_files(void)
{
	static const char *files[] = { SNAP_DATA_NAME, SNAP_MANIFEST_NAME,
				       "module-000000000000000b0000000000000002.bin" };
	char err[SNAP_ERRLEN] = "", want[SNAP_NAME_MAX + 40];
	struct device d;
	const char *res = NULL;
	int fd = sample_dir("symfiles", &d, err), snap;

	dev_free(&d);
	CHECK(fd >= 0, "write: %s", err);
	snap = openat(fd, SNAP_DIR_NAME, O_RDONLY | O_DIRECTORY);
	for (int i = 0; !res && i < 3; i++) {
		snprintf(want, sizeof(want), "%s: is a symbolic link; refused", files[i]);
		if (link_in_place(snap, files[i]))
			res = "cannot make a link";
		if (!res)
			res = open_refused(fd, want);
		if (unlink_in_place(snap, files[i]) && !res)
			res = "cannot undo a link";
	}
	if (!res && snapshot_ok(fd, err))
		res = "the snapshot no longer verifies";
	if (!res && (renameat(snap, SNAP_DATA_NAME, snap, "data.real") || mkfifoat(snap, SNAP_DATA_NAME, 0600)))
		res = "cannot make a FIFO";
	if (!res)
		res = open_refused(fd, SNAP_DATA_NAME ": not a regular file");
	close(snap);
	close(fd);
	return res;
}

/* Keyed: a manifest code that is a link is not taken. */
static const char *t_symlink_mac(void)
{
	char err[SNAP_ERRLEN] = "";
	struct device d;
	const char *res = NULL;
	int fd = fresh_dir("symmac"), snap, rc;

	CHECK(!use_key("the cluster's secret, 32 bytes.."), "cannot load the key");
	dev_init(&d, 1);
	rc = write_sample(fd, NULL, &d, err);
	dev_free(&d);
	snap = openat(fd, SNAP_DIR_NAME, O_RDONLY | O_DIRECTORY);
	if (rc || snapshot_ok(fd, err))
		res = "a keyed sample does not verify";
	if (!res && link_in_place(snap, SNAP_MAC_NAME))
		res = "cannot make a link";
	if (!res)
		res = open_refused(fd, "carries no code");
	snap_key.set = 0;
	close(snap);
	close(fd);
	return res;
}

/* Parents by path: absolute, too far up, too deep are refused by the
 * writer before anything is opened; a good one is taken. */
static const char *t_parent_paths(void)
{
	char err[SNAP_ERRLEN] = "", abs[128];
	const char *bad[3] = { abs, "../../../parpaths/base", "../x/y/base" }, *res = NULL;
	struct device d;
	int fd = fresh_dir("parpaths");

	for (int i = 0; good_parents[i]; i++)
		CHECK(snap_parent_ok(good_parents[i]), "'%s' was refused", good_parents[i]);
	for (int i = 0; bad_parents[i]; i++)
		CHECK(!snap_parent_ok(bad_parents[i]), "'%s' was taken", bad_parents[i]);
	snprintf(abs, sizeof(abs), "%s/parpaths/base", base);
	dev_init(&d, 1);
	if (write_sample_from(fd, "base", &d, NULL, NULL, err))
		res = "cannot write the parent";
	for (int i = 0; !res && i < 3; i++)
		if (!write_sample_from(fd, "incr", &d, bad[i], NULL, err) || !refused(err, "is not a parent snapshot's path"))
			res = (snprintf(why, sizeof(why), "parent %s: %s", bad[i], err[0] ? err : "accepted"), why);
	if (!res && write_sample_from(fd, "incr", &d, "../base", NULL, err))
		res = (snprintf(why, sizeof(why), "a good parent: %s", err), why);
	dev_free(&d);
	if (!res && strcmp(entries(fd), "base incr") && strcmp(entries(fd), "incr base"))
		res = (snprintf(why, sizeof(why), "left: %s", entries(fd)), why);
	close(fd);
	return res;
}

/* A manifest naming an absolute parent, or one too far up or too deep
 * (forged, no key): refused when read, before anything of it is opened. */
static const char *t_parent_paths_read(void)
{
	static const char *forged[] = { "/tmp", "../../../base", "../a/b/c" };
	char err[SNAP_ERRLEN] = "";
	struct device d;
	const char *res = NULL;
	int fd = fresh_dir("parread"), sub = -1;

	dev_init(&d, 1);
	if (write_sample_from(fd, "base", &d, NULL, NULL, err) || write_sample_from(fd, "incr", &d, "../base", NULL, err))
		res = "cannot write the chain";
	if (!res)
		sub = openat(fd, "incr", O_RDONLY | O_DIRECTORY);
	for (int i = 0; !res && i < 3; i++)
		res = rewrite(sub, set_parent, forged[i]) ? "cannot forge the manifest" :
			name_refused(fd, "incr", "names a parent that is not a path of the form");
	if (!res && rewrite(sub, set_parent, "../base"))
		res = "cannot mend the manifest";
	if (!res)
		res = reads_back(fd, "incr", &d);
	dev_free(&d);
	if (sub >= 0)
		close(sub);
	close(fd);
	return res;
}

/* A parent reached through a symbolic link, as the parent itself or on
 * the way, is refused by the writer and by a reader of a child made
 * before the link was put there. */
static const char *t_parent_symlink(void)
{
	char err[SNAP_ERRLEN] = "";
	struct device d;
	int fd = fresh_dir("parlink"), img1, img2, rc;
	const char *res = NULL;

	mkdirat(fd, "img1", 0700);
	mkdirat(fd, "img2", 0700);
	img1 = openat(fd, "img1", O_RDONLY | O_DIRECTORY);
	img2 = openat(fd, "img2", O_RDONLY | O_DIRECTORY);
	dev_init(&d, 1);
	rc = write_sample_from(img1, "base", &d, NULL, NULL, err) ||
	     write_sample_from(img2, "incr", &d, "../../img1/base", NULL, err) ||
	     write_sample_from(img1, "incr", &d, "../base", NULL, err);
	if (rc)
		res = "cannot write the chains";
	/* the parent itself a link */
	if (!res && (renameat(img1, "base", img1, "base.real") || symlinkat("base.real", img1, "base")))
		res = "cannot link the parent";
	if (!res)
		res = name_refused(img1, "incr", "its parent snapshot ../base " SNAP_PARENT_REFUSED);
	if (!res && (!write_sample_from(img1, "incr2", &d, "../base", NULL, err) ||
		     !refused(err, "its parent snapshot ../base " SNAP_PARENT_REFUSED)))
		res = "a writer took a parent that is a link";
	if (!res && (unlinkat(img1, "base", 0) || renameat(img1, "base.real", img1, "base")))
		res = "cannot undo the link";
	/* a directory on the way a link */
	if (!res && (renameat(fd, "img1", fd, "img1.real") || symlinkat("img1.real", fd, "img1")))
		res = "cannot link the directory";
	if (!res)
		res = name_refused(img2, "incr", "its parent snapshot ../../img1/base " SNAP_PARENT_REFUSED);
	if (!res && (!write_sample_from(img2, "incr2", &d, "../../img1/base", NULL, err) ||
		     !refused(err, SNAP_PARENT_REFUSED)))
		res = "a writer took a parent through a link";
	if (!res && (unlinkat(fd, "img1", 0) || renameat(fd, "img1.real", fd, "img1")))
		res = "cannot undo the link";
	if (!res)
		res = reads_back(img2, "incr", &d);
	dev_free(&d);
	close(img1);
	close(img2);
	close(fd);
	return res;
}

/* A parent snapshot directory of another owner (uid 65534) is refused by
 * the writer and by a reader, with the same words as a missing one. */
static const char *t_parent_other_owner(void)
{
	char err[SNAP_ERRLEN] = "", missing[SNAP_ERRLEN] = "";
	struct device d;
	struct snap_reader *r;
	const char *res = NULL;
	int fd = fresh_dir("parowner");

	dev_init(&d, 1);
	if (write_sample_from(fd, "base", &d, NULL, NULL, err) || write_sample_from(fd, "incr", &d, "../base", NULL, err))
		res = "cannot write the chain";
	if (!res && fchownat(fd, "base", 65534, 65534, AT_SYMLINK_NOFOLLOW))
		res = "cannot chown the parent (not root?)";
	if (!res)
		res = name_refused(fd, "incr", "its parent snapshot ../base " SNAP_PARENT_REFUSED);
	if (!res && (!write_sample_from(fd, "incr2", &d, "../base", NULL, err) ||
		     !refused(err, "its parent snapshot ../base " SNAP_PARENT_REFUSED)))
		res = "a writer took another owner's parent";
	if (!res) {                          /* the same words as for no parent at all */
		r = snap_reader_open(fd, "incr", err);
		snap_reader_close(r);
		renameat(fd, "base", fd, "base.away");
		r = snap_reader_open(fd, "incr", missing);
		snap_reader_close(r);
		renameat(fd, "base.away", fd, "base");
		if (strcmp(err, missing))
			res = "another owner's parent and a missing one are told apart";
	}
	if (!res && fchownat(fd, "base", geteuid(), getegid(), AT_SYMLINK_NOFOLLOW))
		res = "cannot chown the parent back";
	if (!res)
		res = reads_back(fd, "incr", &d);
	dev_free(&d);
	close(fd);
	return res;
}

/* An image directory received through a link already there (a
 * subdirectory that is a symbolic link out of it) is refused, and
 * nothing lands outside. */
static const char *t_tree_symlink(void)
{
	char err[SNAP_ERRLEN] = "", target[128];
	struct tree_sender s = { 0 };
	uint64_t got = 0;
	int out = fresh_dir("treesym-out"), outside = fresh_dir("treesym-outside"), rc;

	s.dirfd = fresh_dir("treesym-in");
	mkdirat(s.dirfd, "precopy-1", 0700);
	mkdirat(s.dirfd, "precopy-1/cicada-gpu-1", 0700);
	CHECK(!snap_write_file(s.dirfd, "precopy-1/cicada-gpu-1/manifest", "x", 1, err), "write: %s", err);
	snprintf(target, sizeof(target), "%s/treesym-outside", base);
	CHECK(!symlinkat(target, out, "precopy-1"), "symlink");
	rc = tree_pass(&s, out, &got, err);
	CHECK(rc && refused(err, "is a symbolic link; refused"), "received through a link: %s", rc ? err : "accepted");
	CHECK(!entries(outside)[0], "written outside: %s", entries(outside));
	close(s.dirfd);
	close(out);
	close(outside);
	return NULL;
}

/* criu's log is not read through a link. */
static const char *t_criu_log_symlink(void)
{
	static const char log[] = "(00.001) Error (criu/cr-dump.c:1): the cause\n";
	char err[SNAP_ERRLEN], reason[256];
	int fd = fresh_dir("criulog");

	CHECK(!snap_write_file(fd, "real.log", log, sizeof(log) - 1, err) && !symlinkat("real.log", fd, "dump.log"),
	      "setup: %s", err);
	snap_criu_reason(fd, "real.log", reason, sizeof(reason));
	CHECK(strstr(reason, "the cause"), "no reason from the log itself: '%s'", reason);
	snap_criu_reason(fd, "dump.log", reason, sizeof(reason));
	CHECK(!reason[0], "read a log through a link: '%s'", reason);
	close(fd);
	return NULL;
}

static const struct {
	const char *name;
	const char *(*fn)(void);
} cases[] = {
	{ "round_trip", t_round_trip },
	{ "round_trip_3_threads_level_5", t_round_trip_3_threads_level_5 },
	{ "manifest_fields", t_manifest_fields },
	{ "images_dedup", t_images_dedup },
	{ "verify", t_verify },
	{ "flipped_byte_raw_piece", t_flipped_raw_piece },
	{ "flipped_byte_compressed_piece", t_flipped_compressed_piece },
	{ "truncated_data_file", t_truncated_data_file },
	{ "truncated_manifest", t_truncated_manifest },
	{ "wrong_magic", t_wrong_magic },
	{ "header_version_3", t_header_version_3 },
	{ "manifest_bit_flip", t_manifest_bit_flip },
	{ "image_size_wrong", t_image_size_wrong },
	{ "corrupted_image", t_corrupted_image },
	{ "invalid_manifests", t_invalid_manifests },
	{ "commit_replaces", t_commit_replaces },
	{ "abort_keeps_old", t_abort_keeps_old },
	{ "commit_refuses_invalid", t_commit_refuses_invalid },
	{ "send_recv", t_send_recv },
	{ "recv_truncated", t_recv_truncated },
	{ "recv_corrupted", t_recv_corrupted },
	{ "recv_bad_name", t_recv_bad_name },
	{ "named_snapshots", t_named_snapshots },
	{ "remove_dir", t_remove_dir },
	{ "incremental_chain", t_incremental_chain },
	{ "incremental_broken_parents", t_incremental_broken_parents },
	{ "drop_data", t_drop_data },
	{ "keyed", t_keyed },
	{ "tree_stream", t_tree_stream },
	{ "symlink_snapshot_dir", t_symlink_snapshot_dir },
	{ "symlink_files", t_symlink_files },
	{ "symlink_mac", t_symlink_mac },
	{ "parent_paths", t_parent_paths },
	{ "parent_paths_read", t_parent_paths_read },
	{ "parent_symlink", t_parent_symlink },
	{ "parent_other_owner", t_parent_other_owner },
	{ "tree_symlink", t_tree_symlink },
	{ "criu_log_symlink", t_criu_log_symlink },
};

/* The sample snapshot under dir (keyed under CICADA_SNAPSHOT_KEY_FILE);
 * with parent, named name and incremental on it. */
static int sample(const char *dir, const char *name, const char *parent)
{
	const char *key = getenv("CICADA_SNAPSHOT_KEY_FILE");
	char err[SNAP_ERRLEN];
	struct device d;
	int fd = open(dir, O_RDONLY | O_DIRECTORY), rc;

	dev_init(&d, 1);
	if (parent)
		d.r[0].mem[100] ^= 1;
	rc = fd < 0 ? snap_fail(err, "cannot open %s", dir) : key && snap_key_load(key, err) ? -1 :
		write_sample_from(fd, name, &d, parent, NULL, err);
	if (rc)
		fprintf(stderr, "test_snapshot: %s\n", err);
	if (fd >= 0)
		close(fd);
	dev_free(&d);
	return rc ? 1 : 0;
}

/* DIR/base/cicada-gpu, and DIR/incr/cicada-gpu on it. */
static int chain(const char *dir)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/base", dir);
	if (mkdir(path, 0700) || sample(path, NULL, NULL))
		return 1;
	snprintf(path, sizeof(path), "%s/incr", dir);
	return mkdir(path, 0700) || sample(path, NULL, "../../base/" SNAP_DIR_NAME);
}

int main(int argc, char **argv)
{
	int pass = 0, fail = 0;

	for (size_t i = 0; i < sizeof(image_b); i++)
		image_b[i] = (uint8_t)(i * 7 + i / 100);
	if (argc == 3 && !strcmp(argv[1], "sample"))
		return sample(argv[2], NULL, NULL);
	if (argc == 3 && !strcmp(argv[1], "chain"))
		return chain(argv[2]);
	if (argc == 3 && (!strcmp(argv[1], "reseal") || !strcmp(argv[1], "reseal-owner"))) {
		int fd = open(argv[2], O_RDONLY | O_DIRECTORY);
		return fd < 0 || (argv[1][6] ? rewrite(fd, set_owner, "uid 0") : reseal(fd)) ? 1 : 0;
	}
	if (!mkdtemp(base) || (basefd = open(base, O_RDONLY | O_DIRECTORY)) < 0) {
		perror(base);
		return 1;
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *res = cases[i].fn();

		if (res)
			printf("FAIL %s: %s\n", cases[i].name, res);
		else
			printf("PASS %s\n", cases[i].name);
		res ? fail++ : pass++;
	}
	snap_rmtree(AT_FDCWD, base);
	printf("%d passed, %d failed\n", pass, fail);
	return fail != 0;
}

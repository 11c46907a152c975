/*
 * snapshot.h: the public interface of Cicada's GPU snapshot format.
 *
 * A snapshot is a directory inside CRIU's image directory, named by the
 * caller (one per process, say cicada-gpu-<pid>; NULL means SNAP_DIR_NAME):
 *   manifest           fixed header (magic, format version, length,
 *                      checksum) followed by a protobuf-c Cicada__Manifest
 *   device-memory.img  device memory as zstd-compressed pieces, each with
 *                      its own XXH3-64 checksum (listed in the manifest);
 *                      device-memory-<k>.img, one per further writing thread
 *   module-<hash>.bin  module images, one per content hash
 *
 * Writers build everything in a temporary sibling directory and rename it
 * into place only when complete, so a failed or killed checkpoint leaves
 * the previous snapshot intact. Every function returns 0 (or a pointer)
 * on success and -1 (or NULL) with a one-line reason in err on failure.
 *
 * A snapshot a client names is hostile: nothing of it is opened through a
 * symbolic link (a link where a snapshot or one of its files should be is
 * refused), nor outside the caller's directory but by its parent path.
 * The manifest carries its owner (owner_uid, owner), which the caller
 * sets before commit and compares at restore; the library only keeps it
 * (under the key's code, when keyed).
 */
#ifndef CICADA_SNAPSHOT_H
#define CICADA_SNAPSHOT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <zstd.h>
#include "manifest.pb-c.h"

#define SNAP_FORMAT_VERSION 2            /* what this build writes */
#define SNAP_FORMAT_OLDEST 1             /* the oldest it reads (1: no CUDA IPC) */
#define SNAP_DIR_NAME "cicada-gpu"        /* the default snapshot name */
#define SNAP_NAME_LEN 200                 /* longest snapshot name */
#define SNAP_ERRLEN 512                  /* an error buffer (wire.h's WIRE_ERRLEN too) */
#define SNAP_PIECE_SIZE (8u << 20)        /* device bytes per piece */
#ifndef CICADA_VERSION
#define CICADA_VERSION "0.1"
#endif
#define SNAP_IPC_HANDLE_SIZE 64u          /* a CUDA IPC handle (IpcEntry) */
#define SNAP_VMM_PROP_SIZE 32u            /* sizeof(CUmemAllocationProp) */
#define SNAP_PRODUCER "cicada " CICADA_VERSION   /* the manifest's producer */

struct snap_range {
	uint64_t va;
	uint64_t size;
};

/* How the library moves device memory: supplied by the gpu-server's
 * worker (or by tests). read and write are called from several threads
 * at once, each with its own host buffer from alloc_host. */
struct snap_memory_ops {
	void *ctx;
	void *(*alloc_host)(void *ctx, size_t size);
	void (*free_host)(void *ctx, void *buf, size_t size);
	int (*read)(void *ctx, uint64_t va, void *buf, size_t size);
	int (*write)(void *ctx, uint64_t va, const void *buf, size_t size);
	/* optional: how the library starts and joins its threads (default
	 * pthread_create and pthread_join) */
	int (*thread_start)(pthread_t *t, void *(*fn)(void *), void *arg);
	int (*thread_join)(pthread_t t, void **ret);
	/* optional: out[i] = the devhash.h hash of ranges[i] computed where
	 * the bytes are, or 0 for none; an incremental snapshot then reads
	 * only the pieces whose hash differs from the parent's */
	int (*hash)(void *ctx, const struct snap_range *ranges, size_t n, uint64_t *out);
	/* with hash: the memory does not change while it is written (a
	 * frozen checkpoint), so hash's results describe the bytes read and
	 * need not be computed again on the host */
	int stable;
	/* optional, reading: whether the device holds these bytes already
	 * (va, size, XXH3 checksum): such a piece is neither read nor written */
	int (*have)(void *ctx, uint64_t va, uint64_t size, uint64_t checksum);
};

/* --- keyed snapshots (key.c) --- */
/* Loads the key (a file of 16 to 256 bytes, a per-server or per-cluster
 * secret): from then on every snapshot this process writes carries
 * HMAC-SHA256 codes of its manifest, pieces and module images under it,
 * and every snapshot it opens must carry the right ones (else it is
 * refused, before any of it is used). */
int snap_key_load(const char *path, char *err);
int snap_keyed(void);

/* --- writing --- */
struct snap_writer;

/* Starts the snapshot name (NULL: SNAP_DIR_NAME; a plain file name of at
 * most SNAP_NAME_LEN characters, not starting with '.') under dirfd
 * (CRIU's image directory), in a temporary directory <name>.tmp.<pid>.<n>
 * (a stale one of that name is removed). Device memory is moved by
 * CICADA_SNAPSHOT_THREADS threads (default: online CPUs, at most 16) and
 * compressed at zstd level CICADA_ZSTD_LEVEL (default 1). After a failed
 * write the caller calls snap_writer_abort. */
struct snap_writer *snap_writer_begin(int dirfd, const char *name, char *err);
/* Stores a module image once per hash. */
int snap_write_image(struct snap_writer *w, uint64_t hash_lo, uint64_t hash_hi,
		     const void *data, size_t size, char *err);
/* Stores the device memory of the given ranges, in parallel, as pieces
 * of at most SNAP_PIECE_SIZE; ranges must not overlap (commit checks). */
int snap_write_memory(struct snap_writer *w, const struct snap_range *ranges, size_t n,
		      const struct snap_memory_ops *ops, char *err);
/* Completes m (version, producer, time, images, pieces, data file), writes
 * the manifest and renames the snapshot into place, replacing an older
 * one atomically. Frees w either way, and validates m as a reader would
 * before writing it (records must be in increasing seq order).
 * Ownership: the caller builds m (CICADA__MANIFEST__INIT, its own gpu,
 * records, allocations, chunks, globals) and frees what it put there. It leaves
 * producer, images, pieces and data_file unset: commit points them at
 * the library's memory only while writing and resets them to NULL/0
 * before returning; format_version, created_unix_ns and data_size stay. */
int snap_writer_commit(struct snap_writer *w, Cicada__Manifest *m, char *err);
/* Makes the snapshot incremental: path names its parent snapshot's
 * directory, relative to the new snapshot's own, as
 * (../){0,2}NAME(/NAME)? with NAME of [A-Za-z0-9._-] not starting with
 * '.' (say "../prev/cicada-gpu-42" or "../../job.1/cicada-gpu-42"; never
 * absolute). It is opened a component at a time without following links
 * and must belong to the user the new snapshot's directory does; if it
 * cannot be used, err says only that (nothing of what exists there).
 * snap_write_memory then leaves
 * out every piece whose bytes the parent chain holds (same address, size
 * and checksum: the device memory is still read and hashed, but only what
 * changed is compressed and stored; with ops->hash, a piece whose device
 * hash equals the parent's is not even read), and commit records the
 * parent with its manifest checksum. snap_writer_skipped says how many pieces were
 * left out. */
int snap_writer_parent(struct snap_writer *w, const char *path, char *err);
size_t snap_writer_skipped(const struct snap_writer *w);
size_t snap_writer_unread(const struct snap_writer *w);   /* of those, how many were not read */
/* Discards an unfinished snapshot. */
void snap_writer_abort(struct snap_writer *w);

/* --- reading --- */
struct snap_reader;

/* Opens the snapshot name (NULL: SNAP_DIR_NAME) under dirfd or, if dirfd
 * holds no such directory, dirfd itself as the snapshot (a symbolic link
 * of that name is refused, as is one in place of its files). The manifest is
 * read, its checksum and version checked, and its contents validated
 * (sizes, offsets, names); the data file and images are checked to exist
 * with the sizes it gives; nothing else is read yet. */
struct snap_reader *snap_reader_open(int dirfd, const char *name, char *err);
/* The same for the snapshot directory at path, beneath dirfd (no "..",
 * not absolute, no symbolic link on the way). An incremental snapshot's
 * reader opens its parent chain as well (as snap_writer_parent says): a
 * parent missing, changed since, not its owner's or lacking a piece is
 * refused with one line. */
struct snap_reader *snap_reader_open_path(int dirfd, const char *path, char *err);
const Cicada__Manifest *snap_reader_manifest(const struct snap_reader *r);
/* The owner (st_uid) of the opened snapshot's directory, for a caller
 * comparing it with its client's; -1 if it cannot be told. */
int snap_reader_dir_uid(const struct snap_reader *r, uid_t *uid);
/* Reads image index into a malloc'd buffer (the caller frees it), size
 * and checksum verified. */
int snap_read_image(struct snap_reader *r, size_t index, void **data, size_t *size, char *err);
/* Writes every piece back to device memory, in parallel, each checksum
 * verified before its bytes are written. */
int snap_read_memory(struct snap_reader *r, const struct snap_memory_ops *ops, char *err);
/* Checks every piece's and image's checksum without touching a device. */
int snap_verify(struct snap_reader *r, char *err);
void snap_reader_close(struct snap_reader *r);

/* Parses and validates a manifest file's bytes (header included); free
 * the result with snap_manifest_free. Safe on any input. */
Cicada__Manifest *snap_manifest_parse(const void *buf, size_t len, char *err);
/* The manifest of snapshot name under dirfd alone: neither its data nor
 * its parents are opened (a quick look; a restore opens a reader). */
Cicada__Manifest *snap_manifest_load(int dirfd, const char *name, char *err);
void snap_manifest_free(Cicada__Manifest *m);

/* --- moving a snapshot over a connection (remote gpu-servers, transfer.c) --- */
/* Sends the snapshot name under dirfd (found as by snap_reader_open) over
 * fd, each file framed and the whole stream checksummed; the receiver
 * writes it as name under its dirfd with the same temporary-then-rename
 * rule, after the end marker and the received manifest check out. */
int snap_send_dir(int dirfd, const char *name, int fd, char *err);
int snap_recv_dir(int fd, int dirfd, const char *name, char *err);
/* Removes the snapshot name under dirfd (for temporary copies); a missing
 * one is not an error. */
int snap_remove_dir(int dirfd, const char *name, char *err);
/* Frees what the device-memory data files of the snapshot directory
 * dirfd hold, keeping their sizes (holes punched): for a migration's
 * pre-copy round once it is loaded or sent, so that rounds do not pile
 * up as dirty pages. A piece read from them later fails its checksum.
 * Returns the bytes freed; best effort (0 where holes cannot be made). */
uint64_t snap_drop_data(int dirfd);

/* --- files as the format opens them (util.c) ---
 * Also for session/'s image stream and CRIU log reader (criu_images.h),
 * which keep the same rules: nothing opened through a symbolic link,
 * one-line errors, little-endian stream words, one test of whether data
 * compresses. */
/* Writes one line (no control characters) into err (SNAP_ERRLEN bytes)
 * and returns -1, as wire_fail does. */
int snap_fail(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* openat beneath dirfd, never through a symbolic link (openat2's
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, else a component at a time with
 * O_NOFOLLOW); a link fails with ELOOP, which snap_open_why words. */
int snap_openat(int dirfd, const char *path, int flags, mode_t mode);
const char *snap_open_why(int e);
uint64_t snap_get_le(const uint8_t *p, int n);
void snap_put_le(uint8_t *p, uint64_t v, int n);
int snap_write_all(int fd, const void *buf, size_t len);
ssize_t snap_pread_full(int fd, void *buf, size_t len, uint64_t off);
/* Whether data compresses at all: data that does not (weights, random)
 * is stored raw without paying for a whole compression; three 32 KiB
 * samples, compressed into scratch (cap bytes), decide. */
int snap_worth_compressing(ZSTD_CCtx *c, void *scratch, size_t cap, const void *data, size_t size, int level);

#endif

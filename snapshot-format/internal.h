/*
 * internal.h: what the snapshot library's files share and nothing else
 * sees: file names, limits, the writer and reader, and small helpers for
 * errors, whole-file I/O, directories and the tuning knobs (snapshot.h
 * has the file helpers session/ uses too).
 */
#ifndef CICADA_SNAPSHOT_INTERNAL_H
#define CICADA_SNAPSHOT_INTERNAL_H

#include <stdatomic.h>
#include <sys/types.h>
#include <zstd.h>
#include "snapshot.h"

#define SNAP_MAGIC "CICADAGS"
#define SNAP_HEADER_SIZE 32u
#define SNAP_MANIFEST_NAME "manifest"
#define SNAP_DATA_NAME "device-memory.img"
#define SNAP_NAME_MAX 64                  /* longest file name in a snapshot */
#define SNAP_PATH_MAX (SNAP_NAME_LEN + 40) /* a snapshot's (temporary) name */
#define SNAP_MANIFEST_MAX (256u << 20)
#define SNAP_IMAGE_MAX (1ull << 32)
#define SNAP_MAX_IMAGES 65536u
#define SNAP_MAX_ENTRIES (1u << 24)       /* records, allocations, ..., pieces */
#define SNAP_MAX_THREADS 256              /* and so data files */
#define SNAP_PARENT_MAX 1024              /* a parent's path (snap_parent_ok: far less) */
#define SNAP_CHAIN_MAX 64                 /* snapshots in a chain */
#define SNAP_MAC_NAME "manifest.mac"      /* keyed snapshots: the manifest's code */
#define SNAP_MAC_LEN 32
#define SNAP_KEY_MAX 256

struct snap_image {
	Cicada__ModuleImage mi;
	char file[SNAP_NAME_MAX];
	uint8_t mac[SNAP_MAC_LEN];
};

/* key.c: the key of keyed snapshots (one per process) */
struct snap_key {
	int set;
	uint8_t key[SNAP_KEY_MAX];
	size_t len;
};
extern struct snap_key snap_key;
int snap_mac(uint64_t a, uint64_t b, const void *data, size_t len, uint8_t out[SNAP_MAC_LEN]);
int snap_mac_ok(uint64_t a, uint64_t b, const void *data, size_t len, const ProtobufCBinaryData *mac);

/* A data file being written, by one thread at a time. */
struct snap_data {
	int fd;
	uint64_t size;
};

struct snap_writer {
	int dirfd;                        /* where the snapshot goes */
	int fd;                           /* the temporary snapshot directory */
	char name[SNAP_PATH_MAX];
	char tmpname[SNAP_PATH_MAX];
	struct snap_data data[SNAP_MAX_THREADS];   /* one per writing thread */
	unsigned n_data;                  /* created so far */
	struct snap_image *images;
	size_t n_images;
	Cicada__Piece *pieces;
	size_t n_pieces;
	struct snap_reader *parent;       /* incremental: pieces found there are not stored */
	char parent_path[SNAP_PARENT_MAX + 1];
	atomic_size_t skipped;            /* pieces left to the parent */
	atomic_size_t unread;             /* of them, not even read (device hashes) */
};

/* Where an in_parent piece's bytes are: a reader of the chain and its piece. */
struct snap_src {
	struct snap_reader *r;
	const Cicada__Piece *pc;
};

struct snap_reader {
	int fd;                           /* the snapshot directory */
	int datafd[SNAP_MAX_THREADS];     /* one per data file */
	unsigned n_data;                  /* opened so far */
	Cicada__Manifest *m;
	uint64_t sum;                     /* its manifest header's checksum */
	struct snap_reader *parent;       /* incremental: the chain */
	struct snap_src *src;             /* per piece; set for in_parent pieces */
};

/* util.c */
const char *snap_size_str(char *buf, size_t len, uint64_t n);
#define SNAP_AT_POSITION UINT64_MAX
int snap_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
int snap_read_file(int dirfd, const char *name, size_t max, void **buf, size_t *len, char *err);
int snap_write_file(int dirfd, const char *name, const void *buf, size_t len, char *err);
int snap_rmtree(int dirfd, const char *name);
const char *snap_dir_name(const char *name, char *err);
int snap_make_tmpdir(int dirfd, const char *name, char *tmpname, char *err);
int snap_install(int dirfd, const char *tmpname, const char *name, char *err);
int snap_open_dir(int dirfd, const char *name, char *err);
int snap_name_ok(const char *name);
int snap_parent_ok(const char *path);
void snap_image_name(char *buf, uint64_t hash_lo, uint64_t hash_hi);
void snap_data_name(char *buf, size_t k);
int snap_threads(size_t jobs);
int snap_zstd_level(void);

/* manifest.c */
int snap_manifest_check(const Cicada__Manifest *m, char *err);
uint8_t *snap_manifest_pack(const Cicada__Manifest *m, size_t *len, char *err);

/* reader.c */
/* Errors about a parent say no more than this (nothing of what exists
 * outside the snapshot): "its parent snapshot PATH " SNAP_PARENT_REFUSED. */
#define SNAP_PARENT_REFUSED "cannot be used (missing, changed, or not the owner's)"
struct snap_reader *snap_parent_open(int fd, const char *path, int depth, char *err);
const Cicada__Piece *snap_piece_at(const struct snap_reader *r, uint64_t va, uint64_t size);
const Cicada__Piece *snap_chain_find(const struct snap_reader *r, uint64_t va, uint64_t size, uint64_t sum,
				     struct snap_reader **owner);

#endif

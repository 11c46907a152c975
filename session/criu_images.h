/*
 * criu_images.h: a process's CRIU image directory, as gpu-migrate and a
 * gpu-server taking a migration handle it: moved to another node over
 * one or several connections (tree.c, tree_pack.c), and why a criu run
 * on it failed, from its log (criu_log.c). Part of libsession.a;
 * session.h includes it. It needs neither wire/ nor the generated
 * protocol, so the snapshot format's tests and fuzzers, which cover
 * these too, include it alone. The functions keep the snap_ names they
 * had in snapshot-format/; they use its file helpers (snapshot.h).
 */
#ifndef CICADA_CRIU_IMAGES_H
#define CICADA_CRIU_IMAGES_H

#include <stddef.h>
#include <stdint.h>

/* tree.c, tree_pack.c: the image stream.
 * A whole CRIU image directory (its files, and those of its
 * subdirectories, two levels down) over fd, for moving a process to
 * another node; only the top-level entry only, if not NULL, and none
 * whose name starts with one of skip's space-separated prefixes, if not
 * NULL. The receiver writes into dirfd (several streams may go into one
 * directory: their files must not meet), and the caller removes it
 * after a failure. progress (may be NULL) is told the
 * bytes moved so far; a non-zero return stops the transfer (fault tests).
 * *bytes (may be NULL) gets the bytes moved either way. */
struct snap_progress {
	int (*fn)(void *ctx, uint64_t bytes);
	void *ctx;
	uint64_t logical;                 /* the sender adds the bytes of the files sent */
};
int snap_send_tree(int dirfd, int fd, const char *only, const char *skip, struct snap_progress *p,
		   uint64_t *bytes, char *err);
int snap_recv_tree(int fd, int dirfd, struct snap_progress *p, uint64_t *bytes, char *err);
/* The same over nfds connections at once (at most SNAP_STREAMS_MAX), so
 * that one TCP stream's limit is not the transfer's: the files are shared
 * out by size, each connection carrying a whole stream of its own (an
 * empty one if no file falls to it); progress is told the sum. The
 * receiver takes every stream at once, into one directory. */
#define SNAP_STREAMS_MAX 16
int snap_send_trees(int dirfd, const int *fds, unsigned nfds, const char *only, const char *skip,
		    struct snap_progress *p, uint64_t *bytes, char *err);
int snap_recv_trees(const int *fds, unsigned nfds, int dirfd, uint64_t *bytes, char *err);

/* criu_log.c: why a criu run failed, from its log name under dirfd: the
 * Cicada plugin's error if it gave one, else criu's first error; "" if
 * none. */
void snap_criu_reason(int dirfd, const char *name, char *out, size_t len);

#endif

/*
 * tree_pack.h: what tree_pack.c offers tree.c (session/'s image stream),
 * and nothing else sees: a compressible file of an image stream, its
 * chunks packed by several threads and handed to put in order, each a
 * u32 word (its stored length, TREE_ZCHUNK_FLAG if a zstd frame) and its
 * bytes; logical (if not NULL) counts the file's bytes sent.
 */
#ifndef CICADA_SESSION_TREE_PACK_H
#define CICADA_SESSION_TREE_PACK_H

#include <stddef.h>
#include <stdint.h>

#define TREE_ZCHUNK_FLAG 0x80000000u
struct tree_pack_out {
	int (*put)(void *ctx, const void *p, size_t len);
	void *ctx;
	uint64_t *logical;
};
int tree_pack_send(int fd, uint64_t size, size_t chunk, const struct tree_pack_out *out, const char *name,
		   char *err);

#endif

/*
 * snap_forge: rewrites what a snapshot's manifest names as its parent,
 * as a tenant forging its own snapshot would, for sec-parent. The
 * manifest is re-checksummed and, with CICADA_SNAPSHOT_KEY_FILE, signed
 * again under that key (manifest.mac): the test hands the forger the key,
 * so that only the server's rules on parents stand in the way, as they
 * must on a server without a key.
 *
 * usage: snap_forge SNAPSHOT_DIR PARENT
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"

/* The manifest of the snapshot in dirfd, its parent set to parent. */
static uint8_t *forged(int dirfd, const char *parent, size_t *len, char *err)
{
	Cicada__Manifest *m;
	uint8_t *out;
	void *buf;

	if (snap_read_file(dirfd, SNAP_MANIFEST_NAME, SNAP_MANIFEST_MAX, &buf, len, err))
		return NULL;
	m = *len > SNAP_HEADER_SIZE ? cicada__manifest__unpack(NULL, *len - SNAP_HEADER_SIZE,
							       (uint8_t *)buf + SNAP_HEADER_SIZE) : NULL;
	free(buf);
	if (!m) {
		snprintf(err, SNAP_ERRLEN, "the manifest does not decode");
		return NULL;
	}
	free(m->parent);
	m->parent = strdup(parent);
	out = snap_manifest_pack(m, len, err);
	snap_manifest_free(m);
	return out;
}

/* Replaces name in dirfd with len bytes of buf. */
static int replace(int dirfd, const char *name, const void *buf, size_t len, char *err)
{
	unlinkat(dirfd, name, 0);
	return snap_write_file(dirfd, name, buf, len, err);
}

int main(int argc, char **argv)
{
	const char *key = getenv("CICADA_SNAPSHOT_KEY_FILE");
	char err[SNAP_ERRLEN] = "";
	uint8_t mac[SNAP_MAC_LEN], *m;
	size_t len;
	int dirfd, rc;

	if (argc != 3)
		return fprintf(stderr, "usage: snap_forge SNAPSHOT_DIR PARENT\n"), 2;
	if ((dirfd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return perror(argv[1]), 2;
	if (key && snap_key_load(key, err))
		return fprintf(stderr, "snap_forge: %s\n", err), 2;
	if (!(m = forged(dirfd, argv[2], &len, err)))
		return fprintf(stderr, "snap_forge: %s\n", err), 1;
	rc = replace(dirfd, SNAP_MANIFEST_NAME, m, len, err) ||
	     (key && (snap_mac(len, 0, m, len, mac) || replace(dirfd, SNAP_MAC_NAME, mac, sizeof(mac), err)));
	free(m);
	if (rc)
		return fprintf(stderr, "snap_forge: %s\n", err[0] ? err : "cannot sign the manifest"), 1;
	printf("snap_forge: %s names its parent '%s'%s\n", argv[1], argv[2], key ? ", signed again under the key" : "");
	return 0;
}

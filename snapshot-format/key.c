/*
 * key.c: keyed snapshots. With a key loaded (snap_key_load: a per-server
 * or per-cluster secret), every snapshot this process writes carries
 * HMAC-SHA256 codes under it: of each stored piece (with its address and
 * size), of each module image, and of the manifest file (manifest.mac);
 * and every snapshot it reads must carry the right ones, so a snapshot
 * changed or forged by whoever can write the image directory, even with
 * its checksums redone, is refused before anything of it is used.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include "internal.h"

struct snap_key snap_key;

int snap_key_load(const char *path, char *err)
{
	uint8_t buf[SNAP_KEY_MAX + 1];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;

	if (fd >= 0)
		close(fd);
	if (n < 0)
		return snap_fail(err, "cannot read the snapshot key %s: %s", path, strerror(errno));
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		n--;
	if (n < 16 || n > SNAP_KEY_MAX)
		return snap_fail(err, "the snapshot key in %s must hold 16 to %d bytes", path, SNAP_KEY_MAX);
	memcpy(snap_key.key, buf, (size_t)n);
	snap_key.len = (size_t)n;
	snap_key.set = 1;
	explicit_bzero(buf, sizeof(buf));
	return 0;
}

int snap_keyed(void)
{
	return snap_key.set;
}

/* HMAC-SHA256 under the key of a 16-byte prefix (two numbers) and data;
 * -1 if it cannot be computed. */
int snap_mac(uint64_t a, uint64_t b, const void *data, size_t len, uint8_t out[SNAP_MAC_LEN])
{
	int rc = -1;

	EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *c = mac ? EVP_MAC_CTX_new(mac) : NULL;
	OSSL_PARAM params[] = { OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0),
				OSSL_PARAM_construct_end() };
	uint8_t prefix[16];
	size_t n = 0;

	snap_put_le(prefix, a, 8);
	snap_put_le(prefix + 8, b, 8);
	if (c && EVP_MAC_init(c, snap_key.key, snap_key.len, params) && EVP_MAC_update(c, prefix, sizeof(prefix)) &&
	    EVP_MAC_update(c, data, len) && EVP_MAC_final(c, out, &n, SNAP_MAC_LEN) && n == SNAP_MAC_LEN)
		rc = 0;
	EVP_MAC_CTX_free(c);
	EVP_MAC_free(mac);
	return rc;
}

int snap_mac_ok(uint64_t a, uint64_t b, const void *data, size_t len, const ProtobufCBinaryData *mac)
{
	uint8_t want[SNAP_MAC_LEN];

	return mac && mac->len == SNAP_MAC_LEN && !snap_mac(a, b, data, len, want) &&
	       !CRYPTO_memcmp(want, mac->data, SNAP_MAC_LEN);
}

/*
 * auth.c: how a client proves that it holds the server's token without
 * sending it. The server opens every connection with a challenge: the
 * eight bytes "CICADACH" and 32 random ones. A client with a token
 * answers, in its hello's token field, HMAC-SHA256(token, "cicada hello
 * v1" || challenge); the server computes the same and compares in
 * constant time. The token never crosses the wire, and a captured hello
 * is worth nothing: the next connection has another challenge.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include "wire.h"

#define CHALLENGE_MAGIC "CICADACH"
#define PROOF_LABEL "cicada hello v1"

int wire_send_challenge(int fd, uint8_t nonce[WIRE_NONCE_LEN])
{
	uint8_t msg[8 + WIRE_NONCE_LEN];

	if (getrandom(nonce, WIRE_NONCE_LEN, 0) != WIRE_NONCE_LEN)
		return -1;
	memcpy(msg, CHALLENGE_MAGIC, 8);
	memcpy(msg + 8, nonce, WIRE_NONCE_LEN);
	return send(fd, msg, sizeof(msg), MSG_NOSIGNAL) == (ssize_t)sizeof(msg) ? 0 : -1;
}

int wire_recv_challenge(int fd, uint8_t nonce[WIRE_NONCE_LEN], int timeout_ms, char *err)
{
	uint8_t msg[8 + WIRE_NONCE_LEN];
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t got = 0;

	while (got < sizeof(msg)) {
		ssize_t n;

		if (poll(&p, 1, timeout_ms) != 1) {
			wire_fail(err, "no challenge from the server within %d ms", timeout_ms);
			return -1;
		}
		n = recv(fd, msg + got, sizeof(msg) - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			wire_fail(err, "the server closed the connection before its challenge");
			return -1;
		}
		got += (size_t)n;
	}
	if (memcmp(msg, CHALLENGE_MAGIC, 8)) {
		wire_fail(err, "not a Cicada gpu-server (or one older than this client)");
		return -1;
	}
	memcpy(nonce, msg + 8, WIRE_NONCE_LEN);
	return 0;
}

size_t wire_token_proof(const char *token, size_t len, const uint8_t nonce[WIRE_NONCE_LEN],
			uint8_t out[WIRE_PROOF_LEN])
{
	uint8_t msg[sizeof(PROOF_LABEL) + WIRE_NONCE_LEN];
	unsigned n = 0;

	if (!len)
		return 0;
	memcpy(msg, PROOF_LABEL, sizeof(PROOF_LABEL));
	memcpy(msg + sizeof(PROOF_LABEL), nonce, WIRE_NONCE_LEN);
	if (!HMAC(EVP_sha256(), token, (int)len, msg, sizeof(msg), out, &n) || n != WIRE_PROOF_LEN)
		return 0;
	return WIRE_PROOF_LEN;
}

int wire_proof_ok(const char *token, size_t len, const uint8_t nonce[WIRE_NONCE_LEN], const void *given,
		  size_t given_len)
{
	uint8_t want[WIRE_PROOF_LEN];

	return len && given_len == WIRE_PROOF_LEN && wire_token_proof(token, len, nonce, want) == WIRE_PROOF_LEN &&
	       !CRYPTO_memcmp(want, given, WIRE_PROOF_LEN);
}

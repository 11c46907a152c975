/*
 * auth.c: the shared-secret token that TCP clients must present.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "gpu-server.h"

int token_load(const char *path, char *token, size_t len, char *err)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f) {
		snprintf(err, WIRE_ERRLEN, "cannot read token file %s: %s", path, strerror(errno));
		return -1;
	}
	n = fread(token, 1, len - 1, f);
	fclose(f);
	while (n && (token[n - 1] == '\n' || token[n - 1] == '\r' || token[n - 1] == ' '))
		n--;
	token[n] = 0;
	if (n < 16) {
		snprintf(err, WIRE_ERRLEN, "token in %s is shorter than 16 characters", path);
		return -1;
	}
	return 0;
}

/* Constant-time comparison: how long it takes says nothing of the token. */
int token_equal(const char *expected, const char *given, size_t given_len)
{
	size_t n = strlen(expected);
	unsigned char diff = given_len != n;

	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)expected[i] ^ (unsigned char)(i < given_len ? given[i] : 0);
	return diff == 0;
}

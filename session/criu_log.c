/*
 * criu_log.c: why a criu run failed, read from its log in an image
 * directory, for the one-line errors of gpu-migrate and of a gpu-server
 * taking a migration (so in session/, which both link; criu_images.h). The Cicada
 * plugin's own errors ("cicada: ...", its info lines say "cicada-info: ")
 * say most; otherwise criu's first error, the cause (its last one is
 * usually the generic "Dumping FAILED."), passing over the rlimit one it
 * logs and goes on from where it may not raise its own file limit.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "criu_images.h"
#include "snapshot.h"

/* The text after criu's "(seconds) " stamp. */
static const char *unstamped(const char *line)
{
	const char *p = line;

	while (*p == ' ')
		p++;
	if (*p == '(' && (p = strchr(p, ')')))
		for (p++; *p == ' '; p++)
			;
	return p ? p : line;
}

/* Fills out (len bytes) with the reason from dirfd's log name, or "". */
void snap_criu_reason(int dirfd, const char *name, char *out, size_t len)
{
	int fd = snap_openat(dirfd, name, O_RDONLY | O_NONBLOCK, 0);     /* never through a link */
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	char line[600], first[600] = "", ours[600] = "";
	const char *p;

	if (!f && fd >= 0)
		close(fd);
	while (f && fgets(line, sizeof(line), f)) {
		if (!first[0] && strstr(line, "Error") && !strstr(line, "rlimit:"))
			snprintf(first, sizeof(first), "%s", unstamped(line));
		if ((p = strstr(line, "cicada: ")))
			snprintf(ours, sizeof(ours), "%s", p + 8);
	}
	if (f)
		fclose(f);
	snprintf(out, len, "%.400s", ours[0] ? ours : first);
	out[strcspn(out, "\n")] = 0;
}

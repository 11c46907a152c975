/*
 * log.c: run-time leveled logging to stderr. CICADA_LOG=error|warn|info|debug
 * sets the level (default: warn in clients, info in the server).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "wire.h"

static int log_level = LOG_WARN;
static char log_prog[32] = "cicada";

void log_init(const char *prog)
{
	const char *env = getenv("CICADA_LOG");
	static const char *names[] = { "error", "warn", "info", "debug" };

	snprintf(log_prog, sizeof(log_prog), "%s", prog);
	if (!env)
		return;
	for (int i = 0; i < 4; i++)
		if (!strcmp(env, names[i]))
			log_level = i;
}

int log_enabled(enum log_level level)
{
	return (int)level <= log_level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const char *tags[] = { "error", "warning", "info", "debug" };
	char line[1024];
	va_list ap;
	int n;

	if (!log_enabled(level))
		return;
	n = snprintf(line, sizeof(line), "%s[%d]: %s: ", log_prog, (int)getpid(), tags[level]);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", line);
}

uint64_t wire_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/*
 * log.c: run-time leveled logging to stderr (or log_set_fd's). CICADA_LOG=error|warn|info|debug
 * sets the level (default: warn in clients, info in the server). Also
 * wire_fail, the one way an error is written into a caller's buffer.
 *
 * A line never holds a control character: what a client sent (a host
 * name, say) cannot forge a line of its own. Lines above debug level are
 * rate-limited per call site (its format string): a burst of LOG_BURST,
 * then LOG_RATE a second; the next line let through says how many were
 * suppressed.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "wire.h"

static int log_level = LOG_WARN;
static char log_prog[32] = "cicada";
static int log_fd = -1;                  /* -1: stderr */
static int log_time;                     /* CICADA_LOG_TIME=1: lines start with the time */

/* Lines go to fd from now on (a worker's stderr carries device output). */
void log_set_fd(int fd)
{
	log_fd = fd;
}

void log_init(const char *prog)
{
	const char *env = getenv("CICADA_LOG");
	static const char *names[] = { "error", "warn", "info", "debug" };

	snprintf(log_prog, sizeof(log_prog), "%s", prog);
	log_time = getenv("CICADA_LOG_TIME") && !strcmp(getenv("CICADA_LOG_TIME"), "1");
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

/* Copies in to out with control characters and bytes past 0x7e written
 * as \n, \t or \xNN, truncated to fit len. */
void log_escape(const char *in, char *out, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (; *in && o + 5 < len; in++) {
		unsigned char c = (unsigned char)*in;
		if (c >= 0x20 && c < 0x7f && c != '\\') {
			out[o++] = (char)c;
		} else if (c == '\n' || c == '\t' || c == '\\') {
			out[o++] = '\\';
			out[o++] = c == '\n' ? 'n' : c == '\t' ? 't' : '\\';
		} else {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	if (len)
		out[o < len ? o : len - 1] = 0;
}

#define LOG_SITES 64
#define LOG_BURST 20.0
#define LOG_RATE 10.0

struct log_site {
	const char *fmt;
	double tokens;
	uint64_t last_ns;
	unsigned long suppressed;
};

static struct log_site log_sites[LOG_SITES];
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

/* Takes a token of fmt's bucket: 1 to print (*dropped: how many were
 * suppressed since the last line), 0 to suppress. */
static int log_admit(const char *fmt, unsigned long *dropped)
{
	size_t i = ((uintptr_t)fmt >> 3) % LOG_SITES;
	struct log_site *s = &log_sites[i];
	uint64_t now = wire_now_ns();
	int ok;

	pthread_mutex_lock(&log_lock);
	for (int probe = 1; probe < 4 && s->fmt && s->fmt != fmt; probe++)
		s = &log_sites[(i + probe) % LOG_SITES];
	if (s->fmt != fmt)
		*s = (struct log_site){ .fmt = fmt, .tokens = LOG_BURST, .last_ns = now };
	s->tokens += (double)(now - s->last_ns) * LOG_RATE / 1e9;
	if (s->tokens > LOG_BURST)
		s->tokens = LOG_BURST;
	s->last_ns = now;
	ok = s->tokens >= 1.0;
	if (ok) {
		s->tokens -= 1.0;
		*dropped = s->suppressed;
		s->suppressed = 0;
	} else {
		s->suppressed++;
	}
	pthread_mutex_unlock(&log_lock);
	return ok;
}

static void log_line(enum log_level level, int limited, const char *fmt, va_list ap)
{
	static const char *tags[] = { "error", "warning", "info", "debug" };
	char text[1024], line[1200];
	unsigned long dropped = 0;
	int n;

	if (!log_enabled(level) || (limited && level != LOG_DEBUG && !log_admit(fmt, &dropped)))
		return;
	vsnprintf(text, sizeof(text), fmt, ap);
	n = 0;
	if (log_time) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		n = snprintf(line, sizeof(line), "%lld.%03ld ", (long long)ts.tv_sec, ts.tv_nsec / 1000000);
	}
	n += snprintf(line + n, sizeof(line) - (size_t)n, "%s[%d]: %s: ", log_prog, (int)getpid(), tags[level]);
	log_escape(text, line + n, sizeof(line) - (size_t)n - 64);
	if (dropped)
		snprintf(line + strlen(line), 64, " (%lu similar lines suppressed)", dropped);
	if (log_fd >= 0)
		dprintf(log_fd, "%s\n", line);
	else
		fprintf(stderr, "%s\n", line);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line(level, 1, fmt, ap);
	va_end(ap);
}

/* A line the caller asked for by name (CICADA_TRACE): never rate-limited. */
void log_every(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line(level, 0, fmt, ap);
	va_end(ap);
}

uint64_t wire_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

int wire_fail(char *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, WIRE_ERRLEN, fmt, ap);
	va_end(ap);
	for (char *p = err; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
	return -1;
}

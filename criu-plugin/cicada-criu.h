/*
 * cicada-criu.h: the inside of Cicada's CRIU plugin (cicada.so). plugin.c
 * holds the hooks and preflight.c refuses what criu cannot dump; what the
 * plugin shares with gpu-server and gpu-migrate (pausing a session,
 * requests to a server, session files) is the session library
 * (session/session.h).
 */
#ifndef CICADA_CRIU_H
#define CICADA_CRIU_H

#include "session.h"

/* criu's own logger (exported by the criu binary). */
void print_on_level(unsigned int level, const char *format, ...);
#define plugin_error(fmt, ...) print_on_level(1, "cicada: " fmt "\n", ##__VA_ARGS__)
#define plugin_info(fmt, ...) print_on_level(3, "cicada-info: " fmt "\n", ##__VA_ARGS__)

/* preflight.c */
int task_dumpable(int pid, char *err);

#endif

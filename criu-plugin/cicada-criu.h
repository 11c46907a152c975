/*
 * cicada-criu.h: the inside of Cicada's CRIU plugin (cicada.so). plugin.c
 * holds the hooks, preflight.c refuses what criu cannot dump and
 * watch.c ends sessions after a dump over RPC; what the
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

/* watch.c: criu runs as an RPC service (runc, crun); the sessions of
 * dumped processes handed to a watcher that ends each once its process
 * does (0), or none (-1). */
int criu_over_rpc(void);
int watch_sessions(struct gpu_session *s, int n);

#endif

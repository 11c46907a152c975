/*
 * cicadactl.h: cicadactl, the operator's command for a gpu-server. It
 * speaks the server's admin socket (<run-dir>/admin.sock, root or the
 * server's user: gpu-server/front/admin.c) and runs criu and gpu-migrate
 * for the verbs that move a session's process:
 *
 *   ask.c    one request on the admin socket, its lines
 *   list.c   list: the sessions, their tenants, GPUs, memory, call rate
 *   verbs.c  resize, pause, resume, checkpoint, migrate, drain, revoke
 */
#ifndef CICADA_CICADACTL_H
#define CICADA_CICADACTL_H

#include <stddef.h>
#include <stdint.h>

#define CTL_MAX_SESSIONS 1024

struct ctl_opts {
	char run_dir[512];
	int json;
	char memory[64];                     /* resize --memory */
	char sms[16];                        /* resize --sms */
	char to[300];                        /* migrate, drain --to */
	int gpu;                             /* drain --gpu (-1: none) */
};

struct ctl_session {
	long worker, client;
	long uid;                            /* -1: a remote tenant */
	char gpus[32];
	uint64_t quota, used, calls;
	char state[16];                      /* running, paused */
	char sms[16];                        /* its SMs on a shared GPU, or "-" (the whole GPU) */
	char tenant[48];
	char token[64];                      /* the --token-dir token it proved, or "-" */
};

/* ask.c: the request's answer lines into buf (NUL-separated lines are
 * newline-separated text), 0, or -1 with err. */
int ctl_ask(const struct ctl_opts *o, const char *request, char *buf, size_t len, char *err, size_t errlen);
int ctl_sessions(const struct ctl_opts *o, struct ctl_session *s, int max, char *err, size_t errlen);
int ctl_find(const struct ctl_opts *o, long worker, struct ctl_session *out, char *err, size_t errlen);

/* list.c */
int ctl_list(const struct ctl_opts *o);

/* verbs.c */
int ctl_resize(const struct ctl_opts *o, long worker);
int ctl_pause(const struct ctl_opts *o, long worker, int on);
int ctl_checkpoint(const struct ctl_opts *o, long worker, const char *dir);
int ctl_migrate(const struct ctl_opts *o, long worker, char **extra);
int ctl_drain(const struct ctl_opts *o, char **extra);
int ctl_revoke(const struct ctl_opts *o, const char *token);

#endif

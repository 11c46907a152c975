/*
 * cicada_spank.h: cicada.so, Slurm's SPANK plugin for Cicada. A job's
 * tasks run with their GPU work on a gpu-server: the node's own
 * (--cicada=local[:N]) or one of a pool of GPU nodes (--cicada=remote[:N]).
 * Slurm counts Cicada's GPUs (GRES "cicada" for local ones, a licence
 * "cicada@NODE" for each pool server's), so it never oversubscribes them;
 * the plugin wires the server, a token of the job's own and the library
 * path into the tasks, revokes the token when the job ends, and restores
 * a checkpointed job when Slurm starts it again (docs/slurm.md).
 *
 *   spank.c    the hooks and the option
 *   config.c   plugstack.conf's arguments, the pool's servers file
 *   job.c      the job's token and state files, made and removed
 *   place.c    which server, checked against what Slurm counted
 *   restore.c  a checkpointed batch job restored at its start
 */
#ifndef CICADA_SPANK_H
#define CICADA_SPANK_H

#include <stdint.h>
#include <sys/types.h>

#define CS_PATH 512
#define CS_ADDR 300
#define CS_NODE 64

struct cs_config {
	char lib[CS_PATH];                   /* lib=: libcicada's folder (LD_LIBRARY_PATH) */
	char socket[CS_PATH];                /* socket=: the node's server (%n: the node's name) */
	char servers[CS_PATH];               /* servers=: NODE ADDRESS lines, the pool */
	char tokens[CS_PATH];                /* tokens=: the servers' --token-dir */
	char state[CS_PATH];                 /* state=: the jobs' files on this node */
	char checkpoints[CS_PATH];           /* checkpoints=: job-ID folders (shared) */
	char criu[CS_PATH], plugins[CS_PATH];   /* criu=, plugins=: for restores */
	int enforce;                         /* enforce=0: no check of GRES and licences */
};

/* What the user asked: --cicada=local[:N] or remote[:N]. */
enum cs_mode { CS_OFF, CS_LOCAL, CS_REMOTE };
struct cs_request {
	enum cs_mode mode;
	unsigned gpus;                       /* N, at least 1 */
};

/* config.c */
int cs_config_parse(struct cs_config *c, int ac, char **av, char *err, size_t len);
int cs_request_parse(const char *arg, struct cs_request *r);
void cs_expand(const char *pattern, const char *node, char *out, size_t len);
int cs_server_of(const struct cs_config *c, const char *node, char *addr, size_t len);

/* job.c: the job's folder <state>/<jobid>, root's, holding the token
 * (the job's user's, 0400), the server and the batch task's pid; and the
 * server's copy of the token, <tokens>/job-<jobid>. */
int cs_job_token(const struct cs_config *c, uint32_t job, uid_t uid, gid_t gid, char *err, size_t len);
int cs_job_path(const struct cs_config *c, uint32_t job, const char *file, char *out, size_t len);
int cs_job_read(const struct cs_config *c, uint32_t job, const char *file, char *out, size_t len);
int cs_job_write(const struct cs_config *c, uint32_t job, const char *file, const char *text);
void cs_job_remove(const struct cs_config *c, uint32_t job);

/* place.c */
int cs_place(const struct cs_config *c, uint32_t job, const struct cs_request *r, const char *node, char *addr,
	     size_t len, char *err, size_t errlen);

/* restore.c */
int cs_restore_pending(const struct cs_config *c, uint32_t job);
void cs_restore_run(const struct cs_config *c, uint32_t job, uid_t uid, gid_t gid, const char *script,
		    const char *server, const char *token_file);

#endif

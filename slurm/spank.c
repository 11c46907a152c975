/*
 * spank.c: the plugin's hooks and its option (cicada_spank.h says what
 * the plugin does). In slurmstepd, as root, before the tasks start:
 * the job's token is made (once a job), the server chosen, and the
 * tasks get CICADA_SERVER, CICADA_TOKEN_FILE, CICADA_GPUS and
 * LD_LIBRARY_PATH; a batch task whose job was checkpointed is restored
 * instead of started. In the job's epilog, whatever ended it, its files
 * and its token go (gpu-servers then end its sessions).
 *
 *   plugstack.conf:  optional /usr/lib/cicada/slurm/cicada.so lib=... socket=... servers=...
 *                    tokens=... state=... checkpoints=... criu=... plugins=... [enforce=0]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <slurm/slurm.h>
#include <slurm/spank.h>
#include "cicada_spank.h"

SPANK_PLUGIN(cicada, 1);

static struct cs_request req;                /* CS_OFF unless --cicada was given */
static char server[CS_ADDR];                 /* this step's, once placed */

static int opt_cicada(int val, const char *arg, int remote)
{
	(void)val;
	(void)remote;
	if (cs_request_parse(arg, &req)) {
		slurm_error("cicada: --cicada takes local[:N] or remote[:N] (N from 1 to 64), not '%s'", arg);
		return -1;
	}
	return 0;
}

static struct spank_option option = {
	"cicada", "local[:N]|remote[:N]",
	"Run the tasks' GPU work on a Cicada gpu-server: the node's own (local, the default), or one of the GPU "
	"pool's (remote), with N GPUs", 2, 0, opt_cicada,
};

/* The option, registered here rather than in a spank_options table,
 * which sbatch and salloc do not read. */
int slurm_spank_init(spank_t sp, int ac, char **av)
{
	spank_context_t ctx = spank_context();

	if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR && ctx != S_CTX_REMOTE)
		return 0;
	return spank_option_register(sp, &option) == ESPANK_SUCCESS ? 0 : -1;
}

static int config(struct cs_config *c, int ac, char **av)
{
	char err[256];

	if (cs_config_parse(c, ac, av, err, sizeof(err))) {
		slurm_error("cicada: %s", err);
		return -1;
	}
	return 0;
}

static int item_u32(spank_t sp, spank_item_t item, uint32_t *out)
{
	return spank_get_item(sp, item, out) == ESPANK_SUCCESS ? 0 : -1;
}

/* The step's environment for Cicada. */
static int set_env(spank_t sp, const struct cs_config *c, uint32_t job)
{
	char path[CS_PATH + 64], libs[4096], old[3072] = "", gpus[16];

	cs_job_path(c, job, "token", path, sizeof(path));
	if (spank_getenv(sp, "LD_LIBRARY_PATH", old, sizeof(old)) != ESPANK_SUCCESS)
		old[0] = 0;
	snprintf(libs, sizeof(libs), "%s%s%s", c->lib, old[0] ? ":" : "", old);
	snprintf(gpus, sizeof(gpus), "%u", req.gpus);
	return spank_setenv(sp, "CICADA_SERVER", server, 1) || spank_setenv(sp, "CICADA_TOKEN_FILE", path, 1) ||
	       spank_setenv(sp, "CICADA_GPUS", gpus, 1) || spank_setenv(sp, "LD_LIBRARY_PATH", libs, 1) ? -1 : 0;
}

/* slurmstepd, root, after the options: token, server, environment. */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	struct cs_config c;
	const char *node = getenv("SLURMD_NODENAME");
	char err[512];
	uint32_t job, uid, gid;

	if (!spank_remote(sp) || req.mode == CS_OFF)
		return 0;
	if (config(&c, ac, av))
		return -1;
	if (item_u32(sp, S_JOB_ID, &job) || item_u32(sp, S_JOB_UID, &uid) || item_u32(sp, S_JOB_GID, &gid) || !node) {
		slurm_error("cicada: cannot learn the job, its user or this node's name");
		return -1;
	}
	if (cs_job_token(&c, job, (uid_t)uid, (gid_t)gid, err, sizeof(err)) ||
	    cs_place(&c, job, &req, node, server, sizeof(server), err, sizeof(err))) {
		slurm_error("cicada: job %u: %s", job, err);
		return -1;
	}
	if (set_env(sp, &c, job)) {
		slurm_error("cicada: job %u: cannot set the tasks' environment", job);
		return -1;
	}
	slurm_verbose("cicada: job %u runs its GPU work on %s", job, server);
	return 0;
}

static int batch_step(spank_t sp)
{
	uint32_t step;

	return !item_u32(sp, S_JOB_STEPID, &step) && step == SLURM_BATCH_SCRIPT;
}

/* slurmstepd, root: the batch script's pid, for cicada-slurm checkpoint. */
int slurm_spank_task_post_fork(spank_t sp, int ac, char **av)
{
	struct cs_config c;
	uint32_t job;
	pid_t pid;
	char text[24];

	if (req.mode == CS_OFF || !batch_step(sp) || config(&c, ac, av) || item_u32(sp, S_JOB_ID, &job) ||
	    spank_get_item(sp, S_TASK_PID, &pid) != ESPANK_SUCCESS)
		return 0;
	snprintf(text, sizeof(text), "%d\n", (int)pid);
	if (cs_job_write(&c, job, "batch.pid", text))
		slurm_error("cicada: job %u: cannot note the batch script's pid in %s", job, c.state);
	return 0;
}

/* The task, root, before it runs the script: a checkpointed job is
 * restored instead (cs_restore_run does not return). */
int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	struct cs_config c;
	char token[CS_PATH + 64], **argv;
	uint32_t job, uid, gid;
	int argc;

	if (req.mode == CS_OFF || !batch_step(sp) || config(&c, ac, av) || item_u32(sp, S_JOB_ID, &job) ||
	    item_u32(sp, S_JOB_UID, &uid) || item_u32(sp, S_JOB_GID, &gid) || !cs_restore_pending(&c, job))
		return 0;
	if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1)
		argv = NULL;
	cs_job_path(&c, job, "token", token, sizeof(token));
	cs_restore_run(&c, job, (uid_t)uid, (gid_t)gid, argv ? argv[0] : NULL, server, token);
	return -1;
}

/* The job's epilog, whatever ended it: its token is revoked, its files go. */
int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
	struct cs_config c;
	const char *env = getenv("SLURM_JOB_ID");
	uint32_t job;

	if (config(&c, ac, av))
		return 0;
	if (item_u32(sp, S_JOB_ID, &job)) {
		if (!env)
			return 0;
		job = (uint32_t)strtoul(env, NULL, 10);
	}
	cs_job_remove(&c, job);
	return 0;
}

/*
 * restore.c: a batch job that cicada-slurm checkpointed and Slurm
 * requeued comes back from its checkpoint, on whatever node Slurm starts
 * it. <checkpoints>/job-ID holds criu's images of the batch script's
 * process tree (with Cicada's GPU snapshot), "complete" once they are
 * whole, "stdout"/"stderr": the files the script wrote to, as criu's
 * keys (the path without its leading '/'), and "script": the key of the
 * batch script itself, which the shell holds open, and how far it had
 * read it.
 *
 * At the batch task's start (root, before Slurm drops to the job's user
 * and runs the script) criu restores the tree instead, as its child: the
 * task waits and exits as the restored script does. The GPU state goes to
 * this step's server (CICADA_RESTORE_SERVER); the job's new token is at
 * the same path as before. The script's output files, which Slurm may
 * have written to since (and will not have given the task yet at this
 * point), are opened again, as the job's user, for appending, and stand
 * in for the dumped ones (criu --inherit-fd); so does the script slurmd
 * wrote for this run, where its spool folder may name the node, read
 * from where the shell had read. "complete" becomes "restored"
 * as the restore starts (back if it fails): a later requeue runs the
 * script afresh unless it is checkpointed again.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cicada_spank.h"

static void ckpt_path(const struct cs_config *c, uint32_t job, const char *file, char *out, size_t len)
{
	snprintf(out, len, "%s/job-%u/%s", c->checkpoints, job, file);
}

int cs_restore_pending(const struct cs_config *c, uint32_t job)
{
	char path[CS_PATH + 64];
	struct stat st;

	ckpt_path(c, job, "complete", path, sizeof(path));
	return !lstat(path, &st) && S_ISREG(st.st_mode) && st.st_uid == 0;
}

/* "fd[N]:KEY" for the file the script's fd (1 or 2) wrote to, if it was
 * one: that file opened again, as the job's user, as N. */
static int inherit_arg(const struct cs_config *c, uint32_t job, int fd, uid_t uid, gid_t gid, char *out, size_t len)
{
	char path[CS_PATH + 64], key[CS_PATH];
	FILE *f;
	int n;

	ckpt_path(c, job, fd == 1 ? "stdout" : "stderr", path, sizeof(path));
	if (!(f = fopen(path, "re")))
		return -1;
	if (!fgets(key, sizeof(key), f))
		key[0] = 0;
	fclose(f);
	key[strcspn(key, "\n")] = 0;
	if (!key[0] || key[0] == '/')
		return -1;
	snprintf(path, sizeof(path), "/%s", key);
	setfsgid(gid);
	setfsuid(uid);
	n = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NOCTTY);
	setfsuid(0);
	setfsgid(0);
	if (n < 0) {
		fprintf(stderr, "cicada: cannot open %s again for the restored job: %m\n", path);
		return -1;
	}
	snprintf(out, len, "fd[%d]:%s", n, key);
	return 0;
}

/* "fd[N]:KEY" for the batch script: this run's (path), opened as N at
 * the place the dumped shell had read to. */
static int script_arg(const struct cs_config *c, uint32_t job, const char *path, char *out, size_t len)
{
	char file[CS_PATH + 64], key[CS_PATH];
	unsigned long long pos;
	FILE *f;
	int n;

	ckpt_path(c, job, "script", file, sizeof(file));
	if (!path || !(f = fopen(file, "re")))
		return -1;
	n = fscanf(f, "%511s %llu", key, &pos);
	fclose(f);
	if (n != 2 || (n = open(path, O_RDONLY | O_NOFOLLOW)) < 0)
		return -1;
	if (lseek(n, (off_t)pos, SEEK_SET) < 0) {
		close(n);
		return -1;
	}
	snprintf(out, len, "fd[%d]:%s", n, key);
	return 0;
}

/* Whether criu's log says that the restore itself went well. */
static int restored(const char *log)
{
	char line[512];
	FILE *f = fopen(log, "re");
	int ok = 0;

	while (f && !ok && fgets(line, sizeof(line), f))
		ok = strstr(line, "Restore finished successfully") != NULL;
	if (f)
		fclose(f);
	return ok;
}

void cs_restore_run(const struct cs_config *c, uint32_t job, uid_t uid, gid_t gid, const char *script,
		    const char *server, const char *token_file)
{
	char dir[CS_PATH + 32], out[CS_PATH + 16] = "", errf[CS_PATH + 16], log[CS_PATH + 64], done[CS_PATH + 64];
	char complete[CS_PATH + 64], scr[CS_PATH + 16];
	char env_server[CS_ADDR + 32], env_token[CS_PATH + 32];
	char *argv[20] = { (char *)c->criu, "restore", "-D", dir, "-L", (char *)c->plugins, "--shell-job", "-o", "restore.log",
			   "-v4" };
	char *envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", env_server, env_token, NULL };
	int n = 10, status = 0;
	pid_t pid;

	snprintf(dir, sizeof(dir), "%s/job-%u", c->checkpoints, job);
	snprintf(env_server, sizeof(env_server), "CICADA_RESTORE_SERVER=%s", server);
	snprintf(env_token, sizeof(env_token), "CICADA_TOKEN_FILE=%s", token_file);
	if (!inherit_arg(c, job, 1, uid, gid, out, sizeof(out)))
		argv[n++] = "--inherit-fd", argv[n++] = out;
	if (!inherit_arg(c, job, 2, uid, gid, errf, sizeof(errf)) &&
	    strcmp(out[0] ? strchr(out, ':') : "", strchr(errf, ':')))   /* (one file for both: once) */
		argv[n++] = "--inherit-fd", argv[n++] = errf;
	if (!script_arg(c, job, script, scr, sizeof(scr)))
		argv[n++] = "--inherit-fd", argv[n++] = scr;
	argv[n] = NULL;
	fprintf(stderr, "cicada: job %u restored from its checkpoint in %s\n", job, dir);
	ckpt_path(c, job, "restore.log", log, sizeof(log));
	unlink(log);
	ckpt_path(c, job, "complete", complete, sizeof(complete));
	ckpt_path(c, job, "restored", done, sizeof(done));
	rename(complete, done);              /* (used: a later requeue starts afresh) */
	pid = fork();
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);                  /* (slurmstepd's mask and handlers) */
		sigprocmask(SIG_SETMASK, &none, NULL);
		for (int s = 1; s < NSIG; s++)
			signal(s, SIG_DFL);
		execve(c->criu, argv, envp);
		fprintf(stderr, "cicada: cannot run %s\n", c->criu);
		_exit(127);
	}
	while (pid > 0 && waitpid(pid, &status, 0) < 0)
		;
	if (pid < 0 || !restored(log)) {
		rename(done, complete);      /* (a requeue tries again) */
		fprintf(stderr, "cicada: job %u: criu could not restore %s (its log: %s)\n", job, dir, log);
		_exit(1);
	}
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

/*
 * place.c: the server a job step's tasks use. Slurm placed the job; this
 * reads what it counted (slurm_load_job, from slurmstepd) and refuses a
 * step that asks for more Cicada GPUs than its job holds, so nobody gets
 * a GPU the scheduler did not count:
 *
 *   --cicada=local[:N]   the job holds GRES cicada:N or more on its nodes
 *                        (TresPerNode gres:cicada[:TYPE]:N); the server is
 *                        the node's own, socket= with %n the node's name
 *   --cicada=remote[:N]  the job holds a licence cicada@NODE:N or more;
 *                        the server is NODE's in the servers file
 *
 * cli_filter.lua (in this folder) adds the GRES or picks the licence at
 * submission. Once a step has placed the job, or cicada-slurm drain has
 * moved it, <state>/ID/server says where it is, and later steps go there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <slurm/slurm.h>
#include "cicada_spank.h"

/* GRES cicada:N in a TresPerNode list ("gres:cicada:2,gres:gpu:1"). */
static unsigned gres_count(const char *list)
{
	char buf[1024], *save = NULL;
	unsigned n = 0;

	snprintf(buf, sizeof(buf), "%s", list ? list : "");
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *last = strrchr(t, ':');

		if ((!strncmp(t, "gres:cicada", 11) || !strncmp(t, "gres/cicada", 11)) && (!t[11] || t[11] == ':'))
			n += last && last > t + 10 ? (unsigned)strtoul(last + 1, NULL, 10) : 1;
	}
	return n;
}

/* The node of the first licence cicada@NODE[:N] with N >= want. */
static int licence_node(const char *list, unsigned want, char *node, size_t len)
{
	char buf[1024], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", list ? list : "");
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *count = strchr(t, ':');
		unsigned n = count ? (unsigned)strtoul(count + 1, NULL, 10) : 1;

		if (count)
			*count = 0;
		if (!strncmp(t, "cicada@", 7) && t[7] && n >= want) {
			snprintf(node, len, "%s", t + 7);
			return 0;
		}
	}
	return -1;
}

/* What Slurm counted for the job: its GRES cicada per node, its licences. */
static int counted(uint32_t job, unsigned *gres, char *licences, size_t len, char *err, size_t errlen)
{
	job_info_msg_t *msg = NULL;

	if (slurm_load_job(&msg, job, SHOW_DETAIL) || !msg || msg->record_count < 1) {
		snprintf(err, errlen, "cannot read job %u from slurmctld: %s", job, slurm_strerror(slurm_get_errno()));
		if (msg)
			slurm_free_job_info_msg(msg);
		return -1;
	}
	*gres = gres_count(msg->job_array[0].tres_per_node);
	snprintf(licences, len, "%s", msg->job_array[0].licenses ? msg->job_array[0].licenses : "");
	slurm_free_job_info_msg(msg);
	return 0;
}

int cs_place(const struct cs_config *c, uint32_t job, const struct cs_request *r, const char *node, char *addr,
	     size_t len, char *err, size_t errlen)
{
	char line[CS_ADDR + CS_NODE + 8], licences[1024] = "", pool[CS_NODE];
	unsigned gres = 0;

	if (c->enforce && counted(job, &gres, licences, sizeof(licences), err, errlen))
		return -1;
	if (r->mode == CS_LOCAL && c->enforce && gres < r->gpus) {
		snprintf(err, errlen, "--cicada=local:%u needs the job to hold --gres=cicada:%u on its nodes (it holds %u)",
			 r->gpus, r->gpus, gres);
		return -1;
	}
	if (r->mode == CS_REMOTE && licence_node(licences, r->gpus, pool, sizeof(pool))) {
		snprintf(err, errlen, "--cicada=remote:%u needs the job to hold a licence cicada@NODE:%u (a GPU node of the "
			 "pool; it holds '%.200s')", r->gpus, r->gpus, licences);
		return -1;
	}
	if (!cs_job_read(c, job, "server", line, sizeof(line)) && sscanf(line, "%299s", addr) == 1)
		return 0;                    /* (placed by an earlier step, or moved by a drain) */
	if (r->mode == CS_LOCAL) {
		cs_expand(c->socket, node, addr, len);
		snprintf(pool, sizeof(pool), "%s", node);
	} else if (cs_server_of(c, pool, addr, len)) {
		snprintf(err, errlen, "no server for node %s in %s", pool, c->servers);
		return -1;
	}
	snprintf(line, sizeof(line), "%s %s\n", addr, pool);
	if (cs_job_write(c, job, "server", line)) {
		snprintf(err, errlen, "cannot write the job's server into %s", c->state);
		return -1;
	}
	return 0;
}

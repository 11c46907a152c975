/*
 * config.c: the plugin's arguments in plugstack.conf (key=value), the
 * user's --cicada value, and the pool's servers file: one "NODE ADDRESS"
 * line a GPU node, ADDRESS as CICADA_SERVER takes it (tcp:host:port,
 * tls:host:port), '#' starting a comment. cicada-slurm reads the same
 * line of plugstack.conf, and the same file.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cicada_spank.h"

static const struct cs_config defaults = {
	.lib = "/usr/lib/cicada",
	.socket = "unix:/run/cicada/gpu.sock",
	.servers = "/etc/cicada/slurm-servers",
	.tokens = "/etc/cicada/tokens",
	.state = "/run/cicada/slurm",
	.checkpoints = "/var/lib/cicada/checkpoints",
	.criu = "/usr/sbin/cicada-criu",
	.plugins = "/usr/lib/criu",
	.enforce = 1,
};

int cs_config_parse(struct cs_config *c, int ac, char **av, char *err, size_t len)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
		{ "lib", offsetof(struct cs_config, lib) },         { "socket", offsetof(struct cs_config, socket) },
		{ "servers", offsetof(struct cs_config, servers) }, { "tokens", offsetof(struct cs_config, tokens) },
		{ "state", offsetof(struct cs_config, state) },     { "checkpoints", offsetof(struct cs_config, checkpoints) },
		{ "criu", offsetof(struct cs_config, criu) },       { "plugins", offsetof(struct cs_config, plugins) },
	};

	*c = defaults;
	for (int i = 0; i < ac; i++) {
		const char *eq = strchr(av[i], '=');
		size_t k = eq ? (size_t)(eq - av[i]) : 0, j;

		if (!eq || strlen(eq + 1) >= CS_PATH) {
			snprintf(err, len, "plugstack.conf: '%.60s' is not key=value", av[i]);
			return -1;
		}
		if (k == 7 && !strncmp(av[i], "enforce", 7)) {
			c->enforce = strcmp(eq + 1, "0") != 0;
			continue;
		}
		if (k == 15 && !strncmp(av[i], "migration-token", 15))
			continue;                    /* (cicada-slurm's) */
		for (j = 0; j < sizeof(keys) / sizeof(keys[0]); j++)
			if (strlen(keys[j].key) == k && !strncmp(av[i], keys[j].key, k))
				break;
		if (j == sizeof(keys) / sizeof(keys[0])) {
			snprintf(err, len, "plugstack.conf: unknown argument '%.*s'", (int)(k < 40 ? k : 40), av[i]);
			return -1;
		}
		snprintf((char *)c + keys[j].off, CS_PATH, "%s", eq + 1);
	}
	return 0;
}

/* local[:N] or remote[:N] (none: local, one GPU); 0, or -1. */
int cs_request_parse(const char *arg, struct cs_request *r)
{
	const char *n = NULL;
	char *end;
	long v = 1;

	r->mode = CS_LOCAL;
	r->gpus = 1;
	if (!arg || !*arg)
		return 0;
	if (!strncmp(arg, "local", 5) && (!arg[5] || arg[5] == ':'))
		n = arg[5] ? arg + 6 : NULL;
	else if (!strncmp(arg, "remote", 6) && (!arg[6] || arg[6] == ':'))
		r->mode = CS_REMOTE, n = arg[6] ? arg + 7 : NULL;
	else
		return -1;
	if (n && (v = strtol(n, &end, 10), !*n || *end || v < 1 || v > 64))
		return -1;
	r->gpus = (unsigned)v;
	return 0;
}

/* pattern with each %n replaced by node. */
void cs_expand(const char *pattern, const char *node, char *out, size_t len)
{
	size_t o = 0;

	for (const char *p = pattern; *p && o + 1 < len; p++) {
		if (p[0] == '%' && p[1] == 'n') {
			o += (size_t)snprintf(out + o, len - o, "%s", node);
			if (o >= len)
				o = len - 1;
			p++;
		} else {
			out[o++] = *p;
		}
	}
	out[o] = 0;
}

/* The address of node's server in the servers file; 0, or -1. */
int cs_server_of(const struct cs_config *c, const char *node, char *addr, size_t len)
{
	char line[CS_ADDR + CS_NODE + 8], name[CS_NODE], a[CS_ADDR];
	FILE *f = fopen(c->servers, "re");
	int found = -1;

	if (!f)
		return -1;
	while (found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "#\n")] = 0;
		if (sscanf(line, "%63s %299s", name, a) == 2 && !strcmp(name, node)) {
			snprintf(addr, len, "%s", a);
			found = 0;
		}
	}
	fclose(f);
	return found;
}

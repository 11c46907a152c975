/*
 * main.c: gpu-template's command line.
 *
 *   gpu-template run [--log FILE] -- CMD [ARG...]
 *   gpu-template save PID DIR [--leave-running]
 *   gpu-template start DIR [--log FILE]
 *       [--criu PATH] [--criu-plugins DIR] [--timeout S]
 *
 * One line on success (the pid, or what was saved or started), else one
 * line saying why and exit status 1.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "session.h"
#include "template.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpu-template run [--log FILE] -- CMD [ARG...]\n"
		"       gpu-template save PID DIR [--leave-running]\n"
		"       gpu-template start DIR [--log FILE]\n"
		"       (each also [--criu PATH] [--criu-plugins DIR] [--timeout S])\n"
		"  A model server started cold loads its libraries, its model and its kernels;\n"
		"  a copy started from a template has them already. run starts CMD through\n"
		"  Cicada (this environment: CICADA_SERVER...) in a new pid namespace and prints\n"
		"  the pid of its init; when it is ready, save checkpoints it into DIR, GPU state\n"
		"  included; start restores one more copy from DIR, on this node or any other\n"
		"  that sees DIR and has a gpu-server, as often as wanted, copies side by side.\n"
		"  Output goes to --log FILE (run: the template's; start: this copy's, in place\n"
		"  of the template's; else /dev/null). Needs root, as criu does.\n");
}

static int parse(int argc, char **argv, struct template_opts *o)
{
	static const struct option longs[] = {
		{ "log", required_argument, NULL, 'l' },      { "leave-running", no_argument, NULL, 'r' },
		{ "criu", required_argument, NULL, 'c' },     { "criu-plugins", required_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },  { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->timeout_s = 600;
	while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
		switch (c) {
		case 'l': snprintf(o->log, sizeof(o->log), "%s", optarg); break;
		case 'r': o->leave_running = 1; break;
		case 'c': snprintf(o->criu, sizeof(o->criu), "%s", optarg); break;
		case 'p': snprintf(o->plugins, sizeof(o->plugins), "%s", optarg); break;
		case 't': o->timeout_s = atoi(optarg); break;
		case 'h': usage(stdout); return 1;
		default: return -1;
		}
	}
	if (o->timeout_s <= 0) {
		fprintf(stderr, "gpu-template: --timeout takes a number of seconds\n");
		return -1;
	}
	criu_default_paths(o->criu, sizeof(o->criu), o->plugins, sizeof(o->plugins));
	return 0;
}

int main(int argc, char **argv)
{
	struct template_opts o;
	const char *cmd = argc > 1 ? argv[1] : "";
	int rc;

	signal(SIGCHLD, SIG_DFL);            /* (criu's exit status, and the init's children's) */
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		usage(stdout);
		return 0;
	}
	rc = parse(argc - 1, argv + 1, &o);
	if (rc)
		return rc > 0 ? 0 : (usage(stderr), 1);
	argc -= optind + 1;
	argv += optind + 1;
	if (!strcmp(cmd, "run") && argc >= 1)
		return template_run(&o, argv);
	if (!strcmp(cmd, "save") && argc == 2 && atoi(argv[0]) > 0)
		return template_save(&o, atoi(argv[0]), argv[1]);
	if (!strcmp(cmd, "start") && argc == 1)
		return template_start(&o, argv[0]);
	usage(stderr);
	return 1;
}

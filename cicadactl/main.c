/*
 * main.c: cicadactl's command line.
 *
 *   cicadactl [--run-dir DIR] list [--json]
 *   cicadactl [--run-dir DIR] resize SESSION [--memory SIZE|none] [--sms N|all]
 *   cicadactl [--run-dir DIR] pause|resume SESSION
 *   cicadactl [--run-dir DIR] checkpoint SESSION DIR
 *   cicadactl [--run-dir DIR] migrate SESSION --to TARGET [-- GPU-MIGRATE-OPTIONS]
 *   cicadactl [--run-dir DIR] drain --gpu N --to TARGET [-- GPU-MIGRATE-OPTIONS]
 *   cicadactl [--run-dir DIR] revoke TOKEN-NAME
 *
 * SESSION is the number list shows (its worker's pid). Exit status 0 on
 * success, 1 with one line on failure, 2 for a bad command line.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cicadactl.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: cicadactl [--run-dir DIR] list [--json]\n"
		"       cicadactl [--run-dir DIR] resize SESSION [--memory SIZE|none] [--sms N|all]\n"
		"       cicadactl [--run-dir DIR] pause|resume SESSION\n"
		"       cicadactl [--run-dir DIR] checkpoint SESSION DIR\n"
		"       cicadactl [--run-dir DIR] migrate SESSION --to TARGET [-- GPU-MIGRATE-OPTIONS]\n"
		"       cicadactl [--run-dir DIR] drain --gpu N --to TARGET [-- GPU-MIGRATE-OPTIONS]\n"
		"       cicadactl [--run-dir DIR] revoke TOKEN-NAME\n"
		"  The operator's view of a gpu-server (root or the server's user): its sessions\n"
		"  with their tenant, GPUs, SMs, device memory used and quota, and calls a second;\n"
		"  a session's memory quota changed while it runs (raised at once; lowered only\n"
		"  to what it holds or more), and its SMs (between two of its calls; 'all': the\n"
		"  whole GPU, shared in time); its calls held and let go (pause, resume: work\n"
		"  already on the GPU runs on); its process checkpointed (it goes on) or moved\n"
		"  with gpu-migrate; every session on a GPU moved off it; the sessions that\n"
		"  proved a token of the server's --token-dir ended. --run-dir is the\n"
		"  server's (default CICADA_RUN_DIR, else /run/cicada/sessions).\n");
}

/* A session's number: a pid. */
static long session_arg(const char *s)
{
	char *end;
	long v = s ? strtol(s, &end, 10) : 0;

	return s && *s && !*end && v > 0 ? v : -1;
}

static int parse(int argc, char **argv, struct ctl_opts *o)
{
	static const struct option longs[] = {
		{ "run-dir", required_argument, NULL, 'r' }, { "json", no_argument, NULL, 'j' },
		{ "memory", required_argument, NULL, 'm' },  { "to", required_argument, NULL, 't' },
		{ "gpu", required_argument, NULL, 'g' },     { "help", no_argument, NULL, 'h' },
		{ "sms", required_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	const char *env = getenv("CICADA_RUN_DIR");
	char *end;
	int c;

	memset(o, 0, sizeof(*o));
	o->gpu = -1;
	snprintf(o->run_dir, sizeof(o->run_dir), "%s", env && *env ? env : "/run/cicada/sessions");
	while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
		switch (c) {
		case 'r': snprintf(o->run_dir, sizeof(o->run_dir), "%s", optarg); break;
		case 'j': o->json = 1; break;
		case 'm': snprintf(o->memory, sizeof(o->memory), "%s", optarg); break;
		case 's': snprintf(o->sms, sizeof(o->sms), "%s", optarg); break;
		case 't': snprintf(o->to, sizeof(o->to), "%s", optarg); break;
		case 'g':
			o->gpu = (int)strtol(optarg, &end, 10);
			if (*end || o->gpu < 0) {
				fprintf(stderr, "cicadactl: --gpu takes a GPU's number\n");
				return 2;
			}
			break;
		case 'h': usage(stdout); return 1;
		default: fprintf(stderr, "cicadactl: see cicadactl --help\n"); return 2;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ctl_opts o;
	const char *verb;
	long session;
	int rc = parse(argc, argv, &o);

	if (rc)
		return rc == 1 ? 0 : 2;
	argc -= optind;
	argv += optind;
	verb = argc ? argv[0] : "";
	session = argc > 1 ? session_arg(argv[1]) : -1;
	if (!strcmp(verb, "list") && argc == 1)
		return ctl_list(&o);
	if (!strcmp(verb, "drain"))
		return ctl_drain(&o, argc > 1 ? argv + 1 : NULL);
	if (!strcmp(verb, "revoke") && argc == 2)
		return ctl_revoke(&o, argv[1]);
	if ((!strcmp(verb, "resize") || !strcmp(verb, "checkpoint") || !strcmp(verb, "migrate") ||
	     !strcmp(verb, "pause") || !strcmp(verb, "resume")) && session < 0) {
		fprintf(stderr, "cicadactl: %s needs a SESSION (a number cicadactl list shows)\n", verb);
		return 2;
	}
	if (!strcmp(verb, "resize") && argc == 2)
		return ctl_resize(&o, session);
	if ((!strcmp(verb, "pause") || !strcmp(verb, "resume")) && argc == 2)
		return ctl_pause(&o, session, verb[0] == 'p');
	if (!strcmp(verb, "checkpoint") && argc == 3)
		return ctl_checkpoint(&o, session, argv[2]);
	if (!strcmp(verb, "migrate") && argc >= 2)
		return ctl_migrate(&o, session, argc > 2 ? argv + 2 : NULL);
	if (!strcmp(verb, "list") || !strcmp(verb, "resize") || !strcmp(verb, "checkpoint") || !strcmp(verb, "pause") ||
	    !strcmp(verb, "resume") || !strcmp(verb, "revoke"))
		fprintf(stderr, "cicadactl: %s: wrong arguments (cicadactl --help)\n", verb);
	else
		fprintf(stderr, "cicadactl: unknown verb '%.40s' (list, resize, pause, resume, checkpoint, migrate, "
			"drain, revoke; --help)\n", verb);
	return 2;
}

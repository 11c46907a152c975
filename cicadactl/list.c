/*
 * list.c: cicadactl list [--json]. Two looks at the sessions half a
 * second apart give each one's calls a second; memory is MiB (quota
 * "-": none). A session is named by its worker's pid.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "cicadactl.h"

#define LOOK_GAP_US 500000

static uint64_t calls_before(const struct ctl_session *before, int n, long worker, uint64_t now)
{
	for (int i = 0; i < n; i++)
		if (before[i].worker == worker)
			return before[i].calls <= now ? before[i].calls : now;
	return now;
}

static void print_table(const struct ctl_session *s, int n, const struct ctl_session *b, int nb)
{
	printf("%-8s %-8s %-12s %-8s %5s %10s %10s %10s %-8s %s\n", "SESSION", "CLIENT", "TENANT", "GPUS", "SMS",
	       "USED_MiB", "QUOTA_MiB", "CALLS/S", "STATE", "TOKEN");
	for (int i = 0; i < n; i++) {
		char quota[24];
		snprintf(quota, sizeof(quota), s[i].quota ? "%llu" : "-", (unsigned long long)(s[i].quota >> 20));
		printf("%-8ld %-8ld %-12s %-8s %5s %10llu %10s %10llu %-8s %s\n", s[i].worker, s[i].client, s[i].tenant,
		       s[i].gpus, strcmp(s[i].sms, "-") ? s[i].sms : "all", (unsigned long long)(s[i].used >> 20), quota,
		       (unsigned long long)((s[i].calls - calls_before(b, nb, s[i].worker, s[i].calls)) * 2), s[i].state,
		       s[i].token);
	}
}

static void print_json(const struct ctl_session *s, int n, const struct ctl_session *b, int nb)
{
	printf("[");
	for (int i = 0; i < n; i++)
		printf("%s{\"session\":%ld,\"client_pid\":%ld,\"uid\":%ld,\"tenant\":\"%s\",\"gpus\":\"%s\","
		       "\"sms\":%s,\"used_bytes\":%llu,\"quota_bytes\":%llu,\"calls_per_s\":%llu,\"state\":\"%s\","
		       "\"token\":\"%s\"}",
		       i ? "," : "", s[i].worker, s[i].client, s[i].uid, s[i].tenant, s[i].gpus,
		       strcmp(s[i].sms, "-") ? s[i].sms : "null", (unsigned long long)s[i].used, (unsigned long long)s[i].quota,
		       (unsigned long long)((s[i].calls - calls_before(b, nb, s[i].worker, s[i].calls)) * 2), s[i].state,
		       s[i].token);
	printf("]\n");
}

int ctl_list(const struct ctl_opts *o)
{
	static struct ctl_session before[CTL_MAX_SESSIONS], now[CTL_MAX_SESSIONS];
	char err[512];
	int nb = ctl_sessions(o, before, CTL_MAX_SESSIONS, err, sizeof(err)), n;

	if (nb >= 0)
		usleep(LOOK_GAP_US);
	n = nb < 0 ? -1 : ctl_sessions(o, now, CTL_MAX_SESSIONS, err, sizeof(err));
	if (n < 0) {
		fprintf(stderr, "cicadactl: %s\n", err);
		return 1;
	}
	if (o->json)
		print_json(now, n, before, nb);
	else
		print_table(now, n, before, nb);
	return 0;
}

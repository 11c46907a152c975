/*
 * snap_request: asks a gpu-server what CRIU's plugin or gpu-migrate would
 * ask, as whoever runs it, for the hostile-tenant tests: a checkpoint of
 * a paused session (its ticket) into a directory passed as a descriptor,
 * a restore of the snapshot NAME in such a directory, the release of a
 * detached session, a migration's hello (nothing follows it), and the
 * pause of a process's session through its control socket (held until a
 * file goes away, so that a test can act on the paused session).
 *
 * Each request prints one line, "snap_request: OP: refused=0|1
 * message=... ticket=...", or says that no answer came; the tests judge
 * the message. Exit: 0 answered (refused or not), 1 the server closed the
 * connection, 3 no answer within the deadline, 2 usage or dialling.
 *
 * usage: snap_request [-t TOKEN_FILE] checkpoint ADDRESS TICKET DIR NAME [PARENT]
 *        snap_request [-t TOKEN_FILE] restore ADDRESS DIR NAME
 *        snap_request [-t TOKEN_FILE] release ADDRESS TICKET
 *        snap_request [-t TOKEN_FILE] migrate ADDRESS
 *        snap_request pause PID HOLD_FILE
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "raw.h"

#define ANSWER_MS 60000
#define MIGRATE_ANSWER_MS 3000           /* an accepted migration waits for its images */
#define HOLD_MAX_S 120

static int usage(void)
{
	fprintf(stderr, "usage: snap_request [-t TOKEN_FILE] checkpoint ADDRESS TICKET DIR NAME [PARENT]\n"
			"       snap_request [-t TOKEN_FILE] restore ADDRESS DIR NAME\n"
			"       snap_request [-t TOKEN_FILE] release ADDRESS TICKET\n"
			"       snap_request [-t TOKEN_FILE] migrate ADDRESS\n"
			"       snap_request pause PID HOLD_FILE\n");
	return 2;
}

/* Sends h (then dir's descriptor, if dir) and prints the answer. */
static int request(const char *what, const char *address, const struct raw_hello *h, const char *dir, int ms)
{
	struct raw_conn c;
	char err[WIRE_ERRLEN];
	hello_res r;
	int dirfd = -1, rc;

	if (dir && (dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		perror(dir);
		return 2;
	}
	if (raw_dial(address, &c, err)) {
		fprintf(stderr, "snap_request: %s\n", err);
		return 2;
	}
	/* (a server that refuses at once may close before the descriptor) */
	if (!raw_send_hello(&c, h) && dirfd >= 0)
		wire_send_fd(c.fd, dirfd);
	rc = raw_reply(&c, &r, ms);
	if (rc == -2) {
		printf("snap_request: %s: no answer within %d s\n", what, ms / 1000);
		return 3;
	}
	if (rc) {
		printf("snap_request: %s: the server closed the connection\n", what);
		return 1;
	}
	printf("snap_request: %s: refused=%d message=%s ticket=%s\n", what, r.err != 0, r.message ? r.message : "",
	       r.ticket ? r.ticket : "");
	xdr_free((xdrproc_t)xdr_hello_res, (char *)&r);
	close(c.fd);
	return 0;
}

/* Pauses pid's session and holds it paused while hold_file exists. */
static int pause_held(int pid, const char *hold_file)
{
	char line[WIRE_CTL_LINE_MAX];
	struct wire_ctl_where w;
	struct stat st;
	int fd = wire_ctl_dial(pid);

	if (fd < 0 || wire_ctl_send(fd, WIRE_CTL_PAUSE) || wire_read_line(fd, line, sizeof(line))) {
		printf("snap_request: pause: no answer from process %d\n", pid);
		return 1;
	}
	if (wire_ctl_parse_paused(line, &w)) {
		printf("snap_request: pause: %s\n", line);
		return 1;
	}
	printf("snap_request: pause: ticket=%s\n", w.ticket);
	fflush(stdout);
	for (int i = 0; i < HOLD_MAX_S * 20 && !stat(hold_file, &st); i++)
		usleep(50000);
	close(fd);                           /* the session resumes where it was */
	return 0;
}

int main(int argc, char **argv)
{
	struct raw_hello h = { 0 };
	char token[CICADA_TOKEN_MAX + 1];

	if (argc > 2 && !strcmp(argv[1], "-t")) {
		if (!(h.token = raw_token(argv[2], token, sizeof(token))))
			return perror(argv[2]), 2;
		argc -= 2;
		argv += 2;
	}
	if (argc == 4 && !strcmp(argv[1], "pause"))
		return pause_held(atoi(argv[2]), argv[3]);
	if ((argc == 6 || argc == 7) && !strcmp(argv[1], "checkpoint")) {
		h.op = OP_CHECKPOINT, h.ticket = argv[3], h.snapshot = argv[5], h.parent = argc == 7 ? argv[6] : "";
		return request("checkpoint", argv[2], &h, argv[4], ANSWER_MS);
	}
	if (argc == 5 && !strcmp(argv[1], "restore")) {
		h.op = OP_RESTORE, h.snapshot = argv[4];
		return request("restore", argv[2], &h, argv[3], ANSWER_MS);
	}
	if (argc == 4 && !strcmp(argv[1], "release")) {
		h.op = OP_RELEASE, h.ticket = argv[3];
		return request("release", argv[2], &h, NULL, ANSWER_MS);
	}
	if (argc == 3 && !strcmp(argv[1], "migrate")) {
		h.op = OP_MIGRATE;
		return request("migrate", argv[2], &h, NULL, MIGRATE_ANSWER_MS);
	}
	return usage();
}

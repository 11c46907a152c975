/*
 * fuzz_stream.c: libFuzzer target over the two stream decoders a server
 * reads from the network: snap_recv_tree (a migrating process's image
 * directory) and snap_recv_dir (a GPU snapshot). The first input byte
 * picks the decoder; the rest is what the connection carries, given
 * through a pipe. A refusal must be one line, and no file may land
 * outside the receiving directory (names are checked).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "internal.h"
#include "criu_images.h"

struct feed {
	int fd;
	const uint8_t *p;
	size_t n;
};

static void *feeder(void *arg)
{
	struct feed *f = arg;

	while (f->n) {
		ssize_t w = write(f->fd, f->p, f->n);
		if (w <= 0)
			break;
		f->p += w;
		f->n -= (size_t)w;
	}
	close(f->fd);
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static char base[] = "/tmp/cicada-fuzz-stream.XXXXXX";
	static int basefd = -1;
	char err[SNAP_ERRLEN] = "";
	struct feed f;
	pthread_t t;
	int p[2], dirfd, rc;

	if (!len)
		return 0;
	if (basefd < 0 && (!mkdtemp(base) || (basefd = open(base, O_RDONLY | O_DIRECTORY)) < 0))
		abort();
	snap_rmtree(basefd, "in");
	if (mkdirat(basefd, "in", 0700) || (dirfd = openat(basefd, "in", O_RDONLY | O_DIRECTORY)) < 0 || pipe(p))
		abort();
	f = (struct feed){ p[1], data + 1, len - 1 };
	pthread_create(&t, NULL, feeder, &f);
	if (data[0] & 1)
		rc = snap_recv_tree(p[0], dirfd, NULL, NULL, err);
	else
		rc = snap_recv_dir(p[0], dirfd, NULL, err);
	close(p[0]);
	pthread_join(t, NULL);
	if (rc && (!err[0] || strchr(err, '\n')))
		abort();                     /* a refusal is one line */
	if (faccessat(basefd, "in", F_OK, 0))
		abort();
	close(dirfd);
	return 0;
}

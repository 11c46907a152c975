/*
 * snap_speed.c: throughput of the snapshot library (not a test). Writes
 * and reads back SIZE GiB (default 2) of a moderately compressible
 * pattern, host memory standing in for device memory (memcpy ops), in a
 * snapshot under DIR (default /dev/shm), and prints GB/s (10^9 bytes).
 * Usage: snap_speed [SIZE_GIB [DIR]]; CICADA_SNAPSHOT_THREADS and
 * CICADA_ZSTD_LEVEL apply as usual.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"

/* ctx: the distance from the source to the restore buffer. */
static void *host_alloc(void *ctx, size_t size) { return malloc(size); }
static void host_free(void *ctx, void *buf, size_t size) { free(buf); }

static int copy_out(void *ctx, uint64_t va, void *buf, size_t size)
{
	memcpy(buf, (void *)(uintptr_t)va, size);
	return 0;
}

static int copy_in(void *ctx, uint64_t va, const void *buf, size_t size)
{
	memcpy((char *)(uintptr_t)va + *(ptrdiff_t *)ctx, buf, size);
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Per 4 KiB: 1 KiB of random bytes, then slowly changing 32-bit counters. */
static void fill(uint8_t *p, size_t size)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (size_t off = 0; off < size; off += 4096)
		for (size_t k = 0; k < 4096 && off + k < size; k += 4) {
			uint32_t v = (uint32_t)((off + k) >> 8);

			if (k < 1024) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				v = (uint32_t)x;
			}
			memcpy(p + off + k, &v, size - off - k < 4 ? size - off - k : 4);
		}
}

static int run(int dirfd, uint8_t *src, ptrdiff_t *delta, size_t size, char *err)
{
	struct snap_memory_ops ops = { .ctx = delta, .alloc_host = host_alloc, .free_host = host_free, .read = copy_out,
				       .write = copy_in };
	struct snap_range range = { (uintptr_t)src, size };
	Cicada__Manifest m = CICADA__MANIFEST__INIT;
	struct snap_writer *w;
	struct snap_reader *r;
	double t0 = now(), t1, t2;
	uint64_t stored;
	int rc;

	w = snap_writer_begin(dirfd, NULL, err);
	if (!w)
		return -1;
	if (snap_write_memory(w, &range, 1, &ops, err)) {
		snap_writer_abort(w);
		return -1;
	}
	if (snap_writer_commit(w, &m, err))
		return -1;
	t1 = now();
	stored = m.data_size;
	r = snap_reader_open(dirfd, NULL, err);
	if (!r)
		return -1;
	rc = snap_read_memory(r, &ops, err);
	t2 = now();
	snap_reader_close(r);
	if (rc)
		return -1;
	printf("snap_speed: %.2f GiB, %d threads, zstd level %d, stored %.2f GiB (ratio %.2f)\n",
	       size / 1073741824.0, snap_threads(~(size_t)0), snap_zstd_level(),
	       stored / 1073741824.0, (double)size / stored);
	printf("write: %.3f s, %.2f GB/s\n", t1 - t0, size / (t1 - t0) / 1e9);
	printf("read:  %.3f s, %.2f GB/s\n", t2 - t1, size / (t2 - t1) / 1e9);
	return 0;
}

int main(int argc, char **argv)
{
	size_t size = (size_t)((argc > 1 ? atof(argv[1]) : 2) * 1073741824.0);
	char dir[256], err[SNAP_ERRLEN];
	uint8_t *src = malloc(size), *dst = malloc(size);
	ptrdiff_t delta = dst - src;
	int fd, rc;

	snprintf(dir, sizeof(dir), "%s/cicada-snap-speed.XXXXXX", argc > 2 ? argv[2] : "/dev/shm");
	if (!src || !dst || !mkdtemp(dir) || (fd = open(dir, O_RDONLY | O_DIRECTORY)) < 0) {
		perror("snap_speed");
		return 1;
	}
	fill(src, size);
	memset(dst, 0xff, size);            /* backed, like device memory */
	rc = run(fd, src, &delta, size, err);
	if (rc)
		fprintf(stderr, "snap_speed: %s\n", err);
	else if (memcmp(src, dst, size))
		rc = fprintf(stderr, "snap_speed: restored bytes differ\n");
	snap_rmtree(AT_FDCWD, dir);
	return rc != 0;
}

/*
 * cr_hold: the idle application of the checkpoint benchmark
 * (bench/run-bench-cr.sh).
 *
 *   cr_hold KERNELS_DIR MIB GO_FILE
 *
 * Allocates MIB MiB of device memory, one allocation per GiB, fills it
 * with the hash pattern and takes a checksum of each allocation. Prints
 * "ready", then waits (polling every 10 ms) until GO_FILE exists; the
 * benchmark checkpoints and restores it meanwhile. Then checks the memory
 * on the GPU (the checksums again) and on the host (the first and last
 * words of each allocation against the host twin of the pattern), and
 * prints "verified", or "MISMATCH" and exits 1.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "cr_common.h"

#define MAX_PIECE	(1024UL << 20)
#define MAX_PIECES	1024
#define SAMPLE_WORDS	1024

static struct cr_kernels k;
static struct cr_piece pieces[MAX_PIECES];
static unsigned long long expected[MAX_PIECES];
static int npieces;
static CUdeviceptr sums;

static unsigned long long words(const struct cr_piece *p)
{
	return p->bytes / sizeof(unsigned);
}

static void checksum_each(unsigned long long *out)
{
	CHECK(cuMemsetD8(sums, 0, npieces * sizeof(*out)));
	for (int i = 0; i < npieces; i++)
		cr_checksum(&k, pieces[i].ptr, words(&pieces[i]),
			    sums + i * sizeof(*out));
	CHECK(cuMemcpyDtoH(out, sums, npieces * sizeof(*out)));
}

/* Words [first, first + count) of piece p hold the hash pattern. */
static int sample_ok(const struct cr_piece *p, unsigned long long first,
		     unsigned long long count)
{
	unsigned h[SAMPLE_WORDS];

	CHECK(cuMemcpyDtoH(h, p->ptr + first * sizeof(unsigned),
			   count * sizeof(unsigned)));
	for (unsigned long long i = 0; i < count; i++)
		if (h[i] != cr_pattern_value(first + i, p->seed, 0))
			return 0;
	return 1;
}

static int piece_ok(int i, const unsigned long long *got)
{
	unsigned long long n = words(&pieces[i]);
	unsigned long long count = n < SAMPLE_WORDS ? n : SAMPLE_WORDS;

	if (got[i] != expected[i]) {
		fprintf(stderr, "cr_hold: allocation %d: checksum 0x%016llx, want 0x%016llx\n",
			i, got[i], expected[i]);
		return 0;
	}
	if (!sample_ok(&pieces[i], 0, count) || !sample_ok(&pieces[i], n - count, count)) {
		fprintf(stderr, "cr_hold: allocation %d: words differ from the pattern\n", i);
		return 0;
	}
	return 1;
}

static int verify(void)
{
	unsigned long long *got = xmalloc(npieces * sizeof(*got));
	int ok = 1;

	checksum_each(got);
	for (int i = 0; i < npieces; i++)
		ok &= piece_ok(i, got);
	free(got);
	return ok;
}

int main(int argc, char **argv)
{
	unsigned long mib;
	int ok;

	start("cr_hold");
	if (argc != 4)
		fail("usage: cr_hold KERNELS_DIR MIB GO_FILE");
	mib = parse_count(argv[2], "MIB", 1);

	cr_open(&k, argv[1]);
	npieces = cr_plan(pieces, MAX_PIECES, (size_t)mib << 20, MAX_PIECE, 1);
	cr_alloc(pieces, npieces);
	CHECK(cuMemAlloc(&sums, npieces * sizeof(unsigned long long)));
	for (int i = 0; i < npieces; i++)
		cr_fill(&k, pieces[i].ptr, words(&pieces[i]), pieces[i].seed, 0);
	checksum_each(expected);
	printf("cr_hold: %lu MiB in %d allocations\n", mib, npieces);
	printf("ready\n");
	fflush(stdout);

	wait_for_file(argv[3]);
	ok = verify();
	printf("%s\n", ok ? "verified" : "MISMATCH");
	fflush(stdout);
	cr_free(pieces, npieces);
	CHECK(cuMemFree(sums));
	cr_close(&k);
	return ok ? 0 : 1;
}

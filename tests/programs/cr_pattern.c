/*
 * cr_pattern: the application that the checkpoint/restore tests dump and
 * restore with CRIU while it runs.
 *
 *   cr_pattern KERNELS_DIR MIB STEPS [STEP_MS [DIRTY_PERCENT]]
 *
 * Allocates MIB MiB of device memory as pieces of at most 512 MiB (two at
 * least) plus three small allocations (4 KiB to 64 KiB), fills each piece
 * half with a hash and half with a compressible pattern, and builds a
 * linked list of device pointers in its own allocation. Then, for each
 * step: updates every piece in place (only the first DIRTY_PERCENT of
 * each large piece, if given: what an incremental checkpoint or a
 * migration's pre-copy skips), counts the step in the __device__
 * global g_steps, prints a checksum of all pieces and sleeps STEP_MS
 * milliseconds (default 200): the window in which a test checkpoints it.
 * Last it walks the list and reads g_steps back. The output holds no
 * addresses and no timings, so a run that was dumped and restored at any
 * point prints byte for byte what an undisturbed run prints.
 *
 * CR_PINNED=alloc, devicemap or register adds 4 MiB of pinned host memory
 * (cuMemAllocHost, cuMemHostAlloc with DEVICEMAP, or malloc'd pages
 * cuMemHostRegister'd with DEVICEMAP) that every step copies to the
 * device and back, changes on the host and, where mapped, has a kernel
 * change through its device pointer; a checksum of it is printed.
 * CR_PINNED=managed does the same with 4 MiB of managed memory
 * (cuMemAllocManaged), which host and kernels both touch.
 *
 * CR_HOST_MIB=N adds N MiB of host heap, half a hash (incompressible),
 * half a pattern, of which every step rewrites DIRTY_PERCENT (from a
 * moving place); its checksum is printed at the end: the host state of a
 * whole-process move.
 *
 * CR_CHILDREN=N forks N children once CUDA runs, which sleep until the
 * program ends: a process tree as PyTorch's DataLoader makes one.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common.h"
#include "cr_common.h"

#define MAX_PIECE	(512UL << 20)
#define MAX_PIECES	1024
#define LIST_NODES	100000u	/* 2^5 * 5^5: build_list makes one cycle */
#define LIST_HOPS	1000000u

/* Must match struct node of kernels_cr.cu. */
struct node {
	CUdeviceptr next;
	unsigned value;
	unsigned pad;
};

static const size_t small_sizes[] = { 4096, 10000, 65536 };
#define NSMALL (int)(sizeof(small_sizes) / sizeof(small_sizes[0]))

static struct cr_kernels k;
static struct cr_piece pieces[MAX_PIECES + NSMALL];
static int npieces, nbig;
static CUdeviceptr list, sums;

static void print_line(const char *fmt, unsigned long long v)
{
	printf(fmt, v);
	fflush(stdout);
}

static void plan(unsigned long mib)
{
	nbig = cr_plan(pieces, MAX_PIECES, (size_t)mib << 20, MAX_PIECE, 2);
	for (int i = 0; i < NSMALL; i++) {
		pieces[nbig + i].bytes = small_sizes[i];
		pieces[nbig + i].seed = 0x85ebca6bu * (unsigned)(nbig + i + 1);
	}
	npieces = nbig + NSMALL;
}

static unsigned long long words(const struct cr_piece *p)
{
	return p->bytes / sizeof(unsigned);
}

/* First half hash (incompressible), second half a repeating pattern. */
static void fill_all(void)
{
	for (int i = 0; i < npieces; i++) {
		unsigned long long n = words(&pieces[i]), half = n / 2;

		cr_fill(&k, pieces[i].ptr, half, pieces[i].seed, 0);
		cr_fill(&k, pieces[i].ptr + half * sizeof(unsigned), n - half,
			pieces[i].seed | 1, 1);
	}
}

static void build(void)
{
	unsigned n = LIST_NODES;
	void *args[] = { &list, &n };

	CHECK(cuMemAlloc(&list, (size_t)n * sizeof(struct node)));
	CHECK(cuLaunchKernel(k.build, (n + BLOCK - 1) / BLOCK, 1, 1, BLOCK, 1, 1,
			     0, NULL, args, NULL));
}

static void count_step(void)
{
	CHECK(cuLaunchKernel(k.count, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
}

/* One checksum per piece, folded on the host in piece order (FNV-1a). */
static unsigned long long checksum_all(void)
{
	unsigned long long *h = xmalloc(npieces * sizeof(*h));
	unsigned long long fold = 0xcbf29ce484222325ULL;

	CHECK(cuMemsetD8(sums, 0, npieces * sizeof(*h)));
	for (int i = 0; i < npieces; i++)
		cr_checksum(&k, pieces[i].ptr, words(&pieces[i]),
			    sums + i * sizeof(*h));
	CHECK(cuMemcpyDtoH(h, sums, npieces * sizeof(*h)));
	for (int i = 0; i < npieces; i++)
		fold = (fold ^ h[i]) * 0x100000001b3ULL;
	free(h);
	return fold;
}

static unsigned long dirty_percent = 100;

#define PIN_BYTES (4UL << 20)
static unsigned *pin;                  /* CR_PINNED: pinned host memory */
static CUdeviceptr pin_dev, pin_copy;  /* its device pointer (mapped), a device twin */

static void pinned_open(void)
{
	const char *mode = getenv("CR_PINNED");
	unsigned long i;

	if (!mode || !*mode)
		return;
	if (!strcmp(mode, "alloc")) {
		CHECK(cuMemAllocHost((void **)&pin, PIN_BYTES));
	} else if (!strcmp(mode, "devicemap")) {
		CHECK(cuMemHostAlloc((void **)&pin, PIN_BYTES, CU_MEMHOSTALLOC_DEVICEMAP));
	} else if (!strcmp(mode, "managed")) {
		CHECK(cuMemAllocManaged(&pin_dev, PIN_BYTES, CU_MEM_ATTACH_GLOBAL));
		pin = (unsigned *)(uintptr_t)pin_dev;
	} else if (!strcmp(mode, "register")) {
		pin = xmalloc(PIN_BYTES + 4096);
		pin = (unsigned *)(((uintptr_t)pin + 4095) & ~(uintptr_t)4095);
		CHECK(cuMemHostRegister(pin, PIN_BYTES, CU_MEMHOSTREGISTER_DEVICEMAP));
	} else {
		fail("CR_PINNED is alloc, devicemap, register or managed, not '%s'", mode);
	}
	if (strcmp(mode, "alloc") && strcmp(mode, "managed"))
		CHECK(cuMemHostGetDevicePointer(&pin_dev, pin, 0));
	for (i = 0; i < PIN_BYTES / sizeof(unsigned); i++)
		pin[i] = cr_pattern_value(i, 0x27d4eb2fu, 0);
	CHECK(cuMemAlloc(&pin_copy, PIN_BYTES));
}

/* The pinned memory through copies both ways, a kernel where it is
 * mapped, and the host; then its checksum. */
static void pinned_step(unsigned step)
{
	unsigned long long words = PIN_BYTES / sizeof(unsigned), fold = 0xcbf29ce484222325ULL;

	if (!pin)
		return;
	CHECK(cuMemcpyHtoD(pin_copy, pin, PIN_BYTES));
	cr_step(&k, pin_copy, words / 2, step);
	if (pin_dev)
		cr_step(&k, pin_dev + PIN_BYTES / 2, words / 4, step);
	CHECK(cuMemcpyDtoH(pin, pin_copy, PIN_BYTES / 2));
	pin[step % words] ^= step * 0x9e3779b9u;
	for (unsigned long long i = 0; i < words; i++)
		fold = (fold ^ pin[i]) * 0x100000001b3ULL;
	printf("step %u pinned 0x%016llx\n", step, fold);
}

static uint32_t *host;                  /* CR_HOST_MIB: host state */
static unsigned long host_words;

/* CR_CHILDREN=N: N children forked (no exec) once CUDA runs, as
 * DataLoader workers are; they sleep until their parent ends. */
static void children_open(void)
{
	const char *v = getenv("CR_CHILDREN");
	int n = v ? atoi(v) : 0;

	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			fail("fork: %s", strerror(errno));
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			for (;;)
				pause();
		}
	}
}

static void host_open(void)
{
	const char *v = getenv("CR_HOST_MIB");

	if (!v || !*v)
		return;
	host_words = parse_count(v, "CR_HOST_MIB", 1) << 18;
	host = xmalloc(host_words * sizeof(*host));
	for (unsigned long i = 0; i < host_words; i++)
		host[i] = i < host_words / 2 ? cr_pattern_value(i, 0x85ebca6bu, 0) : (uint32_t)(i & 0xffff);
}

/* DIRTY_PERCENT of the host state rewritten, from a place each step moves. */
static void host_step(unsigned step)
{
	unsigned long n = host_words * dirty_percent / 100, at;

	if (!host || !n)
		return;
	at = (unsigned long)step * 7919 * 1024 % host_words;
	for (unsigned long i = 0; i < n; i++)
		host[(at + i) % host_words] += step;
}

static unsigned long long host_checksum(void)
{
	unsigned long long fold = 0xcbf29ce484222325ULL;

	for (unsigned long i = 0; i < host_words; i++)
		fold = (fold ^ host[i]) * 0x100000001b3ULL;
	return fold;
}

static void run_step(unsigned step)
{
	host_step(step);
	for (int i = 0; i < npieces; i++)
		cr_step(&k, pieces[i].ptr, i < nbig ? words(&pieces[i]) * dirty_percent / 100 : words(&pieces[i]), step);
	count_step();
	pinned_step(step);
	CHECK(cuCtxSynchronize());
	printf("step %u checksum 0x%016llx\n", step, checksum_all());
	fflush(stdout);
}

static unsigned long long walk(void)
{
	unsigned hops = LIST_HOPS;
	unsigned long long sum;
	void *args[] = { &list, &hops, &sums };

	CHECK(cuLaunchKernel(k.walk, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
	CHECK(cuMemcpyDtoH(&sum, sums, sizeof(sum)));
	return sum;
}

static unsigned long long global_steps(void)
{
	unsigned long long v;
	CUdeviceptr g;
	size_t size;

	CHECK(cuModuleGetGlobal(&g, &size, k.mod, "g_steps"));
	if (size != sizeof(v))
		fail("g_steps is %zu bytes, want %zu", size, sizeof(v));
	CHECK(cuMemcpyDtoH(&v, g, sizeof(v)));
	return v;
}

int main(int argc, char **argv)
{
	unsigned long mib, steps, step_ms = 200;

	start("cr_pattern");
	if (argc < 4 || argc > 6)
		fail("usage: cr_pattern KERNELS_DIR MIB STEPS [STEP_MS [DIRTY_PERCENT]]");
	mib = parse_count(argv[2], "MIB", 1);
	steps = parse_count(argv[3], "STEPS", 0);
	if (argc >= 5)
		step_ms = parse_count(argv[4], "STEP_MS", 0);
	if (argc == 6 && (dirty_percent = parse_count(argv[5], "DIRTY_PERCENT", 0)) > 100)
		fail("DIRTY_PERCENT is at most 100");

	cr_open(&k, argv[1]);
	plan(mib);
	cr_alloc(pieces, npieces);
	CHECK(cuMemAlloc(&sums, npieces * sizeof(unsigned long long)));
	fill_all();
	build();
	pinned_open();
	host_open();
	children_open();
	CHECK(cuCtxSynchronize());
	printf("cr_pattern: %lu MiB in %d pieces + %d small, list of %u nodes\n",
	       mib, nbig, NSMALL, LIST_NODES);
	fflush(stdout);

	for (unsigned long s = 1; s <= steps; s++) {
		run_step((unsigned)s);
		sleep_ms(step_ms);
	}
	print_line("list sum %llu\n", walk());
	print_line("global steps %llu\n", global_steps());
	if (host)
		print_line("host 0x%016llx\n", host_checksum());

	cr_free(pieces, npieces);
	CHECK(cuMemFree(list));
	CHECK(cuMemFree(sums));
	cr_close(&k);
	printf("done\n");
	fflush(stdout);
	return 0;
}

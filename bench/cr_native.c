/*
 * cr_native: the baseline of the checkpoint benchmark (bench/run-bench-cr.sh).
 * Checkpoints and restores the GPU state of another process that runs on
 * the real driver, with NVIDIA's own checkpoint API:
 *
 *   cr_native PID
 *
 * Lock + checkpoint moves the process's device memory into its host
 * memory and releases the GPU; restore + unlock brings it back. Prints
 *
 *   native-checkpoint-s X     (lock + checkpoint, CLOCK_MONOTONIC)
 *   native-restore-s Y        (restore + unlock)
 *
 * Needs a real driver (r550 or later) and a GPU; links the stub libcuda.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda.h>

static const char *err_name(CUresult r)
{
	const char *s = NULL;

	return cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "unrecognized CUresult";
}

static void check(CUresult r, const char *call, int pid)
{
	if (r == CUDA_SUCCESS)
		return;
	fprintf(stderr, "cr_native: %s(%d) failed: %s\n", call, pid, err_name(r));
	exit(1);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static int parse_pid(const char *arg)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v <= 0 || v > 0x7fffffff) {
		fprintf(stderr, "cr_native: PID must be a positive number, not '%s'\n", arg);
		exit(2);
	}
	return (int)v;
}

static double checkpoint(int pid)
{
	double t0 = now_s();

	check(cuCheckpointProcessLock(pid, NULL), "cuCheckpointProcessLock", pid);
	check(cuCheckpointProcessCheckpoint(pid, NULL), "cuCheckpointProcessCheckpoint", pid);
	return now_s() - t0;
}

static double restore(int pid)
{
	double t0 = now_s();

	check(cuCheckpointProcessRestore(pid, NULL), "cuCheckpointProcessRestore", pid);
	check(cuCheckpointProcessUnlock(pid, NULL), "cuCheckpointProcessUnlock", pid);
	return now_s() - t0;
}

static void expect_state(int pid, CUprocessState want, const char *when)
{
	CUprocessState state;

	check(cuCheckpointProcessGetState(pid, &state), "cuCheckpointProcessGetState", pid);
	if (state != want) {
		fprintf(stderr, "cr_native: process %d is in state %d %s, want %d\n",
			pid, (int)state, when, (int)want);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	double ckpt_s, restore_s;
	int pid;

	if (argc != 2) {
		fprintf(stderr, "usage: cr_native PID\n");
		return 2;
	}
	pid = parse_pid(argv[1]);
	/* The restore needs an initialized driver (or persistence mode). */
	check(cuInit(0), "cuInit", 0);
	expect_state(pid, CU_PROCESS_STATE_RUNNING, "before the checkpoint");
	ckpt_s = checkpoint(pid);
	expect_state(pid, CU_PROCESS_STATE_CHECKPOINTED, "after the checkpoint");
	restore_s = restore(pid);
	expect_state(pid, CU_PROCESS_STATE_RUNNING, "after the restore");
	printf("native-checkpoint-s %.3f\n", ckpt_s);
	printf("native-restore-s %.3f\n", restore_s);
	return 0;
}

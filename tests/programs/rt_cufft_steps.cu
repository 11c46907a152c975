/*
 * rt_cufft_steps.cu: a cuFFT program that works in steps with pauses
 * between them, for checkpoint/restore on a GPU node: one plan made at
 * the start (its kernels found through the driver's function walk) is
 * executed at every step, and each step prints a hash of the result. A
 * run checkpointed and restored mid-way must print what an uninterrupted
 * run prints. Usage: rt_cufft_steps [STEPS [MS]].
 */
#include <cstdlib>
#include <ctime>
#include <cufft.h>
#include "rt_common.h"

static const int N = 4096;

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 10, ms = argc > 2 ? atoi(argv[2]) : 150;
	static cufftComplex h[N];
	cufftComplex *din, *dout;
	cufftHandle plan;

	CHECK_RT(cudaMalloc(&din, sizeof(h)));
	CHECK_RT(cudaMalloc(&dout, sizeof(h)));
	if (failures || cufftPlan1d(&plan, N, CUFFT_C2C, 1) != CUFFT_SUCCESS) {
		printf("setup failed\n");
		return 1;
	}
	for (int step = 1; step <= steps; step++) {
		for (int i = 0; i < N; i++)
			h[i] = make_cuComplex((float)((i * step) % 17) - 8.0f, (float)(i % 5));
		CHECK_RT(cudaMemcpy(din, h, sizeof(h), cudaMemcpyHostToDevice));
		if (cufftExecC2C(plan, din, dout, CUFFT_FORWARD) != CUFFT_SUCCESS) {
			printf("step %d: cufftExecC2C failed\n", step);
			return 1;
		}
		CHECK_RT(cudaMemcpy(h, dout, sizeof(h), cudaMemcpyDeviceToHost));
		printf("step %d hash %016llx\n", step, fnv(h, sizeof(h)));
		fflush(stdout);
		struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
		while (nanosleep(&t, &t))
			;
	}
	cufftDestroy(plan);
	if (failures)
		return 1;
	printf("done\n");
	return 0;
}

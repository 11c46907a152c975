/*
 * system.c: NVML's system queries (driver, NVML and CUDA versions), as
 * the server's NVML, or its driver, answers them.
 */
#include "nvml-lib.h"

static nvmlReturn_t system_text(unsigned func, char *buf, unsigned length)
{
	struct nvml_answer a;
	nvmlReturn_t ret = nvml_ready();

	if (ret)
		return ret;
	if (!buf)
		return NVML_ERROR_INVALID_ARGUMENT;
	if ((ret = nvml_ask(func, 0, 0, NULL, &a)))
		return ret;
	return nvml_text_out(&a, buf, length);
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	return system_text(NVMLF_DRIVER_VERSION, version, length);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
	return system_text(NVMLF_NVML_VERSION, version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
	struct nvml_answer a;
	nvmlReturn_t ret = nvml_ready();

	if (ret)
		return ret;
	if (!cudaDriverVersion)
		return NVML_ERROR_INVALID_ARGUMENT;
	if ((ret = nvml_ask(NVMLF_CUDA_DRIVER_VERSION, 0, 0, NULL, &a)))
		return ret;
	if (a.nv < 1)
		return NVML_ERROR_UNKNOWN;
	*cudaDriverVersion = (int)a.v[0];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
	return nvmlSystemGetCudaDriverVersion_v2(cudaDriverVersion);
}

/*
 * nvml_bridge.c: the one entry point Cicada's NVML replacement
 * (libnvidia-ml.so.1, nvml/) calls. The replacement has no connection of
 * its own; its queries travel on this process's session, so a program
 * that uses both CUDA and NVML has one worker on the server.
 */
#include "interposer.h"
#include "nvml-wire.h"

int cicada_nvml_query(const struct nvml_args *a, struct nvml_res *r)
{
	if (!a || !r || !r->v.v_val || !r->data.data_val)
		return CUDA_ERROR_INVALID_VALUE;
	r->v.v_len = 0;
	r->data.data_len = 0;
	return rpc_nvml_query((void *)a, r);
}

/*
 * attributes.c: the attribute and limit calls that libraries make around
 * every launch, answered here when the answer is known. cuBLASLt sets a
 * kernel's dynamic shared memory before most GEMMs, and PyTorch does the
 * same for its attention kernels: setting the value the kernel already
 * has is a no-op for the driver, so it is one here too, with no round
 * trip (answers.c keeps what each set gave). Context limits are kept
 * until a cuCtxSetLimit, but the stack size, which a launch may grow, is
 * always asked.
 */
#include "interposer.h"

CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev)
{
	uint64_t key[3] = { (uint64_t)attrib, (uint64_t)(uintptr_t)kernel, (uint64_t)dev };
	CUresult err;

	if (answers_setting_is(P_cuKernelSetAttribute, SETTING_KERNEL, key, 3, (uint64_t)val))
		return CUDA_SUCCESS;
	err = rpc_cuKernelSetAttribute(attrib, val, kernel, dev);
	if (!err)
		answers_setting_keep(P_cuKernelSetAttribute, SETTING_KERNEL, key, 3, (uint64_t)val);
	return err;
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
	uint64_t key[2] = { (uint64_t)(uintptr_t)hfunc, (uint64_t)attrib };
	CUresult err;

	if (answers_setting_is(P_cuFuncSetAttribute, SETTING_FUNC, key, 2, (uint64_t)value))
		return CUDA_SUCCESS;
	err = rpc_cuFuncSetAttribute(hfunc, attrib, value);
	if (!err)
		answers_setting_keep(P_cuFuncSetAttribute, SETTING_FUNC, key, 2, (uint64_t)value);
	return err;
}

CUresult CUDAAPI cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
	uint64_t in = (uint64_t)limit, out;
	CUresult err;

	if (!pvalue)
		return CUDA_ERROR_INVALID_VALUE;
	if (limit == CU_LIMIT_STACK_SIZE)
		return rpc_cuCtxGetLimit(pvalue, limit);
	err = client_cached_call(P_cuCtxGetLimit, &in, 1, &out, 1);
	if (!err)
		*pvalue = (size_t)out;
	return err;
}

/*
 *absent.c: driver functions the gpu-server calls that the CPU stand-in
 *does not model (interprocess events, cache configuration, kernel and function
 *enumeration, clusters). Each fails cleanly, as a driver without the
 *feature would, so a worker never dies of a missing symbol.
 */
#include "fakecuda.h"

CUresult CUDAAPI cuCtxGetCacheConfig(CUfunc_cache *pconfig)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult CUDAAPI cuCtxSetCacheConfig(CUfunc_cache config)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult CUDAAPI cuCtxSetFlags(unsigned int flags)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult CUDAAPI cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult CUDAAPI cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels, CUlibrary lib)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult CUDAAPI cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult CUDAAPI cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions, CUmodule mod)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult CUDAAPI cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult CUDAAPI cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func, const CUlaunchConfig *config)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult CUDAAPI cuOccupancyMaxPotentialClusterSize(int *clusterSize, CUfunction func, const CUlaunchConfig *config)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}



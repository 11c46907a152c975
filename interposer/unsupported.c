/*
 * unsupported.c: driver functions Cicada does not offer, exported anyway.
 * cuBLAS and cuBLASLt dlsym about ninety driver functions by name from
 * libcuda.so.1 and fail to initialise (CUBLAS_STATUS_INTERNAL_ERROR) if
 * any one is missing (EXPORT-TABLES.md 4.8), though a plain GEMM calls few
 * of them. These fail cleanly instead: graph nodes,
 * batched stream memory operations. Some names are
 * the old ABI that cuda.h now maps to a _v2; their prototypes are here.
 */
#include "interposer.h"

#undef cuGraphKernelNodeGetParams
#undef cuGraphExecKernelNodeSetParams
#undef cuStreamBatchMemOp
#undef cuStreamWaitValue32

static CUresult unsupported(const char *name)
{
	log_missing_once("driver function", name, 1);
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* --- graphs built node by node (graph.c serves stream capture) --- */
CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	return unsupported("cuGraphKernelNodeGetParams");
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
						const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
						const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	return unsupported("cuGraphExecKernelNodeSetParams");
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
	return unsupported("cuGraphNodeGetType");
}

/* --- stream memory operations (the old ABI; the driver may refuse it too) --- */
CUresult CUDAAPI cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags);
CUresult CUDAAPI cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
	return unsupported("cuStreamWaitValue32");
}

CUresult CUDAAPI cuStreamBatchMemOp(CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray,
				    unsigned int flags);
CUresult CUDAAPI cuStreamBatchMemOp(CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray,
				    unsigned int flags)
{
	return unsupported("cuStreamBatchMemOp");
}


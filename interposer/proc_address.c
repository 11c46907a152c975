/*
 * proc_address.c: cuGetProcAddress. The runtime asks for a base name at
 * the CUDA version it was built for; the answer is the ABI variant that
 * was current then (cuMemAlloc at 3020 is cuMemAlloc_v2; cuCtxSynchronize
 * at 13000 is cuCtxSynchronize_v2, which takes a context) and, for the
 * per-thread default stream, its _ptds/_ptsz form. A variant we do not
 * export is reported missing, never replaced by another ABI. The answer
 * is the exported function, which reports its failures (trace.c).
 */
#include <execinfo.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "interposer.h"

struct variant {
	const char *name;                    /* without "cu" */
	int since;                           /* CUDA version that introduced it */
	const char *suffix;
};

/* From cuda.h's version macros (EXPORT-TABLES.md section 5). */
static const struct variant variants[] = {
	{ "Array3DCreate", 3020, "_v2" }, { "Array3DGetDescriptor", 3020, "_v2" },
	{ "ArrayCreate", 3020, "_v2" }, { "ArrayGetDescriptor", 3020, "_v2" },
	{ "CtxCreate", 3020, "_v2" }, { "CtxCreate", 11040, "_v3" }, { "CtxCreate", 12050, "_v4" },
	{ "CtxDestroy", 4000, "_v2" }, { "CtxGetDevice", 13000, "_v2" },
	{ "CtxPopCurrent", 4000, "_v2" }, { "CtxPushCurrent", 4000, "_v2" },
	{ "CtxSynchronize", 13000, "_v2" }, { "DevicePrimaryCtxRelease", 11000, "_v2" },
	{ "DevicePrimaryCtxReset", 11000, "_v2" }, { "DevicePrimaryCtxSetFlags", 11000, "_v2" },
	{ "DeviceTotalMem", 3020, "_v2" }, { "DeviceGetUuid", 11040, "_v2" },
	{ "EventDestroy", 4000, "_v2" }, { "EventElapsedTime", 12080, "_v2" },
	{ "GetProcAddress", 12000, "_v2" }, { "GraphAddKernelNode", 12000, "_v2" },
	{ "GraphExecKernelNodeSetParams", 12000, "_v2" }, { "GraphExecUpdate", 12000, "_v2" },
	{ "GraphInstantiate", 11000, "_v2" }, { "GraphKernelNodeGetParams", 12000, "_v2" },
	{ "GraphKernelNodeSetParams", 12000, "_v2" }, { "GraphAddNode", 12030, "_v2" },
	{ "GraphGetEdges", 12030, "_v2" }, { "GraphNodeGetDependencies", 12030, "_v2" },
	{ "GraphNodeGetDependentNodes", 12030, "_v2" }, { "GraphAddDependencies", 12030, "_v2" },
	{ "GraphRemoveDependencies", 12030, "_v2" }, { "IpcOpenMemHandle", 11000, "_v2" },
	{ "MemAdvise", 12020, "_v2" }, { "MemAlloc", 3020, "_v2" }, { "MemAllocHost", 3020, "_v2" },
	{ "MemAllocPitch", 3020, "_v2" }, { "MemFree", 3020, "_v2" }, { "MemGetAddressRange", 3020, "_v2" },
	{ "MemGetInfo", 3020, "_v2" }, { "MemHostGetDevicePointer", 3020, "_v2" },
	{ "MemHostRegister", 6050, "_v2" }, { "MemPrefetchAsync", 12020, "_v2" },
	{ "Memcpy2D", 3020, "_v2" }, { "Memcpy2DAsync", 3020, "_v2" }, { "Memcpy2DUnaligned", 3020, "_v2" },
	{ "Memcpy3D", 3020, "_v2" }, { "Memcpy3DAsync", 3020, "_v2" }, { "MemcpyBatchAsync", 13000, "_v2" },
	{ "Memcpy3DBatchAsync", 13000, "_v2" }, { "MemcpyDtoD", 3020, "_v2" }, { "MemcpyDtoDAsync", 3020, "_v2" },
	{ "MemcpyDtoH", 3020, "_v2" }, { "MemcpyDtoHAsync", 3020, "_v2" }, { "MemcpyHtoD", 3020, "_v2" },
	{ "MemcpyHtoDAsync", 3020, "_v2" }, { "MemsetD16", 3020, "_v2" }, { "MemsetD2D16", 3020, "_v2" },
	{ "MemsetD2D32", 3020, "_v2" }, { "MemsetD2D8", 3020, "_v2" }, { "MemsetD32", 3020, "_v2" },
	{ "MemsetD8", 3020, "_v2" }, { "ModuleGetGlobal", 3020, "_v2" },
	{ "StreamBeginCapture", 10010, "_v2" }, { "StreamDestroy", 4000, "_v2" },
	{ "StreamGetCaptureInfo", 11030, "_v2" }, { "StreamGetCaptureInfo", 12030, "_v3" },
	{ "StreamUpdateCaptureDependencies", 12030, "_v2" },
	{ "LinkCreate", 6050, "_v2" }, { "LinkAddData", 6050, "_v2" }, { "LinkAddFile", 6050, "_v2" },
	{ "MemcpyAtoA", 3020, "_v2" }, { "MemcpyAtoD", 3020, "_v2" }, { "MemcpyAtoH", 3020, "_v2" },
	{ "MemcpyDtoA", 3020, "_v2" }, { "MemcpyHtoA", 3020, "_v2" }, { "TexRefGetAddress", 3020, "_v2" },
	{ "TexRefSetAddress", 3020, "_v2" }, { "TexRefSetAddress2D", 3020, "_v2" },
	{ "TexRefSetAddress2D", 4010, "_v3" }, { "GraphicsResourceGetMappedPointer", 3020, "_v2" },
	{ "GraphicsResourceSetMapFlags", 6050, "_v2" },
	{ "MemcpyHtoAAsync", 3020, "_v2" }, { "MemcpyAtoHAsync", 3020, "_v2" }, { "StreamGetCtx", 12050, "_v2" },
	{ "StreamBatchMemOp", 11070, "_v2" }, { "StreamWaitValue32", 11070, "_v2" },
	{ "StreamWaitValue64", 11070, "_v2" }, { "StreamWriteValue32", 11070, "_v2" },
	{ "StreamWriteValue64", 11070, "_v2" },
};

/* The suffix of name's ABI at version ("" for the first one). */
static const char *suffix_at(const char *name, int version)
{
	const char *best = "";
	int best_since = 0;

	if (strncmp(name, "cu", 2))
		return "";
	for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++)
		if (!strcmp(variants[i].name, name + 2) && variants[i].since <= version &&
		    variants[i].since > best_since) {
			best = variants[i].suffix;
			best_since = variants[i].since;
		}
	return best;
}

static void *find_symbol(const char *name, int version, cuuint64_t flags)
{
	char base[256], buf[272];
	void *p;

	if (strlen(name) > 200)
		return NULL;
	snprintf(base, sizeof(base), "%s%s", name, suffix_at(name, version));
	if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
		snprintf(buf, sizeof(buf), "%s_ptds", base);
		if ((p = dlsym(interposer_self(), buf)))
			return p;
		snprintf(buf, sizeof(buf), "%s_ptsz", base);
		if ((p = dlsym(interposer_self(), buf)))
			return p;
	}
	return dlsym(interposer_self(), base);
}

/* Unknown names succeed with no function (the runtime then uses a stub
 * of its own that fails cleanly if ever called). */
CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
				     CUdriverProcAddressQueryResult *symbolStatus)
{
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = symbol[0] ? find_symbol(symbol, cudaVersion, flags) : NULL;
	if (symbolStatus)
		*symbolStatus = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	if (!*pfn && symbol[0])
		log_missing_once("driver function", symbol, 0);
	return CUDA_SUCCESS;
}

#undef cuGetProcAddress
CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

/* The file name of the first caller outside this library ("?" if none
 * is found): which library asked for what is missing. */
static const char *asker(void)
{
	void *frames[16];
	int n = backtrace(frames, 16);
	Dl_info self, info;

	if (!dladdr((void *)asker, &self))
		return "?";
	for (int i = 1; i < n; i++)
		if (dladdr(frames[i], &info) && info.dli_fname && info.dli_fbase != self.dli_fbase) {
			const char *slash = strrchr(info.dli_fname, '/');

			return slash ? slash + 1 : info.dli_fname;
		}
	return "?";
}

CUresult CUDAAPI cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
	const unsigned char *b;
	char id[80];

	if (!ppExportTable || !pExportTableId)
		return CUDA_ERROR_INVALID_VALUE;
	if ((*ppExportTable = export_table_find(pExportTableId)))
		return CUDA_SUCCESS;
	b = (const unsigned char *)pExportTableId->bytes;
	snprintf(id, sizeof(id), "{%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x}",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
	snprintf(id + strlen(id), sizeof(id) - strlen(id), " (asked by %.32s)", asker());
	log_missing_once("export table", id, 1);
	return CUDA_ERROR_NOT_SUPPORTED;
}

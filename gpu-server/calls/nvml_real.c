/*
 * nvml_real.c: NVML queries answered by the server's own NVML, which the
 * worker loads on the first query (dlopen, so a server without NVML
 * still runs). It refuses Cicada's replacement, which a library path
 * could make it find first (the replacement exports a marker), and then
 * looks beside the driver's libcuda.so.1 and in the usual folders. Each function is looked up by name
 * when asked, so an older NVML lacking one answers
 * NVML_ERROR_NOT_SUPPORTED for it alone.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "calls.h"
#include "nvml-wire.h"

static void *lib;

static const char *const places[] = {
	"libnvidia-ml.so.1",
	"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
	"/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1",
	"/usr/lib64/libnvidia-ml.so.1",
	"/usr/lib/wsl/lib/libnvidia-ml.so.1",
};

/* The function NAME of the loaded NVML, typed by its prototype. */
#define SYM(name) ((__typeof__(name) *)dlsym(lib, #name))
#define CALL(name, ...) (SYM(name) ? SYM(name)(__VA_ARGS__) : NVML_ERROR_NOT_SUPPORTED)

/* 1: place is NVML, loaded and initialised; 0: not there or not NVML;
 * -1: NVML that failed to start. */
static int try_place(const char *place, char *why, size_t len)
{
	nvmlReturn_t (*init)(void);
	void *h = dlopen(place, RTLD_NOW | RTLD_LOCAL);
	int ret;

	if (!h)
		return 0;
	if (dlsym(h, NVML_MARKER_SYMBOL)) {
		log_warn("%s is Cicada's NVML replacement, not NVML; not using it", place);
		snprintf(why, len, "only Cicada's own libnvidia-ml.so.1 was found");
		dlclose(h);
		return 0;
	}
	init = (nvmlReturn_t (*)(void))dlsym(h, "nvmlInit_v2");
	if (!init || (ret = init()) != NVML_SUCCESS) {
		snprintf(why, len, "nvmlInit_v2 of %s failed (%d)", place, init ? ret : -1);
		dlclose(h);
		return -1;
	}
	lib = h;
	return 1;
}

/* NVML by name (the library path decides), else where the driver is
 * installed: beside the libcuda.so.1 this worker runs on, then the usual
 * folders. */
int nvml_real_open(char *why, size_t len)
{
	char beside[4096];
	Dl_info info;
	int rc;

	snprintf(why, len, "no libnvidia-ml.so.1");
	if ((rc = try_place(places[0], why, len)))
		return rc > 0 ? 0 : -1;
	if (dladdr((void *)cuInit, &info) && info.dli_fname && strrchr(info.dli_fname, '/')) {
		snprintf(beside, sizeof(beside), "%.*s/libnvidia-ml.so.1",
			 (int)(strrchr(info.dli_fname, '/') - info.dli_fname), info.dli_fname);
		if ((rc = try_place(beside, why, len)))
			return rc > 0 ? 0 : -1;
	}
	for (size_t i = 1; i < sizeof(places) / sizeof(places[0]); i++)
		if ((rc = try_place(places[i], why, len)))
			return rc > 0 ? 0 : -1;
	return -1;
}

int nvml_real_count(unsigned *count)
{
	return CALL(nvmlDeviceGetCount_v2, count);
}

static void put_pci(struct nvml_reply *r, const nvmlPciInfo_t *p)
{
	char bus[sizeof(p->busId) + 1], old[sizeof(p->busIdLegacy) + 1];

	snprintf(bus, sizeof(bus), "%.*s", (int)sizeof(p->busId), p->busId);
	snprintf(old, sizeof(old), "%.*s", (int)sizeof(p->busIdLegacy), p->busIdLegacy);
	nvml_put(r, p->domain);
	nvml_put(r, p->bus);
	nvml_put(r, p->device);
	nvml_put(r, p->pciDeviceId);
	nvml_put(r, p->pciSubSystemId);
	nvml_put_text(r, bus);
	nvml_put_text(r, old);
}

/* The index of the device a UUID or PCI bus id names. */
static int lookup(unsigned func, const char *text, struct nvml_reply *r)
{
	nvmlDevice_t dev;
	unsigned index;
	int ret = func == NVMLF_BY_UUID ? CALL(nvmlDeviceGetHandleByUUID, text, &dev) :
		  CALL(nvmlDeviceGetHandleByPciBusId_v2, text, &dev);

	if (ret || (ret = CALL(nvmlDeviceGetIndex, dev, &index)))
		return ret;
	nvml_put(r, index);
	return NVML_SUCCESS;
}

/* NVML's index of the GPU at a PCI address (the driver's form). */
int nvml_real_index_by_pci(const char *bus, unsigned *index)
{
	nvmlDevice_t dev;
	int ret = CALL(nvmlDeviceGetHandleByPciBusId_v2, bus, &dev);

	if (!ret)
		ret = CALL(nvmlDeviceGetIndex, dev, index);
	return ret;
}

/* Each version as NVML itself answers it (they count memory differently). */
static int memory(const struct worker *w, nvmlDevice_t dev, int v2, struct nvml_reply *r)
{
	nvmlMemory_v2_t m2 = { .version = nvmlMemory_v2 };
	nvmlMemory_t m;
	uint64_t t, f, u;
	int ret;

	if (!v2) {
		if ((ret = CALL(nvmlDeviceGetMemoryInfo, dev, &m)))
			return ret;
		t = m.total, f = m.free, u = m.used;
		quota_nvml(w, &t, &f, &u);
		nvml_put(r, t);
		nvml_put(r, f);
		nvml_put(r, u);
		return NVML_SUCCESS;
	}
	if ((ret = CALL(nvmlDeviceGetMemoryInfo_v2, dev, &m2)))
		return ret;
	t = m2.total, f = m2.free, u = m2.used;
	quota_nvml(w, &t, &f, &u);
	nvml_put(r, t);
	nvml_put(r, m2.reserved);
	nvml_put(r, f);
	nvml_put(r, u);
	return NVML_SUCCESS;
}

/* The server's view; this session's worker is shown as the client. */
static int processes(struct worker *w, nvmlDevice_t dev, struct nvml_reply *r)
{
	nvmlProcessInfo_t p[NVML_PROC_MAX];
	unsigned n = NVML_PROC_MAX;
	unsigned char *rec;
	int ret = CALL(nvmlDeviceGetComputeRunningProcesses_v3, dev, &n, p);

	if (ret == NVML_ERROR_INSUFFICIENT_SIZE) {
		log_debug("client %s: %u processes on the GPU; NVML shows none of them", w->peer, n);
		nvml_put(r, n);
		return NVML_SUCCESS;
	}
	if (ret)
		return ret;
	nvml_put(r, n);
	for (unsigned i = 0; i < n && i < NVML_PROC_MAX; i++) {
		rec = (unsigned char *)r->data + i * NVML_PROC_RECORD;
		wire_put_be64(rec,
			      p[i].pid == (unsigned)getpid() && w->calls->client_pid ? w->calls->client_pid : p[i].pid);
		wire_put_be64(rec + 8, p[i].usedGpuMemory);
		wire_put_be64(rec + 16, p[i].gpuInstanceId);
		wire_put_be64(rec + 24, p[i].computeInstanceId);
		r->ndata += NVML_PROC_RECORD;
	}
	return NVML_SUCCESS;
}

static int system_answer(unsigned func, struct nvml_reply *r)
{
	char text[256];
	int v = 0, ret;

	switch (func) {
	case NVMLF_DRIVER_VERSION:
		if ((ret = CALL(nvmlSystemGetDriverVersion, text, sizeof(text))))
			return ret;
		nvml_put_text(r, text);
		return NVML_SUCCESS;
	case NVMLF_NVML_VERSION:
		if ((ret = CALL(nvmlSystemGetNVMLVersion, text, sizeof(text))))
			return ret;
		nvml_put_text(r, text);
		return NVML_SUCCESS;
	case NVMLF_CUDA_DRIVER_VERSION:
		ret = SYM(nvmlSystemGetCudaDriverVersion_v2) ? CALL(nvmlSystemGetCudaDriverVersion_v2, &v) :
		      CALL(nvmlSystemGetCudaDriverVersion, &v);
		if (ret)
			return ret;
		nvml_put(r, (uint64_t)v);
		return NVML_SUCCESS;
	default:
		return NVML_ERROR_NOT_SUPPORTED;
	}
}

static int text_answer(int ret, const char *text, struct nvml_reply *r)
{
	if (ret == NVML_SUCCESS)
		nvml_put_text(r, text);
	return ret;
}

/* Queries whose answers are one or two unsigned values (NVML's enums
 * among them); each call completes before its outputs are read. */
static int scalar_answer(nvmlDevice_t dev, unsigned func, unsigned arg, struct nvml_reply *r)
{
	unsigned u[2] = { 0, 0 }, n = 1;
	nvmlUtilization_t util;
	int ret;

	switch (func) {
	case NVMLF_MINOR_NUMBER:
		ret = CALL(nvmlDeviceGetMinorNumber, dev, &u[0]);
		break;
	case NVMLF_COMPUTE_CAPABILITY:
		ret = CALL(nvmlDeviceGetCudaComputeCapability, dev, (int *)&u[0], (int *)&u[1]);
		n = 2;
		break;
	case NVMLF_ARCHITECTURE:
		ret = CALL(nvmlDeviceGetArchitecture, dev, &u[0]);
		break;
	case NVMLF_BRAND:
		ret = CALL(nvmlDeviceGetBrand, dev, (nvmlBrandType_t *)&u[0]);
		break;
	case NVMLF_PERSISTENCE_MODE:
		ret = CALL(nvmlDeviceGetPersistenceMode, dev, (nvmlEnableState_t *)&u[0]);
		break;
	case NVMLF_COMPUTE_MODE:
		ret = CALL(nvmlDeviceGetComputeMode, dev, (nvmlComputeMode_t *)&u[0]);
		break;
	case NVMLF_MIG_MODE:
		ret = CALL(nvmlDeviceGetMigMode, dev, &u[0], &u[1]);
		n = 2;
		break;
	case NVMLF_NUM_GPU_CORES:
		ret = CALL(nvmlDeviceGetNumGpuCores, dev, &u[0]);
		break;
	case NVMLF_UTILIZATION:
		ret = CALL(nvmlDeviceGetUtilizationRates, dev, &util);
		u[0] = util.gpu, u[1] = util.memory, n = 2;
		break;
	case NVMLF_TEMPERATURE:
		ret = CALL(nvmlDeviceGetTemperature, dev, (nvmlTemperatureSensors_t)arg, &u[0]);
		break;
	case NVMLF_POWER_USAGE:
		ret = CALL(nvmlDeviceGetPowerUsage, dev, &u[0]);
		break;
	case NVMLF_ENFORCED_POWER_LIMIT:
		ret = CALL(nvmlDeviceGetEnforcedPowerLimit, dev, &u[0]);
		break;
	case NVMLF_CLOCK:
		ret = CALL(nvmlDeviceGetClockInfo, dev, (nvmlClockType_t)arg, &u[0]);
		break;
	case NVMLF_MAX_CLOCK:
		ret = CALL(nvmlDeviceGetMaxClockInfo, dev, (nvmlClockType_t)arg, &u[0]);
		break;
	case NVMLF_NVLINK_STATE:
		ret = CALL(nvmlDeviceGetNvLinkState, dev, arg, (nvmlEnableState_t *)&u[0]);
		break;
	case NVMLF_NVLINK_REMOTE_TYPE:
		ret = CALL(nvmlDeviceGetNvLinkRemoteDeviceType, dev, arg, (nvmlIntNvLinkDeviceType_t *)&u[0]);
		break;
	case NVMLF_NVLINK_CAPABILITY:
		ret = CALL(nvmlDeviceGetNvLinkCapability, dev, arg & 0xffff, (nvmlNvLinkCapability_t)(arg >> 16), &u[0]);
		break;
	default:
		return NVML_ERROR_NOT_SUPPORTED;
	}
	for (unsigned i = 0; i < n && ret == NVML_SUCCESS; i++)
		nvml_put(r, u[i]);
	return ret;
}

/* arg: the other GPU's NVML index | the capability asked << 16. */
static int p2p_status(nvmlDevice_t dev, unsigned arg, struct nvml_reply *r)
{
	nvmlGpuP2PStatus_t status = NVML_P2P_STATUS_UNKNOWN;
	nvmlDevice_t other;
	int ret;

	if ((ret = CALL(nvmlDeviceGetHandleByIndex_v2, arg & 0xffff, &other)) ||
	    (ret = CALL(nvmlDeviceGetP2PStatus, dev, other, (nvmlGpuP2PCapsIndex_t)(arg >> 16), &status)))
		return ret;
	nvml_put(r, (uint64_t)status);
	return NVML_SUCCESS;
}

/* NVML answers only for MIG devices' handles: a whole GPU's is
 * NVML_ERROR_NOT_SUPPORTED, as natively. */
static int attributes(nvmlDevice_t dev, struct nvml_reply *r)
{
	nvmlDeviceAttributes_t at;
	int ret = CALL(nvmlDeviceGetAttributes_v2, dev, &at);

	if (ret)
		return ret;
	nvml_put(r, at.multiprocessorCount);
	nvml_put(r, at.sharedCopyEngineCount);
	nvml_put(r, at.sharedDecoderCount);
	nvml_put(r, at.sharedEncoderCount);
	nvml_put(r, at.sharedJpegCount);
	nvml_put(r, at.sharedOfaCount);
	nvml_put(r, at.gpuInstanceSliceCount | (uint64_t)at.computeInstanceSliceCount << 32);
	nvml_put(r, at.memorySizeMB);
	return NVML_SUCCESS;
}

/* arg: field id | scope id << 16. */
static int field_value(nvmlDevice_t dev, unsigned arg, struct nvml_reply *r)
{
	nvmlFieldValue_t f = { .fieldId = arg & 0xffff, .scopeId = arg >> 16 };
	int ret;

	if ((ret = CALL(nvmlDeviceGetFieldValues, dev, 1, &f)))
		return ret;
	nvml_put(r, (uint64_t)f.valueType);
	nvml_put(r, (uint64_t)f.nvmlReturn);
	nvml_put(r, f.value.ullVal);
	nvml_put(r, (uint64_t)f.timestamp);
	nvml_put(r, (uint64_t)f.latencyUsec);
	return NVML_SUCCESS;
}

int nvml_real_answer(struct worker *w, const nvml_args *a, struct nvml_reply *r)
{
	unsigned arg = (unsigned)a->arg;
	char text[256] = "";
	nvmlDevice_t dev;
	nvmlPciInfo_t pci;
	nvmlBAR1Memory_t bar1;
	int ret;

	if (a->func < NVMLF_FIRST_DEVICE) {
		if (a->func == NVMLF_BY_UUID || a->func == NVMLF_BY_PCI_BUS_ID)
			return lookup(a->func, a->text, r);
		return system_answer(a->func, r);
	}
	if ((ret = CALL(nvmlDeviceGetHandleByIndex_v2, a->device, &dev)))
		return ret;
	switch (a->func) {
	case NVMLF_NAME:
		return text_answer(CALL(nvmlDeviceGetName, dev, text, sizeof(text)), text, r);
	case NVMLF_UUID:
		return text_answer(CALL(nvmlDeviceGetUUID, dev, text, sizeof(text)), text, r);
	case NVMLF_SERIAL:
		return text_answer(CALL(nvmlDeviceGetSerial, dev, text, sizeof(text)), text, r);
	case NVMLF_PCI_INFO:
	case NVMLF_NVLINK_REMOTE_PCI:
		ret = a->func == NVMLF_PCI_INFO ? CALL(nvmlDeviceGetPciInfo_v3, dev, &pci) :
		      CALL(nvmlDeviceGetNvLinkRemotePciInfo_v2, dev, arg, &pci);
		if (ret == NVML_SUCCESS)
			put_pci(r, &pci);
		return ret;
	case NVMLF_MEMORY:
	case NVMLF_MEMORY_V2:
		return memory(w, dev, a->func == NVMLF_MEMORY_V2, r);
	case NVMLF_BAR1_MEMORY:
		if ((ret = CALL(nvmlDeviceGetBAR1MemoryInfo, dev, &bar1)))
			return ret;
		nvml_put(r, bar1.bar1Total);
		nvml_put(r, bar1.bar1Free);
		nvml_put(r, bar1.bar1Used);
		return NVML_SUCCESS;
	case NVMLF_PROCESSES:
		return processes(w, dev, r);
	case NVMLF_P2P_STATUS:
		return p2p_status(dev, arg, r);
	case NVMLF_FIELD_VALUE:
		return field_value(dev, arg, r);
	case NVMLF_ATTRIBUTES:
		return attributes(dev, r);
	default:
		return scalar_answer(dev, a->func, arg, r);
	}
}

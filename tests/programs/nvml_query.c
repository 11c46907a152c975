/*
 * nvml_query: NVML as a monitoring tool or a framework uses it. It
 * dlopens "libnvidia-ml.so.1" (the real NVML natively, Cicada's
 * replacement through Cicada), so it needs no NVML to build.
 *
 * Stable facts are printed with their values (count, name, UUID, PCI
 * identity, total memory, compute capability, versions, peak clocks,
 * peer status between GPUs, NVLink count): a
 * run through Cicada must print what a native run on the server's GPU
 * prints. Volatile values (memory in use, temperature, power, clocks,
 * utilization, processes) are checked for plausibility and printed as ok
 * or FAIL with whether the GPU supports them, never with their values.
 * Error paths (before init, a bad index, an unknown UUID, a short buffer,
 * after shutdown) are checked the same way. Exits non-zero if any check
 * fails; prints "done" last when all passed.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nvml-wire.h"

static void *lib;
static int failures;

static void *need(const char *name)
{
	void *p = dlsym(lib, name);

	if (!p) {
		printf("%s: missing: FAIL\n", name);
		exit(1);
	}
	return p;
}

/* NVML function NAME, typed by its prototype. */
#define F(name) ((__typeof__(name) *)need(#name))

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(": %s\n", ok ? "ok" : "FAIL");
	failures += !ok;
}

/* A volatile value: supported and plausible, or not supported. */
static void volatile_check(unsigned dev, const char *what, nvmlReturn_t ret, int plausible)
{
	int ok = ret == NVML_ERROR_NOT_SUPPORTED || (ret == NVML_SUCCESS && plausible);

	printf("device %u %s: %s (", dev, what, ok ? "ok" : "FAIL");
	if (ret == NVML_SUCCESS || ret == NVML_ERROR_NOT_SUPPORTED)
		printf("%s)\n", ret == NVML_SUCCESS ? "supported" : "not supported");
	else
		printf("error %d)\n", (int)ret);
	failures += !ok;
}

static void text_fact(const char *what, nvmlReturn_t ret, const char *text)
{
	if (ret == NVML_SUCCESS)
		printf("%s = %s\n", what, text);
	else
		check(ret == NVML_ERROR_NOT_SUPPORTED, "%s not supported", what);
}

static void identity(unsigned i, nvmlDevice_t dev)
{
	char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], tiny[1];
	nvmlDevice_t other;
	nvmlPciInfo_t pci;
	nvmlMemory_t mem;
	unsigned index = 99, arch = 0, mode = 0, mhz = 0;
	int major = 0, minor = 0;

	check(F(nvmlDeviceGetName)(dev, name, sizeof(name)) == NVML_SUCCESS, "device %u name", i);
	printf("device %u name = %s\n", i, name);
	check(F(nvmlDeviceGetName)(dev, tiny, sizeof(tiny)) == NVML_ERROR_INSUFFICIENT_SIZE,
	      "device %u name into a 1-byte buffer: insufficient size", i);
	check(F(nvmlDeviceGetUUID)(dev, uuid, sizeof(uuid)) == NVML_SUCCESS, "device %u uuid", i);
	printf("device %u uuid = %s\n", i, uuid);
	check(F(nvmlDeviceGetPciInfo_v3)(dev, &pci) == NVML_SUCCESS, "device %u pci info", i);
	printf("device %u pci bus id = %s (legacy %s)\n", i, pci.busId, pci.busIdLegacy);
	printf("device %u pci domain %x bus %x device %x ids %08x %08x\n", i, pci.domain, pci.bus, pci.device,
	       pci.pciDeviceId, pci.pciSubSystemId);
	check(F(nvmlDeviceGetMemoryInfo)(dev, &mem) == NVML_SUCCESS, "device %u memory", i);
	printf("device %u total memory = %llu\n", i, mem.total);
	check(F(nvmlDeviceGetCudaComputeCapability)(dev, &major, &minor) == NVML_SUCCESS,
	      "device %u compute capability", i);
	printf("device %u compute capability = %d.%d\n", i, major, minor);
	if (F(nvmlDeviceGetArchitecture)(dev, &arch) == NVML_SUCCESS)
		printf("device %u architecture = %u\n", i, arch);
	if (F(nvmlDeviceGetComputeMode)(dev, (nvmlComputeMode_t *)&mode) == NVML_SUCCESS)
		printf("device %u compute mode = %u\n", i, mode);
	if (F(nvmlDeviceGetMaxClockInfo)(dev, NVML_CLOCK_SM, &mhz) == NVML_SUCCESS)
		printf("device %u max sm clock = %u MHz\n", i, mhz);
	if (F(nvmlDeviceGetMaxClockInfo)(dev, NVML_CLOCK_MEM, &mhz) == NVML_SUCCESS)
		printf("device %u max memory clock = %u MHz\n", i, mhz);

	check(F(nvmlDeviceGetIndex)(dev, &index) == NVML_SUCCESS && index == i, "device %u index", i);
	check(F(nvmlDeviceGetHandleByUUID)(uuid, &other) == NVML_SUCCESS && other == dev,
	      "device %u found by its uuid", i);
	check(F(nvmlDeviceGetHandleByPciBusId_v2)(pci.busId, &other) == NVML_SUCCESS && other == dev,
	      "device %u found by its pci bus id", i);
	check(F(nvmlDeviceGetHandleByPciBusId_v2)(pci.busIdLegacy, &other) == NVML_SUCCESS && other == dev,
	      "device %u found by its legacy pci bus id", i);
}

static void status(unsigned i, nvmlDevice_t dev)
{
	nvmlMemory_t mem;
	nvmlMemory_v2_t mem2 = { .version = nvmlMemory_v2 };
	nvmlBAR1Memory_t bar1;
	nvmlUtilization_t util;
	nvmlProcessInfo_t procs[64];
	nvmlEnableState_t state;
	nvmlBrandType_t brand;
	unsigned v = 0, max = 0, cur = 0, pending = 0, n = 0;
	char serial[NVML_DEVICE_SERIAL_BUFFER_SIZE];
	nvmlReturn_t ret;

	ret = F(nvmlDeviceGetMemoryInfo)(dev, &mem);
	volatile_check(i, "memory in use", ret, mem.used <= mem.total && mem.free <= mem.total && mem.total > 0);
	ret = F(nvmlDeviceGetMemoryInfo_v2)(dev, &mem2);
	volatile_check(i, "memory in use (v2)", ret, mem2.used <= mem2.total && mem2.free <= mem2.total &&
		       mem2.reserved <= mem2.total && mem2.total > 0);
	ret = F(nvmlDeviceGetBAR1MemoryInfo)(dev, &bar1);
	volatile_check(i, "BAR1 memory", ret, bar1.bar1Used <= bar1.bar1Total);
	ret = F(nvmlDeviceGetUtilizationRates)(dev, &util);
	volatile_check(i, "utilization", ret, util.gpu <= 100 && util.memory <= 100);
	ret = F(nvmlDeviceGetTemperature)(dev, NVML_TEMPERATURE_GPU, &v);
	volatile_check(i, "temperature", ret, v > 0 && v <= 120);
	ret = F(nvmlDeviceGetPowerUsage)(dev, &v);
	volatile_check(i, "power usage", ret, v > 0 && v < 5000000);
	ret = F(nvmlDeviceGetEnforcedPowerLimit)(dev, &v);
	volatile_check(i, "enforced power limit", ret, v > 0 && v < 5000000);
	F(nvmlDeviceGetMaxClockInfo)(dev, NVML_CLOCK_SM, &max);
	ret = F(nvmlDeviceGetClockInfo)(dev, NVML_CLOCK_SM, &v);
	volatile_check(i, "sm clock", ret, v > 0 && v <= 10000 && (!max || v <= max));
	ret = F(nvmlDeviceGetPersistenceMode)(dev, &state);
	volatile_check(i, "persistence mode", ret, state == NVML_FEATURE_DISABLED || state == NVML_FEATURE_ENABLED);
	ret = F(nvmlDeviceGetMigMode)(dev, &cur, &pending);
	volatile_check(i, "MIG mode", ret, cur <= 1 && pending <= 1);
	ret = F(nvmlDeviceGetBrand)(dev, &brand);
	volatile_check(i, "brand", ret, 1);
	ret = F(nvmlDeviceGetSerial)(dev, serial, sizeof(serial));
	volatile_check(i, "serial", ret, serial[0] != '\0');
	ret = F(nvmlDeviceGetMinorNumber)(dev, &v);
	volatile_check(i, "minor number", ret, 1);
	n = 0;
	ret = F(nvmlDeviceGetComputeRunningProcesses_v3)(dev, &n, NULL);
	check(ret == NVML_SUCCESS || ret == NVML_ERROR_INSUFFICIENT_SIZE || ret == NVML_ERROR_NOT_SUPPORTED,
	      "device %u process count", i);
	if (ret != NVML_ERROR_NOT_SUPPORTED) {
		n = 64;
		ret = F(nvmlDeviceGetComputeRunningProcesses_v3)(dev, &n, procs);
		volatile_check(i, "processes", ret, n <= 64);
	}
	ret = F(nvmlDeviceGetNvLinkState)(dev, 0, &state);
	if (ret == NVML_ERROR_INVALID_ARGUMENT)
		ret = NVML_ERROR_NOT_SUPPORTED;    /* a GPU without NVLink may say either */
	volatile_check(i, "NVLink 0 state", ret, state == NVML_FEATURE_DISABLED || state == NVML_FEATURE_ENABLED);
}

/* As NCCL starts: peer status of every pair, each GPU's NVLink count
 * (a field value) and whether its first link carries peer traffic. */
static void pairs(unsigned count)
{
	nvmlGpuP2PStatus_t rd, wr;
	nvmlDevice_t a, b;
	unsigned cap = 0;
	nvmlReturn_t ret;

	for (unsigned i = 0; i < count; i++) {
		nvmlFieldValue_t f = { .fieldId = NVML_FI_DEV_NVLINK_LINK_COUNT };

		F(nvmlDeviceGetHandleByIndex_v2)(i, &a);
		for (unsigned j = 0; j < count; j++) {
			F(nvmlDeviceGetHandleByIndex_v2)(j, &b);
			ret = F(nvmlDeviceGetP2PStatus)(a, b, NVML_P2P_CAPS_INDEX_READ, &rd);
			check(ret == NVML_SUCCESS && F(nvmlDeviceGetP2PStatus)(a, b, NVML_P2P_CAPS_INDEX_WRITE, &wr) ==
			      NVML_SUCCESS, "peer status of devices %u and %u", i, j);
			if (ret == NVML_SUCCESS)
				printf("device %u to %u peer read = %d write = %d\n", i, j, (int)rd, (int)wr);
		}
		ret = F(nvmlDeviceGetFieldValues)(a, 1, &f);
		check(ret == NVML_SUCCESS && (f.nvmlReturn == NVML_SUCCESS || f.nvmlReturn == NVML_ERROR_NOT_SUPPORTED),
		      "device %u field value (NVLink count)", i);
		if (ret == NVML_SUCCESS && f.nvmlReturn == NVML_SUCCESS)
			printf("device %u NVLink count = %u\n", i, f.value.uiVal);
		ret = F(nvmlDeviceGetNvLinkCapability)(a, 0, NVML_NVLINK_CAP_P2P_SUPPORTED, &cap);
		if (ret == NVML_ERROR_INVALID_ARGUMENT)
			ret = NVML_ERROR_NOT_SUPPORTED;
		volatile_check(i, "NVLink 0 peer capability", ret, cap <= 1);
	}
	check(F(nvmlDeviceGetP2PStatus)(a, NULL, NVML_P2P_CAPS_INDEX_READ, &rd) == NVML_ERROR_INVALID_ARGUMENT,
	      "peer status with no second device: invalid argument");
}

static void errors(unsigned count)
{
	nvmlDevice_t dev;
	nvmlReturn_t ret;
	nvmlReturn_t (*fan)(nvmlDevice_t, unsigned *);
	unsigned v;

	check(F(nvmlDeviceGetHandleByIndex_v2)(count, &dev) == NVML_ERROR_INVALID_ARGUMENT,
	      "handle of device %u (one past the last): invalid argument", count);
	ret = F(nvmlDeviceGetHandleByUUID)("GPU-00000000-0000-0000-0000-000000000000", &dev);
	check(ret == NVML_ERROR_NOT_FOUND || ret == NVML_ERROR_INVALID_ARGUMENT, "unknown uuid: not found");
	ret = F(nvmlDeviceGetHandleByPciBusId_v2)("ffff:ff:1f.0", &dev);
	check(ret == NVML_ERROR_NOT_FOUND || ret == NVML_ERROR_INVALID_ARGUMENT, "unknown pci bus id: not found");
	check(strlen(F(nvmlErrorString)(NVML_ERROR_NOT_SUPPORTED)) > 0, "error strings");
	fan = (nvmlReturn_t (*)(nvmlDevice_t, unsigned *))dlsym(lib, "nvmlDeviceGetFanSpeed");
	F(nvmlDeviceGetHandleByIndex_v2)(0, &dev);
	ret = fan ? fan(dev, &v) : NVML_ERROR_NOT_SUPPORTED;
	check(ret == NVML_SUCCESS || ret == NVML_ERROR_NOT_SUPPORTED, "a function outside the list (fan speed)");
}

int main(void)
{
	char text[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
	unsigned count = 0;
	int cuda = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("nvml_query\n");
	lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	if (!lib) {
		printf("cannot load libnvidia-ml.so.1: %s: FAIL\n", dlerror());
		return 1;
	}
	check(F(nvmlDeviceGetCount_v2)(&count) == NVML_ERROR_UNINITIALIZED, "before init: uninitialized");
	check(F(nvmlInit_v2)() == NVML_SUCCESS, "init");
	check(F(nvmlInitWithFlags)(0) == NVML_SUCCESS, "init again");
	text_fact("driver version", F(nvmlSystemGetDriverVersion)(text, sizeof(text)), text);
	text_fact("NVML version", F(nvmlSystemGetNVMLVersion)(text, sizeof(text)), text);
	check(F(nvmlSystemGetCudaDriverVersion_v2)(&cuda) == NVML_SUCCESS, "CUDA driver version");
	printf("CUDA driver version = %d\n", cuda);
	check(F(nvmlDeviceGetCount_v2)(&count) == NVML_SUCCESS && count > 0, "device count");
	printf("device count = %u\n", count);
	for (unsigned i = 0; i < count; i++) {
		nvmlDevice_t dev;

		check(F(nvmlDeviceGetHandleByIndex_v2)(i, &dev) == NVML_SUCCESS, "device %u handle", i);
		identity(i, dev);
		status(i, dev);
	}
	pairs(count);
	errors(count);
	check(F(nvmlShutdown)() == NVML_SUCCESS, "shutdown (one of two inits)");
	check(F(nvmlDeviceGetCount_v2)(&count) == NVML_SUCCESS, "still initialised");
	check(F(nvmlShutdown)() == NVML_SUCCESS, "shutdown");
	check(F(nvmlDeviceGetCount_v2)(&count) == NVML_ERROR_UNINITIALIZED, "after shutdown: uninitialized");
	if (failures) {
		printf("%d checks failed\n", failures);
		return 1;
	}
	printf("done\n");
	return 0;
}

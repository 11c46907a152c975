/*
 * device.c: NVML's queries of a device's identity and configuration:
 * name, UUID, serial, minor number, PCI information, memory, compute
 * capability, architecture, cores and attributes, brand and modes. Each
 * is one nvml_query; the answer is copied into NVML's structures here.
 * Cores and attributes count the session's SMs where the server gives it
 * a share of them (gpu-server --sm-share).
 */
#include <stdio.h>
#include <string.h>
#include "nvml-lib.h"

nvmlReturn_t nvml_device_scalars(nvmlDevice_t device, unsigned func, uint64_t arg, uint64_t *v, unsigned n)
{
	struct nvml_answer a;
	unsigned index;
	nvmlReturn_t ret = nvml_index(device, &index);

	if (ret)
		return ret;
	if ((ret = nvml_ask(func, index, arg, NULL, &a)))
		return ret;
	if (a.nv < n)
		return NVML_ERROR_UNKNOWN;
	memcpy(v, a.v, n * sizeof(v[0]));
	return NVML_SUCCESS;
}

/* One scalar into an unsigned int (also NVML's enums). */
static nvmlReturn_t device_uint(nvmlDevice_t device, unsigned func, unsigned *out)
{
	uint64_t v;
	nvmlReturn_t ret = out ? nvml_device_scalars(device, func, 0, &v, 1) : NVML_ERROR_INVALID_ARGUMENT;

	if (ret)
		return ret;
	*out = (unsigned)v;
	return NVML_SUCCESS;
}

nvmlReturn_t nvml_text_out(const struct nvml_answer *a, char *buf, unsigned length)
{
	size_t n = strnlen((const char *)a->data, a->ndata);

	if (n + 1 > length)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(buf, a->data, n);
	buf[n] = '\0';
	return NVML_SUCCESS;
}

static nvmlReturn_t device_text(nvmlDevice_t device, unsigned func, char *buf, unsigned length)
{
	struct nvml_answer a;
	unsigned index;
	nvmlReturn_t ret = nvml_index(device, &index);

	if (ret)
		return ret;
	if (!buf)
		return NVML_ERROR_INVALID_ARGUMENT;
	if ((ret = nvml_ask(func, index, 0, NULL, &a)))
		return ret;
	return nvml_text_out(&a, buf, length);
}

/* legacy: the first version's layout, whose 16-byte bus id is
 * busIdLegacy's place and whose four reserved words lie where busId
 * begins. */
nvmlReturn_t nvml_pci_out(const struct nvml_answer *a, nvmlPciInfo_t *pci, int legacy)
{
	const char *bus = (const char *)a->data, *old = "";
	size_t n = strnlen(bus, a->ndata), n_old = 0;

	if (a->nv < 5)
		return NVML_ERROR_UNKNOWN;
	if (n + 1 < a->ndata) {
		old = bus + n + 1;
		n_old = strnlen(old, a->ndata - n - 1);
	}
	snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%.*s", (int)n_old, old);
	pci->domain = (unsigned)a->v[0];
	pci->bus = (unsigned)a->v[1];
	pci->device = (unsigned)a->v[2];
	pci->pciDeviceId = (unsigned)a->v[3];
	pci->pciSubSystemId = (unsigned)a->v[4];
	if (legacy)
		memset(pci->busId, 0, 16);
	else
		snprintf(pci->busId, sizeof(pci->busId), "%.*s", (int)n, bus);
	return NVML_SUCCESS;
}

static nvmlReturn_t pci_info(nvmlDevice_t device, nvmlPciInfo_t *pci, int legacy)
{
	struct nvml_answer a;
	unsigned index;
	nvmlReturn_t ret = nvml_index(device, &index);

	if (ret)
		return ret;
	if (!pci)
		return NVML_ERROR_INVALID_ARGUMENT;
	if ((ret = nvml_ask(NVMLF_PCI_INFO, index, 0, NULL, &a)))
		return ret;
	return nvml_pci_out(&a, pci, legacy);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
	return device_text(device, NVMLF_NAME, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
	return device_text(device, NVMLF_UUID, uuid, length);
}

nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length)
{
	return device_text(device, NVMLF_SERIAL, serial, length);
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
	return device_uint(device, NVMLF_MINOR_NUMBER, minorNumber);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	return pci_info(device, pci, 0);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	return pci_info(device, pci, 0);
}

nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	return pci_info(device, pci, 1);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	uint64_t v[3];
	nvmlReturn_t ret = memory ? nvml_device_scalars(device, NVMLF_MEMORY, 0, v, 3) : NVML_ERROR_INVALID_ARGUMENT;

	if (ret)
		return ret;
	memory->total = v[0];
	memory->free = v[1];
	memory->used = v[2];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
	uint64_t v[4];
	nvmlReturn_t ret;

	if (!memory)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (memory->version != nvmlMemory_v2)
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	if ((ret = nvml_device_scalars(device, NVMLF_MEMORY_V2, 0, v, 4)))
		return ret;
	memory->total = v[0];
	memory->reserved = v[1];
	memory->free = v[2];
	memory->used = v[3];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1Memory)
{
	uint64_t v[3];
	nvmlReturn_t ret = bar1Memory ? nvml_device_scalars(device, NVMLF_BAR1_MEMORY, 0, v, 3) :
			   NVML_ERROR_INVALID_ARGUMENT;

	if (ret)
		return ret;
	bar1Memory->bar1Total = v[0];
	bar1Memory->bar1Free = v[1];
	bar1Memory->bar1Used = v[2];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
	uint64_t v[2];
	nvmlReturn_t ret = major && minor ? nvml_device_scalars(device, NVMLF_COMPUTE_CAPABILITY, 0, v, 2) :
			   NVML_ERROR_INVALID_ARGUMENT;

	if (ret)
		return ret;
	*major = (int)v[0];
	*minor = (int)v[1];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch)
{
	return device_uint(device, NVMLF_ARCHITECTURE, arch);
}

nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type)
{
	return device_uint(device, NVMLF_BRAND, (unsigned *)type);
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
	return device_uint(device, NVMLF_PERSISTENCE_MODE, (unsigned *)mode);
}

nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode)
{
	return device_uint(device, NVMLF_COMPUTE_MODE, (unsigned *)mode);
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode)
{
	uint64_t v[2];
	nvmlReturn_t ret = currentMode && pendingMode ? nvml_device_scalars(device, NVMLF_MIG_MODE, 0, v, 2) :
			   NVML_ERROR_INVALID_ARGUMENT;

	if (ret)
		return ret;
	*currentMode = (unsigned)v[0];
	*pendingMode = (unsigned)v[1];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNumGpuCores(nvmlDevice_t device, unsigned int *numCores)
{
	return device_uint(device, NVMLF_NUM_GPU_CORES, numCores);
}

/* v1 and v2 fill the same structure. */
nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes)
{
	uint64_t v[8];
	nvmlReturn_t ret = attributes ? nvml_device_scalars(device, NVMLF_ATTRIBUTES, 0, v, 8) :
			   NVML_ERROR_INVALID_ARGUMENT;

	if (ret)
		return ret;
	attributes->multiprocessorCount = (unsigned)v[0];
	attributes->sharedCopyEngineCount = (unsigned)v[1];
	attributes->sharedDecoderCount = (unsigned)v[2];
	attributes->sharedEncoderCount = (unsigned)v[3];
	attributes->sharedJpegCount = (unsigned)v[4];
	attributes->sharedOfaCount = (unsigned)v[5];
	attributes->gpuInstanceSliceCount = (unsigned)v[6];
	attributes->computeInstanceSliceCount = (unsigned)(v[6] >> 32);
	attributes->memorySizeMB = v[7];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes)
{
	return nvmlDeviceGetAttributes_v2(device, attributes);
}

/*
 * handles.c: NVML device handles. A handle is the address of one slot in
 * a table of the server's devices, so checking one is a bounds check; the
 * device count is the one init.c learns from the server at nvmlInit
 * (nvml_count; the server's devices do not change while it runs).
 * Lookups by UUID or PCI bus id are answered by the server, which knows
 * the devices' identities.
 */
#include <stdio.h>
#include <string.h>
#include "wire.h"
#include "nvml-lib.h"

/* A handle's index is its slot's place in the table; the slot holds
 * nothing else (a member only so that slots have a size). */
struct nvmlDevice_st {
	unsigned char slot;
};

static struct nvmlDevice_st devices[NVML_DEVICES_MAX];

nvmlDevice_t nvml_handle(unsigned index)
{
	return &devices[index];
}

nvmlReturn_t nvml_index(nvmlDevice_t device, unsigned *index)
{
	uintptr_t p = (uintptr_t)device, base = (uintptr_t)devices;
	nvmlReturn_t ret = nvml_ready();

	if (ret)
		return ret;
	if (p < base || p >= base + sizeof(devices) || (p - base) % sizeof(devices[0]) ||
	    (p - base) / sizeof(devices[0]) >= nvml_count())
		return NVML_ERROR_INVALID_ARGUMENT;
	*index = (unsigned)((p - base) / sizeof(devices[0]));
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
	nvmlReturn_t ret = nvml_ready();

	if (ret)
		return ret;
	if (!deviceCount)
		return NVML_ERROR_INVALID_ARGUMENT;
	*deviceCount = nvml_count();
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
	return nvmlDeviceGetCount_v2(deviceCount);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	nvmlReturn_t ret = nvml_ready();

	if (ret)
		return ret;
	if (!device || index >= nvml_count())
		return NVML_ERROR_INVALID_ARGUMENT;
	*device = nvml_handle(index);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
	return nvmlDeviceGetHandleByIndex_v2(index, device);
}

/* A device named by text (a UUID or a PCI bus id), found by the server. */
static nvmlReturn_t by_text(unsigned func, const char *text, nvmlDevice_t *device)
{
	struct nvml_answer a;
	nvmlReturn_t ret = nvml_ready();

	if (ret)
		return ret;
	if (!text || !device || strlen(text) >= CICADA_NAME_MAX)
		return NVML_ERROR_INVALID_ARGUMENT;
	if ((ret = nvml_ask(func, 0, 0, text, &a)))
		return ret;
	if (a.nv < 1 || a.v[0] >= nvml_count())
		return NVML_ERROR_NOT_FOUND;
	*device = nvml_handle((unsigned)a.v[0]);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
	return by_text(NVMLF_BY_UUID, uuid, device);
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
	return by_text(NVMLF_BY_PCI_BUS_ID, pciBusId, device);
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
	return by_text(NVMLF_BY_PCI_BUS_ID, pciBusId, device);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
	unsigned i;
	nvmlReturn_t ret = nvml_index(device, &i);

	if (ret)
		return ret;
	if (!index)
		return NVML_ERROR_INVALID_ARGUMENT;
	*index = i;
	return NVML_SUCCESS;
}

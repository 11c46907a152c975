/*
 * status.c: NVML's queries of what a device is doing: utilization,
 * temperature, power, clocks, the processes using it, and its NVLinks.
 */
#include <stddef.h>
#include <string.h>
#include "nvml-lib.h"

/* One scalar answer to a query with an argument (a sensor, clock, link). */
static nvmlReturn_t device_uint_arg(nvmlDevice_t device, unsigned func, unsigned arg, unsigned *out)
{
	uint64_t v;
	nvmlReturn_t ret = out ? nvml_device_scalars(device, func, arg, &v, 1) : NVML_ERROR_INVALID_ARGUMENT;

	if (ret)
		return ret;
	*out = (unsigned)v;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
	uint64_t v[2];
	nvmlReturn_t ret = utilization ? nvml_device_scalars(device, NVMLF_UTILIZATION, 0, v, 2) :
			   NVML_ERROR_INVALID_ARGUMENT;

	if (ret)
		return ret;
	utilization->gpu = (unsigned)v[0];
	utilization->memory = (unsigned)v[1];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType, unsigned int *temp)
{
	return device_uint_arg(device, NVMLF_TEMPERATURE, (unsigned)sensorType, temp);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
	return device_uint_arg(device, NVMLF_POWER_USAGE, 0, power);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
	return device_uint_arg(device, NVMLF_ENFORCED_POWER_LIMIT, 0, limit);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock)
{
	return device_uint_arg(device, NVMLF_CLOCK, (unsigned)type, clock);
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock)
{
	return device_uint_arg(device, NVMLF_MAX_CLOCK, (unsigned)type, clock);
}

/* The processes on the device, as the server sees them (its worker for
 * this process shows this process's pid). version 1 fills
 * nvmlProcessInfo_v1_t, otherwise nvmlProcessInfo_t. */
static nvmlReturn_t processes(nvmlDevice_t device, unsigned *count, void *infos, int version)
{
	struct nvml_answer a;
	unsigned index, total, n;
	nvmlReturn_t ret = nvml_index(device, &index);

	if (ret)
		return ret;
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	if ((ret = nvml_ask(NVMLF_PROCESSES, index, 0, NULL, &a)))
		return ret;
	if (a.nv < 1)
		return NVML_ERROR_UNKNOWN;
	total = (unsigned)a.v[0];
	n = a.ndata / NVML_PROC_RECORD;
	if (n > total)
		n = total;
	if (*count < total) {
		*count = total;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	if (n && !infos)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (unsigned i = 0; i < n; i++) {
		const unsigned char *r = a.data + i * NVML_PROC_RECORD;

		if (version == 1) {
			nvmlProcessInfo_v1_t *p = (nvmlProcessInfo_v1_t *)infos + i;
			p->pid = (unsigned)wire_get_be64(r);
			p->usedGpuMemory = wire_get_be64(r + 8);
		} else {
			nvmlProcessInfo_t *p = (nvmlProcessInfo_t *)infos + i;
			p->pid = (unsigned)wire_get_be64(r);
			p->usedGpuMemory = wire_get_be64(r + 8);
			p->gpuInstanceId = (unsigned)wire_get_be64(r + 16);
			p->computeInstanceId = (unsigned)wire_get_be64(r + 24);
		}
	}
	*count = n;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
						     nvmlProcessInfo_t *infos)
{
	return processes(device, infoCount, infos, 3);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
						     nvmlProcessInfo_v2_t *infos)
{
	return processes(device, infoCount, infos, 2);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
						  nvmlProcessInfo_v1_t *infos)
{
	return processes(device, infoCount, infos, 1);
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive)
{
	return device_uint_arg(device, NVMLF_NVLINK_STATE, link, (unsigned *)isActive);
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
						 nvmlIntNvLinkDeviceType_t *type)
{
	return device_uint_arg(device, NVMLF_NVLINK_REMOTE_TYPE, link, (unsigned *)type);
}

/* NCCL asks for every pair of GPUs before it starts. */
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2, nvmlGpuP2PCapsIndex_t p2pIndex,
				    nvmlGpuP2PStatus_t *p2pStatus)
{
	unsigned other;
	nvmlReturn_t ret = nvml_index(device2, &other);

	if (ret)
		return ret;
	if ((unsigned)p2pIndex > 0xffff)
		return NVML_ERROR_INVALID_ARGUMENT;
	return device_uint_arg(device1, NVMLF_P2P_STATUS, other | (unsigned)p2pIndex << 16, (unsigned *)p2pStatus);
}

nvmlReturn_t nvmlDeviceGetNvLinkCapability(nvmlDevice_t device, unsigned int link, nvmlNvLinkCapability_t capability,
					   unsigned int *capResult)
{
	if (link > 0xffff || (unsigned)capability > 0xffff)
		return NVML_ERROR_INVALID_ARGUMENT;
	return device_uint_arg(device, NVMLF_NVLINK_CAPABILITY, link | (unsigned)capability << 16, capResult);
}

/* Each field is one query; a field's own failure is its nvmlReturn. */
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values)
{
	unsigned index;
	uint64_t v[5];
	nvmlReturn_t ret = nvml_index(device, &index);

	if (ret)
		return ret;
	if (valuesCount < 0 || (valuesCount && !values))
		return NVML_ERROR_INVALID_ARGUMENT;
	for (int i = 0; i < valuesCount; i++) {
		nvmlFieldValue_t *f = &values[i];

		ret = f->fieldId > 0xffff || f->scopeId > 0xffff ? NVML_ERROR_INVALID_ARGUMENT :
		      nvml_device_scalars(device, NVMLF_FIELD_VALUE, f->fieldId | f->scopeId << 16, v, 5);
		if (ret == NVML_ERROR_UNINITIALIZED || ret == NVML_ERROR_GPU_IS_LOST)
			return ret;
		f->nvmlReturn = ret ? ret : (nvmlReturn_t)v[1];
		if (ret)
			continue;
		f->valueType = (nvmlValueType_t)v[0];
		f->value.ullVal = v[2];
		f->timestamp = (long long)v[3];
		f->latencyUsec = (long long)v[4];
	}
	return NVML_SUCCESS;
}

/* The first version's structure: the short bus id, the numbers, and 16
 * reserved bytes (zero). */
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci)
{
	nvmlPciInfo_t full;
	nvmlReturn_t ret;

	if (!pci)
		return NVML_ERROR_INVALID_ARGUMENT;
	if ((ret = nvmlDeviceGetNvLinkRemotePciInfo_v2(device, link, &full)))
		return ret;
	memcpy(pci, &full, offsetof(nvmlPciInfo_t, busId));
	memset(pci->busId, 0, 16);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci)
{
	struct nvml_answer a;
	unsigned index;
	nvmlReturn_t ret = nvml_index(device, &index);

	if (ret)
		return ret;
	if (!pci)
		return NVML_ERROR_INVALID_ARGUMENT;
	if ((ret = nvml_ask(NVMLF_NVLINK_REMOTE_PCI, index, link, NULL, &a)))
		return ret;
	return nvml_pci_out(&a, pci, 0);
}

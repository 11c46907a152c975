/*
 * nvml_cuda.c: NVML queries answered from the driver API, for servers
 * without NVML (and CI, on the CPU stand-in). What the driver knows is
 * answered the way NVML words it: the device count, name, UUID, PCI
 * identity, memory, compute capability (and the architecture it implies),
 * cores and SMs, compute mode, peak clocks and the CUDA driver version;
 * the rest is NVML_ERROR_NOT_SUPPORTED. Device indices are CUDA's
 * ordinals. The answers are the whole GPU's: nvml.c narrows them to a
 * session's share.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "calls.h"
#include "nvml-wire.h"

static int from_cuda(CUresult err)
{
	switch (err) {
	case CUDA_SUCCESS:
		return NVML_SUCCESS;
	case CUDA_ERROR_INVALID_DEVICE:
	case CUDA_ERROR_INVALID_VALUE:
		return NVML_ERROR_INVALID_ARGUMENT;
	case CUDA_ERROR_NOT_SUPPORTED:
		return NVML_ERROR_NOT_SUPPORTED;
	case CUDA_ERROR_OUT_OF_MEMORY:
		return NVML_ERROR_MEMORY;
	default:
		return NVML_ERROR_UNKNOWN;
	}
}

int nvml_cuda_count(unsigned *count)
{
	int n = 0;
	CUresult err = cuDeviceGetCount(&n);

	*count = err ? 0 : (unsigned)n;
	return from_cuda(err);
}

static int attr(CUdevice dev, CUdevice_attribute which, int *v)
{
	return from_cuda(cuDeviceGetAttribute(v, which, dev));
}

/* NVML's form of the UUID (gpus.c). */
static int uuid_text(CUdevice dev, char *out, size_t len)
{
	return gpus_uuid_text(dev, out, len) ? NVML_ERROR_INVALID_ARGUMENT : NVML_SUCCESS;
}

static int pci_ids(CUdevice dev, int id[3])
{
	int ret = attr(dev, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, &id[0]);

	if (!ret)
		ret = attr(dev, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, &id[1]);
	if (!ret)
		ret = attr(dev, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, &id[2]);
	return ret;
}

static int pci_info(CUdevice dev, struct nvml_reply *r)
{
	int id[3], dev_id = 0, sub_id = 0, ret = pci_ids(dev, id);
	char bus[32], old[16];

	if (ret)
		return ret;
	attr(dev, CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID, &dev_id);
	attr(dev, CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID, &sub_id);
	snprintf(bus, sizeof(bus), "%08X:%02X:%02X.0", (unsigned)id[0], (unsigned)id[1], (unsigned)id[2]);
	snprintf(old, sizeof(old), "%04X:%02X:%02X.0", (unsigned)id[0] & 0xffff, (unsigned)id[1] & 0xff,
		 (unsigned)id[2] & 0xff);
	nvml_put(r, (unsigned)id[0]);
	nvml_put(r, (unsigned)id[1]);
	nvml_put(r, (unsigned)id[2]);
	nvml_put(r, (unsigned)dev_id);
	nvml_put(r, (unsigned)sub_id);
	nvml_put_text(r, bus);
	nvml_put_text(r, old);
	return NVML_SUCCESS;
}

/* "domain:bus:device.function", "domain:bus:device" or "bus:device.function". */
static int parse_bus_id(const char *text, unsigned id[3])
{
	unsigned a, b, c, d;
	char end;

	if (sscanf(text, "%x:%x:%x.%x%c", &a, &b, &c, &d, &end) == 4 ||
	    sscanf(text, "%x:%x:%x%c", &a, &b, &c, &end) == 3) {
		id[0] = a, id[1] = b, id[2] = c;
		return 0;
	}
	if (sscanf(text, "%x:%x.%x%c", &b, &c, &d, &end) == 3) {
		id[0] = 0, id[1] = b, id[2] = c;
		return 0;
	}
	return -1;
}

static int lookup(const nvml_args *a, unsigned count, struct nvml_reply *r)
{
	unsigned want[3] = { 0, 0, 0 };
	char uuid[64];
	int id[3];

	if (a->func == NVMLF_BY_PCI_BUS_ID && parse_bus_id(a->text, want))
		return NVML_ERROR_INVALID_ARGUMENT;
	for (unsigned i = 0; i < count; i++) {
		int match = a->func == NVMLF_BY_UUID ?
			    !uuid_text((CUdevice)i, uuid, sizeof(uuid)) && !strcasecmp(uuid, a->text) :
			    !pci_ids((CUdevice)i, id) && (unsigned)id[0] == want[0] &&
			    (unsigned)id[1] == want[1] && (unsigned)id[2] == want[2];
		if (match) {
			nvml_put(r, i);
			return NVML_SUCCESS;
		}
	}
	return NVML_ERROR_NOT_FOUND;
}

/* Free memory needs a context: the device's primary, held for the call.
 * The driver reserves nothing NVML would count apart. */
static int memory(const struct worker *w, CUdevice dev, int v2, struct nvml_reply *r)
{
	size_t total = 0, free_bytes = 0, ctx_total = 0;
	uint64_t t, f, u;
	CUcontext ctx, popped;
	CUresult err = cuDeviceTotalMem(&total, dev);

	if (!err && !(err = cuDevicePrimaryCtxRetain(&ctx, dev))) {
		if (!(err = cuCtxPushCurrent(ctx))) {
			err = cuMemGetInfo(&free_bytes, &ctx_total);
			cuCtxPopCurrent(&popped);
		}
		cuDevicePrimaryCtxRelease(dev);
	}
	if (err)
		return from_cuda(err);
	if (free_bytes > total)
		free_bytes = total;
	t = total, f = free_bytes, u = total - free_bytes;
	quota_nvml(w, &t, &f, &u);
	nvml_put(r, t);
	if (v2)
		nvml_put(r, 0);
	nvml_put(r, f);
	nvml_put(r, u);
	return NVML_SUCCESS;
}

static unsigned architecture(int major, int minor)
{
	switch (major) {
	case 3: return NVML_DEVICE_ARCH_KEPLER;
	case 5: return NVML_DEVICE_ARCH_MAXWELL;
	case 6: return NVML_DEVICE_ARCH_PASCAL;
	case 7: return minor >= 5 ? NVML_DEVICE_ARCH_TURING : NVML_DEVICE_ARCH_VOLTA;
	case 8: return minor == 9 ? NVML_DEVICE_ARCH_ADA : minor == 7 ? NVML_DEVICE_ARCH_T23X : NVML_DEVICE_ARCH_AMPERE;
	case 9: return NVML_DEVICE_ARCH_HOPPER;
	case 10: case 11: case 12: return NVML_DEVICE_ARCH_BLACKWELL;
	default: return NVML_DEVICE_ARCH_UNKNOWN;
	}
}

/* CUDA cores (FP32 lanes) an SM has, by compute capability; 0: unknown. */
static unsigned cores_per_sm(int major, int minor)
{
	switch (major) {
	case 3: return 192;
	case 5: return 128;
	case 6: return minor == 0 ? 64 : 128;
	case 7: return 64;
	case 8: return minor == 0 ? 64 : 128;
	case 9: case 10: case 11: case 12: return 128;
	default: return 0;
	}
}

static int num_cores(CUdevice dev, struct nvml_reply *r)
{
	int sms = 0, major = 0, minor = 0, ret;

	if ((ret = attr(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &sms)) ||
	    (ret = attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major)) ||
	    (ret = attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor)))
		return ret;
	if (!cores_per_sm(major, minor))
		return NVML_ERROR_NOT_SUPPORTED;
	nvml_put(r, (uint64_t)sms * cores_per_sm(major, minor));
	return NVML_SUCCESS;
}

/* What the driver knows of them: SMs, copy engines and memory; the
 * other engines and MIG's slices are not its to say (0). */
static int attributes(CUdevice dev, struct nvml_reply *r)
{
	int sms = 0, copy = 0, ret = attr(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &sms);
	size_t total = 0;

	if (ret || (ret = from_cuda(cuDeviceTotalMem(&total, dev))))
		return ret;
	attr(dev, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, &copy);
	nvml_put(r, (unsigned)sms);
	nvml_put(r, (unsigned)copy);
	for (int i = 0; i < 5; i++)
		nvml_put(r, 0);              /* decoders, encoders, JPEG, OFA; slices */
	nvml_put(r, total >> 20);
	return NVML_SUCCESS;
}

/* Peak clocks in MHz; the driver reports them in kHz. */
static int max_clock(CUdevice dev, unsigned type, struct nvml_reply *r)
{
	int khz = 0, ret;

	if (type == NVML_CLOCK_GRAPHICS || type == NVML_CLOCK_SM)
		ret = attr(dev, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, &khz);
	else if (type == NVML_CLOCK_MEM)
		ret = attr(dev, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, &khz);
	else
		return NVML_ERROR_NOT_SUPPORTED;
	if (!ret && khz <= 0)
		ret = NVML_ERROR_NOT_SUPPORTED;
	if (!ret)
		nvml_put(r, (unsigned)khz / 1000);
	return ret;
}

/* Peer access as the driver says it: reads, writes and atomics go between
 * GPUs that can reach each other; whether over NVLink it does not say. */
static int p2p_status(CUdevice dev, CUdevice other, unsigned index, struct nvml_reply *r)
{
	int can = 1, ret = NVML_SUCCESS;

	if (index >= NVML_P2P_CAPS_INDEX_UNKNOWN)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (dev != other && (ret = from_cuda(cuDeviceCanAccessPeer(&can, dev, other))))
		return ret;
	if (index == NVML_P2P_CAPS_INDEX_NVLINK)
		can = 0;
	nvml_put(r, can ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED);
	return NVML_SUCCESS;
}

int nvml_cuda_answer(const struct worker *w, const nvml_args *a, struct nvml_reply *r)
{
	CUdevice dev = (CUdevice)a->device;
	char text[256];
	unsigned count;
	int v = 0, major = 0, minor = 0, ret;

	switch (a->func) {
	case NVMLF_CUDA_DRIVER_VERSION:
		if ((ret = from_cuda(cuDriverGetVersion(&v))))
			return ret;
		nvml_put(r, (uint64_t)v);
		return NVML_SUCCESS;
	case NVMLF_BY_UUID:
	case NVMLF_BY_PCI_BUS_ID:
		return (ret = nvml_cuda_count(&count)) ? ret : lookup(a, count, r);
	case NVMLF_NAME:
		if ((ret = from_cuda(cuDeviceGetName(text, sizeof(text), dev))))
			return ret;
		nvml_put_text(r, text);
		return NVML_SUCCESS;
	case NVMLF_UUID:
		if ((ret = uuid_text(dev, text, sizeof(text))))
			return ret;
		nvml_put_text(r, text);
		return NVML_SUCCESS;
	case NVMLF_PCI_INFO:
		return pci_info(dev, r);
	case NVMLF_MEMORY:
	case NVMLF_MEMORY_V2:
		return memory(w, dev, a->func == NVMLF_MEMORY_V2, r);
	case NVMLF_COMPUTE_CAPABILITY:
	case NVMLF_ARCHITECTURE:
		if ((ret = attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major)) ||
		    (ret = attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor)))
			return ret;
		if (a->func == NVMLF_ARCHITECTURE) {
			nvml_put(r, architecture(major, minor));
		} else {
			nvml_put(r, (uint64_t)major);
			nvml_put(r, (uint64_t)minor);
		}
		return NVML_SUCCESS;
	case NVMLF_COMPUTE_MODE:
		if ((ret = attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, &v)))
			return ret;
		nvml_put(r, (unsigned)v);      /* CUcomputemode numbers NVML's modes alike */
		return NVML_SUCCESS;
	case NVMLF_MAX_CLOCK:
		return max_clock(dev, (unsigned)a->arg, r);
	case NVMLF_NUM_GPU_CORES:
		return num_cores(dev, r);
	case NVMLF_ATTRIBUTES:
		return attributes(dev, r);
	case NVMLF_P2P_STATUS:
		return p2p_status(dev, (CUdevice)(a->arg & 0xffff), (unsigned)(a->arg >> 16), r);
	case NVMLF_FIELD_VALUE:
		nvml_put(r, 0);
		nvml_put(r, NVML_ERROR_NOT_SUPPORTED);   /* the field's own result */
		nvml_put(r, 0);
		nvml_put(r, 0);
		nvml_put(r, 0);
		return NVML_SUCCESS;
	default:
		return NVML_ERROR_NOT_SUPPORTED;
	}
}

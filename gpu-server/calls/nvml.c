/*
 * nvml.c: nvml_query, the NVML questions of Cicada's libnvidia-ml.so.1.
 * On its first query the worker loads the server's real NVML
 * (nvml_real.c); where there is none (a node without it, or CI on the CPU
 * stand-in) it answers what the driver API can tell (nvml_cuda.c), and
 * NVML_ERROR_NOT_SUPPORTED for the rest. Everything from the wire is
 * checked here first: the function number, the device index, the
 * argument's range. Device indices are the client's: only the GPUs it
 * sees (gpus.c) exist for it. The transport result is always success: an NVML
 * failure is the reply's ret, never a reason to drop the client.
 *
 * A session held to a share of a GPU's SMs (--sm-share, green.c) is told
 * of its share wherever NVML counts SMs: the SM count of the device's
 * attributes, and its cores in proportion (answer_share). Utilization,
 * processes, clocks and power stay the whole GPU's: NVML measures them
 * for the GPU, not for a green context (docs/configuration.md).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "calls.h"
#include "nvml-wire.h"

enum { SOURCE_NONE, SOURCE_NVML, SOURCE_DRIVER };

static int source;
static unsigned device_count;

void nvml_prepare(void)
{
	char why[256] = "";

	if (source != SOURCE_NONE)
		return;
	if (nvml_real_open(why, sizeof(why)) == 0) {
		source = SOURCE_NVML;
		if (nvml_real_count(&device_count))
			device_count = 0;
		log_info("NVML queries: the server's NVML (%u GPUs)", device_count);
		return;
	}
	source = SOURCE_DRIVER;
	if (nvml_cuda_count(&device_count))
		device_count = 0;
	log_info("NVML queries: no NVML here (%s); answering from the driver API", why);
}

/* NVML's index of a real GPU: the driver's ordinal, or with the server's
 * NVML the device on the same PCI address. -1 if none. */
static long nvml_index(CUdevice real)
{
	char bus[32];
	unsigned index;

	if (source != SOURCE_NVML)
		return real;
	if (cuDeviceGetPCIBusId(bus, sizeof(bus), real) || nvml_real_index_by_pci(bus, &index))
		return -1;
	return index;
}

/* The client's ordinal of the GPU NVML numbers index, or -1. */
static long client_index(const struct worker *w, uint64_t index)
{
	for (int i = 0; i < w->ngpus; i++)
		if (nvml_index(w->gpu[i]) == (long)index)
			return i;
	return -1;
}

static int ask(struct worker *w, const nvml_args *a, struct nvml_reply *r)
{
	return source == SOURCE_NVML ? nvml_real_answer(w, a, r) : nvml_cuda_answer(w, a, r);
}

/* A whole GPU's answer narrowed to the session's share of its SMs (real:
 * the GPU) and, for the attributes' memory, to its quota (quota.c). */
static void answer_share(struct worker *w, unsigned func, CUdevice real, struct nvml_reply *r)
{
	int sms = green_sms(w, real), total = 0;
	uint64_t t, f, u = 0;

	if (func == NVMLF_NUM_GPU_CORES && sms && r->nv >= 1 &&
	    !cuDeviceGetAttribute(&total, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, real) && total > sms)
		r->v[0] = r->v[0] * (uint64_t)sms / (uint64_t)total;
	if (func != NVMLF_ATTRIBUTES || r->nv < 8)
		return;
	if (sms)
		r->v[0] = (uint64_t)sms;
	t = f = r->v[7] << 20;
	quota_nvml(w, &t, &f, &u);
	r->v[7] = t >> 20;
}

/* NVML answers for the GPUs the client sees, by its ordinals (gpus.c). */
static int answer(struct worker *w, const nvml_args *a, struct nvml_reply *r)
{
	nvml_args real = *a;
	long index = -1;
	int ret;

	if (a->func == 0 || a->func >= NVMLF_END) {
		log_debug("client %s: NVML function %u is unknown", w->peer, a->func);
		return NVML_ERROR_NOT_SUPPORTED;
	}
	if (a->arg > UINT_MAX || !a->text)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvml_prepare();
	if (a->func >= NVMLF_FIRST_DEVICE &&
	    (a->device >= (uint64_t)w->ngpus || (index = nvml_index(w->gpu[a->device])) < 0 ||
	     (uint64_t)index >= device_count))
		return NVML_ERROR_INVALID_ARGUMENT;
	if ((a->func == NVMLF_BY_UUID || a->func == NVMLF_BY_PCI_BUS_ID) && !a->text[0])
		return NVML_ERROR_INVALID_ARGUMENT;
	if (a->func == NVMLF_COUNT) {
		nvml_put(r, (uint64_t)w->ngpus);
		return NVML_SUCCESS;
	}
	if (a->func == NVMLF_INIT) {
		nvml_put(r, source == SOURCE_NVML);
		return NVML_SUCCESS;
	}
	if (a->func >= NVMLF_FIRST_DEVICE)
		real.device = (uint64_t)index;
	if (a->func == NVMLF_P2P_STATUS) {           /* the other GPU, by the client's ordinal too */
		long other = (a->arg & 0xffff) < (uint64_t)w->ngpus ? nvml_index(w->gpu[a->arg & 0xffff]) : -1;
		if (other < 0 || (uint64_t)other >= device_count)
			return NVML_ERROR_INVALID_ARGUMENT;
		real.arg = (uint64_t)other | (a->arg & 0xffff0000u);
	}
	ret = ask(w, &real, r);
	if (ret == NVML_SUCCESS && a->func >= NVMLF_FIRST_DEVICE)
		answer_share(w, a->func, w->gpu[a->device], r);
	if (ret == NVML_SUCCESS && (a->func == NVMLF_BY_UUID || a->func == NVMLF_BY_PCI_BUS_ID) && r->nv) {
		if ((index = client_index(w, r->v[0])) < 0)
			return NVML_ERROR_NOT_FOUND;     /* a GPU this client does not see */
		r->v[0] = (uint64_t)index;
	}
	return ret;
}

CUresult hand_nvml_query(struct worker *w, void *args, void *res)
{
	nvml_args *a = args;
	nvml_res *r = res;
	struct nvml_reply *out = calloc(1, sizeof(*out));

	if (!out)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r->ret = answer(w, a, out);
	if (r->ret == NVML_SUCCESS && out->nv) {
		r->v.v_val = malloc(out->nv * sizeof(uint64_t));
		if (!r->v.v_val)
			goto oom;
		memcpy(r->v.v_val, out->v, out->nv * sizeof(uint64_t));
		r->v.v_len = out->nv;
	}
	if (r->ret == NVML_SUCCESS && out->ndata) {
		r->data.data_val = malloc(out->ndata);
		if (!r->data.data_val)
			goto oom;
		memcpy(r->data.data_val, out->data, out->ndata);
		r->data.data_len = out->ndata;
	}
	free(out);
	return CUDA_SUCCESS;
oom:
	free(out);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

/*
 * init.c: initialisation and the query path of libnvidia-ml.so.1,
 * Cicada's NVML replacement. It has no connection of its own: every query
 * goes through cicada_nvml_query in libcuda.so.1 (the interposer), on the
 * process's CUDA session. nvmlInit asks the server once, and learns the
 * device count. Also NVML's error strings, the once-only log line for
 * names Cicada does not serve, and the marker symbol by which a
 * gpu-server recognises this library (and refuses to load it as the real
 * NVML).
 */
#include <cuda.h>
#include <pthread.h>
#include <string.h>
#include "wire.h"
#include "nvml-lib.h"

/* Weak: loaded next to a libcuda.so.1 that is not Cicada's, the library
 * still loads, and nvmlInit says why it cannot work. */
#pragma weak cicada_nvml_query

const int cicada_nvml_replacement = 1;

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int init_count;
static unsigned device_count;             /* the server's, at most NVML_DEVICES_MAX */

/* Logging works from the first call, nvmlInit or not. */
__attribute__((constructor)) static void nvml_lib_init(void)
{
	log_init("cicada-nvml");
}

nvmlReturn_t nvml_ready(void)
{
	return __atomic_load_n(&init_count, __ATOMIC_ACQUIRE) > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

/* A transport failure (the CUDA result of the call) as NVML would say it. */
static nvmlReturn_t transport_error(int err)
{
	switch (err) {
	case CUDA_ERROR_OUT_OF_MEMORY:
		return NVML_ERROR_MEMORY;
	case CUDA_ERROR_NO_DEVICE:
	case CUDA_ERROR_NOT_PERMITTED:
		return NVML_ERROR_DRIVER_NOT_LOADED;
	default:
		return NVML_ERROR_GPU_IS_LOST;
	}
}

static nvmlReturn_t ask(unsigned func, unsigned device, uint64_t arg, const char *text, struct nvml_answer *out)
{
	nvml_args a = { .func = func, .device = device, .arg = arg, .text = (char *)(text ? text : "") };
	nvml_res r;
	int err;

	if (!cicada_nvml_query)
		return NVML_ERROR_LIBRARY_NOT_FOUND;
	if (strlen(a.text) >= CICADA_NAME_MAX)
		return NVML_ERROR_INVALID_ARGUMENT;
	memset(out, 0, sizeof(*out));
	memset(&r, 0, sizeof(r));
	r.v.v_val = (u_quad_t *)out->v;
	r.data.data_val = (char *)out->data;
	err = cicada_nvml_query(&a, &r);
	if (err) {
		log_debug("NVML query %u failed on the way: CUDA error %d", func, err);
		return transport_error(err);
	}
	out->nv = r.v.v_len;
	out->ndata = r.data.data_len;
	return (nvmlReturn_t)r.ret;
}

unsigned nvml_count(void)
{
	return __atomic_load_n(&device_count, __ATOMIC_ACQUIRE);
}

/* The count the server gave, as many as handles.c has slots for. */
static void set_count(unsigned count)
{
	if (count > NVML_DEVICES_MAX) {
		log_warn("the server has %u GPUs; NVML shows the first %d", count, NVML_DEVICES_MAX);
		count = NVML_DEVICES_MAX;
	}
	__atomic_store_n(&device_count, count, __ATOMIC_RELEASE);
}

nvmlReturn_t nvml_ask(unsigned func, unsigned device, uint64_t arg, const char *text, struct nvml_answer *out)
{
	nvmlReturn_t ret = nvml_ready();

	return ret ? ret : ask(func, device, arg, text, out);
}

/* The server's NVML (or its driver-API fallback) and the device count. */
static nvmlReturn_t first_init(void)
{
	static int said;
	struct nvml_answer a;
	nvmlReturn_t ret;

	if (!cicada_nvml_query) {
		if (!said++)
			log_error("libnvidia-ml.so.1 is Cicada's: it needs Cicada's libcuda.so.1, which this process did not load");
		return NVML_ERROR_LIBRARY_NOT_FOUND;
	}
	if ((ret = ask(NVMLF_INIT, 0, 0, NULL, &a)))
		return ret;
	log_debug("NVML answers from the server's %s", a.nv && a.v[0] ? "NVML" : "driver API (it has no NVML)");
	if ((ret = ask(NVMLF_COUNT, 0, 0, NULL, &a)))
		return ret;
	if (a.nv < 1)
		return NVML_ERROR_UNKNOWN;
	set_count((unsigned)a.v[0]);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
	nvmlReturn_t ret = NVML_SUCCESS;

	pthread_mutex_lock(&init_lock);
	if (init_count == 0)
		ret = first_init();
	if (ret == NVML_SUCCESS)
		__atomic_add_fetch(&init_count, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&init_lock);
	return ret;
}

nvmlReturn_t nvmlInit_v2(void)
{
	return nvmlInitWithFlags(0);
}

nvmlReturn_t nvmlInit(void)
{
	return nvmlInitWithFlags(0);
}

nvmlReturn_t nvmlShutdown(void)
{
	nvmlReturn_t ret = NVML_SUCCESS;

	pthread_mutex_lock(&init_lock);
	if (init_count == 0)
		ret = NVML_ERROR_UNINITIALIZED;
	else
		__atomic_sub_fetch(&init_count, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&init_lock);
	return ret;
}

/* Says once per name that Cicada does not serve it. */
nvmlReturn_t nvml_unsupported(const char *name)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static const char *seen[256];
	static int nseen;
	int i;

	pthread_mutex_lock(&lock);
	for (i = 0; i < nseen && strcmp(seen[i], name); i++)
		;
	if (i == nseen && nseen < 256) {
		seen[nseen++] = name;
		log_debug("NVML function %s is not supported through Cicada", name);
	}
	pthread_mutex_unlock(&lock);
	return NVML_ERROR_NOT_SUPPORTED;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
	static const char *const text[] = {
		[NVML_SUCCESS] = "Success",
		[NVML_ERROR_UNINITIALIZED] = "Uninitialized",
		[NVML_ERROR_INVALID_ARGUMENT] = "Invalid Argument",
		[NVML_ERROR_NOT_SUPPORTED] = "Not Supported",
		[NVML_ERROR_NO_PERMISSION] = "Insufficient Permissions",
		[NVML_ERROR_ALREADY_INITIALIZED] = "Already Initialized",
		[NVML_ERROR_NOT_FOUND] = "Not Found",
		[NVML_ERROR_INSUFFICIENT_SIZE] = "Insufficient Size",
		[NVML_ERROR_INSUFFICIENT_POWER] = "Insufficient External Power",
		[NVML_ERROR_DRIVER_NOT_LOADED] = "Driver Not Loaded",
		[NVML_ERROR_TIMEOUT] = "Timeout",
		[NVML_ERROR_IRQ_ISSUE] = "Interrupt Request Issue",
		[NVML_ERROR_LIBRARY_NOT_FOUND] = "NVML Shared Library Not Found",
		[NVML_ERROR_FUNCTION_NOT_FOUND] = "Function Not Found",
		[NVML_ERROR_CORRUPTED_INFOROM] = "Corrupted infoROM",
		[NVML_ERROR_GPU_IS_LOST] = "GPU is lost",
		[NVML_ERROR_RESET_REQUIRED] = "GPU requires reset",
		[NVML_ERROR_OPERATING_SYSTEM] = "GPU access blocked by the operating system",
		[NVML_ERROR_LIB_RM_VERSION_MISMATCH] = "Driver/library version mismatch",
		[NVML_ERROR_IN_USE] = "In use by another client",
		[NVML_ERROR_MEMORY] = "Insufficient Memory",
		[NVML_ERROR_NO_DATA] = "No data",
		[NVML_ERROR_VGPU_ECC_NOT_SUPPORTED] = "vGPU operation not available while ECC is enabled",
		[NVML_ERROR_INSUFFICIENT_RESOURCES] = "Insufficient resources",
		[NVML_ERROR_FREQ_NOT_SUPPORTED] = "Frequency not supported",
		[NVML_ERROR_ARGUMENT_VERSION_MISMATCH] = "Argument version mismatch",
		[NVML_ERROR_DEPRECATED] = "Deprecated",
		[NVML_ERROR_NOT_READY] = "Not ready",
		[NVML_ERROR_GPU_NOT_FOUND] = "GPU not found",
		[NVML_ERROR_INVALID_STATE] = "Invalid state",
	};

	if ((unsigned)result < sizeof(text) / sizeof(text[0]) && text[result])
		return text[result];
	return "Unknown Error";
}

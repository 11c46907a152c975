/*
 * device.c: hand-written handlers for device, context and pointer queries
 * whose results are not plain scalars.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "calls.h"

typedef CUresult (*name_query)(uint64_t value, char *buf, int len);

/* Answers a query of one scalar (a device or an error code) with a name. */
static CUresult name_reply(void *args, void *res, name_query query)
{
	char buf[CICADA_NAME_MAX] = "";
	scalars *a = args;
	name_res *r = res;
	CUresult err;

	if (a->v.v_len != 1)
		return CUDA_ERROR_INVALID_VALUE;
	err = query(a->v.v_val[0], buf, sizeof(buf));
	r->name = strdup(buf);
	return r->name ? err : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult error_string(uint64_t code, char *buf, int len)
{
	const char *s = NULL;
	CUresult err = cuGetErrorString((CUresult)code, &s);

	snprintf(buf, (size_t)len, "%s", s ? s : "");
	return err;
}

static CUresult device_name(uint64_t dev, char *buf, int len)
{
	return cuDeviceGetName(buf, len, (CUdevice)dev);
}

static CUresult device_pci_bus_id(uint64_t dev, char *buf, int len)
{
	return cuDeviceGetPCIBusId(buf, len, (CUdevice)dev);
}

CUresult hand_get_error_string(struct worker *w, void *args, void *res)
{
	return name_reply(args, res, error_string);
}

/* A device query's one scalar, the client's ordinal, as the real device. */
static CUresult device_arg(struct worker *w, void *args, uint64_t *real)
{
	scalars *a = args;
	CUdevice dev;
	CUresult err;

	if (a->v.v_len != 1)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = device_in(w, a->v.v_val[0], &dev)))
		return err;
	if (dev < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*real = (uint64_t)dev;
	return CUDA_SUCCESS;
}

static CUresult device_name_reply(struct worker *w, void *args, void *res, name_query query)
{
	uint64_t dev;
	scalars one = { { 1, &dev } };
	CUresult err = device_arg(w, args, &dev);

	return err ? err : name_reply(&one, res, query);
}

CUresult hand_device_get_name(struct worker *w, void *args, void *res)
{
	return device_name_reply(w, args, res, device_name);
}

CUresult hand_device_get_pci_bus_id(struct worker *w, void *args, void *res)
{
	return device_name_reply(w, args, res, device_pci_bus_id);
}

CUresult hand_device_get_uuid(struct worker *w, void *args, void *res)
{
	bytes_res *r = res;
	uint64_t dev;
	CUuuid uuid;
	CUresult err = device_arg(w, args, &dev);

	if (!err)
		err = cuDeviceGetUuid(&uuid, (CUdevice)dev);
	if (err)
		return err;
	r->data.data_val = malloc(sizeof(uuid.bytes));
	if (!r->data.data_val)
		return CUDA_ERROR_OUT_OF_MEMORY;
	memcpy(r->data.data_val, uuid.bytes, sizeof(uuid.bytes));
	r->data.data_len = sizeof(uuid.bytes);
	return CUDA_SUCCESS;
}

/* in: flags, device; out: context id (now current on the worker). */
CUresult hand_ctx_create(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	scalar_res *r = res;
	CUcontext ctx;
	CUdevice dev;
	CUresult err;
	int sms;

	if (a->v.v_len != 2)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = device_in(w, a->v.v_val[1], &dev)))
		return err;
	if (!primary_ctx(w, dev))            /* held: see wrap_cuDevicePrimaryCtxRetain */
		return CUDA_ERROR_INVALID_DEVICE;
	if ((sms = green_sms(w, dev))) {     /* it would run on every SM: see green.c */
		log_info("client %s: cuCtxCreate refused: the session is held to %d SMs of GPU %d", w->peer, sms,
			 (int)dev);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	err = cuCtxCreate(&ctx, NULL, (unsigned)a->v.v_val[0], dev);
	if (err)
		return err;
	w->current_ctx = handle_put(w, H_CTX, ctx);  /* cuCtxCreate makes it current */
	return one_scalar(r, w->current_ctx);
}

/* The arena's allocations are sub-ranges of VMM chunks: their ranges come
 * from the worker, the rest from the driver. */
static CUresult pointer_attribute(struct worker *w, const pointer_attr_args *a, uint64_t *value)
{
	unsigned type = 0;
	uint64_t base, size;

	/* Host addresses are the client's to answer: here they would name
	 * the worker's own memory. */
	if (cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)a->ptr) ||
	    type != CU_MEMORYTYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;

	if ((a->attr == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR || a->attr == CU_POINTER_ATTRIBUTE_RANGE_SIZE) &&
	    !devmem_range(w, a->ptr, &base, &size)) {
		*value = a->attr == CU_POINTER_ATTRIBUTE_RANGE_SIZE ? size : base;
		return CUDA_SUCCESS;
	}
	return cuPointerGetAttribute(value, (CUpointer_attribute)a->attr, (CUdeviceptr)a->ptr);
}

CUresult hand_pointer_get_attribute(struct worker *w, void *args, void *res)
{
	pointer_attr_args *a = args;
	bytes_res *r = res;
	size_t size = wire_pointer_attr_size(a->attr);
	uint64_t value = 0;
	CUresult err;

	if (!size)
		return CUDA_ERROR_INVALID_VALUE;
	err = pointer_attribute(w, a, &value);
	if (err)
		return err;
	if (a->attr == CU_POINTER_ATTRIBUTE_CONTEXT)
		value = handle_put(w, H_CTX, green_view_of(w, (CUcontext)(uintptr_t)value));
	if (a->attr == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
		value = (uint32_t)device_out(w, (CUdevice)(int)value);
	r->data.data_val = malloc(size);
	if (!r->data.data_val)
		return CUDA_ERROR_OUT_OF_MEMORY;
	memcpy(r->data.data_val, &value, size);
	r->data.data_len = size;
	return CUDA_SUCCESS;
}

/* The grid that fills the SMs of a session with a share of them (green.c)
 * at block: as the driver and the runtime count it, the blocks an SM
 * holds times the SMs, these being the share's. grid stays if none. */
static CUresult share_grid(struct worker *w, CUfunction f, int block, size_t shmem, unsigned flags, int *grid)
{
	CUdevice dev;
	int sms, per_sm = 0;
	CUresult err = cuCtxGetDevice(&dev);

	if (err || !(sms = green_sms(w, dev)))
		return err;
	if ((err = cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&per_sm, f, block, shmem, flags)))
		return err;
	*grid = per_sm * sms;
	return CUDA_SUCCESS;
}

/* in: function, dynamic shared memory, block size limit, flags;
 * out: min grid size, block size. Callbacks cannot cross the wire. */
CUresult hand_occupancy_max_potential_block_size(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	scalar_res *r = res;
	CUfunction f;
	int grid = 0, block = 0;
	CUresult err;

	if (a->v.v_len != 4)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = handle_get(w, H_FUNCTION, a->v.v_val[0], (void **)&f)))
		return err;
	err = cuOccupancyMaxPotentialBlockSizeWithFlags(&grid, &block, f, NULL, (size_t)a->v.v_val[1],
							(int)a->v.v_val[2], (unsigned)a->v.v_val[3]);
	if (!err)
		err = share_grid(w, f, block, (size_t)a->v.v_val[1], (unsigned)a->v.v_val[3], &grid);
	if (err)
		return err;
	r->v.v_val = malloc(2 * sizeof(uint64_t));
	if (!r->v.v_val)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r->v.v_val[0] = (uint64_t)grid;
	r->v.v_val[1] = (uint64_t)block;
	r->v.v_len = 2;
	return CUDA_SUCCESS;
}

/* --- devices and their primary contexts --- */

CUresult wrap_cuDeviceGet(struct worker *w, CUdevice *device, int ordinal)
{
	return ordinal < 0 ? CUDA_ERROR_INVALID_DEVICE : device_in(w, (uint64_t)ordinal, device);
}

CUresult wrap_cuDeviceGetCount(struct worker *w, int *count)
{
	*count = w->ngpus;
	return CUDA_SUCCESS;
}

static int client_refs[PRIMARY_DEVICES_MAX];   /* the client's retains not yet released */

/* What a native context's destruction frees: every allocation the client
 * made on its GPU. The context itself stays, holding the worker's own
 * buffers. */
static CUresult clear_client_state(struct worker *w, CUdevice dev)
{
	uint64_t va, size;
	CUresult err;

	cuCtxPushCurrent(primary_ctx(w, dev));
	err = cuCtxSynchronize();
	cuCtxPopCurrent(NULL);
	for (unsigned i = 0; i < devmem_count(w, 0);) {
		devmem_get(w, 0, i, &va, &size);
		if (devmem_device(w, va) != dev || devmem_free(w, va))
			i++;
	}
	return err;
}

/* The worker holds a GPU's primary context from the client's first use of
 * it: the arena's memory there must outlive the client's contexts. */
CUresult wrap_cuDevicePrimaryCtxRetain(struct worker *w, CUcontext *pctx, CUdevice dev)
{
	CUresult err = primary_ctx(w, dev) ? cuDevicePrimaryCtxRetain(pctx, dev) : CUDA_ERROR_INVALID_DEVICE;

	if (!err && (err = green_context(w, dev, pctx)))    /* a share of its SMs: green.c */
		cuDevicePrimaryCtxRelease(dev);
	if (!err && primary_held(dev))
		client_refs[dev]++;
	return err;
}

/* A session with a share of a GPU's SMs counts only those. */
CUresult wrap_cuDeviceGetAttribute(struct worker *w, int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	CUresult err = cuDeviceGetAttribute(pi, attrib, dev);
	int sms;

	if (!err && attrib == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT && (sms = green_sms(w, dev)))
		*pi = sms;
	return err;
}

/* The worker's own reference never goes: a client that releases more
 * than it retained is told so, as the driver would, instead of taking
 * the context (and the worker's buffers in it) away. */
CUresult wrap_cuDevicePrimaryCtxRelease_v2(struct worker *w, CUdevice dev)
{
	CUresult err;

	if (!primary_held(dev))
		return cuDevicePrimaryCtxRelease(dev);
	if (!client_refs[dev])
		return CUDA_ERROR_INVALID_CONTEXT;
	if ((err = cuDevicePrimaryCtxRelease(dev)))
		return err;
	if (!--client_refs[dev])
		clear_client_state(w, dev);
	return CUDA_SUCCESS;
}

CUresult wrap_cuDevicePrimaryCtxGetState(struct worker *w, CUdevice dev, unsigned int *flags, int *active)
{
	CUresult err = cuDevicePrimaryCtxGetState(dev, flags, active);

	if (!err && primary_held(dev))
		*active = client_refs[dev] > 0;
	return err;
}

/* A real reset would free the worker's own buffers (pinned scratch, the
 * registered staging area, the arena) under it: the worker frees what is
 * the client's instead. Its modules, streams and events stay until the
 * session ends. */
CUresult wrap_cuDevicePrimaryCtxReset_v2(struct worker *w, CUdevice dev)
{
	CUresult err;

	if (!primary_held(dev))
		return cuDevicePrimaryCtxReset(dev);
	err = clear_client_state(w, dev);
	log_info("client %s reset device %d's primary context: its allocations are freed", w->peer, (int)dev);
	return err == CUDA_ERROR_INVALID_CONTEXT ? CUDA_SUCCESS : err;
}

/* Names a device's primary context without leaving it active (a retain
 * and release); the id is the one a later retain returns. */
CUresult hand_primary_ctx_handle(struct worker *w, void *args, void *res)
{
	scalars *a = args;
	scalar_res *r = res;
	CUdevice dev;
	CUcontext ctx;
	CUresult err;

	if (a->v.v_len != 1)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = device_in(w, a->v.v_val[0], &dev)))
		return err;
	if (!primary_ctx(w, dev))            /* held, so the id names a context that stays */
		return CUDA_ERROR_INVALID_DEVICE;
	if ((err = cuDevicePrimaryCtxRetain(&ctx, dev)))
		return err;
	cuDevicePrimaryCtxRelease(dev);
	if ((err = green_context(w, dev, &ctx)))
		return err;
	return one_scalar(r, handle_put(w, H_CTX, ctx));
}

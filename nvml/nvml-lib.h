/*
 * nvml-lib.h: the internals of libnvidia-ml.so.1, Cicada's NVML
 * replacement. NVML's interface is nvml-wire.h, the protocol wire.h's
 * (cicada.x: nvml_query); this header ties together the query path and
 * initialisation (init.c), device handles (handles.c), the system queries
 * (system.c), the device queries (device.c, status.c) and the names
 * Cicada does not serve (unsupported.c).
 */
#ifndef CICADA_NVML_LIB_H
#define CICADA_NVML_LIB_H

#include <stddef.h>
#include <stdint.h>
#include "nvml-wire.h"
#include "wire.h"                   /* the protocol: nvml_query (cicada.x) */

/* One answer of the server, copied out of the reply. */
struct nvml_answer {
	uint64_t v[NVML_SCALARS];
	unsigned nv;
	unsigned char data[NVML_DATA_MAX];
	unsigned ndata;
};

/* init.c: asks the server; NVML_ERROR_UNINITIALIZED before nvmlInit. */
nvmlReturn_t nvml_ask(unsigned func, unsigned device, uint64_t arg, const char *text, struct nvml_answer *out);
nvmlReturn_t nvml_ready(void);
nvmlReturn_t nvml_unsupported(const char *name);
/* The server's device count, learnt at nvmlInit (0 before): at most
 * NVML_DEVICES_MAX, the slots of handles.c's table. */
#define NVML_DEVICES_MAX 64
unsigned nvml_count(void);

/* handles.c */
nvmlReturn_t nvml_index(nvmlDevice_t device, unsigned *index);
nvmlDevice_t nvml_handle(unsigned index);

/* device.c: a device query whose answer is n scalars (n at least 1). */
nvmlReturn_t nvml_device_scalars(nvmlDevice_t device, unsigned func, uint64_t arg, uint64_t *v, unsigned n);
nvmlReturn_t nvml_text_out(const struct nvml_answer *a, char *buf, unsigned length);
nvmlReturn_t nvml_pci_out(const struct nvml_answer *a, nvmlPciInfo_t *pci, int legacy);

#endif

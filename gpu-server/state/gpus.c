/*
 * gpus.c: which GPUs a client sees. The gpu-server hands each worker the
 * GPUs it may use (placement.c chooses them: all of the server's by
 * default); the client's CUDA_VISIBLE_DEVICES, sent in its hello, narrows
 * and orders them as the driver would (ordinals into that set, or UUIDs;
 * the list ends at the first entry that names no GPU or one already
 * named). The client numbers its devices 0..n-1 as it would natively;
 * every device number that crosses the wire is translated here, both
 * ways, so a client can neither see nor reach a GPU it was not given.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "state.h"

/* Every GPU of the node, in the driver's order, until a client's set. */
void gpus_init(struct worker *w)
{
	int n = 0;

	if (cuDeviceGetCount(&n) || n < 0)
		n = 0;
	w->ngpus = n > CICADA_MAX_GPUS ? CICADA_MAX_GPUS : n;
	for (int i = 0; i < w->ngpus; i++)
		w->gpu[i] = (CUdevice)i;
	w->nreal = w->ngpus;
}

/* The GPUs the gpu-server assigned (real ordinals); none: all. */
void gpus_assign(struct worker *w, const uint32_t *ids, unsigned n)
{
	w->nassigned = 0;
	for (unsigned i = 0; i < n && w->nassigned < CICADA_MAX_GPUS; i++)
		if (ids[i] < (uint32_t)w->nreal)
			w->assigned[w->nassigned++] = (CUdevice)ids[i];
}

/* NVML's form of a GPU's UUID: "GPU-" and 8-4-4-4-12 hex digits. */
int gpus_uuid_text(CUdevice dev, char *out, size_t len)
{
	CUuuid u;
	const unsigned char *b = (const unsigned char *)u.bytes;
	CUresult err = cuDeviceGetUuid(&u, dev);

	if (err)
		return -1;
	snprintf(out, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
	return 0;
}

/* One entry of a device list: an ordinal into base, or a UUID (whole, or
 * a prefix that names one GPU, "GPU-" optional). -1 if it names none. */
static int entry(const char *tok, const CUdevice *base, int n)
{
	char *end, uuid[64];
	long v;
	int found = -1;

	while (isspace((unsigned char)*tok))
		tok++;
	v = strtol(tok, &end, 10);
	if (end != tok && (!*end || isspace((unsigned char)*end)))
		return v >= 0 && v < n ? (int)v : -1;
	if (!strncasecmp(tok, "GPU-", 4))
		tok += 4;
	if (!*tok)
		return -1;
	for (int i = 0; i < n; i++)
		if (!gpus_uuid_text(base[i], uuid, sizeof(uuid)) && !strncasecmp(uuid + 4, tok, strlen(tok))) {
			if (found >= 0)
				return -1;           /* ambiguous */
			found = i;
		}
	return found;
}

/* The client's set: the assigned GPUs, narrowed by visible (the client's
 * CUDA_VISIBLE_DEVICES after a '=', or "" when it has none), or for a
 * restore put in the order visible names after a '>' (CICADA_RESTORE_GPUS:
 * the application's GPU 0 goes to the first named, and so on; the GPUs
 * not named follow in their order). A restore's entry that names no GPU
 * of the session's is an error (-1, with why). */
int gpus_choose(struct worker *w, const char *visible, char *why)
{
	CUdevice base[CICADA_MAX_GPUS];
	int n = 0, chosen = 0;
	char list[CICADA_NAME_MAX], *save = NULL;

	if (w->nassigned)
		for (unsigned i = 0; i < w->nassigned; i++)
			base[n++] = w->assigned[i];
	else
		for (int i = 0; i < w->nreal; i++)
			base[n++] = (CUdevice)i;
	if (!visible || (visible[0] != '=' && visible[0] != '>')) {
		memcpy(w->gpu, base, sizeof(base[0]) * (size_t)n);
		w->ngpus = n;
		return 0;
	}
	snprintf(list, sizeof(list), "%s", visible + 1);
	for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int i = entry(tok, base, n), dup = 0;

		for (int k = 0; i >= 0 && k < chosen; k++)
			dup |= w->gpu[k] == base[i];
		if ((i < 0 || dup) && visible[0] == '>')
			return wire_fail(why, "CICADA_RESTORE_GPUS: '%s' names no GPU of this server's "
					"(it has %d)%s", tok, n, dup ? " or names one twice" : "");
		if (i < 0 || dup)
			break;
		w->gpu[chosen++] = base[i];
	}
	for (int i = 0; visible[0] == '>' && i < n; i++) {
		int named = 0;

		for (int k = 0; k < chosen; k++)
			named |= w->gpu[k] == base[i];
		if (!named)
			w->gpu[chosen++] = base[i];
	}
	w->ngpus = chosen;
	return 0;
}

/* A device number from the client: its ordinal, or CU_DEVICE_CPU and
 * CU_DEVICE_INVALID, which pass as they are. */
CUresult device_in(const struct worker *w, uint64_t v, CUdevice *real)
{
	int d = (int)(int64_t)v;

	if (d == CU_DEVICE_CPU || d == CU_DEVICE_INVALID) {
		*real = d;
		return CUDA_SUCCESS;
	}
	if ((int64_t)v < 0 || (int64_t)v >= w->ngpus)
		return CUDA_ERROR_INVALID_DEVICE;
	*real = w->gpu[v];
	return CUDA_SUCCESS;
}

/* A device number for the client: the ordinal it knows the GPU by, or
 * CU_DEVICE_INVALID for one it does not see. */
uint64_t device_out(const struct worker *w, CUdevice real)
{
	if (real == CU_DEVICE_CPU || real == CU_DEVICE_INVALID)
		return (uint64_t)(int64_t)real;
	for (int i = 0; i < w->ngpus; i++)
		if (w->gpu[i] == real)
			return (uint64_t)i;
	return (uint64_t)(int64_t)CU_DEVICE_INVALID;
}

/* The client's ordinal of a real GPU, or -1. */
int device_slot(const struct worker *w, CUdevice real)
{
	for (int i = 0; i < w->ngpus; i++)
		if (w->gpu[i] == real)
			return i;
	return -1;
}

/* A fresh session's GPUs: chosen, with the worker's own context (its
 * copies, its pinned buffers are portable) on the client's first GPU. */
int gpus_setup(struct worker *w, const char *visible, char *why)
{
	CUcontext ctx;

	if (gpus_choose(w, visible, why))
		return -1;
	if (!w->ngpus) {                     /* the worker's own buffers still need a context */
		CUdevice first = w->nassigned ? w->assigned[0] : 0;
		if (w->start_on && w->start_on(w, first))
			return wire_fail(why, "cannot start CUDA on GPU %d of the node", (int)first);
		return 0;
	}
	if ((w->start_on && w->start_on(w, w->gpu[0])) || !(ctx = primary_ctx(w, w->gpu[0])) ||
	    cuCtxSetCurrent(ctx))
		return wire_fail(why, "cannot start CUDA on GPU %d of the node", (int)w->gpu[0]);
	w->base_ctx = ctx;
	w->gpu_order[0] = 0;
	w->ngpu_order = 1;
	log_info("session GPUs: %d (first: GPU %d of the node)", w->ngpus, (int)w->gpu[0]);
	return 0;
}

/* primary.c's hook, through worker.c: the worker took real GPU dev's
 * primary context; if it is one of the session's, its ordinal comes next
 * in gpu_order. */
void gpus_taken(struct worker *w, CUdevice dev)
{
	int slot = device_slot(w, dev);

	if (slot < 0 || w->ngpu_order >= CICADA_MAX_GPUS)
		return;
	for (unsigned i = 0; i < w->ngpu_order; i++)
		if (w->gpu_order[i] == slot)
			return;
	w->gpu_order[w->ngpu_order++] = (unsigned char)slot;
}

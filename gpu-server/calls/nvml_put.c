/*
 * nvml_put.c: the NVML reply being filled, a number or a text at a time;
 * below nvml.c, nvml_real.c and nvml_cuda.c, which all answer into it.
 */
#include <string.h>
#include "calls.h"

void nvml_put(struct nvml_reply *r, uint64_t v)
{
	if (r->nv < CICADA_SCALARS_MAX)
		r->v[r->nv++] = v;
}

/* Appends text and its NUL (cut to what fits). */
void nvml_put_text(struct nvml_reply *r, const char *text)
{
	size_t room = sizeof(r->data) - r->ndata, n = strlen(text);

	if (!room)
		return;
	if (n >= room)
		n = room - 1;
	memcpy(r->data + r->ndata, text, n);
	r->data[r->ndata + n] = '\0';
	r->ndata += (unsigned)n + 1;
}

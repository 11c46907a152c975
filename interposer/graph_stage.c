/*
 * graph_stage.c: graph copy nodes of the program's pageable memory, which
 * the gpu-server cannot reach. Such a side travels by its address, with
 * the id of a host function here that moves its bytes when the node runs;
 * the worker makes the node a host node and a copy around a stage
 * (gpu-server/calls/graph_stage.c), so the program's memory is read or written
 * at every launch, in the graph's order, as natively. Over shared memory
 * the stage is pinned memory shared with the worker, which that function
 * fills or empties; remote, the worker pins it and the bytes cross the
 * host function channel, from or into the program's memory (hostfn.c).
 * The stage is packed row after row. Each set of parameters gets its own
 * stage and id (a graph and its executables may hold either), kept as
 * long as the process, like the host functions of graphs. The shape of
 * a side (struct stage_shape, its rows) is hostfn.c's, below.
 */
#include <stdlib.h>
#include "interposer.h"

/* The bytes from the base to the end of the last row, or 0 if they
 * cannot be program memory at all. */
static size_t shape_span(const struct stage_shape *s)
{
	size_t rows = s->rows ? s->rows : 1, depth = s->depth ? s->depth : 1;
	size_t pitch = s->pitch ? s->pitch : s->width, height = s->height ? s->height : rows;
	unsigned __int128 end = (unsigned __int128)s->x + ((unsigned __int128)(s->z + depth - 1) * height + s->y +
							   rows - 1) * pitch + s->width;

	return end >> 56 || !host_range_valid(s->base, (size_t)end) ? 0 : (size_t)end;
}

struct shared_stage {
	struct stage_shape shape;
	char *pinned;
};

static void CUDA_CB shared_in(void *p)
{
	struct shared_stage *st = p;
	size_t w = st->shape.width;

	for (size_t i = 0, n = stage_shape_rows(&st->shape); i < n; i++)
		memcpy(st->pinned + i * w, stage_shape_row(&st->shape, i), w);
}

static void CUDA_CB shared_out(void *p)
{
	struct shared_stage *st = p;
	size_t w = st->shape.width;

	for (size_t i = 0, n = stage_shape_rows(&st->shape); i < n; i++)
		memcpy(stage_shape_row(&st->shape, i), st->pinned + i * w, w);
}

/* A local client's stage: pinned memory it shares with the worker, and
 * the function that fills or empties it (its id in *id). */
static CUresult shared_register(const struct stage_shape *s, size_t size, int to_device, uint64_t *v)
{
	struct shared_stage *st = malloc(sizeof(*st));
	struct host_range r;
	void *pinned = NULL;
	CUresult err;

	if (!st)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if ((err = cuMemHostAlloc(&pinned, size, 0)) || !hostmem_find(pinned, size, &r)) {
		if (pinned)
			cuMemFreeHost(pinned);
		free(st);
		return err ? err : CUDA_ERROR_NOT_SUPPORTED;
	}
	*st = (struct shared_stage){ *s, pinned };
	if (!(v[GM_STAGE_ID] = hostfn_register(to_device ? shared_in : shared_out, st, &err))) {
		cuMemFreeHost(pinned);
		free(st);
		return err;
	}
	v[GM_STAGE_REGION] = r.region;
	v[GM_STAGE_OFF] = r.offset;
	return CUDA_SUCCESS;
}

/* Packs the program's side (at v + side, its type already there) and
 * registers what moves its bytes; the copy's shape is in v. */
CUresult graph_stage_pack(uint64_t *v, unsigned side, const struct stage_shape *s, int to_device)
{
	size_t rows = stage_shape_rows(s), size;
	CUresult err;

	if (!s->width || !shape_span(s) || s->width > SIZE_MAX / rows)
		return CUDA_ERROR_INVALID_VALUE;
	size = s->width * rows;
	v[side + GM_DEVICE] = (uint64_t)(uintptr_t)s->base, v[side + GM_REGION] = 0, v[side + GM_ARRAY] = 0;
	v[side + GM_X] = s->x, v[side + GM_Y] = s->y, v[side + GM_Z] = s->z;
	v[side + GM_PITCH] = s->pitch, v[side + GM_HEIGHT] = s->height;
	v[GM_STAGE_REGION] = v[GM_STAGE_OFF] = 0;
	if ((err = client_connect()))
		return err;
	if (client_shm())
		return shared_register(s, size, to_device, v);
	return (v[GM_STAGE_ID] = hostfn_stage_node(s, to_device, &err)) ? CUDA_SUCCESS : err;
}

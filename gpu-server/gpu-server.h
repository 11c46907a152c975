/*
 * gpu-server.h: the gpu-server's parts, each in its folder with one
 * header, each calling only the parts below it:
 *
 *   front/       the daemon, admission, the pool, sessions, privsep
 *   checkpoint/  checkpoints, restores, a migration's memory
 *   calls/       the dispatcher and the driver calls, object by object
 *   state/       the worker, its handles, GPUs, memory, replay log
 *
 * A lower part reaches a higher one only through hooks registered at
 * start-up (handles_on_load, primary_on_take, devmem_on_unmap, ...).
 * The worker is split the same way: struct worker (state.h) holds what
 * state/ uses; the fields only a higher part uses are in that part's
 * struct worker_calls, worker_ckpt or worker_front, which w->calls,
 * w->ckpt and w->front point to (front/worker.c makes them).
 * This header includes them all: for the generated procedure table
 * (build/gen/server_calls.c) and the unit tests.
 */
#ifndef CICADA_GPU_SERVER_H
#define CICADA_GPU_SERVER_H

#include "front/front.h"

#endif

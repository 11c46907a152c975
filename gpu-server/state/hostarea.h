/*
 * hostarea.h: a worker's own host mappings and thread stacks, kept in an
 * address range of their own, away from where the driver places module
 * variables (hostarea.c says why). state.h includes it; the shared-memory
 * fuzzer, a worker's stand-in, includes it alone.
 */
#ifndef CICADA_GPU_SERVER_HOSTAREA_H
#define CICADA_GPU_SERVER_HOSTAREA_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Before CUDA starts; also makes the shared-memory ring map clients'
 * segments here (shm_set_mapper). */
void hostarea_enable(void);
int hostarea_enabled(void);
void *hostarea_map(size_t size, int prot, int flags, int fd, off_t off);   /* as mmap(NULL, ...) */
void *hostarea_map_at(uint64_t at, size_t size, int prot, int flags, int fd, off_t off);
void hostarea_unmap(void *p, size_t size);
int hostarea_thread(pthread_t *t, void *(*fn)(void *), void *arg);
int hostarea_join(pthread_t t, void **ret);

#endif

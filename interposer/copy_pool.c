/*
 * copy_pool.c: large host memcpys split across a few threads. Staged
 * copies of a local client are bound by the application-side memcpy into
 * and out of shared memory, which one core cannot do at the speed the
 * GPU's DMA engines work at. CICADA_COPY_THREADS sets the pool size
 * (default 4, 1 disables it).
 */
#include <pthread.h>
#include <stdlib.h>
#include "interposer.h"

#define POOL_MAX 16
#define SPLIT_MIN (1u << 20)

struct copy_job {
	char *dst;
	const char *src;
	size_t len;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t go, done;
	pthread_once_t once;
	unsigned nthreads, generation, pending;
	struct copy_job jobs[POOL_MAX];
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER,
	    .done = PTHREAD_COND_INITIALIZER, .once = PTHREAD_ONCE_INIT };

static void *copy_thread(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg, seen = 0;

	for (;;) {
		pthread_mutex_lock(&pool.lock);
		while (pool.generation == seen)
			pthread_cond_wait(&pool.go, &pool.lock);
		seen = pool.generation;
		struct copy_job job = pool.jobs[id];
		pthread_mutex_unlock(&pool.lock);
		memcpy(job.dst, job.src, job.len);
		pthread_mutex_lock(&pool.lock);
		if (--pool.pending == 0)
			pthread_cond_signal(&pool.done);
		pthread_mutex_unlock(&pool.lock);
	}
	return NULL;
}

static void start_pool(void)
{
	const char *env = getenv("CICADA_COPY_THREADS");
	unsigned n = env ? (unsigned)atoi(env) : 4;
	pthread_attr_t attr;

	if (n < 1)
		n = 1;
	if (n > POOL_MAX)
		n = POOL_MAX;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pool.nthreads = 1;
	for (unsigned i = 1; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, &attr, copy_thread, (void *)(uintptr_t)i))
			break;
		pool.nthreads++;
	}
	pthread_attr_destroy(&attr);
}

/* Callers are serialised by the connection lock. */
void copy_parallel(void *dst, const void *src, size_t len)
{
	size_t part;

	pthread_once(&pool.once, start_pool);
	if (len < SPLIT_MIN || pool.nthreads == 1) {
		memcpy(dst, src, len);
		return;
	}
	part = (len / pool.nthreads + 63) & ~(size_t)63;
	pthread_mutex_lock(&pool.lock);
	for (unsigned i = 1; i < pool.nthreads; i++) {
		size_t off = part * i, n = off >= len ? 0 : (len - off < part ? len - off : part);
		pool.jobs[i] = (struct copy_job){ (char *)dst + off, (const char *)src + off, n };
	}
	pool.pending = pool.nthreads - 1;
	pool.generation++;
	pthread_cond_broadcast(&pool.go);
	pthread_mutex_unlock(&pool.lock);
	memcpy(dst, src, part < len ? part : len);
	pthread_mutex_lock(&pool.lock);
	while (pool.pending)
		pthread_cond_wait(&pool.done, &pool.lock);
	pthread_mutex_unlock(&pool.lock);
}

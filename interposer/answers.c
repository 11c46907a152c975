/*
 * answers.c: answers the client keeps. Some driver queries have answers
 * that cannot change until the application changes something: a
 * context's device, a device's attributes, a kernel's attributes and
 * function, a primary context's state. The runtime asks them hundreds of
 * times per training step (cudaGetDevice is cuCtxGetDevice), and each
 * would be a round trip. Calls marked "cache" in calls.tbl keep a
 * successful answer here, keyed by the procedure, its inputs and the
 * calling thread's context; calls marked "flush" (what sets an attribute,
 * unloads code, creates or destroys a context, changes a primary
 * context) drop every kept answer, and so do a pause and a resume (the
 * session may go on on another GPU). After a sticky device error or a
 * lost server nothing is kept any more, so each query reports the error
 * as the driver would.
 */
#include <pthread.h>
#include "interposer.h"

#define ANSWERS_SLOTS 4096             /* a power of two */
#define ANSWERS_FULL (ANSWERS_SLOTS / 2)
#define KEY_MAX 12
#define VALUE_MAX 2

struct answer {
	uint32_t proc;                  /* 0: empty */
	uint32_t nkey;
	uint64_t key[KEY_MAX];
	uint64_t value[VALUE_MAX];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct answer table[ANSWERS_SLOTS];
static unsigned used_slot[ANSWERS_FULL], used;  /* a flush clears only these */
static uint64_t generation;                     /* flushes so far */
static int answers_off;

static uint64_t hash(unsigned proc, const uint64_t *key, unsigned n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ proc;

	for (unsigned i = 0; i < n; i++) {
		h ^= key[i];
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	return h;
}

static struct answer *slot_of(unsigned proc, const uint64_t *key, unsigned n)
{
	unsigned i = (unsigned)hash(proc, key, n) & (ANSWERS_SLOTS - 1);

	for (;; i = (i + 1) & (ANSWERS_SLOTS - 1)) {
		struct answer *a = &table[i];

		if (!a->proc || (a->proc == proc && a->nkey == n && !memcmp(a->key, key, n * sizeof(*key))))
			return a;
	}
}

/* With the lock held. */
static void clear(void)
{
	for (unsigned i = 0; i < used; i++)
		table[used_slot[i]].proc = 0;
	used = 0;
	generation++;
}

void answers_flush(void)
{
	pthread_mutex_lock(&lock);
	clear();
	pthread_mutex_unlock(&lock);
}

/* A device error that poisons the context, or a lost server: from now on
 * every query goes to the server, which reports it. */
void answers_error(CUresult err)
{
	switch (err) {
	case CUDA_ERROR_ILLEGAL_ADDRESS: case CUDA_ERROR_LAUNCH_TIMEOUT: case CUDA_ERROR_ASSERT:
	case CUDA_ERROR_HARDWARE_STACK_ERROR: case CUDA_ERROR_ILLEGAL_INSTRUCTION:
	case CUDA_ERROR_MISALIGNED_ADDRESS: case CUDA_ERROR_INVALID_ADDRESS_SPACE: case CUDA_ERROR_INVALID_PC:
	case CUDA_ERROR_LAUNCH_FAILED: case CUDA_ERROR_ECC_UNCORRECTABLE: case CUDA_ERROR_DEVICE_UNAVAILABLE:
		break;
	default:
		return;
	}
	if (answers_off)
		return;
	answers_off = 1;
	answers_flush();
}

/* client_scalar_call, answered from the kept answers when it can be. */
CUresult client_cached_call(unsigned proc, const uint64_t *in, unsigned nin, uint64_t *out, unsigned nout)
{
	uint64_t key[KEY_MAX], gen;
	struct answer *a;
	CUresult err;
	int hit = 0;

	if (nin + 1 > KEY_MAX || nout > VALUE_MAX || answers_off || !client_connected())
		return client_scalar_call(proc, 0, in, nin, out, nout);
	memcpy(key, in, nin * sizeof(*in));
	key[nin] = handle_id(ctx_current());
	pthread_mutex_lock(&lock);
	a = slot_of(proc, key, nin + 1);
	if (a->proc) {
		memcpy(out, a->value, nout * sizeof(*out));
		hit = 1;
	}
	gen = generation;
	pthread_mutex_unlock(&lock);
	if (hit)
		return CUDA_SUCCESS;
	err = client_scalar_call(proc, 0, in, nin, out, nout);
	if (err)
		return err;
	pthread_mutex_lock(&lock);
	if (used >= ANSWERS_FULL)
		clear();
	/* A flush while the call ran (another thread set an attribute, a
	 * resume) may have made this answer stale: it is not kept. */
	a = gen == generation ? slot_of(proc, key, nin + 1) : NULL;
	if (a && !a->proc) {
		a->proc = proc;
		a->nkey = nin + 1;
		memcpy(a->key, key, (nin + 1) * sizeof(*key));
		memcpy(a->value, out, nout * sizeof(*out));
		used_slot[used++] = (unsigned)(a - table);
	}
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

static int answers_resume(int regions_lost)
{
	(void)regions_lost;
	answers_flush();
	return 0;
}

static const struct client_hooks answers_hooks = { .pause = answers_flush, .resume = answers_resume };

__attribute__((constructor)) static void answers_init(void)
{
	client_add_hooks(&answers_hooks);
}

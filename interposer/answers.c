/*
 * answers.c: answers the client keeps. Some driver queries have answers
 * that cannot change until the application changes something: a
 * context's device, a device's attributes, a kernel's attributes and
 * function, a primary context's state. The runtime asks them hundreds of
 * times per training step (cudaGetDevice is cuCtxGetDevice), and each
 * would be a round trip. Calls marked "cache" in calls.tbl keep a
 * successful answer here, keyed by the procedure, its inputs and the
 * calling thread's context; calls marked "flush" (what unloads code,
 * creates or destroys a context, changes a primary context or a limit)
 * drop every kept answer, and so do a pause and a resume (the session
 * may go on on another GPU).
 *
 * Code answers ("cache-code": a function's or kernel's attributes and
 * occupancy) are dropped alone by "flush-code" calls, which set a
 * function's or kernel's attribute: cuBLASLt sets one before most GEMMs,
 * and dropping the device's answers each time made every GEMM pay a
 * round trip per query. A successful set is kept too (answers_setting_*),
 * so setting the value a kernel already has is answered here, as the
 * driver answers it: by doing nothing.
 *
 * After a sticky device error or a lost server nothing is kept any more,
 * so each query reports the error as the driver would.
 */
#include <pthread.h>
#include "interposer.h"

#define ANSWERS_SLOTS 4096             /* a power of two */
#define ANSWERS_FULL (ANSWERS_SLOTS / 2)
#define KEY_MAX 12
#define VALUE_MAX 2

struct answer {
	uint32_t proc;                  /* 0: empty */
	uint16_t nkey;
	uint16_t scope;                 /* enum scope */
	uint64_t epoch;                 /* of its scope, when kept */
	uint64_t key[KEY_MAX];
	uint64_t value[VALUE_MAX];
};

/* What drops an answer besides a full flush: a new epoch of its scope
 * (SETTING_KERNEL and SETTING_FUNC, interposer.h, are scopes too). */
enum scope { SCOPE_ALL, SCOPE_CODE, SCOPE_NSCOPES = 4 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct answer table[ANSWERS_SLOTS];
static unsigned used_slot[ANSWERS_FULL], used;  /* a flush clears only these */
static uint64_t generation;                     /* flushes so far */
static uint64_t epochs[SCOPE_NSCOPES];          /* scoped flushes so far */
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

/* Whether a kept answer still holds (with the lock held). */
static int fresh(const struct answer *a)
{
	return a->proc && (a->scope == SCOPE_ALL || a->epoch == epochs[a->scope]);
}

void answers_flush(void)
{
	pthread_mutex_lock(&lock);
	clear();
	pthread_mutex_unlock(&lock);
}

/* Drops the code answers alone (a new epoch of their scope). */
void answers_flush_code(void)
{
	pthread_mutex_lock(&lock);
	epochs[SCOPE_CODE]++;
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

/* Keeps value under (proc, key) in scope, unless a flush of it happened
 * since gen / epoch were read (with the lock held). A stale answer of the
 * same key is overwritten in place. */
static void keep(unsigned proc, const uint64_t *key, unsigned n, const uint64_t *value, unsigned nvalue,
		 unsigned scope, uint64_t gen, uint64_t epoch)
{
	struct answer *a;

	if (used >= ANSWERS_FULL)
		clear();
	if (gen != generation || epoch != epochs[scope])
		return;
	a = slot_of(proc, key, n);
	if (!a->proc) {
		a->proc = proc;
		a->nkey = (uint16_t)n;
		memcpy(a->key, key, n * sizeof(*key));
		used_slot[used++] = (unsigned)(a - table);
	}
	a->scope = (uint16_t)scope;
	a->epoch = epochs[scope];
	memcpy(a->value, value, nvalue * sizeof(*value));
}

static CUresult cached_call(unsigned proc, const uint64_t *in, unsigned nin, uint64_t *out, unsigned nout,
			    unsigned scope)
{
	uint64_t key[KEY_MAX], gen, epoch;
	struct answer *a;
	CUresult err;
	int hit = 0;

	if (nin + 1 > KEY_MAX || nout > VALUE_MAX || answers_off || !client_connected())
		return client_scalar_call(proc, 0, in, nin, out, nout);
	memcpy(key, in, nin * sizeof(*in));
	key[nin] = handle_id(ctx_current());
	pthread_mutex_lock(&lock);
	a = slot_of(proc, key, nin + 1);
	if (fresh(a)) {
		memcpy(out, a->value, nout * sizeof(*out));
		hit = 1;
	}
	gen = generation, epoch = epochs[scope];
	pthread_mutex_unlock(&lock);
	if (hit)
		return CUDA_SUCCESS;
	err = client_scalar_call(proc, 0, in, nin, out, nout);
	if (err)
		return err;
	/* A flush while the call ran (another thread set an attribute, a
	 * resume) may have made this answer stale: it is not kept. */
	pthread_mutex_lock(&lock);
	keep(proc, key, nin + 1, out, nout, scope, gen, epoch);
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

/* client_scalar_call, answered from the kept answers when it can be. */
CUresult client_cached_call(unsigned proc, const uint64_t *in, unsigned nin, uint64_t *out, unsigned nout)
{
	return cached_call(proc, in, nin, out, nout, SCOPE_ALL);
}

/* The same for a code answer, which flush-code calls drop. */
CUresult client_cached_code_call(unsigned proc, const uint64_t *in, unsigned nin, uint64_t *out, unsigned nout)
{
	return cached_call(proc, in, nin, out, nout, SCOPE_CODE);
}

/*
 * Settings: the value a set call (proc) last gave under key, kept in the
 * scope of its kind (SETTING_KERNEL, SETTING_FUNC). The key holds no
 * context: a kernel's attributes are its device's, whatever context sets
 * them, and a function names its context already. A set of one kind
 * drops what the other kind remembers: a function and the kernel it came
 * from name the same code.
 */
static int setting_ok(unsigned kind, unsigned nin)
{
	return nin <= KEY_MAX && !answers_off && (kind == SETTING_KERNEL || kind == SETTING_FUNC);
}

int answers_setting_is(unsigned proc, unsigned kind, const uint64_t *key, unsigned n, uint64_t value)
{
	struct answer *a;
	int same;

	if (!setting_ok(kind, n))
		return 0;
	pthread_mutex_lock(&lock);
	a = slot_of(proc, key, n);
	same = fresh(a) && a->scope == kind && a->value[0] == value;
	pthread_mutex_unlock(&lock);
	return same;
}

void answers_setting_keep(unsigned proc, unsigned kind, const uint64_t *key, unsigned n, uint64_t value)
{
	if (!setting_ok(kind, n))
		return;
	pthread_mutex_lock(&lock);
	epochs[kind == SETTING_KERNEL ? SETTING_FUNC : SETTING_KERNEL]++;
	keep(proc, key, n, &value, 1, kind, generation, epochs[kind]);
	pthread_mutex_unlock(&lock);
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

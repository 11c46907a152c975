/*
 * export_tables.c: the driver's private tables that the CUDA runtime and
 * libraries ask for with cuGetExportTable (facts in EXPORT-TABLES.md).
 * Every table is static, so its address never changes (the integrity
 * check hashes it). Slots whose use is unknown return success and do
 * nothing, except in 21318c60, whose unknown slots fail; a table we do
 * not know is logged once and refused.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "interposer.h"

typedef void (*slot)(void);

static CUresult CUDAAPI slot_ok(void)
{
	return CUDA_SUCCESS;
}

static CUresult CUDAAPI slot_unsupported(void)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

#define SIZE_WORD(n) ((slot)(uintptr_t)((n) * sizeof(void *)))
#define OK ((slot)slot_ok)
#define NO ((slot)slot_unsupported)

/* --- error-log sink {f8cff951} --- */
static void CUDAAPI runtime_log(const char *component, int level, const char *fmt, va_list ap)
{
	char line[512];

	vsnprintf(line, sizeof(line), fmt, ap);
	log_debug("runtime log (%s, %d): %s", component ? component : "?", level, line);
}

static slot log_table[] = { SIZE_WORD(3), (slot)runtime_log, OK, NULL };

/* --- CUDART_INTERFACE {6bd5fb6c}: slot 2 names a device's primary
 * context without activating it (the runtime asks before it retains it) --- */
static CUresult CUDAAPI primary_handle(CUcontext *out, CUdevice dev)
{
	uint64_t in = (uint64_t)dev, id;
	CUresult err;

	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	err = client_scalar_call(P_primary_ctx_handle, 0, &in, 1, &id, 1);
	if (!err)
		*out = (CUcontext)(uintptr_t)id;
	return err;
}

static slot interface_table[] = { SIZE_WORD(13), NO, (slot)primary_handle, NO, NO, NO, NO, OK, NO, NO,
				  NULL, NO, OK, NULL };

/* --- tools callback hooks {a094798c}: no callbacks enabled --- */
static uint32_t callback_flags[1024];
static unsigned char tool_flags[64];

static void CUDAAPI callback_buffer(void **buf, size_t *count)
{
	*buf = callback_flags;
	*count = sizeof(callback_flags) / sizeof(callback_flags[0]);
}

static void CUDAAPI tool_buffer(void **buf, size_t *count)
{
	*buf = tool_flags;
	*count = 14;
}

static slot hooks_table[] = { SIZE_WORD(7), OK, (slot)callback_buffer, OK, OK, OK, (slot)tool_buffer, NULL };

/* --- tools TLS {42d85a81}: slot 2 names the calling thread's current
 * context (cuBLAS asks before it uses table 21318c60) --- */
static CUresult CUDAAPI tls_current_context(CUcontext *out)
{
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	*out = ctx_current();
	return CUDA_SUCCESS;
}

static slot tls_table[] = { SIZE_WORD(3), OK, (slot)tls_current_context, NULL };

/* --- context-local storage {c693336e}: the runtime's per-context state,
 * kept here in the process (keys and values are its own pointers) --- */
struct cls_entry {
	CUcontext ctx;
	void *key, *value;
};

static pthread_mutex_t cls_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cls_entry cls[256];
static int ncls;

static CUresult cls_context(CUcontext *ctx)
{
	if (!*ctx)
		*ctx = ctx_current();
	return *ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult CUDAAPI cls_put(CUcontext ctx, void *key, void *value, void *dtor)
{
	CUresult err = cls_context(&ctx);
	int i;

	if (err)
		return err;
	pthread_mutex_lock(&cls_lock);
	for (i = 0; i < ncls && (cls[i].ctx != ctx || cls[i].key != key); i++)
		;
	if (i == ncls && ncls < (int)(sizeof(cls) / sizeof(cls[0])))
		ncls++;
	if (i < ncls)
		cls[i] = (struct cls_entry){ ctx, key, value };
	else
		err = CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_unlock(&cls_lock);
	return err;
}

static CUresult CUDAAPI cls_delete(CUcontext ctx, void *key)
{
	CUresult err = cls_context(&ctx);

	if (err)
		return err;
	pthread_mutex_lock(&cls_lock);
	for (int i = 0; i < ncls; i++)
		if (cls[i].ctx == ctx && cls[i].key == key)
			cls[i] = cls[--ncls];
	pthread_mutex_unlock(&cls_lock);
	return CUDA_SUCCESS;
}

static CUresult CUDAAPI cls_get(void **value, CUcontext ctx, void *key)
{
	CUresult err = cls_context(&ctx);

	if (err)
		return err;
	err = CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&cls_lock);
	for (int i = 0; i < ncls; i++)
		if (cls[i].ctx == ctx && cls[i].key == key) {
			*value = cls[i].value;
			err = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&cls_lock);
	return err;
}

/* Forgets a destroyed context's entries. */
void cls_forget(CUcontext ctx)
{
	pthread_mutex_lock(&cls_lock);
	for (int i = 0; i < ncls;)
		if (cls[i].ctx == ctx)
			cls[i] = cls[--ncls];
		else
			i++;
	pthread_mutex_unlock(&cls_lock);
}

static slot cls_table[] = { (slot)cls_put, (slot)cls_delete, (slot)cls_get, NULL };

/* --- context checks {263e8860}: no context is ever wrapped --- */
static CUresult CUDAAPI context_unwrap(CUcontext ctx, unsigned *wrapped, CUcontext *inner)
{
	if (wrapped)
		*wrapped = 0;
	return CUDA_SUCCESS;
}

static int CUDAAPI context_flag(void)
{
	return 0;
}

static slot checks_table[] = { SIZE_WORD(15), OK, (slot)context_unwrap, (slot)context_flag, OK, OK, OK, OK,
			       OK, OK, OK, OK, OK, OK, OK, NULL };

/* --- integrity check {d4082055} --- */
static CUresult CUDAAPI integrity(uint32_t version, uint64_t seconds, uint64_t out[2]);

static slot integrity_table[] = { SIZE_WORD(3), (slot)integrity, OK, NULL };

static CUresult CUDAAPI integrity(uint32_t version, uint64_t seconds, uint64_t out[2])
{
	return out ? integrity_digest(version, seconds, interface_table, integrity_table, (void *)integrity, out)
		   : CUDA_ERROR_INVALID_VALUE;
}

/* --- context and stream ids {21318c60}, asked for by cuBLAS and cuBLASLt:
 * slot 4 is the context's id, slot 51 resolves a stream (0: the legacy or,
 * when asked, the per-thread default stream) and slot 39 gives its id.
 * Slot 91 is NULL in the driver; the other slots are not known and fail. --- */
static CUresult CUDAAPI lt_context_id(CUcontext ctx, unsigned long long *id)
{
	return cuCtxGetId(ctx, id);
}

static CUresult CUDAAPI lt_resolve_stream(CUcontext ctx, CUstream stream, CUstream *out, int per_thread)
{
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	*out = stream ? stream : per_thread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
	return CUDA_SUCCESS;
}

static CUresult CUDAAPI lt_stream_id(CUcontext ctx, CUstream stream, unsigned long long *id)
{
	return stream_id(ctx, stream, 0, id);
}

#define NO5 NO, NO, NO, NO, NO
#define NO10 NO5, NO5
static slot lt_table[] = {
	SIZE_WORD(93), NO, NO, NO, (slot)lt_context_id,      /* 0-4 */
	NO10, NO10, NO10, NO, NO, NO, NO,                    /* 5-38 */
	(slot)lt_stream_id, NO10, NO,                        /* 39-50 */
	(slot)lt_resolve_stream, NO10, NO10, NO10, NO5, NO, NO, NO, NO, /* 51-90 */
	NULL, NO, NULL                                       /* 91, 92, end */
};
_Static_assert(sizeof(lt_table) / sizeof(lt_table[0]) == 93 + 1, "table 21318c60 has 93 entries");

/* --- module functions {6e163fbe}: cuFFT walks the functions of each
 * module it loads, with slot 7 (ctx, module, visit, user, ...): each
 * function is handed to visit(user, function, name), and the slot returns
 * how many it visited (the driver returns 1 for a module of one function).
 * The names stay valid (cached by function id). Its other slots are not
 * known and fail. --- */
typedef void (*function_visitor)(void *user, CUfunction f, const char *name);

struct function_name {
	uint64_t id;
	char *name;
};

static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static struct function_name names[1024];
static unsigned nnames;

/* The name kept for function id. An id the server gave to a function of
 * an unloaded module and now to another gets the new name; the old string
 * stays allocated (a library may still hold it). */
static const char *keep_name(uint64_t id, const char *name, uint32_t len)
{
	struct function_name *e = NULL;
	const char *kept = NULL;

	pthread_mutex_lock(&names_lock);
	for (unsigned i = 0; i < nnames && !e; i++)
		if (names[i].id == id)
			e = &names[i];
	if (e && strlen(e->name) == len && !memcmp(e->name, name, len))
		kept = e->name;
	else if ((kept = strndup(name, len)) && e)
		e->name = (char *)kept;
	else if (kept && nnames < sizeof(names) / sizeof(names[0]))
		names[nnames++] = (struct function_name){ id, (char *)kept };  /* past 1024: not cached */
	pthread_mutex_unlock(&names_lock);
	return kept;
}

static CUresult CUDAAPI walk_functions(CUcontext ctx, CUmodule mod, function_visitor visit, void *user)
{
	uint64_t id = handle_id(mod), fid;
	scalars a = { { 1, &id } };
	bytes_res r = { 0 };
	const char *name;
	uint32_t len;
	size_t at = 0;
	int visited = 0;
	CUresult err;

	if (!visit)
		return CUDA_ERROR_INVALID_VALUE;
	err = rpc_module_functions(&a, &r);
	while (!err && at + 12 <= r.data.data_len) {
		memcpy(&fid, r.data.data_val + at, 8);
		memcpy(&len, r.data.data_val + at + 8, 4);
		if (len > r.data.data_len - at - 12) {
			err = client_lost("malformed reply");
			break;
		}
		if (!(name = keep_name(fid, r.data.data_val + at + 12, len))) {
			err = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		visit(user, (CUfunction)(uintptr_t)fid, name);
		visited++;
		at += 12 + len;
	}
	xdr_free((xdrproc_t)xdr_bytes_res, (char *)&r);
	return err ? err : (CUresult)visited;
}

static slot functions_table[] = {
	SIZE_WORD(99), NO, NO, NO, NO, NO, NO, (slot)walk_functions,     /* 0-7 */
	NO10, NO10, NO10, NO10, NO10, NO10, NO10, NO10, NO10, NO, NULL   /* 8-98, end */
};
_Static_assert(sizeof(functions_table) / sizeof(functions_table[0]) == 99 + 1, "table 6e163fbe has 99 entries");

/* The slots of 21318c60 and 6e163fbe that we do not know still fail, but
 * say which was called, once, at info level: each has a function of its
 * own that knows its table and index (put in place before first use). */
static CUresult unknown_slot(const char *table, int n)
{
	char name[48];

	snprintf(name, sizeof(name), "{%s} slot %d", table, n);
	log_missing_once("export table", name, 0);
	return CUDA_ERROR_NOT_SUPPORTED;
}

#define U1(t, a, b) static CUresult CUDAAPI u_##t##_##a##b(void) { return unknown_slot(#t, a * 10 + b); }
#define U10(t, a) U1(t, a, 0) U1(t, a, 1) U1(t, a, 2) U1(t, a, 3) U1(t, a, 4) \
		  U1(t, a, 5) U1(t, a, 6) U1(t, a, 7) U1(t, a, 8) U1(t, a, 9)
#define U100(t) U10(t, 0) U10(t, 1) U10(t, 2) U10(t, 3) U10(t, 4) U10(t, 5) U10(t, 6) U10(t, 7) U10(t, 8) U10(t, 9)
#define P1(t, a, b) (slot)u_##t##_##a##b,
#define P10(t, a) P1(t, a, 0) P1(t, a, 1) P1(t, a, 2) P1(t, a, 3) P1(t, a, 4) \
		  P1(t, a, 5) P1(t, a, 6) P1(t, a, 7) P1(t, a, 8) P1(t, a, 9)
#define P100(t) P10(t, 0) P10(t, 1) P10(t, 2) P10(t, 3) P10(t, 4) P10(t, 5) P10(t, 6) P10(t, 7) P10(t, 8) P10(t, 9)

U100(21318c60)
U100(6e163fbe)
U10(1734dc26, 0) U10(1734dc26, 1)
static const slot unknown_lt[100] = { P100(21318c60) };
static const slot unknown_functions[100] = { P100(6e163fbe) };

/* {1734dc26-800d-4745-8726-c0f1e7dd8bca}: cuBLASLt's FP8 GEMMs ask for
 * it and call slot 4 (two output pointers; a hardware description) without
 * checking the table itself, but take a failed call for "nothing known",
 * the path they also take by choice (EXPORT-TABLES.md). Every slot fails
 * cleanly and names itself once. */
static slot blaslt_table[] = { SIZE_WORD(20), P10(1734dc26, 0) P10(1734dc26, 1) NULL };

__attribute__((constructor)) static void name_unknown_slots(void)
{
	for (int i = 1; i < 93; i++)
		if (lt_table[i] == NO)
			lt_table[i] = unknown_lt[i];
	for (int i = 1; i < 99; i++)
		if (functions_table[i] == NO)
			functions_table[i] = unknown_functions[i];
}

struct known_table {
	unsigned char id[16];
	slot *table;
};

static const struct known_table tables[] = {
	{ { 0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d, 0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99, 0x1e }, functions_table },
	{ { 0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9 }, log_table },
	{ { 0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9 }, interface_table },
	{ { 0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66 }, hooks_table },
	{ { 0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc }, tls_table },
	{ { 0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93 }, cls_table },
	{ { 0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e }, checks_table },
	{ { 0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2 }, integrity_table },
	{ { 0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2 }, lt_table },
	{ { 0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45, 0x87, 0x26, 0xc0, 0xf1, 0xe7, 0xdd, 0x8b, 0xca }, blaslt_table },
};

/* The table for id, or NULL. */
const void *export_table_find(const CUuuid *id)
{
	static const unsigned char compute_cache_id[16] = {
		0xda, 0x91, 0x51, 0xd3, 0x3a, 0xe6, 0xcc, 0x41, 0xa5, 0xc0, 0x4f, 0x26, 0xd5, 0x33, 0xe3, 0x28
	};

	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
		if (!memcmp(tables[i].id, id->bytes, 16))
			return tables[i].table;
	if (!memcmp(compute_cache_id, id->bytes, 16))
		return compute_cache_table();   /* compute_cache.c */
	return NULL;
}

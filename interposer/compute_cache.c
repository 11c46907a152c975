/*
 * compute_cache.c: the driver's compute cache as nvrtc and nvJitLink see
 * it, export table {da9151d3-3ae6-cc41-a5c0-4f26d533e328}. Libraries
 * that compile at run time (cuBLASLt builds GEMM kernels with nvrtc;
 * cuFFT and cuSPARSE link with nvJitLink) ask the driver whether the same
 * input was compiled with the same options before, by any process of the
 * user, and skip the compile if so. Without the table they compile every
 * time, for every process: seconds of client CPU a model pays again at
 * each start and at each new shape.
 *
 * The real driver is in the gpu-server, but the compiles run here, so the
 * cache is the client's own: one file per entry in $CICADA_COMPUTE_CACHE,
 * else $XDG_CACHE_HOME/cicada/compute-cache, else
 * ~/.cache/cicada/compute-cache (made 0700, and it must be the user's).
 * The driver's variables apply: CUDA_CACHE_DISABLE=1 turns it off and
 * CUDA_CACHE_MAXSIZE bounds it (bytes, default 1 GiB; the least recently
 * used entries go first). An entry is a header (magic, size, a checksum
 * of the data) then the data, written to a temporary name and renamed, so
 * a torn or damaged entry is a miss, never a wrong kernel. No descriptor
 * stays open between calls, so a checkpoint of the process holds none.
 *
 * Slots (EXPORT-TABLES.md): 1 makes a key from what is compiled, 2 frees
 * it, 3 looks it up, 4 stores a result, 6 frees what a look-up returned.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include "interposer.h"

#define ENTRY_MAGIC 0x31434343u         /* "CCC1" */
#define ENTRY_MAX (256u << 20)          /* one entry; more is not a kernel */
#define DEFAULT_MAXSIZE (1ull << 30)

struct entry_header {
	uint32_t magic, size;
	uint64_t sum;                   /* XXH3_64bits of the data */
};

struct cache_key {
	char name[40];                  /* 32 hex digits of XXH3_128 */
};

static char cache_dir[PATH_MAX];        /* "" when the cache is off */
static unsigned long long cache_max = DEFAULT_MAXSIZE;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

/* mkdir -p with mode 0700 for what it makes. */
static int make_dirs(const char *path)
{
	char buf[PATH_MAX];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			if (mkdir(buf, 0700) && errno != EEXIST)
				return -1;
			*p = '/';
		}
	return mkdir(buf, 0700) && errno != EEXIST ? -1 : 0;
}

static int pick_dir(char *out, size_t len)
{
	const char *e = getenv("CICADA_COMPUTE_CACHE"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");

	if (e && *e)
		return snprintf(out, len, "%s", e) < (int)len ? 0 : -1;
	if (x && *x == '/')
		return snprintf(out, len, "%s/cicada/compute-cache", x) < (int)len ? 0 : -1;
	if (h && *h == '/')
		return snprintf(out, len, "%s/.cache/cicada/compute-cache", h) < (int)len ? 0 : -1;
	return -1;
}

/* The directory, made if missing; it must be ours and closed to others. */
static void cache_setup(void)
{
	const char *off = getenv("CUDA_CACHE_DISABLE"), *max = getenv("CUDA_CACHE_MAXSIZE");
	char dir[PATH_MAX];
	struct stat st;

	if (off && *off && strcmp(off, "0"))
		return;
	if (max && *max)
		cache_max = strtoull(max, NULL, 0);
	if (pick_dir(dir, sizeof(dir)) || make_dirs(dir) || lstat(dir, &st)) {
		log_info("compute cache: no usable directory; run-time compiles are not kept");
		return;
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		log_warn("compute cache: %s is not a directory of this user's, closed to others; not used", dir);
		return;
	}
	snprintf(cache_dir, sizeof(cache_dir), "%s", dir);
}

static int cache_on(void)
{
	pthread_once(&cache_once, cache_setup);
	return cache_dir[0] && cache_max > 0;
}

static void hash_str(XXH3_state_t *s, const char *str)
{
	static const char none[] = "";

	if (!str)
		str = none;
	XXH3_128bits_update(s, str, strlen(str) + 1);
}

/* Slot 1: the key of a compile (kind: 1 PTX to cubin, 2 bitcode to PTX). */
static CUresult CUDAAPI key_make(void **key, int kind, const void *input, uint32_t size, const char *options,
				 const char *host, const char *stamp, uint32_t a, uint32_t b)
{
	uint32_t words[3] = { (uint32_t)kind, a, b };
	struct cache_key *k;
	XXH3_state_t *s;
	XXH128_hash_t h;

	if (!key || !input || !size || !cache_on())
		return CUDA_ERROR_NOT_SUPPORTED;
	s = XXH3_createState();
	k = malloc(sizeof(*k));
	if (!s || !k) {
		XXH3_freeState(s);
		free(k);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	XXH3_128bits_reset(s);
	XXH3_128bits_update(s, "cicada compute cache 1", 22);
	XXH3_128bits_update(s, words, sizeof(words));
	XXH3_128bits_update(s, &size, sizeof(size));
	XXH3_128bits_update(s, input, size);
	hash_str(s, options);
	hash_str(s, host);
	hash_str(s, stamp);
	h = XXH3_128bits_digest(s);
	XXH3_freeState(s);
	snprintf(k->name, sizeof(k->name), "%016llx%016llx", (unsigned long long)h.high64,
		 (unsigned long long)h.low64);
	*key = k;
	return CUDA_SUCCESS;
}

/* Slot 2. */
static CUresult CUDAAPI key_free(void *key)
{
	free(key);
	return CUDA_SUCCESS;
}

static int entry_path(const struct cache_key *k, char *out, size_t len)
{
	return snprintf(out, len, "%s/%s", cache_dir, k->name) < (int)len ? 0 : -1;
}

static int read_full(int fd, void *buf, size_t len)
{
	for (size_t at = 0; at < len;) {
		ssize_t n = read(fd, (char *)buf + at, len - at);

		if (n <= 0)
			return -1;
		at += (size_t)n;
	}
	return 0;
}

/* The data of an entry, checked, or NULL. */
static void *entry_read(int fd, uint32_t *size)
{
	struct entry_header h;
	struct stat st;
	void *data;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || read_full(fd, &h, sizeof(h)) || h.magic != ENTRY_MAGIC ||
	    h.size == 0 || h.size > ENTRY_MAX || (uint64_t)st.st_size != sizeof(h) + h.size)
		return NULL;
	data = malloc(h.size);
	if (data && !read_full(fd, data, h.size) && XXH3_64bits(data, h.size) == h.sum) {
		*size = h.size;
		return data;
	}
	free(data);
	return NULL;
}

/* Slot 3: 0 and the data (slot 6 frees it) when the compile was kept. */
static CUresult CUDAAPI entry_lookup(void *key, int flags, void **data, uint32_t *size)
{
	char path[PATH_MAX];
	int fd;

	(void)flags;
	if (!key || !data || !size || !cache_on() || entry_path(key, path, sizeof(path)))
		return CUDA_ERROR_NOT_FOUND;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return CUDA_ERROR_NOT_FOUND;
	*data = entry_read(fd, size);
	if (*data)
		futimens(fd, NULL);     /* recently used: evicted last */
	close(fd);
	log_debug("compute cache: %s %s", ((struct cache_key *)key)->name, *data ? "hit" : "miss");
	return *data ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* Slot 6. */
static CUresult CUDAAPI entry_free(void *data)
{
	free(data);
	return CUDA_SUCCESS;
}

struct aged {
	char name[40];
	time_t used;
	unsigned long long size;
};

static int by_age(const void *a, const void *b)
{
	const struct aged *x = a, *y = b;

	return x->used < y->used ? -1 : x->used > y->used;
}

/* Entries of the directory (names of 32 hex digits) into *list. */
static size_t list_entries(DIR *d, struct aged **list, unsigned long long *total)
{
	size_t n = 0, cap = 0;
	struct dirent *e;
	struct stat st;

	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);

		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		/* a temporary file a killed writer left, an hour old: gone */
		if (len > 4 && !strcmp(e->d_name + len - 4, ".tmp") && time(NULL) - st.st_mtime > 3600) {
			unlinkat(dirfd(d), e->d_name, 0);
			continue;
		}
		if (len != 32 || strspn(e->d_name, "0123456789abcdef") != 32)
			continue;
		if (n == cap) {
			struct aged *more = realloc(*list, (cap = cap ? 2 * cap : 64) * sizeof(**list));

			if (!more)
				break;
			*list = more;
		}
		snprintf((*list)[n].name, sizeof((*list)[n].name), "%s", e->d_name);
		(*list)[n].used = st.st_mtime;
		(*list)[n].size = (unsigned long long)st.st_size;
		*total += (unsigned long long)st.st_size;
		n++;
	}
	return n;
}

/* Least recently used entries out until the cache is under its bound. */
static void cache_trim(void)
{
	unsigned long long total = 0;
	struct aged *list = NULL;
	DIR *d = opendir(cache_dir);
	size_t n;

	if (!d)
		return;
	n = list_entries(d, &list, &total);
	if (total > cache_max) {
		qsort(list, n, sizeof(*list), by_age);
		for (size_t i = 0; i < n && total > cache_max; i++)
			if (!unlinkat(dirfd(d), list[i].name, 0))
				total -= list[i].size;
	}
	free(list);
	closedir(d);
}

static int write_full(int fd, const void *buf, size_t len)
{
	for (size_t at = 0; at < len;) {
		ssize_t n = write(fd, (const char *)buf + at, len - at);

		if (n <= 0)
			return -1;
		at += (size_t)n;
	}
	return 0;
}

/* Slot 4: keep the result of a compile. */
static CUresult CUDAAPI entry_store(void *key, int flags, const void *data, uint32_t size)
{
	struct entry_header h = { ENTRY_MAGIC, size, 0 };
	char path[PATH_MAX], tmp[PATH_MAX + 32];
	int fd, bad;

	(void)flags;
	if (!key || !data || !size || size > ENTRY_MAX || sizeof(h) + size > cache_max || !cache_on() ||
	    entry_path(key, path, sizeof(path)))
		return CUDA_ERROR_NOT_SUPPORTED;
	snprintf(tmp, sizeof(tmp), "%s.%d.%lx.tmp", path, (int)getpid(), (unsigned long)pthread_self());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return CUDA_ERROR_NOT_SUPPORTED;
	h.sum = XXH3_64bits(data, size);
	bad = write_full(fd, &h, sizeof(h)) || write_full(fd, data, size);
	bad = close(fd) || bad || rename(tmp, path);
	if (bad) {
		unlink(tmp);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	log_debug("compute cache: kept %s (%u bytes)", ((struct cache_key *)key)->name, size);
	cache_trim();
	return CUDA_SUCCESS;
}

static CUresult CUDAAPI slot_unknown(void)
{
	log_missing_once("export table", "{da9151d3} slot 5", 0);
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* Size word 7 entries: both libraries want more than 0x30 bytes, else
 * they go through 1734dc26 to free data; they use slots 1 to 4 and 6. */
typedef void (*slot)(void);
static const slot compute_cache[] = {
	(slot)(uintptr_t)(7 * sizeof(void *)), (slot)key_make, (slot)key_free, (slot)entry_lookup,
	(slot)entry_store, (slot)slot_unknown, (slot)entry_free, NULL
};

const void *compute_cache_table(void)
{
	return compute_cache;
}

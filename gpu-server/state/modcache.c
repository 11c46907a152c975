/*
 * modcache.c: the on-disk cache of module images, shared by all workers,
 * so that a program's second run sends only hashes.
 *
 * Images are stored by content, under their SHA-256 (objects/<sha>.img),
 * and checked against it on every read: an entry is what its name says
 * or it is thrown away. Clients look images up by the XXH3-128 they send;
 * those names live in an index per client identity (<part>/<xxh3>: the
 * SHA-256 of the image), a unix user's or a TCP peer's, so that a tenant
 * finds only what it stored itself: it cannot learn that another ran an
 * image, nor plant one under a hash another will ask for (the image's
 * XXH3-128 is checked too). --shared-module-cache shares one index on
 * purpose. Objects beyond --cache-quota are evicted, least recently used
 * first. Entries are written to a temporary name, then renamed.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <openssl/evp.h>
#include "state.h"
#include "snapshot.h"

#define SHA_HEX 65
#define QUOTA_DEFAULT (4ull << 30)

void image_hash_compute(const void *image, size_t size, image_hash *out)
{
	XXH128_hash_t h = XXH3_128bits(image, size);

	out->lo = h.low64;
	out->hi = h.high64;
}

static int sha256_hex(const void *data, size_t len, char out[SHA_HEX])
{
	unsigned char md[32];
	unsigned n = 0;

	if (!EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) || n != 32)
		return -1;
	for (int i = 0; i < 32; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
	return 0;
}

/* This client's index: "shared" on purpose, else its user or address. */
void modcache_identify(struct worker *w)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct ucred cred;
	char host[64] = "unknown";
	const char *shared = getenv("CICADA_CACHE_SHARED");

	if (shared && !strcmp(shared, "1")) {
		snprintf(w->cache_part, sizeof(w->cache_part), "shared");
	} else if (peer_remote_host(w->sock)) {       /* through a TLS relay: its client's address */
		snprintf(host, sizeof(host), "%s", peer_remote_host(w->sock));
		for (char *p = host; *p; p++)
			if (*p == ':')
				*p = '_';
		snprintf(w->cache_part, sizeof(w->cache_part), "ip-%s", host);
	} else if (!peer_cred(w->sock, &cred)) {
		snprintf(w->cache_part, sizeof(w->cache_part), "uid-%u", (unsigned)cred.uid);
	} else if (!getpeername(w->sock, (struct sockaddr *)&ss, &sl)) {
		if (ss.ss_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof(host));
		else if (ss.ss_family == AF_INET6)
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof(host));
		for (char *p = host; *p; p++)
			if (*p == ':')
				*p = '_';
		snprintf(w->cache_part, sizeof(w->cache_part), "ip-%s", host);
	} else {
		snprintf(w->cache_part, sizeof(w->cache_part), "unknown");
	}
}

static void index_path(const struct worker *w, const image_hash *hash, char *path, size_t len)
{
	snprintf(path, len, "%s/%s/%016llx%016llx", w->cache_dir, w->cache_part[0] ? w->cache_part : "unknown",
		 (unsigned long long)hash->hi, (unsigned long long)hash->lo);
}

static void object_path(const struct worker *w, const char *sha, char *path, size_t len)
{
	snprintf(path, len, "%s/objects/%s.img", w->cache_dir, sha);
}

static void *read_all(const char *path, size_t max, size_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	void *buf = NULL;

	if (fd < 0)
		return NULL;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_size > 0 && (size_t)st.st_size <= max &&
	    (buf = malloc(st.st_size)) && read(fd, buf, st.st_size) != st.st_size) {
		free(buf);
		buf = NULL;
	}
	if (buf)
		*size = (size_t)st.st_size;
	close(fd);
	return buf;
}

int modcache_lookup(const struct worker *w, const image_hash *hash, void **image, size_t *size)
{
	char path[4096], sha[SHA_HEX], *ref;
	size_t n = 0;
	image_hash check;
	void *buf;

	if (!w->cache_dir)
		return -1;
	index_path(w, hash, path, sizeof(path));
	if (!(ref = read_all(path, SHA_HEX - 1, &n)))
		return -1;
	snprintf(sha, sizeof(sha), "%.*s", (int)n, ref);
	free(ref);
	object_path(w, sha, path, sizeof(path));
	if (strlen(sha) != SHA_HEX - 1 || strspn(sha, "0123456789abcdef") != SHA_HEX - 1 ||
	    !(buf = read_all(path, CICADA_IMAGE_MAX, size)))
		return -1;
	image_hash_compute(buf, *size, &check);
	if (sha256_hex(buf, *size, path) || strcmp(path, sha) || check.lo != hash->lo || check.hi != hash->hi) {
		object_path(w, sha, path, sizeof(path));
		log_warn("module cache entry %s is not what its name says; thrown away", path);
		unlink(path);
		free(buf);
		return -1;
	}
	object_path(w, sha, path, sizeof(path));
	utimensat(AT_FDCWD, path, NULL, 0);  /* recently used */
	*image = buf;
	return 0;
}

static int write_file(const char *path, const void *data, size_t size)
{
	char tmp[4200];
	int fd, rc;

	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	/* No fsync: an entry a crash tears is a miss (lookups check every
	 * entry's hashes), and a load waits for this write. */
	rc = write(fd, data, size) != (ssize_t)size || rename(tmp, path) ? -1 : 0;
	if (rc)
		unlink(tmp);
	close(fd);
	return rc;
}

static uint64_t quota(void)
{
	const char *q = getenv("CICADA_CACHE_QUOTA");
	unsigned long long v;

	return q && sscanf(q, "%llu", &v) == 1 ? (uint64_t)v : QUOTA_DEFAULT;
}

struct object {
	char name[SHA_HEX + 8];
	time_t used;
	uint64_t size;
};

static int older_first(const void *a, const void *b)
{
	time_t x = ((const struct object *)a)->used, y = ((const struct object *)b)->used;

	return (x > y) - (x < y);
}

/* Evicts objects, least recently used first, until they fit the quota:
 * one scan, and a sort only when over it. */
static void evict(const struct worker *w)
{
	char dir[4096];
	uint64_t total = 0, limit = quota();
	struct object *v = NULL, *grown;
	size_t n = 0, cap = 0;
	struct dirent *e;
	struct stat st;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/objects", w->cache_dir);
	if (!(d = opendir(dir)))
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof(v->name) ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			if (!(grown = realloc(v, (cap ? 2 * cap : 64) * sizeof(*v))))
				break;
			v = grown;
			cap = cap ? 2 * cap : 64;
		}
		snprintf(v[n].name, sizeof(v[n].name), "%s", e->d_name);
		v[n].used = st.st_mtime;
		v[n].size = (uint64_t)st.st_size;
		total += v[n++].size;
	}
	if (total > limit) {
		qsort(v, n, sizeof(*v), older_first);
		for (size_t i = 0; i < n && total > limit; i++)
			if (!unlinkat(dirfd(d), v[i].name, 0)) {
				total -= v[i].size;
				log_info("module cache over its quota (%llu bytes): evicted %s", (unsigned long long)limit,
					 v[i].name);
			}
	}
	closedir(d);
	free(v);
}

/* Whether hash is indexed and its object is there (lookups check the
 * rest): a load that sent its image again need not store it again. */
static int kept(const struct worker *w, const image_hash *hash)
{
	char path[4096], *ref;
	size_t n = 0;
	int there;

	index_path(w, hash, path, sizeof(path));
	if (!(ref = read_all(path, SHA_HEX - 1, &n)))
		return 0;
	snprintf(path, sizeof(path), "%s/objects/%.*s.img", w->cache_dir, (int)n, ref);
	free(ref);
	there = n == SHA_HEX - 1 && !access(path, F_OK);
	return there;
}

void modcache_store(const struct worker *w, const image_hash *hash, const void *image, size_t size)
{
	char path[4096], sha[SHA_HEX];

	if (!w->cache_dir)
		return;
	if (kept(w, hash))
		return;
	if (sha256_hex(image, size, sha))
		return;
	snprintf(path, sizeof(path), "%s/objects", w->cache_dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/%s", w->cache_dir, w->cache_part[0] ? w->cache_part : "unknown");
	mkdir(path, 0700);
	object_path(w, sha, path, sizeof(path));
	if (access(path, F_OK) && write_file(path, image, size)) {
		log_warn("cannot write module cache entry %s: %s", path, strerror(errno));
		return;
	}
	index_path(w, hash, path, sizeof(path));
	if (write_file(path, sha, SHA_HEX - 1))
		log_warn("cannot write module cache index %s: %s", path, strerror(errno));
	evict(w);
}

/* --- module images --- */

struct image {
	image_hash hash;
	void *data;
	size_t size;
};

struct image_table {
	struct image *v;
	size_t n;
};

/* Module images that came with a snapshot (the local cache may lack them). */
int worker_image_find(struct worker *w, const image_hash *hash, void **data, size_t *size)
{
	struct image_table *t = w->images;

	for (size_t i = 0; t && i < t->n; i++) {
		if (t->v[i].hash.lo != hash->lo || t->v[i].hash.hi != hash->hi)
			continue;
		if (!(*data = malloc(t->v[i].size)))
			return -1;
		memcpy(*data, t->v[i].data, t->v[i].size);
		*size = t->v[i].size;
		return 0;
	}
	return -1;
}

/* Keeps the module images of the snapshot r reads. */
int worker_images_load(struct worker *w, struct snap_reader *r, const Cicada__Manifest *m, char *err)
{
	struct image_table *t = calloc(1, sizeof(*t));

	if (!t || !(t->v = calloc(m->n_images + 1, sizeof(*t->v)))) {
		free(t);
		wire_fail(err, "out of memory");
		return -1;
	}
	w->images = t;
	for (size_t i = 0; i < m->n_images; i++, t->n++) {
		struct image *im = &t->v[i];
		im->hash.lo = m->images[i]->hash_lo;
		im->hash.hi = m->images[i]->hash_hi;
		if (snap_read_image(r, i, &im->data, &im->size, err))
			return -1;
	}
	return 0;
}

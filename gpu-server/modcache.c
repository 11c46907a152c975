/*
 * modcache.c: the on-disk cache of module images, keyed by content hash
 * (XXH3-128), shared by all workers so that a program's second run sends
 * only hashes. Entries are written to a temporary name, then renamed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include "gpu-server.h"

void image_hash_compute(const void *image, size_t size, image_hash *out)
{
	XXH128_hash_t h = XXH3_128bits(image, size);

	out->lo = h.low64;
	out->hi = h.high64;
}

static void entry_path(const char *dir, const image_hash *hash, char *path, size_t len)
{
	snprintf(path, len, "%s/%016llx%016llx.img", dir, (unsigned long long)hash->hi,
		 (unsigned long long)hash->lo);
}

int modcache_lookup(const char *dir, const image_hash *hash, void **image, size_t *size)
{
	char path[4096];
	struct stat st;
	image_hash check;
	void *buf;
	int fd;

	if (!dir)
		return -1;
	entry_path(dir, hash, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || st.st_size <= 0 || st.st_size > CICADA_IMAGE_MAX ||
	    !(buf = malloc(st.st_size))) {
		close(fd);
		return -1;
	}
	if (read(fd, buf, st.st_size) != st.st_size) {
		free(buf);
		close(fd);
		return -1;
	}
	close(fd);
	image_hash_compute(buf, st.st_size, &check);
	if (check.lo != hash->lo || check.hi != hash->hi) {
		log_warn("module cache entry %s is corrupt; ignoring it", path);
		unlink(path);
		free(buf);
		return -1;
	}
	*image = buf;
	*size = st.st_size;
	return 0;
}

void modcache_store(const char *dir, const image_hash *hash, const void *image, size_t size)
{
	char path[4096], tmp[4200];
	int fd;

	if (!dir)
		return;
	entry_path(dir, hash, path, sizeof(path));
	if (!access(path, F_OK))
		return;
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		log_warn("cannot write module cache entry %s: %s", tmp, strerror(errno));
		return;
	}
	if (write(fd, image, size) != (ssize_t)size || fsync(fd) || rename(tmp, path))
		unlink(tmp);
	close(fd);
}

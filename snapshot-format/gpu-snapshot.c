/*
 * gpu-snapshot.c: the command-line tool for Cicada's GPU snapshots, in
 * the manner of CRIU's crit: "inspect" prints what a snapshot holds (as
 * text or JSON), "verify" checks every checksum and, under the key, every
 * code; it says which it checked, and refuses to call a keyed snapshot
 * good without its key unless told (--no-key). DIR is a snapshot
 * directory, or a directory holding one named cicada-gpu.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"

struct totals {
	uint64_t alloc, chunk, global, piece, stored, image, parent_bytes;
	size_t compressed, in_parent;
};

static int no_key;                        /* verify --no-key */

static int usage(FILE *f, int rc)
{
	fprintf(f, "usage: gpu-snapshot inspect DIR [--json]\n"
		   "       gpu-snapshot verify DIR [--no-key]\n"
		   "DIR is a snapshot directory (in CRIU's image directory, one per process),\n"
		   "or a directory holding one named %s.\n"
		   "  inspect   what the snapshot holds: format, owner, GPU, memory, module images,\n"
		   "            replay records; --json prints the same as JSON\n"
		   "  verify    checks every checksum, and every code of a keyed snapshot under\n"
		   "            the key; prints OK, what was checked and the totals, or one error\n"
		   "            line and exits 1. A keyed snapshot without the key is an error\n"
		   "            (its codes cannot be checked) unless --no-key is given: then its\n"
		   "            checksums alone are checked, and the output says codes NOT checked.\n"
		   "CICADA_SNAPSHOT_KEY_FILE: the key of keyed snapshots (gpu-server\n"
		   "--snapshot-key-file); with it, verify checks their codes, and refuses an\n"
		   "unkeyed snapshot or one of another key.\n", SNAP_DIR_NAME);
	return rc;
}

static struct totals count(const Cicada__Manifest *m)
{
	struct totals t = { 0 };

	for (size_t i = 0; i < m->n_allocations; i++)
		t.alloc += m->allocations[i]->size;
	for (size_t i = 0; i < m->n_chunks; i++)
		t.chunk += m->chunks[i]->size;
	for (size_t i = 0; i < m->n_globals; i++)
		t.global += m->globals[i]->size;
	for (size_t i = 0; i < m->n_pieces; i++) {
		t.piece += m->pieces[i]->size;
		t.stored += m->pieces[i]->stored_size;
		t.compressed += m->pieces[i]->compressed;
		if (m->pieces[i]->in_parent) {
			t.in_parent++;
			t.parent_bytes += m->pieces[i]->size;
		}
	}
	for (size_t i = 0; i < m->n_images; i++)
		t.image += m->images[i]->size;
	return t;
}

static const char *time_str(char *buf, size_t len, uint64_t ns, const char *fmt)
{
	time_t s = (time_t)(ns / 1000000000ull);
	struct tm tm;

	if (!gmtime_r(&s, &tm) || !strftime(buf, len, fmt, &tm))
		snprintf(buf, len, "?");
	return buf;
}

/* nvidia-smi's form for 16 bytes, plain hex otherwise. */
static const char *uuid_str(char *buf, const ProtobufCBinaryData *u)
{
	char *p = buf;

	if (u->len == 16)
		p += sprintf(p, "GPU-");
	for (size_t i = 0; i < u->len; i++)
		p += sprintf(p, "%s%02x", u->len == 16 && (i == 4 || i == 6 || i == 8 || i == 10) ?
			     "-" : "", u->data[i]);
	*p = 0;
	return buf;
}

static void text_gpu(const Cicada__Gpu *g)
{
	char uuid[160], size[32];

	printf("gpu              %s\n", g->name ? g->name : "?");
	if (g->uuid.len)
		printf("  uuid           %s\n", uuid_str(uuid, &g->uuid));
	if (g->has_driver_version)
		printf("  driver         %d.%d (%d)\n", g->driver_version / 1000,
		       g->driver_version % 1000 / 10, g->driver_version);
	if (g->has_cc_major)
		printf("  compute        %d.%d\n", g->cc_major, g->cc_minor);
	if (g->has_total_memory)
		printf("  memory         %s\n", snap_size_str(size, sizeof(size), g->total_memory));
}

static void text_records(const Cicada__Manifest *m)
{
	printf("records          %zu\n", m->n_records);
	if (!m->n_records)
		return;
	printf("  %8s  %-32s %8s %8s %6s %8s\n", "seq", "name", "handle", "parent", "ctx", "args");
	for (size_t i = 0; i < m->n_records; i++) {
		const Cicada__Record *r = m->records[i];
		char proc[32];

		snprintf(proc, sizeof(proc), "proc %u", r->proc);
		printf("  %8llu  %-32s %8llu %8llu %6llu %8zu\n", (unsigned long long)r->seq,
		       r->name ? r->name : proc, (unsigned long long)r->handle,
		       (unsigned long long)r->parent, (unsigned long long)r->ctx, r->args.len);
	}
}

static void text_memory(const Cicada__Manifest *m, const struct totals *t)
{
	char a[32], b[32];

	printf("allocations      %zu, %s\n", m->n_allocations, snap_size_str(a, sizeof(a), t->alloc));
	printf("chunks           %zu, %s\n", m->n_chunks, snap_size_str(a, sizeof(a), t->chunk));
	printf("globals          %zu, %s\n", m->n_globals, snap_size_str(a, sizeof(a), t->global));
	printf("pieces           %zu (%zu compressed), %s of device memory stored in %s",
	       m->n_pieces, t->compressed, snap_size_str(a, sizeof(a), t->piece),
	       snap_size_str(b, sizeof(b), t->stored));
	if (t->stored)
		printf(", ratio %.2f", (double)t->piece / (double)t->stored);
	printf("\n");
	printf("data files       %zu, %s\n", m->n_data_sizes, snap_size_str(a, sizeof(a), m->data_size));
	if (m->parent)
		printf("parent           %s (checksum %016llx): %zu pieces, %s, are there\n", m->parent,
		       (unsigned long long)m->parent_checksum, t->in_parent,
		       snap_size_str(a, sizeof(a), t->parent_bytes));
}

static void print_text(const Cicada__Manifest *m)
{
	struct totals t = count(m);
	char when[64], size[32];

	printf("format version   %u\n", m->format_version);
	printf("producer         %s\n", m->producer);
	printf("created          %s (%llu ns)\n",
	       time_str(when, sizeof(when), m->created_unix_ns, "%Y-%m-%d %H:%M:%S UTC"),
	       (unsigned long long)m->created_unix_ns);
	if (m->owner && m->has_owner_uid)
		printf("owner            %s (uid %u)\n", m->owner, m->owner_uid);
	else if (m->owner)
		printf("owner            %s\n", m->owner);
	else if (m->has_owner_uid)
		printf("owner            uid %u\n", m->owner_uid);
	if (m->gpu)
		text_gpu(m->gpu);
	if (m->has_arena_size)
		printf("arena            0x%llx, %s\n", (unsigned long long)m->arena_va,
		       snap_size_str(size, sizeof(size), m->arena_size));
	if (m->has_current_ctx)
		printf("current context  %llu\n", (unsigned long long)m->current_ctx);
	if (m->n_ipc_exports || m->n_ipc_imports)
		printf("CUDA IPC         %016llx: %zu exported, %zu opened of other processes\n",
		       (unsigned long long)m->ipc_owner, m->n_ipc_exports, m->n_ipc_imports);
	text_memory(m, &t);
	printf("images           %zu, %s\n", m->n_images, snap_size_str(size, sizeof(size), t.image));
	for (size_t i = 0; i < m->n_images; i++)
		printf("  %016llx%016llx  %10llu bytes  checksum %016llx\n",
		       (unsigned long long)m->images[i]->hash_hi, (unsigned long long)m->images[i]->hash_lo,
		       (unsigned long long)m->images[i]->size, (unsigned long long)m->images[i]->checksum);
	text_records(m);
}

/* Strings are printable ASCII (the manifest is validated); quote and escape. */
static void json_str(const char *key, const char *s, const char *after)
{
	printf("\"%s\": \"", key);
	for (; *s; s++)
		printf(*s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
	printf("\"%s", after);
}

static void json_gpu(const Cicada__Gpu *g)
{
	char uuid[160];

	printf("  \"gpu\": {");
	json_str("name", g->name ? g->name : "", ", ");
	json_str("uuid", uuid_str(uuid, &g->uuid), ", ");
	printf("\"driver_version\": %d, \"cc_major\": %d, \"cc_minor\": %d, \"total_memory\": %llu},\n",
	       g->driver_version, g->cc_major, g->cc_minor, (unsigned long long)g->total_memory);
}

static void json_memory(const Cicada__Manifest *m, const struct totals *t)
{
	printf("  \"arena\": {\"va\": \"0x%llx\", \"size\": %llu},\n",
	       (unsigned long long)m->arena_va, (unsigned long long)m->arena_size);
	printf("  \"current_ctx\": %llu,\n", (unsigned long long)m->current_ctx);
	printf("  \"allocations\": {\"count\": %zu, \"bytes\": %llu},\n", m->n_allocations,
	       (unsigned long long)t->alloc);
	printf("  \"chunks\": {\"count\": %zu, \"bytes\": %llu},\n", m->n_chunks,
	       (unsigned long long)t->chunk);
	printf("  \"globals\": {\"count\": %zu, \"bytes\": %llu},\n", m->n_globals,
	       (unsigned long long)t->global);
	printf("  \"pieces\": {\"count\": %zu, \"compressed\": %zu, \"bytes\": %llu, "
	       "\"stored_bytes\": %llu, \"ratio\": %.4f},\n", m->n_pieces, t->compressed,
	       (unsigned long long)t->piece, (unsigned long long)t->stored,
	       t->stored ? (double)t->piece / (double)t->stored : 0.0);
	printf("  \"data_files\": {\"count\": %zu, \"bytes\": %llu},\n", m->n_data_sizes,
	       (unsigned long long)m->data_size);
	if (m->parent) {
		printf("  ");
		json_str("parent", m->parent, ", ");
		printf("\"parent_checksum\": \"%016llx\", \"pieces_in_parent\": %zu, \"bytes_in_parent\": %llu,\n",
		       (unsigned long long)m->parent_checksum, t->in_parent, (unsigned long long)t->parent_bytes);
	}
}

static void json_lists(const Cicada__Manifest *m)
{
	printf("  \"images\": [");
	for (size_t i = 0; i < m->n_images; i++) {
		const Cicada__ModuleImage *im = m->images[i];

		printf("%s\n    {\"hash\": \"%016llx%016llx\", \"size\": %llu, \"checksum\": \"%016llx\", ",
		       i ? "," : "", (unsigned long long)im->hash_hi, (unsigned long long)im->hash_lo,
		       (unsigned long long)im->size, (unsigned long long)im->checksum);
		json_str("file", im->file, "}");
	}
	printf("%s],\n  \"records\": [", m->n_images ? "\n  " : "");
	for (size_t i = 0; i < m->n_records; i++) {
		const Cicada__Record *r = m->records[i];

		printf("%s\n    {\"seq\": %llu, \"proc\": %u, ", i ? "," : "", (unsigned long long)r->seq, r->proc);
		json_str("name", r->name ? r->name : "", ", ");
		printf("\"handle\": %llu, \"parent\": %llu, \"ctx\": %llu, \"args_len\": %zu}",
		       (unsigned long long)r->handle, (unsigned long long)r->parent,
		       (unsigned long long)r->ctx, r->args.len);
	}
	printf("%s]\n", m->n_records ? "\n  " : "");
}

static void print_json(const Cicada__Manifest *m)
{
	struct totals t = count(m);
	char when[64];

	printf("{\n  \"format_version\": %u,\n  ", m->format_version);
	json_str("producer", m->producer, ",\n");
	printf("  \"created_unix_ns\": %llu,\n  ", (unsigned long long)m->created_unix_ns);
	json_str("created", time_str(when, sizeof(when), m->created_unix_ns, "%Y-%m-%dT%H:%M:%SZ"), ",\n");
	if (m->owner) {
		printf("  ");
		json_str("owner", m->owner, ",\n");
	}
	if (m->has_owner_uid)
		printf("  \"owner_uid\": %u,\n", m->owner_uid);
	if (m->gpu)
		json_gpu(m->gpu);
	printf("  \"ipc\": {\"owner\": %llu, \"exports\": %zu, \"imports\": %zu},\n",
	       (unsigned long long)m->ipc_owner, m->n_ipc_exports, m->n_ipc_imports);
	json_memory(m, &t);
	json_lists(m);
	printf("}\n");
}

static struct snap_reader *open_snapshot(const char *dir)
{
	char err[SNAP_ERRLEN];
	struct snap_reader *r = NULL;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		snap_fail(err, "cannot open the directory: %s", strerror(errno));
	else
		r = snap_reader_open(fd, NULL, err);
	if (fd >= 0)
		close(fd);
	if (!r)
		fprintf(stderr, "gpu-snapshot: %s: %s\n", dir, err);
	return r;
}

static int inspect(const char *dir, int json)
{
	struct snap_reader *r = open_snapshot(dir);

	if (!r)
		return 1;
	if (json)
		print_json(snap_reader_manifest(r));
	else
		print_text(snap_reader_manifest(r));
	snap_reader_close(r);
	return 0;
}

/* Whether the snapshot carries codes of a key: its manifest's, or any
 * piece's or image's. */
static int keyed_snapshot(const struct snap_reader *r)
{
	const Cicada__Manifest *m = snap_reader_manifest(r);
	struct stat st;

	if (!fstatat(r->fd, SNAP_MAC_NAME, &st, AT_SYMLINK_NOFOLLOW))
		return 1;
	for (size_t i = 0; i < m->n_pieces; i++)
		if (m->pieces[i]->has_mac)
			return 1;
	for (size_t i = 0; i < m->n_images; i++)
		if (m->images[i]->has_mac)
			return 1;
	return 0;
}

/* What verify checked, for its OK line. */
static const char *checked(int keyed)
{
	if (snap_keyed())
		return "OK: checksums and codes checked under the key";
	return keyed ? "checksums OK; codes NOT checked: no key given" :
		       "OK: checksums checked; the snapshot has no codes (not keyed)";
}

static int verify(const char *dir)
{
	struct snap_reader *r = open_snapshot(dir);
	const Cicada__Manifest *m;
	char err[SNAP_ERRLEN];
	struct totals t;
	int rc = 1, keyed;

	if (!r)
		return 1;
	m = snap_reader_manifest(r);
	t = count(m);
	keyed = keyed_snapshot(r);
	if (keyed && !snap_keyed() && !no_key)
		fprintf(stderr, "gpu-snapshot: %s: the snapshot carries codes of a key, but no key was given "
			"(CICADA_SNAPSHOT_KEY_FILE): its codes cannot be checked (--no-key checks the checksums alone)\n",
			dir);
	else if (snap_verify(r, err))
		fprintf(stderr, "gpu-snapshot: %s: %s\n", dir, err);
	else
		rc = printf("%s: %zu pieces, %zu images, %llu bytes verified\n", checked(keyed), m->n_pieces,
			    m->n_images, (unsigned long long)(t.piece + t.image)) < 0;
	snap_reader_close(r);
	return rc;
}

/* CRIU's image directory holds one snapshot per process, cicada-gpu-<pid>;
 * DIR may be that directory or a snapshot directory itself. Runs fn on
 * each snapshot found; the worst status wins. */
static int each_snapshot(const char *dir, int (*fn)(const char *, int), int json)
{
	char path[PATH_MAX];
	struct dirent **names;
	int n = scandir(dir, &names, NULL, alphasort), found = 0, rc = 0;

	for (int i = 0; i < n; i++) {
		if (!strncmp(names[i]->d_name, "cicada-gpu-", 11) && names[i]->d_type == DT_DIR) {
			snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
			if (!json)
				printf("%s== %s\n", found ? "\n" : "", names[i]->d_name);
			else
				printf(found ? ",\n" : "[\n");
			found++;
			rc |= fn(path, json);
		}
		free(names[i]);
	}
	if (n >= 0)
		free(names);
	if (!found)
		return fn(dir, json);
	if (json)
		printf("]\n");
	return rc;
}

static int verify_one(const char *dir, int json)
{
	return verify(dir);
}

int main(int argc, char **argv)
{
	int json = argc == 4 && !strcmp(argv[3], "--json");
	int verify_args = (argc == 3 || (argc == 4 && !strcmp(argv[3], "--no-key"))) && !strcmp(argv[1], "verify");
	const char *key = getenv("CICADA_SNAPSHOT_KEY_FILE");
	char err[SNAP_ERRLEN];

	if (key && snap_key_load(key, err)) {
		fprintf(stderr, "gpu-snapshot: %s\n", err);
		return 1;
	}
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
		return usage(stdout, 0);
	if (verify_args) {
		no_key = argc == 4;
		return each_snapshot(argv[2], verify_one, 0);
	}
	if ((argc == 3 || json) && !strcmp(argv[1], "inspect"))
		return each_snapshot(argv[2], inspect, json);
	return usage(stderr, 2);
}

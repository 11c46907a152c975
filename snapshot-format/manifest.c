/*
 * manifest.c: the manifest file: a fixed header (magic, format version,
 * header size, payload length, XXH3-64 of the payload, little endian)
 * then the packed Cicada__Manifest. Parsing checks the header before
 * unpacking anything, then validates the contents so that readers can
 * trust sizes, offsets and names. Fuzzed: must hold on any input.
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include "internal.h"

#define TEXT_MAX 1024                     /* longest string field */
#define OWNER_MAX 128                     /* longest owner identity */
#define UUID_MAX 64

/* Printable ASCII of at most max characters: safe to print in
 * inspect's text and JSON. */
static int text_max_ok(const char *s, size_t max)
{
	size_t i;

	for (i = 0; s[i] && i <= max; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return 0;
	return i <= max;
}

static int text_ok(const char *s)
{
	return text_max_ok(s, TEXT_MAX);
}

/* An address range [va, va+size) that is not empty and does not wrap. */
static int span_ok(uint64_t va, uint64_t size)
{
	return size && va + size > va;
}

static int check_top(const Cicada__Manifest *m, char *err)
{
	if (m->format_version < SNAP_FORMAT_OLDEST || m->format_version > SNAP_FORMAT_VERSION)
		return snap_fail(err, "manifest says format version %u; this build reads %u to %u",
				 m->format_version, SNAP_FORMAT_OLDEST, SNAP_FORMAT_VERSION);
	if (m->format_version < 2 && (m->has_ipc_owner || m->n_ipc_exports || m->n_ipc_imports))
		return snap_fail(err, "manifest of format version %u names CUDA IPC handles", m->format_version);
	if (!m->producer || !text_ok(m->producer))
		return snap_fail(err, "manifest producer is not printable text");
	if (m->gpu && m->gpu->name && !text_ok(m->gpu->name))
		return snap_fail(err, "manifest GPU name is not printable text");
	if (m->gpu && m->gpu->uuid.len > UUID_MAX)
		return snap_fail(err, "manifest GPU uuid is %zu bytes long", m->gpu->uuid.len);
	if (m->arena_size && !span_ok(m->arena_va, m->arena_size))
		return snap_fail(err, "manifest arena wraps around the address space");
	if (m->n_images > SNAP_MAX_IMAGES || m->n_records > SNAP_MAX_ENTRIES ||
	    m->n_allocations > SNAP_MAX_ENTRIES || m->n_chunks > SNAP_MAX_ENTRIES ||
	    m->n_globals > SNAP_MAX_ENTRIES || m->n_pieces > SNAP_MAX_ENTRIES ||
	    m->n_vmm_reservations > SNAP_MAX_ENTRIES || m->n_vmm_allocations > SNAP_MAX_ENTRIES ||
	    m->n_vmm_mappings > SNAP_MAX_ENTRIES || m->n_vmm_access > SNAP_MAX_ENTRIES ||
	    m->n_objects > SNAP_MAX_ENTRIES || m->n_ipc_exports > SNAP_MAX_ENTRIES ||
	    m->n_ipc_imports > SNAP_MAX_ENTRIES)
		return snap_fail(err, "manifest lists too many entries");
	if (m->owner && !text_max_ok(m->owner, OWNER_MAX))
		return snap_fail(err, "manifest owner is not printable text of at most %d characters", OWNER_MAX);
	if (m->parent && !snap_parent_ok(m->parent))
		return snap_fail(err, "manifest names a parent that is not a path of the form (../){0,2}NAME(/NAME)?");
	return 0;
}

/* A data file is named (always SNAP_DATA_NAME) if and only if there are
 * data file sizes, and these add up to data_size. */
static int check_data(const Cicada__Manifest *m, char *err)
{
	uint64_t sum = 0;

	if (m->data_file && strcmp(m->data_file, SNAP_DATA_NAME))
		return snap_fail(err, "manifest names data file '%.64s', expected %s",
				 text_ok(m->data_file) ? m->data_file : "?", SNAP_DATA_NAME);
	if (!m->data_file != !m->n_data_sizes || m->n_data_sizes > SNAP_MAX_THREADS)
		return snap_fail(err, "manifest lists %zu data file sizes for %s", m->n_data_sizes,
				 m->data_file ? "its data files" : "no data file");
	for (size_t k = 0; k < m->n_data_sizes; k++) {
		if (m->data_sizes[k] > UINT64_MAX - sum)
			return snap_fail(err, "manifest data file sizes overflow");
		sum += m->data_sizes[k];
	}
	if (sum != m->data_size)
		return snap_fail(err, "manifest data size %llu is not its files' %llu bytes",
				 (unsigned long long)m->data_size, (unsigned long long)sum);
	return 0;
}

static int check_images(const Cicada__Manifest *m, char *err)
{
	char name[SNAP_NAME_MAX];

	for (size_t i = 0; i < m->n_images; i++) {
		const Cicada__ModuleImage *im = m->images[i];

		snap_image_name(name, im->hash_lo, im->hash_hi);
		if (!im->file || strcmp(im->file, name))
			return snap_fail(err, "manifest image %zu: file name is not %s", i, name);
		if (im->size > SNAP_IMAGE_MAX)
			return snap_fail(err, "manifest image %zu: size %llu is too large", i,
					 (unsigned long long)im->size);
	}
	return 0;
}

static int check_records(const Cicada__Manifest *m, char *err)
{
	for (size_t i = 0; i < m->n_records; i++) {
		const Cicada__Record *rec = m->records[i];

		if (i && rec->seq <= m->records[i - 1]->seq)
			return snap_fail(err, "manifest record %zu: seq %llu is not increasing", i,
					 (unsigned long long)rec->seq);
		if (rec->name && !text_ok(rec->name))
			return snap_fail(err, "manifest record %zu: name is not printable text", i);
	}
	return 0;
}

static int check_spans(const Cicada__Manifest *m, char *err)
{
	for (size_t i = 0; i < m->n_allocations; i++)
		if (!span_ok(m->allocations[i]->va, m->allocations[i]->size))
			return snap_fail(err, "manifest allocation %zu is empty or wraps", i);
	for (size_t i = 0; i < m->n_chunks; i++)
		if (!span_ok(m->chunks[i]->va, m->chunks[i]->size))
			return snap_fail(err, "manifest chunk %zu is empty or wraps", i);
	for (size_t i = 0; i < m->n_globals; i++)
		if (!span_ok(m->globals[i]->va, m->globals[i]->size))
			return snap_fail(err, "manifest global %zu is empty or wraps", i);
	return 0;
}

/* The application's own virtual memory: spans that do not wrap, a
 * property of the driver's size, mappings of allocations that exist. */
static int check_vmm(const Cicada__Manifest *m, char *err)
{
	for (size_t i = 0; i < m->n_vmm_reservations; i++)
		if (!span_ok(m->vmm_reservations[i]->va, m->vmm_reservations[i]->size))
			return snap_fail(err, "manifest reservation %zu is empty or wraps", i);
	for (size_t i = 0; i < m->n_vmm_allocations; i++) {
		const Cicada__VmmAllocation *a = m->vmm_allocations[i];
		if (!a->size || a->prop.len != SNAP_VMM_PROP_SIZE)
			return snap_fail(err, "manifest allocation property %zu is not %u bytes", i,
					 SNAP_VMM_PROP_SIZE);
		if (a->has_imported && (a->imported.len != SNAP_IPC_HANDLE_SIZE || m->format_version < 2 ||
					memcmp(a->imported.data, "CICADAVM", 8)))
			return snap_fail(err, "manifest allocation %zu: an import token of %zu bytes, or not a VMM one", i,
					 a->imported.len);
		if (!a->handle != !a->held || a->held > SNAP_MAX_ENTRIES)
			return snap_fail(err, "manifest allocation %zu: %u references to handle %llu", i, a->held,
					 (unsigned long long)a->handle);
	}
	for (size_t i = 0; i < m->n_vmm_mappings; i++) {
		const Cicada__VmmMapping *p = m->vmm_mappings[i];
		if (!span_ok(p->va, p->size) || p->allocation >= m->n_vmm_allocations ||
		    p->offset > m->vmm_allocations[p->allocation]->size ||
		    p->size > m->vmm_allocations[p->allocation]->size - p->offset)
			return snap_fail(err, "manifest mapping %zu does not fit its allocation", i);
	}
	for (size_t i = 0; i < m->n_vmm_access; i++)
		if (!span_ok(m->vmm_access[i]->va, m->vmm_access[i]->size))
			return snap_fail(err, "manifest access range %zu is empty or wraps", i);
	return 0;
}

/* A CUDA IPC handle of one of the kinds a list takes (magics: 8 bytes
 * each, in kinds), and the 64 bytes it must be. */
static int ipc_handle_ok(const Cicada__IpcEntry *e, const char *kinds)
{
	if (e->handle.len != SNAP_IPC_HANDLE_SIZE)
		return 0;
	for (; *kinds; kinds += 8)
		if (!memcmp(e->handle.data, kinds, 8))
			return 1;
	return 0;
}

/* The GPUs' order: distinct ordinals the manifest's GPUs have, 0 first;
 * no record counts more of them than there are. */
static int check_gpu_order(const Cicada__Manifest *m, char *err)
{
	uint32_t count = m->has_gpu_count ? m->gpu_count : 1, seen = 0;

	if (m->n_gpu_order > 32)
		return snap_fail(err, "manifest GPU order names %zu GPUs", m->n_gpu_order);
	if (m->n_gpu_order && m->gpu_order[0] != 0)
		return snap_fail(err, "manifest GPU order does not start at GPU 0");
	for (size_t i = 0; i < m->n_gpu_order; i++) {
		if (m->gpu_order[i] >= count || m->gpu_order[i] >= 32 || (seen >> m->gpu_order[i] & 1))
			return snap_fail(err, "manifest GPU order names GPU %u twice or past the %u GPUs",
					 m->gpu_order[i], count);
		seen |= 1u << m->gpu_order[i];
	}
	for (size_t i = 0; i < m->n_records; i++)
		if (m->records[i]->has_gpus_before && m->records[i]->gpus_before > m->n_gpu_order)
			return snap_fail(err, "manifest record %zu counts %u GPUs taken, of %zu", i,
					 m->records[i]->gpus_before, m->n_gpu_order);
	return 0;
}

/* CUDA IPC entries: 64-byte handles of the kinds gpu-server/calls/ipc.c makes
 * (arena memory, VMM memory, events), imports of memory or events. */
static int check_ipc(const Cicada__Manifest *m, char *err)
{
	for (size_t i = 0; i < m->n_ipc_exports; i++)
		if (!ipc_handle_ok(m->ipc_exports[i], "CICADA01CICADAVMCICADAEV"))
			return snap_fail(err, "manifest IPC export %zu is no handle (%zu bytes, %u expected)", i,
					 m->ipc_exports[i]->handle.len, SNAP_IPC_HANDLE_SIZE);
	for (size_t i = 0; i < m->n_ipc_imports; i++)
		if (!ipc_handle_ok(m->ipc_imports[i], "CICADA01CICADAEV"))
			return snap_fail(err, "manifest IPC import %zu is no handle (%zu bytes, %u expected)", i,
					 m->ipc_imports[i]->handle.len, SNAP_IPC_HANDLE_SIZE);
	if ((m->n_ipc_exports || m->n_ipc_imports) && (!m->has_ipc_owner || !m->ipc_owner))
		return snap_fail(err, "manifest names CUDA IPC handles but no owner");
	return 0;
}

/* Pieces: sorted by va without overlap, each at most SNAP_PIECE_SIZE,
 * stored raw (stored_size == size) or smaller compressed, and inside
 * their data file. */
static int check_piece(const Cicada__Manifest *m, size_t i, char *err)
{
	const Cicada__Piece *p = m->pieces[i], *prev = i ? m->pieces[i - 1] : NULL;
	uint64_t size;

	if (!span_ok(p->va, p->size) || p->size > SNAP_PIECE_SIZE)
		return snap_fail(err, "manifest piece %zu: size %llu is out of range", i,
				 (unsigned long long)p->size);
	if (prev && p->va < prev->va + prev->size)
		return snap_fail(err, "manifest piece %zu: not sorted or overlapping", i);
	if (p->in_parent) {
		if (!m->parent || p->stored_size || p->compressed)
			return snap_fail(err, "manifest piece %zu: in a parent, but %s", i,
					 m->parent ? "it has stored bytes" : "the snapshot has none");
		return 0;
	}
	if (p->compressed ? !p->stored_size || p->stored_size >= p->size : p->stored_size != p->size)
		return snap_fail(err, "manifest piece %zu: stored size %llu does not fit size %llu", i,
				 (unsigned long long)p->stored_size, (unsigned long long)p->size);
	if (p->file >= m->n_data_sizes)
		return snap_fail(err, "manifest piece %zu: no data file %u", i, p->file);
	size = m->data_sizes[p->file];
	if (p->offset > size || p->stored_size > size - p->offset)
		return snap_fail(err, "manifest piece %zu lies beyond its data file's %llu bytes", i,
				 (unsigned long long)size);
	return 0;
}

int snap_manifest_check(const Cicada__Manifest *m, char *err)
{
	if (check_top(m, err) || check_data(m, err) || check_images(m, err) ||
	    check_records(m, err) || check_spans(m, err) || check_vmm(m, err) || check_ipc(m, err) ||
	    check_gpu_order(m, err))
		return -1;
	for (size_t i = 0; i < m->n_pieces; i++)
		if (check_piece(m, i, err))
			return -1;
	return 0;
}

uint8_t *snap_manifest_pack(const Cicada__Manifest *m, size_t *len, char *err)
{
	size_t plen = cicada__manifest__get_packed_size(m);
	uint8_t *b;

	if (plen > SNAP_MANIFEST_MAX - SNAP_HEADER_SIZE) {
		snap_fail(err, "manifest too large (%zu bytes)", plen);
		return NULL;
	}
	b = malloc(SNAP_HEADER_SIZE + plen);
	if (!b) {
		snap_fail(err, "out of memory for the manifest");
		return NULL;
	}
	cicada__manifest__pack(m, b + SNAP_HEADER_SIZE);
	memcpy(b, SNAP_MAGIC, 8);
	snap_put_le(b + 8, SNAP_FORMAT_VERSION, 4);
	snap_put_le(b + 12, SNAP_HEADER_SIZE, 4);
	snap_put_le(b + 16, plen, 8);
	snap_put_le(b + 24, XXH3_64bits(b + SNAP_HEADER_SIZE, plen), 8);
	*len = SNAP_HEADER_SIZE + plen;
	return b;
}

static int check_header(const uint8_t *b, size_t len, char *err)
{
	uint64_t plen;

	if (len < 8 || memcmp(b, SNAP_MAGIC, 8))
		return snap_fail(err, "not a Cicada GPU snapshot (bad manifest magic)");
	if (len < SNAP_HEADER_SIZE)
		return snap_fail(err, "manifest truncated (%zu bytes, the header alone is %u)",
				 len, SNAP_HEADER_SIZE);
	if (snap_get_le(b + 8, 4) < SNAP_FORMAT_OLDEST || snap_get_le(b + 8, 4) > SNAP_FORMAT_VERSION)
		return snap_fail(err, "snapshot format version %llu is not supported (this build reads %d to %d)",
				 (unsigned long long)snap_get_le(b + 8, 4), SNAP_FORMAT_OLDEST, SNAP_FORMAT_VERSION);
	if (snap_get_le(b + 12, 4) != SNAP_HEADER_SIZE)
		return snap_fail(err, "manifest header size %llu, expected %u",
				 (unsigned long long)snap_get_le(b + 12, 4), SNAP_HEADER_SIZE);
	plen = snap_get_le(b + 16, 8);
	if (plen > len - SNAP_HEADER_SIZE)
		return snap_fail(err, "manifest truncated (%zu of %llu payload bytes)",
				 len - SNAP_HEADER_SIZE, (unsigned long long)plen);
	if (plen < len - SNAP_HEADER_SIZE)
		return snap_fail(err, "manifest has %llu stray bytes after its payload",
				 (unsigned long long)(len - SNAP_HEADER_SIZE - plen));
	if (XXH3_64bits(b + SNAP_HEADER_SIZE, plen) != snap_get_le(b + 24, 8))
		return snap_fail(err, "manifest checksum mismatch: corrupted");
	return 0;
}

Cicada__Manifest *snap_manifest_parse(const void *buf, size_t len, char *err)
{
	Cicada__Manifest *m;

	if (check_header(buf, len, err))
		return NULL;
	m = cicada__manifest__unpack(NULL, len - SNAP_HEADER_SIZE, (const uint8_t *)buf + SNAP_HEADER_SIZE);
	if (!m) {
		snap_fail(err, "manifest does not decode: corrupted or incomplete");
		return NULL;
	}
	if (snap_manifest_check(m, err)) {
		snap_manifest_free(m);
		return NULL;
	}
	return m;
}

void snap_manifest_free(Cicada__Manifest *m)
{
	if (m)
		cicada__manifest__free_unpacked(m, NULL);
}

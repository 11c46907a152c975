/*
 * manifest_seeds.c: writes the starting corpus for fuzz_manifest: a
 * minimal manifest, a full one (GPU, images, records, allocations,
 * chunks, globals, pieces in two data files) and an incremental one of an
 * owner (a parent path, a piece left to it), each as a whole file (mode
 * byte 0) and as a bare payload (mode byte 1). Usage: manifest_seeds DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

static void write_seed(const char *dir, const char *name, int mode, const uint8_t *data, size_t len)
{
	char path[4096];
	unsigned char m = (unsigned char)mode;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s-%d", dir, name, mode);
	f = fopen(path, "wb");
	if (!f || fwrite(&m, 1, 1, f) != 1 || fwrite(data, 1, len, f) != len || fclose(f)) {
		perror(path);
		exit(1);
	}
}

static void seed(const char *dir, const char *name, const Cicada__Manifest *m)
{
	char err[SNAP_ERRLEN];
	size_t len;
	uint8_t *buf = snap_manifest_pack(m, &len, err);

	if (!buf || snap_manifest_check(m, err)) {
		fprintf(stderr, "manifest_seeds: %s: %s\n", name, buf ? err : "cannot pack");
		exit(1);
	}
	write_seed(dir, name, 0, buf, len);
	write_seed(dir, name, 1, buf + SNAP_HEADER_SIZE, len - SNAP_HEADER_SIZE);
	free(buf);
}

static void full(Cicada__Manifest *m)
{
	static Cicada__Gpu gpu = CICADA__GPU__INIT;
	static Cicada__ModuleImage im = CICADA__MODULE_IMAGE__INIT, *ims[1] = { &im };
	static Cicada__Record rec[2] = { CICADA__RECORD__INIT, CICADA__RECORD__INIT };
	static Cicada__Record *recs[2] = { &rec[0], &rec[1] };
	static Cicada__Allocation al = CICADA__ALLOCATION__INIT, *als[1] = { &al };
	static Cicada__Chunk ch = CICADA__CHUNK__INIT, *chs[1] = { &ch };
	static Cicada__Global gl = CICADA__GLOBAL__INIT, *gls[1] = { &gl };
	static Cicada__Piece pc[2] = { CICADA__PIECE__INIT, CICADA__PIECE__INIT };
	static Cicada__Piece *pcs[2] = { &pc[0], &pc[1] };
	static char file[SNAP_NAME_MAX];
	static uint8_t bytes[16] = { 1, 2, 3 };
	static uint64_t sizes[2] = { 1000, SNAP_PIECE_SIZE };

	gpu.name = "NVIDIA H100 80GB HBM3";
	gpu.has_uuid = gpu.has_driver_version = gpu.has_cc_major = 1;
	gpu.uuid = (ProtobufCBinaryData){ 16, bytes };
	gpu.driver_version = 12040;
	gpu.cc_major = 9;
	im.hash_lo = 0x1234;
	im.hash_hi = 0xabcd;
	im.size = 4096;
	snap_image_name(file, im.hash_lo, im.hash_hi);
	im.file = file;
	for (int i = 0; i < 2; i++) {
		rec[i].seq = i + 1;
		rec[i].proc = 7 + i;
		rec[i].name = "cuMemAlloc";
		rec[i].has_args = rec[i].has_handle = rec[i].has_parent = 1;
		rec[i].args = (ProtobufCBinaryData){ sizeof(bytes), bytes };
		rec[i].handle = i + 1;
		rec[i].parent = i;
	}
	al.va = ch.va = pc[0].va = 0x7f0000000000ull;
	al.size = ch.size = 2 * SNAP_PIECE_SIZE;
	pc[1].va = gl.va = pc[0].va + SNAP_PIECE_SIZE;
	gl.size = 4;
	gl.parent = 2;
	pc[0].size = pc[1].size = SNAP_PIECE_SIZE;
	pc[0].stored_size = 1000;
	pc[0].has_compressed = pc[0].compressed = 1;
	pc[1].has_file = pc[1].file = 1;
	pc[1].stored_size = SNAP_PIECE_SIZE;
	m->gpu = &gpu;
	m->n_images = 1;
	m->images = ims;
	m->n_records = 2;
	m->records = recs;
	m->n_allocations = m->n_chunks = m->n_globals = 1;
	m->globals = gls;
	m->allocations = als;
	m->chunks = chs;
	m->n_pieces = 2;
	m->pieces = pcs;
	m->data_file = SNAP_DATA_NAME;
	m->has_data_size = 1;
	m->data_size = 1000 + SNAP_PIECE_SIZE;
	m->n_data_sizes = 2;
	m->data_sizes = sizes;
	m->has_arena_va = m->has_arena_size = 1;
	m->arena_va = 0x7f0000000000ull;
	m->arena_size = 1ull << 30;
}

int main(int argc, char **argv)
{
	Cicada__Manifest m = CICADA__MANIFEST__INIT;

	if (argc != 2) {
		fprintf(stderr, "usage: manifest_seeds DIR\n");
		return 2;
	}
	m.format_version = SNAP_FORMAT_VERSION;
	m.producer = SNAP_PRODUCER;
	m.created_unix_ns = 1700000000000000000ull;
	seed(argv[1], "minimal", &m);
	full(&m);
	seed(argv[1], "full", &m);
	m.owner = "uid 1000";
	m.has_owner_uid = 1;
	m.owner_uid = 1000;
	m.parent = "../../precopy-1/cicada-gpu-42";
	m.has_parent_checksum = 1;
	m.parent_checksum = 0x1234567890abcdefull;
	m.pieces[1]->has_in_parent = m.pieces[1]->in_parent = 1;
	m.pieces[1]->stored_size = 0;
	m.pieces[1]->has_file = 0;
	m.pieces[1]->file = 0;
	m.n_data_sizes = 1;
	m.data_size = 1000;
	seed(argv[1], "incremental", &m);
	return 0;
}

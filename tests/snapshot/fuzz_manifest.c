/*
 * fuzz_manifest.c: libFuzzer target over snap_manifest_parse. The first
 * input byte picks the mode: even, the rest is a whole manifest file;
 * odd, the rest is a payload behind a valid header (so that mutations
 * get past the checksum into decoding and validation). A refusal must
 * give one line; an accepted manifest must pack and parse again, unless
 * it carries unknown fields (protobuf-c keeps those, but re-encodes the
 * non-canonical tag 0 it tolerates as a canonical one it refuses).
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include "internal.h"

static int has_unknown(const ProtobufCMessage *msg)
{
	const ProtobufCMessageDescriptor *d = msg->descriptor;
	const char *base = (const char *)msg;

	if (msg->n_unknown_fields)
		return 1;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		ProtobufCMessage *const *sub = (ProtobufCMessage *const *)(base + f->offset);
		size_t n = 1;

		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			n = *(const size_t *)(base + f->quantifier_offset);
			sub = *(ProtobufCMessage *const *const *)sub;
		}
		for (size_t k = 0; k < n; k++)
			if (sub[k] && has_unknown(sub[k]))
				return 1;
	}
	return 0;
}

static void parse(const uint8_t *buf, size_t len)
{
	char err[SNAP_ERRLEN] = "";
	Cicada__Manifest *m = snap_manifest_parse(buf, len, err), *again;
	uint8_t *packed;
	size_t plen;

	if (!m) {
		if (!err[0] || strchr(err, '\n'))
			abort();
		return;
	}
	packed = snap_manifest_pack(m, &plen, err);
	again = packed ? snap_manifest_parse(packed, plen, err) : NULL;
	if (!again && !has_unknown(&m->base))
		abort();
	snap_manifest_free(again);
	snap_manifest_free(m);
	free(packed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf;

	if (!size)
		return 0;
	if (!(data[0] & 1)) {
		parse(data + 1, size - 1);
		return 0;
	}
	buf = malloc(SNAP_HEADER_SIZE + size - 1);
	memcpy(buf, SNAP_MAGIC, 8);
	snap_put_le(buf + 8, SNAP_FORMAT_VERSION, 4);
	snap_put_le(buf + 12, SNAP_HEADER_SIZE, 4);
	snap_put_le(buf + 16, size - 1, 8);
	snap_put_le(buf + 24, XXH3_64bits(data + 1, size - 1), 8);
	memcpy(buf + SNAP_HEADER_SIZE, data + 1, size - 1);
	parse(buf, SNAP_HEADER_SIZE + size - 1);
	free(buf);
	return 0;
}

/*
 * make_seeds.c: writes the starting corpus for fuzz_decode: valid call
 * records, encoded with wire_encode_call, for a handful of procedures.
 * Each file is fuzz_decode's mode byte followed by the message: a record
 * body (modes 0 and 2), a marked byte stream of records (mode 1) or a
 * control line (mode 3).
 * Usage: make_seeds DIR
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire.h"
#include "nvml-wire.h"

enum { MODE_BODY = 0, MODE_STREAM = 1, MODE_HELLO = 2, MODE_CONTROL = 3 };

static const char *seed_dir;
static struct wire_buf stream;           /* every record, marked, for mode 1 */

static void write_seed(const char *name, int mode, const void *data, size_t len)
{
	char path[4096];
	unsigned char m = (unsigned char)mode;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", seed_dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(&m, 1, 1, f) != 1 || fwrite(data, 1, len, f) != len || fclose(f)) {
		perror(path);
		exit(1);
	}
}

/* Appends a record to the stream seed; split sends it as two fragments. */
static void append_record(const struct wire_buf *b, int split)
{
	size_t body = b->len - 4, first = split ? body / 2 : body;
	uint32_t mark;

	if (wire_buf_reserve(&stream, stream.len + body + 8))
		exit(1);
	mark = htonl((split ? 0 : 0x80000000u) | (uint32_t)first);
	memcpy(stream.data + stream.len, &mark, 4);
	memcpy(stream.data + stream.len + 4, b->data + 4, first);
	stream.len += 4 + first;
	if (!split)
		return;
	mark = htonl(0x80000000u | (uint32_t)(body - first));
	memcpy(stream.data + stream.len, &mark, 4);
	memcpy(stream.data + stream.len + 4, b->data + 4 + first, body - first);
	stream.len += 4 + body - first;
}

/* Encodes one call and writes it as a body seed (and a hello seed). */
static void seed_call(const char *name, uint32_t proc, xdrproc_t xargs, void *args, int split)
{
	static uint32_t xid = 1;
	struct wire_buf b = { 0 };

	if (wire_encode_call(&b, xid++, proc, xargs, args)) {
		fprintf(stderr, "make_seeds: cannot encode %s\n", name);
		exit(1);
	}
	write_seed(name, MODE_BODY, b.data + 4, b.len - 4);
	if (proc == P_hello)
		write_seed("hello-first", MODE_HELLO, b.data + 4, b.len - 4);
	append_record(&b, split);
	wire_buf_free(&b);
}

static void seed_hello(void)
{
	char token[] = "fuzz-token-0123456789", host[] = "fuzzhost";
	hello_args h = { .proto_version = CICADA_PROTO_VERSION, .want_shm = 0, .shm_size = 0, .pid = 1234,
			 .host = host, .ticket = "", .snapshot = "", .parent = "", .devices = "=1,0" };

	h.token.token_val = token;
	h.token.token_len = sizeof(token) - 1;
	seed_call("hello", P_hello, (xdrproc_t)xdr_hello_args, &h, 0);
	h.op = OP_CHECKPOINT;
	h.ticket = "0123456789abcdef0123456789abcdef";
	h.snapshot = "cicada-gpu-1234";
	seed_call("hello-checkpoint", P_hello, (xdrproc_t)xdr_hello_args, &h, 0);
}

static void seed_scalars(void)
{
	uint64_t v[2] = { 16, 0 };          /* multiprocessor count, device 0 */
	scalars s = { .v = { .v_len = 2, .v_val = v } };

	seed_call("cuDeviceGetAttribute", P_cuDeviceGetAttribute, (xdrproc_t)xdr_scalars, &s, 1);
}

static void seed_launch(void)
{
	char params[24] = { 1, 2, 3, 4 };
	launch_attr attr = { .id = 1 };
	launch_args a = { .func = 0x1003, .grid = { 4, 1, 1 }, .block = { 256, 1, 1 },
			  .shared_mem = 0, .stream = 0 };

	a.params.params_val = params;
	a.params.params_len = sizeof(params);
	a.attrs.attrs_val = &attr;
	a.attrs.attrs_len = 1;
	seed_call("launch_kernel", P_launch_kernel, (xdrproc_t)xdr_launch_args, &a, 0);
}

static void seed_htod(void)
{
	char data[64];
	htod_args a = { .dst = 0x7f0000001000ull, .stream = 0, .async = 0 };

	memset(data, 0x5a, sizeof(data));
	a.data.data_val = data;
	a.data.data_len = sizeof(data);
	seed_call("memcpy_htod", P_memcpy_htod, (xdrproc_t)xdr_htod_args, &a, 1);
}

static void seed_module_load(void)
{
	char image[] = "//\n.version 8.0\n.target sm_90\n.address_size 64\n";
	module_load_args a = { .hash = { 0x1234, 0x5678 }, .library = 0 };

	a.image.image_val = image;
	a.image.image_len = sizeof(image);
	seed_call("module_load", P_module_load, (xdrproc_t)xdr_module_load_args, &a, 0);
}

static void seed_get_function(void)
{
	char name[] = "vecadd";
	handle_name_args a = { .handle = 0x1002, .name = name };

	seed_call("module_get_function", P_module_get_function, (xdrproc_t)xdr_handle_name_args, &a, 0);
}

static void seed_shm_copy(void)
{
	shm_copy_args a = { .device = 0x7f0000002000ull, .region = 0, .offset = 0, .size = 4096,
			    .stream = 0, .async = 1, .to_device = 1, .slot = 0 };

	seed_call("memcpy_shm_async", P_memcpy_shm_async, (xdrproc_t)xdr_shm_copy_args, &a, 0);
}

static void seed_nvml(void)
{
	char uuid[] = "GPU-43696361-6461-4661-6b65-4750552d3030";
	nvml_args a = { .func = NVMLF_BY_UUID, .device = 0, .arg = 0, .text = uuid };

	seed_call("nvml_query", P_nvml_query, (xdrproc_t)xdr_nvml_args, &a, 1);
}

static void seed_arrays(void)
{
	char res[144] = { 0 }, tex[120] = { 0 };
	memcpy3d_args c = { .src = { .type = 2, .device = 0x200000000000ull, .pitch = 256, .height = 4 },
			    .dst = { .type = 3, .array = 0x1004 }, .width_bytes = 256, .height = 4, .depth = 1 };
	tex_object_args t = { { sizeof(res), res }, { sizeof(tex), tex }, { 0, NULL } };

	seed_call("memcpy_3d", P_memcpy_3d, (xdrproc_t)xdr_memcpy3d_args, &c, 0);
	seed_call("tex_object_create", P_tex_object_create, (xdrproc_t)xdr_tex_object_args, &t, 1);
}

/* Lines of the control protocol (wire/control.c), for mode 3. */
static void seed_control(void)
{
	static const char *lines[] = {
		"PAUSED 0123456789abcdef0123456789abcdef unix:/run/cicada/gpu.sock 00ff /home/u/token",
		"PAUSED 0123456789abcdef0123456789abcdef tcp:10.0.0.2:7777 - -",
		"RESUME 0123456789abcdef0123456789abcdef tcp:127.0.0.1:7777 a1b2",
		"RESUME 0123456789abcdef0123456789abcdef unix:/run/cicada/gpu.sock",
		"PRECOPY cicada-gpu-round-1 -",
		"PRECOPIED 1026 1000 209715200",
		"ERROR process 12 has no GPU session",
	};
	char name[32];

	for (unsigned i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		snprintf(name, sizeof(name), "control-%u", i);
		write_seed(name, MODE_CONTROL, lines[i], strlen(lines[i]));
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: make_seeds DIR\n");
		return 2;
	}
	seed_dir = argv[1];
	seed_hello();
	seed_scalars();
	seed_launch();
	seed_htod();
	seed_module_load();
	seed_get_function();
	seed_shm_copy();
	seed_nvml();
	seed_arrays();
	write_seed("stream", MODE_STREAM, stream.data, stream.len);
	seed_control();
	wire_buf_free(&stream);
	return 0;
}

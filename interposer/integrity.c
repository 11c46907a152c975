/*
 * integrity.c: the runtime's integrity check (export table d4082055, see
 * EXPORT-TABLES.md 4.7). The runtime asks for a 16-byte digest for three
 * versions and checks the third itself: HMAC (RFC 2104) with MD2 (RFC
 * 1319) over what this process sees of the driver: its version, the pid
 * and thread, the addresses of our tables, the time, and every device's
 * UUID and PCI location. It must be computed here, in the application.
 */
#include <pthread.h>
#include <unistd.h>
#include "interposer.h"

/* RFC 1319's permutation of 0..255 made from the digits of pi. */
static const unsigned char md2_s[256] = {
	41, 46, 67, 201, 162, 216, 124, 1, 61, 54, 84, 161, 236, 240, 6, 19, 98, 167, 5, 243, 192, 199,
	115, 140, 152, 147, 43, 217, 188, 76, 130, 202, 30, 155, 87, 60, 253, 212, 224, 22, 103, 66, 111,
	24, 138, 23, 229, 18, 190, 78, 196, 214, 218, 158, 222, 73, 160, 251, 245, 142, 187, 47, 238, 122,
	169, 104, 121, 145, 21, 178, 7, 63, 148, 194, 16, 137, 11, 34, 95, 33, 128, 127, 93, 154, 90, 144,
	50, 39, 53, 62, 204, 231, 191, 247, 151, 3, 255, 25, 48, 179, 72, 165, 181, 209, 215, 94, 146, 42,
	172, 86, 170, 198, 79, 184, 56, 210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4, 241, 69,
	157, 112, 89, 100, 113, 135, 32, 134, 91, 207, 101, 230, 45, 168, 2, 27, 96, 37, 173, 174, 176, 185,
	246, 28, 70, 97, 105, 52, 64, 126, 15, 85, 71, 163, 35, 221, 81, 175, 58, 195, 92, 249, 206, 186,
	197, 234, 38, 44, 83, 13, 110, 133, 40, 132, 9, 211, 223, 205, 244, 65, 129, 77, 82, 106, 220, 55,
	200, 108, 193, 171, 250, 36, 225, 123, 8, 12, 189, 177, 74, 120, 136, 149, 139, 227, 99, 232, 109,
	233, 203, 213, 254, 59, 0, 29, 57, 242, 239, 183, 14, 102, 88, 208, 228, 166, 119, 114, 248, 235,
	117, 75, 10, 49, 68, 80, 180, 143, 237, 31, 26, 219, 153, 141, 51, 159, 17, 131, 20,
};

struct md2 {
	unsigned char state[48], checksum[16], block[16];
	size_t used;
};

static void md2_block(struct md2 *c, const unsigned char *b)
{
	unsigned char t = c->checksum[15];

	for (int i = 0; i < 16; i++) {
		c->state[16 + i] = b[i];
		c->state[32 + i] = (unsigned char)(b[i] ^ c->state[i]);
		t = c->checksum[i] ^= md2_s[b[i] ^ t];
	}
	t = 0;
	for (int round = 0; round < 18; round++) {
		for (int i = 0; i < 48; i++)
			t = c->state[i] ^= md2_s[t];
		t = (unsigned char)(t + round);
	}
}

static void md2_update(struct md2 *c, const void *data, size_t len)
{
	const unsigned char *p = data;

	while (len--) {
		c->block[c->used++] = *p++;
		if (c->used == 16) {
			md2_block(c, c->block);
			c->used = 0;
		}
	}
}

static void md2_final(struct md2 *c, unsigned char out[16])
{
	unsigned char pad = (unsigned char)(16 - c->used), checksum[16];

	for (int i = 0; i < pad; i++)
		md2_update(c, &pad, 1);
	memcpy(checksum, c->checksum, 16);
	md2_update(c, checksum, 16);
	memcpy(out, c->state, 16);
}

/* HMAC-MD2 of msg with a 16-byte key (MD2's block is 16 bytes). */
static void hmac_md2(const unsigned char key[16], const void *msg, size_t len, unsigned char out[16])
{
	unsigned char pad[16], inner[16];
	struct md2 c;

	memset(&c, 0, sizeof(c));
	for (int i = 0; i < 16; i++)
		pad[i] = key[i] ^ 0x36;
	md2_update(&c, pad, 16);
	md2_update(&c, msg, len);
	md2_final(&c, inner);
	memset(&c, 0, sizeof(c));
	for (int i = 0; i < 16; i++)
		pad[i] = key[i] ^ 0x5c;
	md2_update(&c, pad, 16);
	md2_update(&c, inner, 16);
	md2_final(&c, out);
}

/* MD2 alone, for the self-test. */
void integrity_md2(const void *msg, size_t len, unsigned char out[16])
{
	struct md2 c;

	memset(&c, 0, sizeof(c));
	md2_update(&c, msg, len);
	md2_final(&c, out);
}

struct process_record {
	uint32_t driver_version, version, pid, thread;
	uint64_t interface_table, integrity_table, function, seconds;
};

struct device_record {
	unsigned char uuid[16];
	int32_t pci_domain, pci_bus, pci_device;
};

static const unsigned char integrity_key[16] = {
	0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52, 0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f,
};

#define MAX_DEVICES 64

CUresult integrity_digest(uint32_t version, uint64_t seconds, const void *interface_table,
			  const void *integrity_table, const void *function, uint64_t out[2])
{
	struct { struct process_record p; struct device_record d[MAX_DEVICES]; } m;   /* no padding */
	int driver = 0, count = 0;
	CUresult err;

	if (version % 10 == 0 || version % 10 == 1) {
		out[0] = version % 10 ? 0x1841181C03CB675Cull : 0x3341181C03CB675Cull;
		out[1] = 0x8ED383AA1F4CD1E8ull;
		return CUDA_SUCCESS;
	}
	if ((err = cuDriverGetVersion(&driver)) || (err = cuDeviceGetCount(&count)))
		return err;
	memset(&m, 0, sizeof(m));
	m.p = (struct process_record){ (uint32_t)driver, version, (uint32_t)getpid(), (uint32_t)pthread_self(),
				       (uintptr_t)interface_table, (uintptr_t)integrity_table, (uintptr_t)function,
				       seconds };
	for (int i = 0; i < count && i < MAX_DEVICES; i++) {
		CUuuid uuid;
		if ((err = cuDeviceGetUuid_v2(&uuid, i)) ||
		    (err = cuDeviceGetAttribute(&m.d[i].pci_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, i)) ||
		    (err = cuDeviceGetAttribute(&m.d[i].pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, i)) ||
		    (err = cuDeviceGetAttribute(&m.d[i].pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, i)))
			return err;
		memcpy(m.d[i].uuid, uuid.bytes, 16);
	}
	hmac_md2(integrity_key, &m, sizeof(m.p) + (size_t)(count < MAX_DEVICES ? count : MAX_DEVICES) *
				    sizeof(struct device_record), (unsigned char *)out);
	return CUDA_SUCCESS;
}

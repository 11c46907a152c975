/*
 * globals.c: finds the global and constant variables a module image
 * declares, so that their device memory is part of a checkpoint even if
 * the client never looked them up (a counter only kernels touch). Names
 * come from the symbol table of an ELF cubin, from the declarations of
 * PTX text, or from the uncompressed entries of a fatbin; each name the
 * driver knows is then tracked with its address. The image comes from a
 * client: every offset is checked.
 */
#include <elf.h>
#include <string.h>
#include "state.h"

#define FATBIN_MAGIC 0xBA55ED50u
#define FATBIN_COMPRESSED 0xa000u           /* LZ4 or zstd entries */
#define MAX_NAME 256

typedef void (*name_fn)(void *ctx, const char *name);

static void scan_elf(const unsigned char *p, size_t size, name_fn fn, void *ctx)
{
	const Elf64_Ehdr *e = (const void *)p;
	const Elf64_Shdr *sh;

	if (size < sizeof(*e) || e->e_shentsize != sizeof(Elf64_Shdr) || e->e_shoff > size ||
	    (size - e->e_shoff) / sizeof(Elf64_Shdr) < e->e_shnum)
		return;
	sh = (const void *)(p + e->e_shoff);
	for (unsigned i = 0; i < e->e_shnum; i++) {
		const Elf64_Shdr *s = &sh[i], *str;
		if (s->sh_type != SHT_SYMTAB || s->sh_link >= e->e_shnum || s->sh_offset > size ||
		    s->sh_size > size - s->sh_offset)
			continue;
		str = &sh[s->sh_link];
		if (str->sh_offset > size || str->sh_size > size - str->sh_offset || !str->sh_size)
			continue;
		for (size_t k = 0; k < s->sh_size / sizeof(Elf64_Sym); k++) {
			const Elf64_Sym *sym = (const void *)(p + s->sh_offset + k * sizeof(Elf64_Sym));
			const char *name = (const char *)p + str->sh_offset + sym->st_name;
			if (ELF64_ST_TYPE(sym->st_info) != STT_OBJECT || sym->st_name >= str->sh_size ||
			    !memchr(name, 0, str->sh_size - sym->st_name))
				continue;
			fn(ctx, name);
		}
	}
}

/* A PTX line declaring a variable in the global or constant space. */
static void scan_ptx_line(const char *line, size_t len, name_fn fn, void *ctx)
{
	char buf[MAX_NAME * 2];
	const char *space;
	size_t n, end;

	if (len >= sizeof(buf))
		return;
	memcpy(buf, line, len);
	buf[len] = 0;
	space = strstr(buf, ".global ");
	if (!space)
		space = strstr(buf, ".const ");
	if (!space || (space > buf && space[-1] != ' ' && space[-1] != '\t') || strstr(buf, ".extern") ||
	    strchr(buf, '('))
		return;
	end = strcspn(space, ";[=");
	n = (size_t)(space - buf) + end;
	while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		n--;
	buf[n] = 0;
	while (n > 0 && (buf[n - 1] == '_' || buf[n - 1] == '$' || (buf[n - 1] >= '0' && buf[n - 1] <= '9') ||
			 ((buf[n - 1] | 32) >= 'a' && (buf[n - 1] | 32) <= 'z')))
		n--;
	if (buf[n])
		fn(ctx, buf + n);
}

static void scan_ptx(const unsigned char *p, size_t size, name_fn fn, void *ctx)
{
	const char *s = (const char *)p, *end = s + strnlen(s, size);

	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);
		while (len && (*s == ' ' || *s == '\t'))
			s++, len--;
		if (len && *s == '.')
			scan_ptx_line(s, len, fn, ctx);
		s += len + 1;
	}
}

struct fatbin_entry {
	uint16_t kind;                       /* 1: PTX, 2: ELF */
	uint16_t version;
	uint32_t header_size;
	uint64_t padded_size;
	uint32_t compressed_size;
	uint32_t unknown;
	uint16_t minor, major;
	uint32_t arch;
	uint32_t name_offset, name_size;
	uint64_t flags;
};

static void scan_image(const unsigned char *p, size_t size, name_fn fn, void *ctx);

static void scan_fatbin(const unsigned char *p, size_t size, name_fn fn, void *ctx)
{
	uint16_t hsize;
	uint64_t fat, off;

	if (size < 16)
		return;
	memcpy(&hsize, p + 6, 2);
	memcpy(&fat, p + 8, 8);
	if (hsize > size || fat > size - hsize)
		return;
	for (off = hsize; off + sizeof(struct fatbin_entry) <= hsize + fat;) {
		struct fatbin_entry e;
		memcpy(&e, p + off, sizeof(e));
		if (e.header_size < sizeof(e) || e.header_size > size - off || e.padded_size > size - off - e.header_size)
			return;
		if (!(e.flags & FATBIN_COMPRESSED) && (e.kind == 1 || e.kind == 2))
			scan_image(p + off + e.header_size, e.padded_size, fn, ctx);
		off += e.header_size + e.padded_size;
	}
}

static void scan_image(const unsigned char *p, size_t size, name_fn fn, void *ctx)
{
	uint32_t magic = 0;

	if (size >= 4)
		memcpy(&magic, p, 4);
	if (magic == FATBIN_MAGIC)
		scan_fatbin(p, size, fn, ctx);
	else if (size >= SELFMAG && !memcmp(p, ELFMAG, SELFMAG))
		scan_elf(p, size, fn, ctx);
	else
		scan_ptx(p, size, fn, ctx);
}

struct tracking {
	struct worker *w;
	uint64_t id;
	void *handle;
	int library;
};

static void track_one(void *ctx, const char *name)
{
	struct tracking *t = ctx;
	CUdeviceptr ptr;
	size_t size;
	CUresult err;

	err = t->library ? cuLibraryGetGlobal(&ptr, &size, t->handle, name)
			 : cuModuleGetGlobal(&ptr, &size, t->handle, name);
	if (!err && size)
		replay_note_global(t->w, t->id, ptr, size);
}

/* Tracks every variable of a loaded module (or library) image. */
void globals_track(struct worker *w, uint64_t id, void *handle, int library, const void *image, size_t size)
{
	struct tracking t = { w, id, handle, library };

	scan_image(image, size, track_one, &t);
}

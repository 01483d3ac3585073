// SPDX-License-Identifier: MIT
/*
 * The whole analysis (as fuzz_elf) over large files: the input is not the
 * file but a recipe for one, so that a few bytes reach the sizes and counts
 * where the analysis has budgets and where quadratic paths used to hide
 * (hundreds of thousands of symbols, names repeated thousands of times, long
 * names to suggest from, megabytes of code or of RET bytes, a .gopclntab of
 * tens of MiB). The file is an ET_EXEC with one R+X PT_LOAD over .text, its
 * .symtab and .strtab, and an optional .gopclntab, written to a memfd
 * (zeros left as holes). The rest of the input, after the recipe, is a tile
 * that fills the code and the names. run.sh gives this target a time limit
 * per input (fuzz_bigelf.options): a unit over it is a failure, as a crash.
 * BIGELF_OUT=FILE keeps the file made from the last input, to look at with
 * `retwatch inspect` or readelf.
 *
 * Recipe (little-endian), every field optional (0 past the input's end):
 *   u8  flags     1: code is RET bytes, not the tile; 2: every other symbol
 *                 is the previous one's ".cold" part; 4: a .gopclntab;
 *                 8: names are Go-like ("main." then the tile); 16: the
 *                 first symbol spans the whole .text
 *   u8  name_len  a name's length, 1 + 4 * name_len (at most 1,021)
 *   u16 nsyms     symbols, 4 * nsyms (at most 262,140), each step + 1 bytes
 *                 or up to 64 times that
 *   u16 distinct  names repeat every distinct + 1 symbols
 *   u8  code      .text size, 32 KiB * (code + 1) (at most 8 MiB)
 *   u8  step      a symbol starts every step + 1 bytes of .text (wrapping)
 *   u16 pcln      the .gopclntab's size, 1 KiB * pcln (at most 64 MiB)
 *   u32 nfunc     the .gopclntab header's function count
 *   u8  npats     patterns matching nothing, 0-16 (suggestions for each)
 */
#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "analysis/binary.h"

#define BASE 0x10000000ULL
#define TEXT_OFF 0x1000ULL
/* the names' bytes in all: a bound on the generator's own memory */
#define MAX_STRTAB (8u << 20)
/* patterns to suggest for: each is a pass over every name */
#define MAX_PATS 16
#define PCLN_HDR 72

struct recipe {
	uint8_t flags, name_len, code, step, npats;
	uint32_t nsyms, distinct, pcln, nfunc;
	const uint8_t *tile;
	size_t ntile;
};

static uint64_t take(const uint8_t **p, size_t *left, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		if (i < *left)
			v |= (uint64_t)(*p)[i] << (8 * i);
	*p += n < *left ? n : *left;
	*left -= n < *left ? n : *left;
	return v;
}

static void read_recipe(const uint8_t *data, size_t size, struct recipe *r)
{
	r->flags = take(&data, &size, 1);
	r->name_len = take(&data, &size, 1);
	r->nsyms = 4 * take(&data, &size, 2);
	r->distinct = take(&data, &size, 2) + 1;
	r->code = take(&data, &size, 1);
	r->step = take(&data, &size, 1);
	r->pcln = take(&data, &size, 2);
	r->nfunc = take(&data, &size, 4);
	r->npats = take(&data, &size, 1) % (MAX_PATS + 1);
	r->tile = data;
	r->ntile = size;
}

/* Byte i of the tile, or of a fixed pattern when there is no tile. */
static uint8_t tile_at(const struct recipe *r, size_t i)
{
	return r->ntile ? r->tile[i % r->ntile] : (uint8_t)(0x90 + i % 7);
}

/* Name k (of r->distinct) into out: name_len bytes of letters from the tile. */
static size_t make_name(const struct recipe *r, uint32_t k, size_t len, char *out)
{
	size_t n = 0;

	if (r->flags & 8)
		n = (size_t)snprintf(out, len + 1, "main.");
	for (; n < len; n++)
		out[n] = (char)('a' + (tile_at(r, k * 31 + n) + k + n / 8) % 26);
	/* distinct names differ in their last bytes too */
	for (size_t i = 0; i < 4 && len > 8; i++)
		out[len - 1 - i] = (char)('a' + (k >> (5 * i)) % 26);
	out[len] = '\0';
	return len;
}

struct file {
	uint8_t *text, *symtab, *strtab, *pcln;
	size_t ntext, nsymtab, nstrtab, npcln;
};

static int build(const struct recipe *r, struct file *f)
{
	size_t len = 1 + 4 * (size_t)r->name_len, step = (size_t)r->step + 1;
	uint32_t nsyms = r->nsyms, distinct = r->distinct < nsyms ? r->distinct : nsyms;
	char *name = malloc(len + 16);
	uint32_t *name_off;

	if (!name)
		return -1;
	if ((size_t)distinct * (len + 6) > MAX_STRTAB)
		distinct = MAX_STRTAB / (len + 6);
	f->ntext = (32u << 10) * ((size_t)r->code + 1);
	f->text = malloc(f->ntext);
	f->symtab = calloc((size_t)nsyms + 1, sizeof(Elf64_Sym));
	f->strtab = malloc((size_t)distinct * (len + 6) + 1);
	name_off = calloc((size_t)distinct + 1, sizeof(*name_off));
	if (!f->text || !f->symtab || !f->strtab || !name_off) {
		free(name);
		free(name_off);
		return -1;
	}
	for (size_t i = 0; i < f->ntext; i++)
		f->text[i] = r->flags & 1 ? 0xc3 : tile_at(r, i);
	f->nstrtab = 1;
	f->strtab[0] = '\0';
	for (uint32_t k = 0; k < distinct; k++) {
		size_t n = make_name(r, k, len, name);

		/* with flag 2 the odd names are their even neighbour's cold part */
		if ((r->flags & 2) && (k & 1)) {
			make_name(r, k - 1, len, name);
			memcpy(name + n, ".cold", 6);
			n += 5;
		}
		name_off[k] = (uint32_t)f->nstrtab;
		memcpy(f->strtab + f->nstrtab, name, n + 1);
		f->nstrtab += n + 1;
	}
	f->nsymtab = ((size_t)nsyms + 1) * sizeof(Elf64_Sym);
	for (uint32_t i = 0; i < nsyms && distinct; i++) {
		Elf64_Sym *s = (Elf64_Sym *)f->symtab + 1 + i;
		size_t off = (i * step) % f->ntext;

		s->st_name = name_off[i % distinct];
		s->st_info = ELF64_ST_INFO(STB_LOCAL, STT_FUNC);
		s->st_shndx = 1;
		s->st_value = BASE + TEXT_OFF + off;
		s->st_size = tile_at(r, i) & 1		  ? step
			     : f->ntext - off < step * 64 ? f->ntext - off
							  : step * 64;
		if (i == 0 && (r->flags & 16))
			s->st_size = f->ntext;
	}
	free(name);
	free(name_off);
	f->npcln = r->flags & 4 ? ((size_t)r->pcln << 10) + PCLN_HDR : 0;
	if (f->npcln) {
		/* the Go 1.20+ header; the tables it points into are zeros (holes) */
		uint64_t hdr[8] = { r->nfunc,	     1,
				    BASE + TEXT_OFF, PCLN_HDR,
				    PCLN_HDR,	     PCLN_HDR,
				    PCLN_HDR,	     PCLN_HDR + (f->npcln - PCLN_HDR) / 2 };

		f->pcln = calloc(1, PCLN_HDR);
		if (!f->pcln)
			return -1;
		memcpy(f->pcln, "\xf1\xff\xff\xff\0\0\x01\x08", 8);
		memcpy(f->pcln + 8, hdr, sizeof(hdr));
	}
	return 0;
}

static void file_free(struct file *f)
{
	free(f->text);
	free(f->symtab);
	free(f->strtab);
	free(f->pcln);
}

static int put(int fd, const void *p, size_t n, size_t off)
{
	return n && pwrite(fd, p, n, (off_t)off) != (ssize_t)n ? -1 : 0;
}

/* Writes f as an ELF file to fd; 0 or -1. */
static int write_elf(int fd, const struct file *f)
{
	static const char shstr[] = "\0.text\0.symtab\0.strtab\0.gopclntab\0.shstrtab";
	const size_t name_at[] = { 0, 1, 7, 15, 23, 34 };
	size_t off[6] = { 0 }, at = TEXT_OFF, nsec = f->npcln ? 6 : 5;
	const size_t sizes[6] = { 0, f->ntext, f->nsymtab, f->nstrtab, f->npcln, sizeof(shstr) };
	Elf64_Shdr sh[6] = { 0 };
	Elf64_Ehdr eh = { 0 };
	Elf64_Phdr ph = { 0 };

	for (size_t i = 1; i < 6; i++) {
		if (i == 4 && !f->npcln)
			continue;
		at = (at + 15) & ~(size_t)15;
		off[i] = at;
		at += sizes[i];
	}
	at = (at + 7) & ~(size_t)7;
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_EXEC;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_entry = BASE + TEXT_OFF;
	eh.e_phoff = sizeof(eh);
	eh.e_shoff = at;
	eh.e_ehsize = sizeof(eh);
	eh.e_phentsize = sizeof(ph);
	eh.e_phnum = 1;
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = nsec;
	eh.e_shstrndx = nsec - 1;
	ph.p_type = PT_LOAD;
	ph.p_flags = PF_R | PF_X;
	ph.p_vaddr = ph.p_paddr = BASE;
	ph.p_filesz = ph.p_memsz = off[1] + f->ntext;
	ph.p_align = 0x1000;
	for (size_t i = 1, k = 1; i < 6; i++) {
		Elf64_Shdr *s = &sh[k];

		if (i == 4 && !f->npcln)
			continue;
		s->sh_name = name_at[i];
		s->sh_offset = off[i];
		s->sh_size = sizes[i];
		s->sh_addralign = 16;
		switch (i) {
		case 1:
			s->sh_type = SHT_PROGBITS;
			s->sh_flags = SHF_ALLOC | SHF_EXECINSTR;
			s->sh_addr = BASE + off[i];
			break;
		case 2:
			s->sh_type = SHT_SYMTAB;
			s->sh_link = 3;
			s->sh_info = (uint32_t)(f->nsymtab / sizeof(Elf64_Sym));
			s->sh_entsize = sizeof(Elf64_Sym);
			break;
		case 4:
			s->sh_type = SHT_PROGBITS;
			s->sh_flags = SHF_ALLOC;
			s->sh_addr = BASE + off[i];
			break;
		default: s->sh_type = SHT_STRTAB; break;
		}
		k++;
	}
	if (ftruncate(fd, 0) || ftruncate(fd, (off_t)(at + nsec * sizeof(Elf64_Shdr))))
		return -1;
	if (put(fd, &eh, sizeof(eh), 0) || put(fd, &ph, sizeof(ph), sizeof(eh)) ||
	    put(fd, f->text, f->ntext, off[1]) || put(fd, f->symtab, f->nsymtab, off[2]) ||
	    put(fd, f->strtab, f->nstrtab, off[3]) ||
	    (f->npcln && put(fd, f->pcln, PCLN_HDR, off[4])) ||
	    put(fd, shstr, sizeof(shstr), off[5]) || put(fd, sh, nsec * sizeof(Elf64_Shdr), at))
		return -1;
	return 0;
}

/* A copy of the file in fd to path (BIGELF_OUT). */
static void keep_file(int fd, const char *path)
{
	int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	static char buf[1 << 16];
	off_t off = 0;
	ssize_t n;

	if (out < 0)
		return;
	while ((n = pread(fd, buf, sizeof(buf), off)) > 0 && write(out, buf, (size_t)n) == n)
		off += n;
	close(out);
}

/* Pattern i of the ones that match nothing: a name of the file, one byte off. */
static void make_pattern(const struct recipe *r, size_t i, char *out, size_t cap)
{
	size_t len = 1 + 4 * (size_t)r->name_len;

	if (len + 1 > cap)
		len = cap - 1;
	make_name(r, (uint32_t)(i * 7919 % (r->distinct ? r->distinct : 1)), len, out);
	out[len / 2] = out[len / 2] == 'q' ? 'r' : 'q';
	out[len > 8 ? len - 9 : 0] = '#';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char patbuf[MAX_PATS][1100];
	const char *pats[MAX_PATS + 2] = { "*", "main.*" };
	static int fd = -1;
	struct binary_match m;
	struct file f = { 0 };
	struct rw_error err;
	struct recipe r;
	struct binary *b;
	char path[64];

	read_recipe(data, size, &r);
	if (fd < 0)
		fd = memfd_create("fuzz-bigelf", MFD_CLOEXEC);
	if (fd < 0 || build(&r, &f) || write_elf(fd, &f)) {
		file_free(&f);
		return 0;
	}
	file_free(&f);
	if (getenv("BIGELF_OUT"))
		keep_file(fd, getenv("BIGELF_OUT"));
	for (size_t i = 0; i < r.npats; i++) {
		make_pattern(&r, i, patbuf[i], sizeof(patbuf[i]));
		pats[2 + i] = patbuf[i];
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	b = binary__open(NULL, path, &err);
	/* the agent's limit per pattern: as many functions analysed as it would */
	if (b && !binary__match(b, pats, 2 + r.npats, BINARY_DEFAULT_LIMIT, &m, &err))
		binary_match__clear(&m);
	/* the same name alone: exact names are bounded as globs are */
	if (b && r.npats && !binary__match(b, pats + 2, 1, BINARY_DEFAULT_LIMIT, &m, &err))
		binary_match__clear(&m);
	binary__put(b);
	return 0;
}

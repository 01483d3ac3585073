// SPDX-License-Identifier: MIT
/*
 * A section's bytes are read on first use through elf_rawdata(), which
 * checks them against the file size; a lookup touches two or three
 * sections, not the whole file. Only a file without section headers is read
 * by segments (elf_getdata_rawchunk(), bounds-checked by libelf), never with
 * elf_rawfile(): that leaks every section the caller read before it (libelf
 * then takes their buffers for parts of the file's image and never frees them).
 */
#include <elf.h>
#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis/elfimg.h"

const char *elf_safe_strptr(Elf *elf, size_t ndx, size_t off)
{
	Elf_Scn *scn = elf_getscn(elf, ndx);
	Elf_Data *d;
	GElf_Shdr sh;

	/* elf_strptr() can hand out a string that runs off the end of a
	 * hostile string table: check for the terminator ourselves. A
	 * compressed table holds no strings until inflated, and libelf's
	 * elf_strptr() (which libdw looks sections up with) refuses it: names
	 * read here must be the names libdw sees (unwind__section_ok). */
	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_STRTAB ||
	    (sh.sh_flags & SHF_COMPRESSED))
		return NULL;
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || off >= d->d_size)
		return NULL;
	if (!memchr((const char *)d->d_buf + off, 0, d->d_size - off))
		return NULL;
	return (const char *)d->d_buf + off;
}

/* Loads a section's bytes on first use; false when they cannot be read. */
bool elfimg_region__load(const struct elfimg_region *cr)
{
	struct elfimg_region *r = (struct elfimg_region *)cr; /* img->reg is ours, not const */
	Elf_Data *d;

	if (r->scn) {
		d = elf_rawdata(r->scn, NULL);
		if (d && d->d_buf && d->d_size >= r->size)
			r->data = d->d_buf;
		r->scn = NULL; /* one attempt */
	}
	return r->data != NULL;
}

void elfimg__free(struct elfimg *img)
{
	free(img->reg);
	free(img->rel);
}

/* The allocated sections that hold bytes in the file, each read on first use. */
static int img_sections(struct elfimg *img, size_t cap, struct rw_error *err)
{
	Elf *elf = img->elf;
	size_t shstrndx = 0;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx))
		shstrndx = 0;
	while ((scn = elf_nextscn(elf, scn)) && img->nreg < cap) {
		struct elfimg_region *r = &img->reg[img->nreg];
		GElf_Shdr sh;

		/* Said outright: else a cut-off Go binary reads as "not Go". */
		if (!gelf_getshdr(scn, &sh))
			return rw_error_set(
				err, EINVAL,
				"truncated ELF file: section header %zu cannot be read: %s",
				elf_ndxscn(scn), elf_errmsg(-1));
		if (!(sh.sh_flags & SHF_ALLOC) || sh.sh_type == SHT_NOBITS || !sh.sh_size ||
		    (sh.sh_flags & SHF_COMPRESSED) || sh.sh_addr + sh.sh_size < sh.sh_addr)
			continue;
		r->name = shstrndx ? elf_safe_strptr(elf, shstrndx, sh.sh_name) : NULL;
		r->addr = sh.sh_addr;
		r->offset = sh.sh_offset;
		r->scn = scn;
		r->size = sh.sh_size;
		r->writable = sh.sh_flags & SHF_WRITE;
		r->exec = sh.sh_flags & SHF_EXECINSTR;
		img->nreg++;
	}
	return 0;
}

/* The loadable segments of a file without section headers (sstrip and friends). */
static int img_segments(struct elfimg *img, size_t nphdr, struct rw_error *err)
{
	Elf *elf = img->elf;

	for (size_t i = 0; i < nphdr; i++) {
		GElf_Phdr ph;
		Elf_Data *d;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || !ph.p_filesz ||
		    ph.p_vaddr + ph.p_filesz < ph.p_vaddr)
			continue;
		d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_BYTE);
		if (!d || !d->d_buf || d->d_size < ph.p_filesz)
			return rw_error_set(
				err, EINVAL,
				"truncated ELF file: segment at offset 0x%llx (0x%llx bytes) runs past its end: %s",
				(unsigned long long)ph.p_offset, (unsigned long long)ph.p_filesz,
				elf_errmsg(-1));
		img->reg[img->nreg++] = (struct elfimg_region){
			.addr = ph.p_vaddr,
			.data = d->d_buf,
			.size = ph.p_filesz,
			.writable = ph.p_flags & PF_W,
			/* a segment is read whole: code and data may share it */
		};
	}
	return 0;
}

int elfimg__init(struct elfimg *img, Elf *elf, int fd, struct rw_error *err)
{
	size_t nsec = 0, nphdr = 0, cap;
	bool from_segments;
	struct stat st;
	GElf_Ehdr eh;
	int ret;

	memset(img, 0, sizeof(*img));
	img->elf = elf;
	img->fd = -1;
	if (fd >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode)) {
		img->fd = fd;
		img->file_size = (uint64_t)st.st_size;
	}
	if (!elf || elf_kind(elf) != ELF_K_ELF)
		return rw_error_set(err, ENOENT, "not an ELF file");
	if (!gelf_getehdr(elf, &eh))
		return rw_error_set(err, EINVAL, "corrupted ELF file: %s", elf_errmsg(-1));
	if (elf_getshdrnum(elf, &nsec) || elf_getphdrnum(elf, &nphdr))
		return rw_error_set(err, EINVAL,
				    "corrupted ELF file: cannot count its sections: %s",
				    elf_errmsg(-1));
	/* the headers' counts were checked against the file size by libelf */
	cap = nsec > nphdr ? nsec : nphdr;
	img->reg = calloc(cap ? cap : 1, sizeof(*img->reg));
	if (!img->reg)
		return rw_error_set(err, ENOMEM, "out of memory for %zu sections", cap);
	ret = img_sections(img, cap, err);
	if (ret)
		return ret;
	/* No section headers (sstrip and friends): the loadable segments. */
	from_segments = !img->nreg && nsec <= 1;
	return from_segments ? img_segments(img, nphdr, err) : 0;
}

/* Whether the file's regions are its sections (else its segments: no section headers). */
bool elfimg__has_sections(const struct elfimg *img)
{
	for (size_t i = 0; i < img->nreg; i++)
		if (img->reg[i].name || img->reg[i].scn)
			return true;
	return false;
}

/* Whether an allocated section of that name exists (nothing is read). */
bool elfimg__section_named(const struct elfimg *img, const char *name)
{
	for (size_t i = 0; i < img->nreg; i++)
		if (img->reg[i].name && !strcmp(img->reg[i].name, name))
			return true;
	return false;
}

const struct elfimg_region *elfimg__section(const struct elfimg *img, const char *name)
{
	for (size_t i = 0; i < img->nreg; i++)
		if (img->reg[i].name && !strcmp(img->reg[i].name, name))
			return elfimg_region__load(&img->reg[i]) ? &img->reg[i] : NULL;
	return NULL;
}

/* The region holding [addr, addr + len), or NULL. */
const struct elfimg_region *elfimg__find(const struct elfimg *img, uint64_t addr, uint64_t len)
{
	for (size_t i = 0; i < img->nreg; i++) {
		const struct elfimg_region *r = &img->reg[i];

		/* [addr - r->addr, + len) inside [0, r->size), without overflowing */
		if (addr >= r->addr && addr - r->addr <= r->size &&
		    len <= r->size - (addr - r->addr))
			return elfimg_region__load(r) ? r : NULL;
	}
	return NULL;
}

void elfimg__symbols(struct elfimg *img)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(img->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		size_t n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf)
			continue;
		n = d->d_size / gelf_fsize(img->elf, ELF_T_SYM, 1, EV_CURRENT);
		if (n > INT32_MAX) /* gelf_getsym takes an int */
			n = INT32_MAX;
		for (size_t i = 0; i < n; i++) {
			GElf_Sym s;
			const char *name;

			if (!gelf_getsym(d, (int)i, &s) || !s.st_value || !s.st_name)
				continue;
			name = elf_safe_strptr(img->elf, sh.sh_link, s.st_name);
			if (name && !strcmp(name, "go:func.*"))
				img->sym_gofunc = s.st_value;
			if (!name || strncmp(name, "runtime.", 8))
				continue;
			if (!strcmp(name + 8, "text"))
				img->sym_text = s.st_value;
			else if (!strcmp(name + 8, "pclntab"))
				img->sym_pclntab = s.st_value;
			else if (!strcmp(name + 8, "epclntab"))
				img->sym_epclntab = s.st_value;
		}
	}
}

static int cmp_relative(const void *a, const void *b)
{
	const struct elfimg_rel *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/*
 * In a PIE the pointers in moduledata and .go.buildinfo are dynamic
 * relocations. The Go linker and GNU ld also store the link-time value in
 * the file, but a linker may leave zeros there (lld without
 * --apply-dynamic-relocs): the R_X86_64_RELATIVE (R_AARCH64_RELATIVE)
 * addends are authoritative.
 */
int elfimg__load_relatives(struct elfimg *img, struct rw_error *err)
{
	Elf_Scn *scn = NULL;
	size_t cap = 0, relsz;
	unsigned int relative;
	GElf_Ehdr eh;

	if (img->rel_loaded)
		return 0;
	img->rel_loaded = true;
	relsz = gelf_fsize(img->elf, ELF_T_RELA, 1, EV_CURRENT);
	if (!relsz || !gelf_getehdr(img->elf, &eh))
		return 0;
	relative = eh.e_machine == EM_AARCH64 ? R_AARCH64_RELATIVE : R_X86_64_RELATIVE;
	while ((scn = elf_nextscn(img->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		size_t n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf)
			continue;
		n = d->d_size / relsz;
		if (n > INT32_MAX) /* gelf_getrela takes an int */
			n = INT32_MAX;
		for (size_t i = 0; i < n; i++) {
			GElf_Rela r;

			if (!gelf_getrela(d, (int)i, &r) || GELF_R_TYPE(r.r_info) != relative)
				continue;
			if (img->nrel == cap) {
				size_t ncap = cap ? 2 * cap : 1024;
				struct elfimg_rel *p;

				p = reallocarray(img->rel, ncap, sizeof(*p));
				if (!p)
					return rw_error_set(err, ENOMEM,
							    "out of memory for %zu relocations",
							    ncap);
				img->rel = p;
				cap = ncap;
			}
			img->rel[img->nrel++] = (struct elfimg_rel){ r.r_offset,
								     (uint64_t)r.r_addend };
		}
	}
	if (img->nrel)
		qsort(img->rel, img->nrel, sizeof(*img->rel), cmp_relative);
	return 0;
}

/* Reads the raw 8 bytes at addr. */
static bool img_u64(const struct elfimg *img, uint64_t addr, uint64_t *out)
{
	const struct elfimg_region *r = elfimg__find(img, addr, 8);
	uint64_t v = 0;

	if (!r)
		return false;
	for (int i = 7; i >= 0; i--) /* little-endian, whatever the host */
		v = v << 8 | r->data[addr - r->addr + (uint64_t)i];
	*out = v;
	return true;
}

/* Reads a pointer at addr: its relocation's addend if it has one. */
bool elfimg__ptr(const struct elfimg *img, uint64_t addr, uint64_t *out)
{
	size_t lo = 0, hi = img->nrel;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (img->rel[mid].offset == addr) {
			*out = img->rel[mid].addend;
			return true;
		}
		if (img->rel[mid].offset < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return img_u64(img, addr, out);
}

// SPDX-License-Identifier: MIT
/*
 * The ELF side of the gopclntab module: finding a Go binary's pclntab (by
 * section, by symbol, or without either through runtime.firstmoduledata,
 * the runtime's moduledata that points at it), reading it from the file and
 * handing it to the parser (gopclntab.c); and the Go version in the build
 * info (.go.buildinfo). The image of the file is elfimg's: nothing here
 * reads the file through libelf. The file is hostile: every scan is bounded
 * in candidates and in the size of what it reads.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "analysis/elfimg.h"
#include "analysis/goinline.h"
#include "analysis/gopclntab.h"
#include "analysis/gopclntab_impl.h"

/*
 * Whether the scans for a pcHeader, a moduledata or a buildinfo header
 * (which read a region whole) look in r: not in code, where Go puts none of
 * them, and not in a region bigger than a table may be. A hostile file's
 * 256 MiB of code were read and kept with the cached file (the agent's RSS
 * grew by as much per file), and so was every C binary's code.
 */
static bool reg_scannable(const struct elfimg_region *r)
{
	return !r->exec && r->size <= GOPCLNTAB_MAX_SIZE;
}

/*
 * runtime.moduledata starts, from go1.16 through go1.26, with
 *   pcHeader *pcHeader                      +0
 *   funcnametab, cutab, filetab, pctab,
 *   pclntable, ftab  (slices, 24 bytes)     +8 ... +0x98
 *   findfunctab, minpc, maxpc uintptr       +0x98, +0xa0, +0xa8
 *   text, etext uintptr                     +0xb0, +0xb8
 * (runtime/symtab.go; checked against runtime.firstmoduledata in go1.21,
 * go1.23 and go1.26 builds, normal, PIE and cgo). It lives in .noptrdata
 * before go1.26 and in its own .go.module section since.
 */
#define MD_FUNCNAMETAB 0x08
#define MD_PCLNTABLE 0x68
#define MD_FTAB 0x80
#define MD_TEXT 0xb0
/*
 * Go 1.20 to 1.26 go on with etext, noptrdata, enoptrdata, data, edata, bss,
 * ebss, noptrbss, enoptrbss, covctrs, ecovctrs (new in 1.20), end, gcdata,
 * gcbss, types, etypes, rodata, then gofunc: the go:func.* symbol, which
 * funcdata offsets (the inline tree's) are relative to.
 */
#define MD_GOFUNC 0x140

struct pchdr_info {
	uint64_t addr; /* virtual address of the pcHeader */
	uint64_t name_off, pcln_off;
};

static bool pchdr_read(const uint8_t *p, size_t avail, struct pchdr_info *h)
{
	const struct pcln_layout *l;

	if (avail < PCHDR_PREFIX)
		return false;
	l = pcln_layout_of(rd32(p));
	if (!l || p[4] || p[5] || (p[6] != 1 && p[6] != 4) || p[7] != 8 ||
	    avail < PCHDR_PREFIX + 8 * (size_t)l->hdr_words)
		return false;
	h->name_off = rd64(p + PCHDR_PREFIX + 8 * l->name_word);
	h->pcln_off = rd64(p + PCHDR_PREFIX + 8 * l->pcln_word);
	return true;
}

/* Does a moduledata at md describe the pcHeader h? */
static bool md_matches(const struct elfimg *img, uint64_t md, const struct pchdr_info *h)
{
	uint64_t v, want;

	if (!elfimg__ptr(img, md, &v) || v != h->addr)
		return false;
	if (__builtin_add_overflow(h->addr, h->name_off, &want) ||
	    !elfimg__ptr(img, md + MD_FUNCNAMETAB, &v) || v != want)
		return false;
	/* Not ftab's length against nfunc: a damaged nfunc is better
	 * reported by the parser than as "no moduledata". */
	return !__builtin_add_overflow(h->addr, h->pcln_off, &want) &&
	       elfimg__ptr(img, md + MD_PCLNTABLE, &v) && v == want &&
	       elfimg__ptr(img, md + MD_FTAB, &v) && v == want;
}

/*
 * How many words equal to the pcHeader's address md_find() examines at
 * most: a real binary has one or two, a hostile one can be full of them and
 * each check looks up several addresses.
 */
#define MAX_MD_CANDIDATES 64

/*
 * Finds runtime.firstmoduledata without symbols: a word equal to the
 * pcHeader's address in a writable section (or, in a PIE, a relative
 * relocation with that addend), confirmed by the pointers that follow it.
 */
static bool md_find(const struct elfimg *img, const struct pchdr_info *h, uint64_t *md)
{
	uint8_t needle[8];
	int tries = 0;

	for (size_t i = 0; i < img->nrel && tries < MAX_MD_CANDIDATES; i++) {
		if (img->rel[i].addend != h->addr)
			continue;
		tries++;
		if (md_matches(img, img->rel[i].offset, h)) {
			*md = img->rel[i].offset;
			return true;
		}
	}
	for (int i = 0; i < 8; i++)
		needle[i] = (uint8_t)(h->addr >> (8 * i));
	for (size_t i = 0; i < img->nreg; i++) {
		const struct elfimg_region *r = &img->reg[i];
		const uint8_t *p, *end;

		if (!r->writable || !reg_scannable(r) || !elfimg_region__load(r))
			continue;
		p = r->data;
		end = r->data + r->size;
		while (p < end && tries < MAX_MD_CANDIDATES &&
		       (p = memmem(p, (size_t)(end - p), needle, 8))) {
			uint64_t a = r->addr + (uint64_t)(p - r->data);

			if (!(a & 7)) {
				tries++;
				if (md_matches(img, a, h)) {
					*md = a;
					return true;
				}
			}
			p++;
		}
	}
	return false;
}

/* The pcHeader bytes at every supported magic: magic[1..3], pads, minLC
 * (amd64's 1, arm64's 4), ptrSize. */
static const uint8_t pchdr_tails[2][7] = { { 0xff, 0xff, 0xff, 0, 0, 1, 8 },
					   { 0xff, 0xff, 0xff, 0, 0, 4, 8 } };

/* How many pcHeader look-alikes a stripped-binary scan checks at most: each
 * costs a pass over the data sections, and a hostile file can hold many. */
#define MAX_PCHDR_CANDIDATES 16

/*
 * Last resort for files without a .gopclntab section or symbols
 * (externally linked PIEs of go1.21-1.23, stripped): every 8-byte aligned
 * pcHeader look-alike, accepted only when a moduledata points at it, so
 * that a Go binary embedded as data in another file is not taken for the
 * file's own table.
 */
static bool pchdr_scan(const struct elfimg *img, const struct elfimg_region **ret_r,
		       struct pchdr_info *h, uint64_t *md)
{
	int tries = 0;

	for (size_t i = 0; i < img->nreg; i++) {
		const struct elfimg_region *r = &img->reg[i];

		if (!reg_scannable(r) || !elfimg_region__load(r))
			continue;
		for (size_t t = 0; t < sizeof(pchdr_tails) / sizeof(pchdr_tails[0]); t++) {
			const uint8_t *p = r->data, *end = r->data + r->size;

			while (p + 1 < end && tries < MAX_PCHDR_CANDIDATES &&
			       (p = memmem(p + 1, (size_t)(end - p - 1), pchdr_tails[t],
					   sizeof(pchdr_tails[t])))) {
				const uint8_t *hp = p - 1;
				uint64_t a = r->addr + (uint64_t)(hp - r->data);

				if ((a & 7) || !pchdr_read(hp, (size_t)(end - hp), h))
					continue;
				tries++;
				h->addr = a;
				if (md_find(img, h, md)) {
					*ret_r = r;
					return true;
				}
			}
		}
	}
	return false;
}

/* Where the pcHeader is, and the moduledata pointing at it once one is found. */
struct pchdr_loc {
	const struct elfimg_region *r; /* the region holding the pcHeader */
	struct pchdr_info h;
	uint64_t md; /* runtime.firstmoduledata, when have_md */
	bool have_md;
	bool whole; /* the region ends where the table does (its section, runtime.epclntab) */
};

/*
 * The section of the table, loaded, or NULL; -EFBIG when it is past the
 * budget, which is checked before its bytes are read.
 */
static int pchdr_section(const struct elfimg *img, const char *name,
			 const struct elfimg_region **ret, struct rw_error *err)
{
	*ret = NULL;
	for (size_t i = 0; i < img->nreg; i++) {
		if (!img->reg[i].name || strcmp(img->reg[i].name, name))
			continue;
		if (img->reg[i].size > GOPCLNTAB_MAX_SIZE)
			return pcln_too_big(img->reg[i].size, err);
		/* read by table_read, from the file, as libelf would check it */
		if (img->fd >= 0 && img->reg[i].scn &&
		    in_bounds(img->reg[i].offset, img->reg[i].size, img->file_size)) {
			*ret = &img->reg[i];
			return 0;
		}
		*ret = elfimg_region__load(&img->reg[i]) ? &img->reg[i] : NULL;
		return 0;
	}
	return 0;
}

/* Finds the pcHeader by section name, then by symbol, then by a scan. */
static int pchdr_locate(const struct elfimg *img, struct pchdr_loc *loc, struct rw_error *err)
{
	/* 1. The section: ".data.rel.ro.gopclntab" in go1.21-1.23 internally
	 *    linked PIEs, which relocate the header's textStart. */
	int ret = pchdr_section(img, ".gopclntab", &loc->r, err);

	if (!ret && !loc->r)
		ret = pchdr_section(img, ".data.rel.ro.gopclntab", &loc->r, err);
	if (ret)
		return ret;
	if (loc->r) {
		loc->whole = true;
		loc->h.addr = loc->r->addr;
		return 0;
	}
	if (img->sym_pclntab) {
		/* 2. Externally linked PIEs of go1.21-1.23 put it inside
		 *    .data.rel.ro, where only the symbol marks it. */
		loc->r = elfimg__find(img, img->sym_pclntab, 1);
		if (!loc->r)
			return rw_error_set(
				err, EINVAL,
				"corrupted Go binary: runtime.pclntab at 0x%llx is in no section",
				(unsigned long long)img->sym_pclntab);
		loc->h.addr = img->sym_pclntab;
		return 0;
	}
	if (elfimg__has_sections(img) && !elfimg__section_named(img, ".go.buildinfo") &&
	    !elfimg__section_named(img, ".note.go.buildid"))
		return rw_error_set(
			err, ENOENT,
			"not a Go binary: no .gopclntab, .go.buildinfo or Go build id section, "
			"nor runtime.pclntab symbol");
	if (pchdr_scan(img, &loc->r, &loc->h, &loc->md)) {
		/* 3. Stripped, no section: found through moduledata. */
		loc->have_md = true;
		return 0;
	}
	return rw_error_set(
		err, ENOENT,
		"not a Go binary: no .gopclntab section, runtime.pclntab symbol or moduledata-referenced pcHeader");
}

/*
 * The text start that the entries of the table at data are offsets from: 0
 * for go1.16/1.17 tables, whose entries are absolute, and for a table too
 * short to tell (the parser reports it). May find the moduledata for loc.
 */
static int pchdr_text_start(const struct elfimg *img, const uint8_t *data, uint64_t size,
			    struct pchdr_loc *loc, uint64_t *ret_text, struct rw_error *err)
{
	uint64_t text, v;

	*ret_text = 0;
	if (size < PCHDR_PREFIX + 24 || rd32(data) == GO116_MAGIC)
		return 0;
	/*
	 * Entries are offsets from the text start. Not the start of .text: an
	 * external linker puts C code before the Go text (cgo: .text at
	 * 0x4022e0, runtime.text at 0x4023e0). In order: the runtime.text
	 * symbol; the header's textStart (go1.18-1.25, where the runtime
	 * insists it equals moduledata.text); and moduledata.text, the only
	 * source in a stripped go1.26 binary, whose header word is 0.
	 */
	text = img->sym_text;
	if (!text)
		text = rd64(data + PCHDR_PREFIX + 16);
	if (!text && !loc->have_md && pchdr_read(data, (size_t)size, &loc->h))
		loc->have_md = md_find(img, &loc->h, &loc->md);
	if (!text && loc->have_md && elfimg__ptr(img, loc->md + MD_TEXT, &v))
		text = v;
	if (!text && pcln_layout_of(rd32(data)))
		return rw_error_set(
			err, EINVAL,
			"cannot find the Go text start: the pclntab header has none and no runtime.text symbol or runtime.firstmoduledata was found");
	*ret_text = text;
	return 0;
}

/*
 * The table's bytes, read from the file into an anonymous mapping of its
 * size: only those the parse reads (the header, the function names, the
 * function table and records), when the header says where they are. The
 * others (pc-value, file and compilation-unit tables: a fifth of
 * kube-apiserver's 46 MB) stay zero pages that cost nothing, and the whole
 * mapping goes back to the system once parsed: libelf would hold every byte
 * for as long as the file is open.
 */
static bool read_at(int fd, uint8_t *buf, uint64_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pread(fd, buf, len > (1U << 30) ? (1U << 30) : (size_t)len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		buf += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return true;
}

static int table_read(const struct elfimg *img, const struct elfimg_region *r, struct table_map *tm,
		      struct rw_error *err)
{
	uint64_t size = r->size, hdr = size < 4096 ? size : 4096;
	struct pcln_hdr h = { 0 };
	bool ok;

	errno = 0;
	tm->len = (size_t)size;
	tm->data = mmap(NULL, tm->len, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (tm->data == MAP_FAILED) {
		tm->data = NULL;
		return rw_error_set(err, ENOMEM, "out of memory for a %llu-byte .gopclntab",
				    (unsigned long long)size);
	}
	ok = read_at(img->fd, tm->data, hdr, r->offset);
	/*
	 * A header the parse will refuse (it reads the same header, its text
	 * start aside, with the same size or less): nothing more is read. A
	 * 64 MiB table declaring too many functions was read whole before its
	 * header refused it.
	 */
	if (ok && hdr < size &&
	    (pcln_read_header(tm->data, (size_t)size, 1, &h, NULL) || pcln_locate_tables(&h, NULL)))
		return 0;
	if (ok && hdr < size)
		ok = read_at(img->fd, tm->data + h.name_off, h.names_len, r->offset + h.name_off) &&
		     read_at(img->fd, tm->data + h.pcln_off, size - h.pcln_off,
			     r->offset + h.pcln_off);
	if (!ok)
		return rw_error_set(err, EINVAL,
				    "cannot read .gopclntab (%llu bytes at 0x%llx): %s",
				    (unsigned long long)size, (unsigned long long)r->offset,
				    errno ? strerror(errno) : "the file is shorter");
	return 0;
}

/* All of region r, read from the file into an anonymous mapping. */
static int table_read_whole(const struct elfimg *img, const struct elfimg_region *r,
			    struct table_map *tm, struct rw_error *err)
{
	errno = 0;
	tm->len = (size_t)r->size;
	tm->data = mmap(NULL, tm->len ? tm->len : 1, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (tm->data == MAP_FAILED) {
		tm->data = NULL;
		return rw_error_set(err, ENOMEM, "out of memory for a %llu-byte .gopclntab",
				    (unsigned long long)r->size);
	}
	if (!read_at(img->fd, tm->data, r->size, r->offset))
		return rw_error_set(err, EINVAL,
				    "cannot read .gopclntab (%llu bytes at 0x%llx): %s",
				    (unsigned long long)r->size, (unsigned long long)r->offset,
				    errno ? strerror(errno) : "the file is shorter");
	return 0;
}

static void table_unmap(struct table_map *tm)
{
	if (tm->data)
		munmap(tm->data, tm->len);
	tm->data = NULL;
}

int gopclntab__load(Elf *elf, int fd, struct gopclntab **ret_tab, struct rw_error *err)
{
	struct table_map tm = { 0 };
	struct pchdr_loc loc = { 0 };
	struct elfimg img;
	uint64_t text, off, size;
	const uint8_t *data;
	int ret;

	if (ret_tab)
		*ret_tab = NULL;
	if (!ret_tab)
		return rw_error_set(err, EINVAL, "no place for the table");
	ret = elfimg__init(&img, elf, fd, err);
	if (ret)
		goto cleanup;
	elfimg__symbols(&img);
	ret = elfimg__load_relatives(&img, err);
	if (ret)
		goto cleanup;
	ret = pchdr_locate(&img, &loc, err);
	if (ret)
		goto cleanup;

	if (!loc.r->data) {
		ret = table_read(&img, loc.r, &tm, err);
		if (ret)
			goto cleanup;
	}
	off = loc.h.addr - loc.r->addr;
	size = loc.r->size - off;
	/* The table ends at runtime.epclntab when that symbol is there. */
	if (img.sym_epclntab > loc.h.addr && img.sym_epclntab - loc.h.addr < size) {
		size = img.sym_epclntab - loc.h.addr;
		loc.whole = true;
	}
	/* A table whose end is not known is read up to the limit only. */
	if (size > GOPCLNTAB_MAX_SIZE && !loc.whole)
		size = GOPCLNTAB_MAX_SIZE;
	data = (tm.data ? tm.data : loc.r->data) + off;

	ret = pchdr_text_start(&img, data, size, &loc, &text, err);
	if (ret)
		goto cleanup;
	ret = pcln_parse(data, (size_t)size, text, tm.data ? &tm : NULL, ret_tab, err);
cleanup:
	table_unmap(&tm);
	elfimg__free(&img);
	return ret;
}

/*
 * go:func.*: its symbol, else moduledata.gofunc (a stripped binary); 0 when
 * neither is found. The moduledata offset is that of Go 1.20 and later,
 * whose tables are the only ones the inline reader takes.
 */
static uint64_t gofunc_addr(const struct elfimg *img, const uint8_t *data, uint64_t size,
			    struct pchdr_loc *loc)
{
	uint64_t v;

	if (img->sym_gofunc)
		return img->sym_gofunc;
	if (!loc->have_md && pchdr_read(data, (size_t)size, &loc->h))
		loc->have_md = md_find(img, &loc->h, &loc->md);
	return loc->have_md && elfimg__ptr(img, loc->md + MD_GOFUNC, &v) ? v : 0;
}

/*
 * -EOPNOTSUPP for a table of a layout older than go1.20, said before the
 * whole table is read for nothing (the parse says the same of a table it is
 * given).
 */
static int inline_layout_check(const struct elfimg *img, const struct pchdr_loc *loc,
			       struct rw_error *err)
{
	uint64_t off = loc->h.addr - loc->r->addr;
	const struct pcln_layout *l;
	uint8_t m[4];

	if (off > loc->r->size || loc->r->size - off < sizeof(m))
		return 0; /* the parse reports it */
	if (loc->r->data)
		memcpy(m, loc->r->data + off, sizeof(m));
	else if (img->fd < 0 || !read_at(img->fd, m, sizeof(m), loc->r->offset + off))
		return 0;
	l = pcln_layout_of(rd32(m));
	if (l && l->magic != GO120_MAGIC)
		return rw_error_set(
			err, EOPNOTSUPP,
			"inlined copies are read from Go 1.20 and later tables only, and this one is %s",
			l->go);
	return 0;
}

int goinline__load(Elf *elf, int fd, inl_match_fn match, void *arg, struct inl_list **ret_list,
		   struct rw_error *err)
{
	const struct elfimg_region *gr = NULL;
	struct table_map tm = { 0 };
	struct pchdr_loc loc = { 0 };
	const uint8_t *base, *data, *gofunc = NULL;
	uint64_t text, off, size, gaddr, gsize = 0;
	struct elfimg img;
	int ret;

	if (ret_list)
		*ret_list = NULL;
	if (!ret_list)
		return rw_error_set(err, EINVAL, "no place for the inlined copies");
	ret = elfimg__init(&img, elf, fd, err);
	if (!ret) {
		elfimg__symbols(&img);
		ret = elfimg__load_relatives(&img, err);
	}
	if (!ret)
		ret = pchdr_locate(&img, &loc, err);
	if (ret)
		goto cleanup;
	ret = inline_layout_check(&img, &loc, err);
	if (ret)
		goto cleanup;
	/* the whole table this time: the pc-value tables are wanted, and the
	 * inline trees in go:func.*, which the linker puts at its end; read
	 * from the file into memory given back after, not kept by libelf */
	base = loc.r->data;
	if (!base && img.fd >= 0 && loc.r->scn &&
	    in_bounds(loc.r->offset, loc.r->size, img.file_size)) {
		ret = table_read_whole(&img, loc.r, &tm, err);
		if (ret)
			goto cleanup;
		base = tm.data;
	} else if (!base && elfimg_region__load(loc.r)) {
		base = loc.r->data;
	}
	if (!base) {
		ret = rw_error_set(err, EINVAL, "cannot read .gopclntab (%llu bytes at 0x%llx)",
				   (unsigned long long)loc.r->size,
				   (unsigned long long)loc.r->offset);
		goto cleanup;
	}
	off = loc.h.addr - loc.r->addr;
	size = loc.r->size - off;
	if (img.sym_epclntab > loc.h.addr && img.sym_epclntab - loc.h.addr < size)
		size = img.sym_epclntab - loc.h.addr;
	if (size > GOPCLNTAB_MAX_SIZE)
		size = GOPCLNTAB_MAX_SIZE;
	data = base + off;
	ret = pchdr_text_start(&img, data, size, &loc, &text, err);
	if (ret)
		goto cleanup;
	gaddr = gofunc_addr(&img, data, size, &loc);
	if (gaddr >= loc.r->addr && gaddr - loc.r->addr < loc.r->size) {
		gofunc = base + (gaddr - loc.r->addr);
		gsize = loc.r->size - (gaddr - loc.r->addr);
	} else if (gaddr && (gr = elfimg__find(&img, gaddr, 1))) {
		gofunc = gr->data + (gaddr - gr->addr);
		gsize = gr->size - (gaddr - gr->addr);
	}
	/* without go:func.*, a table with inline trees is reported by the parse */
	ret = goinline__parse(data, (size_t)size, text, gofunc, (size_t)gsize, match, arg, ret_list,
			      err);
cleanup:
	table_unmap(&tm);
	elfimg__free(&img);
	return ret;
}

/*
 * .go.buildinfo: a 32-byte header, "\xff Go buildinf:", the pointer size,
 * flags (1: big-endian, 2: strings inline); then either (go1.18+) the
 * version and module strings inline, each a uvarint length and bytes, or
 * (before) two pointers to Go string headers {ptr, len}.
 */
#define BUILDINFO_MAGIC "\xff Go buildinf:"
#define BUILDINFO_MAGIC_LEN 14
#define BUILDINFO_HDR 32
#define BUILDINFO_MAX_VERSION 1024
#define MAX_BUILDINFO_CANDIDATES 16 /* look-alikes examined without sections */

static char *version_dup(const uint8_t *p, uint64_t len)
{
	char *s;

	if (!len || len > BUILDINFO_MAX_VERSION)
		return NULL;
	for (uint64_t i = 0; i < len; i++)
		if (p[i] < 0x20 || p[i] > 0x7e)
			return NULL;
	s = malloc((size_t)len + 1);
	if (!s)
		return NULL;
	memcpy(s, p, (size_t)len);
	s[len] = '\0';
	return s;
}

/* Reads a word of the old format, whichever its size and byte order. */
static bool bi_word(const struct elfimg *img, uint64_t addr, unsigned int psz, bool be,
		    uint64_t *out)
{
	const struct elfimg_region *r;
	uint64_t v = 0;

	if (psz == 8 && !be)
		return elfimg__ptr(img, addr, out);
	r = elfimg__find(img, addr, psz);
	if (!r)
		return false;
	for (unsigned int i = 0; i < psz; i++) {
		unsigned int b = be ? i : psz - 1 - i;

		v = v << 8 | r->data[addr - r->addr + b];
	}
	*out = v;
	return true;
}

static char *buildinfo_version(const struct elfimg *img, const struct elfimg_region *r,
			       uint64_t off)
{
	const uint8_t *p = r->data + off;
	uint64_t avail = r->size - off, len = 0, sptr, slen, vaddr;
	unsigned int psz, shift = 0;
	const struct elfimg_region *sr;
	bool be;
	size_t i;

	if (avail < BUILDINFO_HDR)
		return NULL;
	psz = p[BUILDINFO_MAGIC_LEN];
	be = p[BUILDINFO_MAGIC_LEN + 1] & 1;
	if (p[BUILDINFO_MAGIC_LEN + 1] & 2) {
		/* uvarint: at most 10 bytes, inside the section */
		for (i = BUILDINFO_HDR; i < avail && i < BUILDINFO_HDR + 10; i++) {
			len |= (uint64_t)(p[i] & 0x7f) << shift;
			shift += 7;
			if (!(p[i] & 0x80))
				break;
		}
		if (i >= avail || i >= BUILDINFO_HDR + 10 || p[i] & 0x80)
			return NULL;
		i++;
		if (len > avail - i)
			return NULL;
		return version_dup(p + i, len);
	}
	if (psz != 4 && psz != 8)
		return NULL;
	vaddr = r->addr + off + 16;
	if (!bi_word(img, vaddr, psz, be, &vaddr) || !bi_word(img, vaddr, psz, be, &sptr) ||
	    !bi_word(img, vaddr + psz, psz, be, &slen) || slen > BUILDINFO_MAX_VERSION)
		return NULL;
	sr = elfimg__find(img, sptr, slen);
	if (!sr)
		return NULL;
	return version_dup(sr->data + (sptr - sr->addr), slen);
}

char *gobuildinfo__version(Elf *elf)
{
	const struct elfimg_region *r;
	struct elfimg img;
	char *ver = NULL;
	int tries = 0;

	if (elfimg__init(&img, elf, -1, NULL))
		goto cleanup;
	if (elfimg__load_relatives(&img, NULL))
		goto cleanup;
	r = elfimg__section(&img, ".go.buildinfo");
	if (r) {
		if (r->size >= BUILDINFO_HDR &&
		    !memcmp(r->data, BUILDINFO_MAGIC, BUILDINFO_MAGIC_LEN))
			ver = buildinfo_version(&img, r, 0);
		goto cleanup;
	}
	/* Without sections: the header is 16-byte aligned in a data segment.
	 * A file with sections has it in .go.buildinfo or not at all (scanning
	 * its sections read a hostile 64 MiB table whole, to find nothing). */
	for (size_t i = 0; !elfimg__has_sections(&img) && i < img.nreg && !ver &&
			   tries < MAX_BUILDINFO_CANDIDATES;
	     i++) {
		const uint8_t *p, *start;
		uint64_t sz = img.reg[i].size;

		r = &img.reg[i];
		if (!reg_scannable(r) || !elfimg_region__load(r))
			continue;
		start = r->data;
		p = start;
		while (!ver && p < start + sz && tries < MAX_BUILDINFO_CANDIDATES &&
		       (p = memmem(p, (size_t)(start + sz - p), BUILDINFO_MAGIC,
				   BUILDINFO_MAGIC_LEN))) {
			uint64_t off = (uint64_t)(p - start);

			if (!((r->addr + off) & 15)) {
				tries++;
				ver = buildinfo_version(&img, r, off);
			}
			p++;
		}
	}
cleanup:
	elfimg__free(&img);
	return ver;
}

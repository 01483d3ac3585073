// SPDX-License-Identifier: MIT
/*
 * Go's .gopclntab ("pc-line table"): the runtime's own table of every
 * function, which Go keeps even in stripped binaries because tracebacks and
 * the garbage collector need it.
 *
 * Layout (little-endian, 64-bit pointers), as written by cmd/link and read by
 * runtime/symtab.go and debug/gosym:
 *
 *   pcHeader   magic u32, pad1 u8, pad2 u8, minLC u8, ptrSize u8,
 *              then uintptr words:
 *                go1.16/1.17 (0xfffffffa): nfunc, nfiles, funcnameOffset,
 *                    cuOffset, filetabOffset, pctabOffset, pclnOffset
 *                go1.18+ (0xfffffff0, 0xfffffff1): nfunc, nfiles, textStart,
 *                    funcnameOffset, cuOffset, filetabOffset, pctabOffset,
 *                    pclnOffset
 *              (go1.26 still has the textStart word but writes 0 in it: it
 *              needed a dynamic relocation, and the runtime uses
 *              moduledata.text instead.)
 *   functab    at pclnOffset: nfunc pairs {entry, funcoff} and one last entry
 *              that is the end of the last function. go1.16/1.17: uintptr
 *              fields, entry an absolute address; go1.18+: uint32 fields,
 *              entry an offset from the text start.
 *   _func      at pclnOffset + funcoff: entry (uintptr before go1.18, uint32
 *              offset since), nameOff int32 into funcnametab, ... funcID u8.
 *              funcID sits at offset 40 in go1.16/1.17, 36 in go1.18/1.19
 *              (no startLine yet) and 40 again from go1.20 (startLine int32).
 *
 * Everything here is hostile input: offsets and counts come from a file that
 * a container controls while this code runs privileged. Every read goes
 * through a bounds-checked helper, every sum and product is overflow-checked,
 * counts are capped by what the section can hold, and nothing recurses.
 */
#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cancel.h"
#include "analysis/elfbin.h"
#include "analysis/gopclntab.h"

#define GO12_MAGIC 0xfffffffbU	/* go1.2 to go1.15: not supported */
#define GO116_MAGIC 0xfffffffaU /* go1.16, go1.17 */
#define GO118_MAGIC 0xfffffff0U /* go1.18, go1.19 */
#define GO120_MAGIC 0xfffffff1U /* go1.20 to go1.26 */

#define PCHDR_PREFIX 8 /* magic, pad1, pad2, minLC, ptrSize */

struct pcln_layout {
	uint32_t magic;
	const char *go;		 /* for messages */
	unsigned int hdr_words;	 /* uintptr words after the 8-byte prefix */
	int text_word;		 /* index of textStart, -1 when absent */
	unsigned int name_word;	 /* funcnameOffset */
	unsigned int pcln_word;	 /* pclnOffset */
	unsigned int ftab_field; /* bytes of one functab field */
	unsigned int f_entry;	 /* bytes of _func.entry(Off) at offset 0 */
	unsigned int f_nameoff;	 /* offset of _func.nameOff */
	unsigned int f_funcid;	 /* offset of _func.funcID */
	unsigned int f_size;	 /* fixed part of _func that must be present */
};

static const struct pcln_layout layouts[] = {
	{ GO116_MAGIC, "go1.16/1.17", 7, -1, 2, 6, 8, 8, 8, 40, 44 },
	{ GO118_MAGIC, "go1.18/1.19", 8, 2, 3, 7, 4, 4, 4, 36, 40 },
	{ GO120_MAGIC, "go1.20+", 8, 2, 3, 7, 4, 4, 4, 40, 44 },
};

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
	return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* True when [off, off + len) lies inside [0, size), without overflowing. */
static bool in_bounds(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

static const struct pcln_layout *find_layout(uint32_t magic)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].magic == magic)
			return &layouts[i];
	return NULL;
}

void gopclntab__free(struct gopclntab *tab)
{
	if (!tab)
		return;
	free(tab->funcs);
	free(tab->strings);
	free(tab);
}

/* One function as read from the table, before wrappers are dropped. */
struct rawfunc {
	uint64_t entry, end;
	uint32_t nameoff;
	uint32_t namelen;
	uint8_t funcid;
	bool drop;
};

struct parse_ctx {
	const uint8_t *names; /* funcnametab */
	struct rawfunc *f;
};

/* qsort_r, not qsort with a global: tables may be loaded from many threads */
static int cmp_by_nameoff(const void *a, const void *b, void *arg)
{
	const struct rawfunc *f = ((const struct parse_ctx *)arg)->f;
	uint32_t x = f[*(const uint32_t *)a].nameoff;
	uint32_t y = f[*(const uint32_t *)b].nameoff;

	return x < y ? -1 : x > y;
}

/*
 * Orders by name, then funcID (ascending), then size (descending), then
 * entry: the first of a group of same-named functions is the one to keep.
 * A hostile table can point many functions at long names: comparing lengths
 * first and taking equal offsets as equal names bounds the work, because
 * two different offsets whose names have the same length cannot overlap (a
 * name ends at the first NUL), so k such names of length L take k * L <=
 * table size bytes, and the sort costs O(table size * log n) at worst.
 */
static int cmp_by_name(const void *a, const void *b, void *arg)
{
	const struct parse_ctx *ctx = arg;
	const struct rawfunc *x = &ctx->f[*(const uint32_t *)a];
	const struct rawfunc *y = &ctx->f[*(const uint32_t *)b];
	int c = 0;

	if (x->namelen != y->namelen)
		return x->namelen < y->namelen ? -1 : 1;
	if (x->nameoff != y->nameoff)
		c = memcmp(ctx->names + x->nameoff, ctx->names + y->nameoff, x->namelen);
	if (c)
		return c;
	if (x->funcid != y->funcid)
		return x->funcid < y->funcid ? -1 : 1;
	if (x->end - x->entry != y->end - y->entry)
		return x->end - x->entry > y->end - y->entry ? -1 : 1;
	if (x->entry != y->entry)
		return x->entry < y->entry ? -1 : 1;
	return 0;
}

/*
 * Sets namelen of every function; fails when a name is not NUL-terminated
 * inside the name table. Visiting the offsets in ascending order lets each
 * byte of the table be scanned at most once whatever the offsets are (a
 * hostile table can point thousands of functions into one long string).
 */
static int measure_names(struct parse_ctx *ctx, uint32_t *idx, size_t n, size_t names_len,
			 struct rw_error *err)
{
	size_t nul = 0; /* position of the NUL ending the previous name */
	bool have_nul = false;

	for (size_t i = 0; i < n; i++)
		idx[i] = (uint32_t)i;
	qsort_r(idx, n, sizeof(*idx), cmp_by_nameoff, ctx);

	for (size_t i = 0; i < n; i++) {
		struct rawfunc *f = &ctx->f[idx[i]];
		const uint8_t *p;

		if (cancel__every(i))
			return rw_error_set(err, ECANCELED, "reading .gopclntab was cancelled");
		if (!have_nul || nul < f->nameoff) {
			p = memchr(ctx->names + f->nameoff, 0, names_len - f->nameoff);
			if (!p)
				return rw_error_set(
					err, EINVAL,
					"corrupted .gopclntab: function name at offset 0x%x runs past the end of the name table (size 0x%zx)",
					f->nameoff, names_len);
			nul = (size_t)(p - ctx->names);
			have_nul = true;
		}
		if (nul - f->nameoff > UINT32_MAX)
			return rw_error_set(
				err, EINVAL,
				"corrupted .gopclntab: function name at offset 0x%x is longer than 4 GiB",
				f->nameoff);
		f->namelen = (uint32_t)(nul - f->nameoff);
	}
	return 0;
}

/*
 * ABI wrappers. Since go1.17 (register ABI on amd64) the compiler emits, for
 * a function that is needed under both calling conventions, the real body
 * under its own ABI plus a small wrapper under the other one, and the linker
 * puts both in the pclntab under the SAME, unmangled name (only the ELF
 * symtab renames the ABI0 one to "<name>.abi0"). Which one is the body
 * depends on the function, as `go tool nm -size` and the table show on
 * go1.21, go1.23 and go1.26 amd64 builds (about 27 such pairs in a hello
 * world, all in the runtime, reflect and internal/bytealg):
 *
 *   - a Go function called from assembly (runtime.args, runtime.schedinit):
 *     body = ABIInternal, named "runtime.args" in the symtab, wrapper = ABI0,
 *     "runtime.args.abi0" (43 bytes, at the end of the runtime's text);
 *   - an assembly function used from Go through a func value or linkname
 *     (runtime.osyield, runtime.asmcgocall): body = ABI0, which the symtab
 *     calls "runtime.osyield.abi0", wrapper = ABIInternal, which the symtab
 *     calls plain "runtime.osyield". Here the symtab's plain name is the
 *     wrapper: the pclntab pick below returns the assembly body instead,
 *     the code that both the wrapper and direct ABI0 callers run.
 *
 * The same holds for user code: in a test program main.goCallee (a Go
 * function that assembly calls) has a 9-byte body and a 42-byte ABI0
 * wrapper, and main.asmAdd (assembly used as a func value) a 16-byte ABI0
 * body and a 46-byte ABIInternal wrapper named plain "main.asmAdd" in the
 * symtab. So neither "keep ABIInternal", nor "keep the plain symtab name",
 * nor "keep the larger one" is right.
 * What is reliable: cmd/internal/obj sets _func.funcID to FuncIDWrapper for
 * every function with the ABIWRAPPER (or WRAPPER) text flag, and
 * FuncIDWrapper is the LAST value of the FuncID enumeration in every release
 * (21 in go1.21, 22 in go1.23, 23 in go1.26: the value moves as special
 * runtime functions come and go, so it cannot be hard-coded). A body's
 * funcID is 0 or the id of a special runtime function, always smaller
 * (runtime.asmcgocall: funcID 2, flags SPWRITE|ASM; its wrapper: 23,
 * no flags). Hence: among
 * functions sharing a name keep the smallest funcID.
 *
 * One pair ties: reflect.callMethod, whose body the compiler itself marks
 * as a wrapper (to hide it from tracebacks), so body (4 KiB) and ABI0
 * wrapper (64 bytes) both carry FuncIDWrapper. An ABI wrapper only moves
 * arguments between registers and the stack around one call, so on a tie
 * the larger function is the body. Exact ties (same funcID and size) cannot
 * be told apart and are all kept. Functions of funcID 0 are never
 * wrappers: same-named ones of different sizes are bodies of their own, as
 * Go 1.18 and 1.19 name every shape instance of a generic function here
 * ("main.Map[...]" for Map[go.shape.int_0] and Map[go.shape.string_0]), and
 * all are kept.
 */
static void drop_abi_wrappers(struct parse_ctx *ctx, uint32_t *idx, size_t n)
{
	size_t i = 0;

	qsort_r(idx, n, sizeof(*idx), cmp_by_name, ctx);

	while (i < n) {
		const struct rawfunc *best = &ctx->f[idx[i]];
		size_t j = i + 1;

		for (; j < n; j++) {
			struct rawfunc *g = &ctx->f[idx[j]];

			if (g->namelen != best->namelen ||
			    (g->nameoff != best->nameoff &&
			     memcmp(ctx->names + g->nameoff, ctx->names + best->nameoff,
				    g->namelen)))
				break;
			/* sorted so that the first of a group is the best */
			if (g->funcid != best->funcid ||
			    (g->funcid && g->end - g->entry != best->end - best->entry))
				g->drop = true;
		}
		i = j;
	}
}

/*
 * Picks the layout for a magic. The magics of layouts that are not
 * supported get a message that names them rather than "bad magic".
 */
static int pcln_find_layout(uint32_t magic, const struct pcln_layout **ret_l, struct rw_error *err)
{
	*ret_l = find_layout(magic);
	if (*ret_l)
		return 0;
	if (magic == GO12_MAGIC)
		return rw_error_set(
			err, EINVAL,
			"unsupported .gopclntab: go1.2-1.15 layout (magic 0x%08x), only go1.16 and later are supported",
			magic);
	if (find_layout(__builtin_bswap32(magic)))
		return rw_error_set(
			err, EINVAL,
			"unsupported .gopclntab: big-endian table (magic 0x%08x), only little-endian amd64 is supported",
			magic);
	return rw_error_set(err, EINVAL, "not a .gopclntab: bad magic 0x%08x", magic);
}

/* pad1, pad2, minLC and ptrSize: the values of amd64, the only target. */
static int pcln_check_prefix(const uint8_t *data, struct rw_error *err)
{
	if (data[4] || data[5])
		return rw_error_set(
			err, EINVAL,
			"corrupted .gopclntab: header padding is 0x%02x 0x%02x instead of zero",
			data[4], data[5]);
	if (data[6] != 1)
		return rw_error_set(
			err, EINVAL,
			"unsupported .gopclntab: instruction size quantum %u is not amd64's 1, and amd64 is the only architecture supported",
			data[6]);
	if (data[7] != 8)
		return rw_error_set(
			err, EINVAL,
			"unsupported .gopclntab: pointer size %u is not amd64's 8, and amd64 is the only architecture supported",
			data[7]);
	return 0;
}

/* Where the tables are, from the header, once checked against the section. */
struct pcln_hdr {
	const struct pcln_layout *l;
	size_t size;	     /* of the section */
	size_t hdr_len;	     /* bytes of the pcHeader */
	uint64_t w[8];	     /* its uintptr words, l->hdr_words of them */
	uint64_t text_start; /* what go1.18+ entries are offsets from */
	size_t nfunc;	     /* at most UINT32_MAX and what the section holds */
	uint64_t pcln_off;   /* functab, then the _func records */
	uint64_t name_off;   /* funcnametab */
	uint64_t names_len;  /* bytes of funcnametab */
};

/* Reads the pcHeader: magic, prefix, the words, and the text start. */
static int pcln_read_header(const uint8_t *data, size_t size, uint64_t text_start,
			    struct pcln_hdr *h, struct rw_error *err)
{
	const struct pcln_layout *l;
	int ret;

	if (size < PCHDR_PREFIX)
		return rw_error_set(err, EINVAL,
				    "corrupted .gopclntab: %zu bytes are too few for the header",
				    size);
	ret = pcln_find_layout(rd32(data), &l, err);
	if (!ret)
		ret = pcln_check_prefix(data, err);
	if (ret)
		return ret;

	h->l = l;
	h->size = size;
	h->hdr_len = PCHDR_PREFIX + (size_t)l->hdr_words * 8;
	if (size < h->hdr_len)
		return rw_error_set(
			err, EINVAL,
			"corrupted .gopclntab: the %s header needs 0x%zx bytes but the section has 0x%zx",
			l->go, h->hdr_len, size);
	for (unsigned int i = 0; i < l->hdr_words; i++)
		h->w[i] = rd64(data + PCHDR_PREFIX + 8 * i);

	if (!text_start && l->text_word >= 0)
		text_start = h->w[l->text_word];
	if (l->text_word >= 0 && !text_start)
		return rw_error_set(
			err, EINVAL,
			"cannot parse .gopclntab: the header has no text start (go1.26 writes 0) and none was given");
	h->text_start = text_start;
	return 0;
}

/* Checks that the function count, the functab and the name table fit in the section. */
static int pcln_locate_tables(struct pcln_hdr *h, struct rw_error *err)
{
	const struct pcln_layout *l = h->l;
	uint64_t nfunc = h->w[0], ftab_len;

	h->name_off = h->w[l->name_word];
	h->pcln_off = h->w[l->pcln_word];
	if (!nfunc)
		return rw_error_set(err, EINVAL,
				    "corrupted .gopclntab: the header says there are no functions");
	/*
	 * The functab alone takes 2 * nfunc + 1 fields: capping nfunc by what
	 * the section can hold first also keeps the products below from
	 * overflowing and bounds the allocations by the input size.
	 */
	if (nfunc > h->size / (2 * l->ftab_field) || nfunc > UINT32_MAX)
		return rw_error_set(
			err, EINVAL,
			"corrupted .gopclntab: %llu functions cannot fit in a 0x%zx-byte section",
			(unsigned long long)nfunc, h->size);
	if (nfunc > GOPCLNTAB_MAX_FUNCS)
		return rw_error_set(
			err, EFBIG,
			".gopclntab declares %llu functions, more than %u (the limit per binary)",
			(unsigned long long)nfunc, GOPCLNTAB_MAX_FUNCS);
	h->nfunc = (size_t)nfunc;
	ftab_len = (2 * nfunc + 1) * l->ftab_field;
	if (!in_bounds(h->pcln_off, ftab_len, h->size))
		return rw_error_set(
			err, EINVAL,
			"corrupted .gopclntab: function table at offset 0x%llx (0x%llx bytes for %zu functions) runs past the end of the section (size 0x%zx)",
			(unsigned long long)h->pcln_off, (unsigned long long)ftab_len, h->nfunc,
			h->size);
	if (h->name_off < h->hdr_len || h->name_off >= h->size)
		return rw_error_set(
			err, EINVAL,
			"corrupted .gopclntab: function name table at offset 0x%llx is outside the section (header 0x%zx, size 0x%zx)",
			(unsigned long long)h->name_off, h->hdr_len, h->size);
	/*
	 * The header gives no sizes: the name table ends where the next table
	 * (by offset) starts, or at the end of the section.
	 */
	h->names_len = h->size - h->name_off;
	for (unsigned int i = l->name_word + 1; i < l->hdr_words; i++)
		if (h->w[i] > h->name_off && h->w[i] - h->name_off < h->names_len)
			h->names_len = h->w[i] - h->name_off;
	return 0;
}

/* Reads functab entry i: {entry, funcoff} and the next entry, which ends it. */
static void pcln_read_ftab(const uint8_t *data, const struct pcln_hdr *h, size_t i,
			   uint64_t *ret_entry, uint64_t *ret_funcoff, uint64_t *ret_next)
{
	/* i < nfunc and the whole functab is in bounds (pcln_locate_tables) */
	const uint8_t *ft = data + h->pcln_off + 2 * i * h->l->ftab_field;

	if (h->l->ftab_field == 8) {
		*ret_entry = rd64(ft);
		*ret_funcoff = rd64(ft + 8);
		*ret_next = rd64(ft + 16);
	} else {
		*ret_entry = rd32(ft);
		*ret_funcoff = rd32(ft + 4);
		*ret_next = rd32(ft + 8);
	}
}

/* Reads function i from the functab and its _func record. */
static int pcln_read_func(const uint8_t *data, const struct pcln_hdr *h, size_t i,
			  struct rawfunc *f, struct rw_error *err)
{
	const struct pcln_layout *l = h->l;
	uint64_t e, next, funcoff, rec, rec_entry;
	int32_t nameoff;

	pcln_read_ftab(data, h, i, &e, &funcoff, &next);
	if (next < e)
		return rw_error_set(
			err, EINVAL,
			"corrupted .gopclntab: function table is not sorted: function %zu starts at 0x%llx, after the next one at 0x%llx",
			i, (unsigned long long)e, (unsigned long long)next);
	if (__builtin_add_overflow(h->pcln_off, funcoff, &rec) ||
	    !in_bounds(rec, l->f_size, h->size))
		return rw_error_set(
			err, EINVAL,
			"corrupted .gopclntab: function %zu's record at offset 0x%llx+0x%llx runs past the end of the section (size 0x%zx)",
			i, (unsigned long long)h->pcln_off, (unsigned long long)funcoff, h->size);
	/* The record repeats the entry: a mismatch means a bad funcoff. */
	rec_entry = l->f_entry == 8 ? rd64(data + rec) : rd32(data + rec);
	if (rec_entry != e)
		return rw_error_set(
			err, EINVAL,
			"corrupted .gopclntab: function %zu's record at offset 0x%llx has entry 0x%llx but the function table says 0x%llx",
			i, (unsigned long long)rec, (unsigned long long)rec_entry,
			(unsigned long long)e);
	nameoff = (int32_t)rd32(data + rec + l->f_nameoff);
	if (nameoff < 0 || (uint64_t)nameoff >= h->names_len)
		return rw_error_set(
			err, EINVAL,
			"corrupted .gopclntab: function %zu's name offset 0x%x is outside the name table (size 0x%llx)",
			i, (uint32_t)nameoff, (unsigned long long)h->names_len);
	if (l->ftab_field == 4 && (__builtin_add_overflow(h->text_start, e, &e) ||
				   __builtin_add_overflow(h->text_start, next, &next)))
		return rw_error_set(
			err, EINVAL,
			"corrupted .gopclntab: function %zu's address overflows (text start 0x%llx)",
			i, (unsigned long long)h->text_start);
	f->entry = e;
	f->end = next;
	f->nameoff = (uint32_t)nameoff;
	f->funcid = data[rec + l->f_funcid];
	return 0;
}

/*
 * Fills tab with the functions not dropped, and a copy of the name table
 * that their names point into.
 */
static int pcln_fill_table(const struct pcln_hdr *h, const struct parse_ctx *ctx, size_t n,
			   struct gopclntab *tab, struct rw_error *err)
{
	size_t kept = 0;

	size_t used = 0; /* the name table up to the end of the last name kept */

	for (size_t i = 0; i < n; i++) {
		const struct rawfunc *f = &ctx->f[i];

		kept += !f->drop;
		/* measure_names: nameoff + namelen < names_len */
		if (!f->drop && f->nameoff + (size_t)f->namelen + 1 > used)
			used = f->nameoff + (size_t)f->namelen + 1;
	}
	/* The names are not copied one by one: names may overlap (suffixes
	 * of one string), so copying the table once bounds the memory. */
	tab->strings = malloc(used + 1);
	tab->funcs = calloc(kept ? kept : 1, sizeof(*tab->funcs));
	if (!tab->strings || !tab->funcs)
		return rw_error_set(err, ENOMEM,
				    "cannot parse .gopclntab: out of memory for %zu functions", n);
	memcpy(tab->strings, ctx->names, used);
	tab->strings[used] = '\0';

	/* The functab is sorted by entry, so the output is too. */
	for (size_t i = 0; i < n; i++) {
		const struct rawfunc *f = &ctx->f[i];

		if (f->drop)
			continue;
		tab->funcs[tab->nfuncs++] = (struct gofunc){
			.name = tab->strings + f->nameoff,
			.entry = f->entry,
			.end = f->end,
		};
	}
	tab->magic = h->l->magic;
	tab->text_start = h->l->ftab_field == 4 ? h->text_start : 0;
	return 0;
}

static int too_big(uint64_t size, struct rw_error *err)
{
	return rw_error_set(err, EFBIG, ".gopclntab is %llu bytes, more than %u MiB (the limit)",
			    (unsigned long long)size, GOPCLNTAB_MAX_SIZE >> 20);
}

/*
 * Reads the functions that have code into ctx->f (*ret_n of them), growing
 * the array as they come: a table that declares many functions but holds
 * few costs what it holds.
 */
static int pcln_read_funcs(const uint8_t *data, const struct pcln_hdr *h, struct parse_ctx *ctx,
			   size_t *ret_n, struct rw_error *err)
{
	size_t n = 0, cap = 0;
	struct rawfunc f;
	int ret;

	for (size_t i = 0; i < h->nfunc; i++) {
		if (cancel__every(i))
			return rw_error_set(err, ECANCELED, "reading .gopclntab was cancelled");
		f = (struct rawfunc){ 0 };
		ret = pcln_read_func(data, h, i, &f, err);
		if (ret)
			return ret;
		if (f.end == f.entry)
			continue;
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 1024;
			void *p = reallocarray(ctx->f, ncap, sizeof(*ctx->f));

			if (!p)
				return rw_error_set(
					err, ENOMEM,
					"cannot parse .gopclntab: out of memory for %zu functions",
					n);
			ctx->f = p;
			cap = ncap;
		}
		ctx->f[n++] = f;
	}
	*ret_n = n;
	if (!n)
		return rw_error_set(err, EINVAL,
				    "corrupted .gopclntab: none of its %zu functions has any code",
				    h->nfunc);
	return 0;
}

/* A table read into an anonymous mapping (table_read, below). */
struct table_map {
	uint8_t *data;
	size_t len;
};

/* Gives [p, p + len)'s whole pages of tm back to the system; they read as zeros after. */
static void table_release(const struct table_map *tm, const uint8_t *p, uint64_t len)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1);
	uintptr_t hi = ((uintptr_t)p + len) & ~(page - 1);

	if (tm && lo < hi && p >= tm->data && len <= tm->len - (size_t)(p - tm->data))
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* gopclntab__parse; tm, when not NULL, holds data: what is read is released as the parse goes. */
static int parse(const uint8_t *data, size_t size, uint64_t text_start, const struct table_map *tm,
		 struct gopclntab **ret_tab, struct rw_error *err)
{
	struct gopclntab *tab = NULL;
	struct parse_ctx ctx = { 0 };
	struct pcln_hdr h = { 0 };
	uint32_t *idx = NULL;
	size_t n = 0;
	int ret;

	if (ret_tab)
		*ret_tab = NULL;
	if (!ret_tab || (!data && size))
		return rw_error_set(err, EINVAL, "cannot parse .gopclntab: no data");
	if (size > GOPCLNTAB_MAX_SIZE)
		return too_big(size, err);
	ret = pcln_read_header(data, size, text_start, &h, err);
	if (!ret)
		ret = pcln_locate_tables(&h, err);
	if (ret)
		return ret;
	ctx.names = data + h.name_off;

	ret = pcln_read_funcs(data, &h, &ctx, &n, err);
	if (ret)
		goto cleanup;
	/* what is left to read is in the name table (the linker writes it first) */
	if (h.pcln_off >= h.name_off + h.names_len)
		table_release(tm, data + h.pcln_off, h.size - h.pcln_off);
	idx = calloc(n, sizeof(*idx));
	tab = calloc(1, sizeof(*tab));
	if (!idx || !tab) {
		ret = rw_error_set(err, ENOMEM,
				   "cannot parse .gopclntab: out of memory for %zu functions", n);
		goto cleanup;
	}
	ret = measure_names(&ctx, idx, n, (size_t)h.names_len, err);
	if (ret)
		goto cleanup;
	drop_abi_wrappers(&ctx, idx, n);
	ret = pcln_fill_table(&h, &ctx, n, tab, err);
	if (ret)
		goto cleanup;
	*ret_tab = tab;
	tab = NULL;
cleanup:
	free(ctx.f);
	free(idx);
	gopclntab__free(tab);
	return ret;
}

int gopclntab__parse(const uint8_t *data, size_t size, uint64_t text_start,
		     struct gopclntab **ret_tab, struct rw_error *err)
{
	return parse(data, size, text_start, NULL, ret_tab, err);
}

/*
 * ELF side. A section's bytes are read on first use through elf_rawdata(),
 * which checks them against the file size; a lookup touches two or three
 * sections, not the whole file. Only a file without section headers is read
 * by segments (elf_getdata_rawchunk(), bounds-checked by libelf), never with
 * elf_rawfile(): that leaks every section the caller read before it (libelf
 * then takes their buffers for parts of the file's image and never frees them).
 */

struct region {
	const char *name;    /* section name, NULL for a segment */
	uint64_t addr;	     /* virtual address of data[0] */
	const uint8_t *data; /* bytes in the file, NULL until loaded */
	Elf_Scn *scn;	     /* section still to load, or NULL */
	uint64_t size;
	uint64_t offset; /* of a section in the file */
	bool writable;
	bool exec; /* code: never holds a table, a header or a moduledata */
};

/*
 * Whether the scans for a pcHeader, a moduledata or a buildinfo header
 * (which read a region whole) look in r: not in code, where Go puts none of
 * them, and not in a region bigger than a table may be. A hostile file's
 * 256 MiB of code were read and kept with the cached file (the agent's RSS
 * grew by as much per file), and so was every C binary's code.
 */
static bool reg_scannable(const struct region *r)
{
	return !r->exec && r->size <= GOPCLNTAB_MAX_SIZE;
}

/* Loads a section's bytes on first use; false when they cannot be read. */
static bool reg_load(const struct region *cr)
{
	struct region *r = (struct region *)cr; /* img->reg is ours, not const */
	Elf_Data *d;

	if (r->scn) {
		d = elf_rawdata(r->scn, NULL);
		if (d && d->d_buf && d->d_size >= r->size)
			r->data = d->d_buf;
		r->scn = NULL; /* one attempt */
	}
	return r->data != NULL;
}

struct relative {
	uint64_t offset; /* where the loader stores ... */
	uint64_t addend; /* ... this link-time address plus the load bias */
};

struct elfimg {
	Elf *elf;
	int fd;		    /* the file, to read the table from; -1: through libelf */
	uint64_t file_size; /* when fd >= 0 */
	struct region *reg;
	size_t nreg;
	struct relative *rel; /* R_X86_64_RELATIVE, sorted by offset */
	size_t nrel;
	bool rel_loaded;
	/* symbols from .symtab, 0 when absent (stripped) */
	uint64_t sym_text, sym_pclntab, sym_epclntab;
};

static void img_free(struct elfimg *img)
{
	free(img->reg);
	free(img->rel);
}

static int img_init(struct elfimg *img, Elf *elf, int fd, struct rw_error *err)
{
	size_t nsec = 0, nphdr = 0, shstrndx = 0, cap;
	bool from_segments;
	Elf_Scn *scn = NULL;
	struct stat st;
	GElf_Ehdr eh;

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
	if (elf_getshdrstrndx(elf, &shstrndx))
		shstrndx = 0;

	while ((scn = elf_nextscn(elf, scn)) && img->nreg < cap) {
		struct region *r = &img->reg[img->nreg];
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
	/* No section headers (sstrip and friends): the loadable segments. */
	from_segments = !img->nreg && nsec <= 1;
	for (size_t i = 0; from_segments && i < nphdr; i++) {
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
		img->reg[img->nreg++] = (struct region){
			.addr = ph.p_vaddr,
			.data = d->d_buf,
			.size = ph.p_filesz,
			.writable = ph.p_flags & PF_W,
			/* a segment is read whole: code and data may share it */
		};
	}
	return 0;
}

/* Whether the file's regions are its sections (else its segments: no section headers). */
static bool img_has_sections(const struct elfimg *img)
{
	for (size_t i = 0; i < img->nreg; i++)
		if (img->reg[i].name || img->reg[i].scn)
			return true;
	return false;
}

/* Whether an allocated section of that name exists (nothing is read). */
static bool img_section_named(const struct elfimg *img, const char *name)
{
	for (size_t i = 0; i < img->nreg; i++)
		if (img->reg[i].name && !strcmp(img->reg[i].name, name))
			return true;
	return false;
}

static const struct region *img_section(const struct elfimg *img, const char *name)
{
	for (size_t i = 0; i < img->nreg; i++)
		if (img->reg[i].name && !strcmp(img->reg[i].name, name))
			return reg_load(&img->reg[i]) ? &img->reg[i] : NULL;
	return NULL;
}

/* The region holding [addr, addr + len), or NULL. */
static const struct region *img_find(const struct elfimg *img, uint64_t addr, uint64_t len)
{
	for (size_t i = 0; i < img->nreg; i++) {
		const struct region *r = &img->reg[i];

		if (addr >= r->addr && in_bounds(addr - r->addr, len, r->size))
			return reg_load(r) ? r : NULL;
	}
	return NULL;
}

static void img_symbols(struct elfimg *img)
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
	const struct relative *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/*
 * In a PIE the pointers in moduledata and .go.buildinfo are dynamic
 * relocations. The Go linker and GNU ld also store the link-time value in
 * the file, but a linker may leave zeros there (lld without
 * --apply-dynamic-relocs): the R_X86_64_RELATIVE addends are authoritative.
 */
static int img_load_relatives(struct elfimg *img, struct rw_error *err)
{
	Elf_Scn *scn = NULL;
	size_t cap = 0, relsz;

	if (img->rel_loaded)
		return 0;
	img->rel_loaded = true;
	relsz = gelf_fsize(img->elf, ELF_T_RELA, 1, EV_CURRENT);
	if (!relsz)
		return 0;
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

			if (!gelf_getrela(d, (int)i, &r) ||
			    GELF_R_TYPE(r.r_info) != R_X86_64_RELATIVE)
				continue;
			if (img->nrel == cap) {
				size_t ncap = cap ? 2 * cap : 1024;
				struct relative *p;

				p = reallocarray(img->rel, ncap, sizeof(*p));
				if (!p)
					return rw_error_set(err, ENOMEM,
							    "out of memory for %zu relocations",
							    ncap);
				img->rel = p;
				cap = ncap;
			}
			img->rel[img->nrel++] = (struct relative){ r.r_offset,
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
	const struct region *r = img_find(img, addr, 8);

	if (!r)
		return false;
	*out = rd64(r->data + (addr - r->addr));
	return true;
}

/* Reads a pointer at addr: its relocation's addend if it has one. */
static bool img_ptr(const struct elfimg *img, uint64_t addr, uint64_t *out)
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

struct pchdr_info {
	uint64_t addr; /* virtual address of the pcHeader */
	uint64_t name_off, pcln_off;
};

static bool pchdr_read(const uint8_t *p, size_t avail, struct pchdr_info *h)
{
	const struct pcln_layout *l;

	if (avail < PCHDR_PREFIX)
		return false;
	l = find_layout(rd32(p));
	if (!l || p[4] || p[5] || p[6] != 1 || p[7] != 8 ||
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

	if (!img_ptr(img, md, &v) || v != h->addr)
		return false;
	if (__builtin_add_overflow(h->addr, h->name_off, &want) ||
	    !img_ptr(img, md + MD_FUNCNAMETAB, &v) || v != want)
		return false;
	/* Not ftab's length against nfunc: a damaged nfunc is better
	 * reported by the parser than as "no moduledata". */
	return !__builtin_add_overflow(h->addr, h->pcln_off, &want) &&
	       img_ptr(img, md + MD_PCLNTABLE, &v) && v == want && img_ptr(img, md + MD_FTAB, &v) &&
	       v == want;
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
		const struct region *r = &img->reg[i];
		const uint8_t *p, *end;

		if (!r->writable || !reg_scannable(r) || !reg_load(r))
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

/* The pcHeader bytes at every supported magic: magic[1..3], pads, minLC, ptrSize. */
static const uint8_t pchdr_tail[7] = { 0xff, 0xff, 0xff, 0, 0, 1, 8 };

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
static bool pchdr_scan(const struct elfimg *img, const struct region **ret_r, struct pchdr_info *h,
		       uint64_t *md)
{
	int tries = 0;

	for (size_t i = 0; i < img->nreg; i++) {
		const struct region *r = &img->reg[i];
		const uint8_t *p, *end;

		if (!reg_scannable(r) || !reg_load(r))
			continue;
		p = r->data;
		end = r->data + r->size;
		while (p + 1 < end && tries < MAX_PCHDR_CANDIDATES &&
		       (p = memmem(p + 1, (size_t)(end - p - 1), pchdr_tail, sizeof(pchdr_tail)))) {
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
	return false;
}

/* Where the pcHeader is, and the moduledata pointing at it once one is found. */
struct pchdr_loc {
	const struct region *r; /* the region holding the pcHeader */
	struct pchdr_info h;
	uint64_t md; /* runtime.firstmoduledata, when have_md */
	bool have_md;
	bool whole; /* the region ends where the table does (its section, runtime.epclntab) */
};

/*
 * The section of the table, loaded, or NULL; -EFBIG when it is past the
 * budget, which is checked before its bytes are read.
 */
static int pchdr_section(const struct elfimg *img, const char *name, const struct region **ret,
			 struct rw_error *err)
{
	*ret = NULL;
	for (size_t i = 0; i < img->nreg; i++) {
		if (!img->reg[i].name || strcmp(img->reg[i].name, name))
			continue;
		if (img->reg[i].size > GOPCLNTAB_MAX_SIZE)
			return too_big(img->reg[i].size, err);
		/* read by table_read, from the file, as libelf would check it */
		if (img->fd >= 0 && img->reg[i].scn &&
		    in_bounds(img->reg[i].offset, img->reg[i].size, img->file_size)) {
			*ret = &img->reg[i];
			return 0;
		}
		*ret = reg_load(&img->reg[i]) ? &img->reg[i] : NULL;
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
		loc->r = img_find(img, img->sym_pclntab, 1);
		if (!loc->r)
			return rw_error_set(
				err, EINVAL,
				"corrupted Go binary: runtime.pclntab at 0x%llx is in no section",
				(unsigned long long)img->sym_pclntab);
		loc->h.addr = img->sym_pclntab;
		return 0;
	}
	if (img_has_sections(img) && !img_section_named(img, ".go.buildinfo") &&
	    !img_section_named(img, ".note.go.buildid"))
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
	if (!text && loc->have_md && img_ptr(img, loc->md + MD_TEXT, &v))
		text = v;
	if (!text && find_layout(rd32(data)))
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

static int table_read(const struct elfimg *img, const struct region *r, struct table_map *tm,
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
	ret = img_init(&img, elf, fd, err);
	if (ret)
		goto cleanup;
	img_symbols(&img);
	ret = img_load_relatives(&img, err);
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
	ret = parse(data, (size_t)size, text, tm.data ? &tm : NULL, ret_tab, err);
cleanup:
	table_unmap(&tm);
	img_free(&img);
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
	const struct region *r;
	uint64_t v = 0;

	if (psz == 8 && !be)
		return img_ptr(img, addr, out);
	r = img_find(img, addr, psz);
	if (!r)
		return false;
	for (unsigned int i = 0; i < psz; i++) {
		unsigned int b = be ? i : psz - 1 - i;

		v = v << 8 | r->data[addr - r->addr + b];
	}
	*out = v;
	return true;
}

static char *buildinfo_version(const struct elfimg *img, const struct region *r, uint64_t off)
{
	const uint8_t *p = r->data + off;
	uint64_t avail = r->size - off, len = 0, sptr, slen, vaddr;
	unsigned int psz, shift = 0;
	const struct region *sr;
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
	sr = img_find(img, sptr, slen);
	if (!sr)
		return NULL;
	return version_dup(sr->data + (sptr - sr->addr), slen);
}

char *gobuildinfo__version(Elf *elf)
{
	const struct region *r;
	struct elfimg img;
	char *ver = NULL;
	int tries = 0;

	if (img_init(&img, elf, -1, NULL))
		goto cleanup;
	if (img_load_relatives(&img, NULL))
		goto cleanup;
	r = img_section(&img, ".go.buildinfo");
	if (r) {
		if (r->size >= BUILDINFO_HDR &&
		    !memcmp(r->data, BUILDINFO_MAGIC, BUILDINFO_MAGIC_LEN))
			ver = buildinfo_version(&img, r, 0);
		goto cleanup;
	}
	/* Without sections: the header is 16-byte aligned in a data segment.
	 * A file with sections has it in .go.buildinfo or not at all (scanning
	 * its sections read a hostile 64 MiB table whole, to find nothing). */
	for (size_t i = 0;
	     !img_has_sections(&img) && i < img.nreg && !ver && tries < MAX_BUILDINFO_CANDIDATES;
	     i++) {
		const uint8_t *p, *start;
		uint64_t sz = img.reg[i].size;

		r = &img.reg[i];
		if (!reg_scannable(r) || !reg_load(r))
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
	img_free(&img);
	return ver;
}

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
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/cancel.h"
#include "analysis/gopclntab.h"
#include "analysis/gopclntab_impl.h"

static const struct pcln_layout layouts[] = {
	{ GO116_MAGIC, "go1.16/1.17", 7, -1, 2, 6, 8, 8, 8, 40, 44 },
	{ GO118_MAGIC, "go1.18/1.19", 8, 2, 3, 7, 4, 4, 4, 36, 40 },
	{ GO120_MAGIC, "go1.20+", 8, 2, 3, 7, 4, 4, 4, 40, 44 },
};

const struct pcln_layout *pcln_layout_of(uint32_t magic)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].magic == magic)
			return &layouts[i];
	return NULL;
}

size_t gopclntab__bytes(const struct gopclntab *tab)
{
	return tab ? sizeof(*tab) + tab->nfuncs * sizeof(*tab->funcs) + tab->strings_len : 0;
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
	*ret_l = pcln_layout_of(magic);
	if (*ret_l)
		return 0;
	if (magic == GO12_MAGIC)
		return rw_error_set(
			err, EINVAL,
			"unsupported .gopclntab: go1.2-1.15 layout (magic 0x%08x), only go1.16 and later are supported",
			magic);
	if (pcln_layout_of(__builtin_bswap32(magic)))
		return rw_error_set(
			err, EINVAL,
			"unsupported .gopclntab: big-endian table (magic 0x%08x), only little-endian amd64 is supported",
			magic);
	return rw_error_set(err, EINVAL, "not a .gopclntab: bad magic 0x%08x", magic);
}

/* pad1, pad2, minLC and ptrSize: amd64's (1, 8) or arm64's (4, 8). The
 * pc-value tables' deltas are in minLC units; of them, only the inline
 * tree's is read (goinline.c). */
static int pcln_check_prefix(const uint8_t *data, struct rw_error *err)
{
	if (data[4] || data[5])
		return rw_error_set(
			err, EINVAL,
			"corrupted .gopclntab: header padding is 0x%02x 0x%02x instead of zero",
			data[4], data[5]);
	if (data[6] != 1 && data[6] != 4)
		return rw_error_set(
			err, EINVAL,
			"unsupported .gopclntab: instruction size quantum %u is neither amd64's 1 nor arm64's 4",
			data[6]);
	if (data[7] != 8)
		return rw_error_set(
			err, EINVAL,
			"unsupported .gopclntab: pointer size %u is not 8 (amd64 and arm64 are supported)",
			data[7]);
	return 0;
}

int pcln_read_header(const uint8_t *data, size_t size, uint64_t text_start, struct pcln_hdr *h,
		     struct rw_error *err)
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

int pcln_locate_tables(struct pcln_hdr *h, struct rw_error *err)
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
	tab->strings_len = used + 1;
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

int pcln_too_big(uint64_t size, struct rw_error *err)
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

/* Gives [p, p + len)'s whole pages of tm back to the system; they read as zeros after. */
static void table_release(const struct table_map *tm, const uint8_t *p, uint64_t len)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1);
	uintptr_t hi = ((uintptr_t)p + len) & ~(page - 1);

	if (tm && lo < hi && p >= tm->data && len <= tm->len - (size_t)(p - tm->data))
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

int pcln_parse(const uint8_t *data, size_t size, uint64_t text_start, const struct table_map *tm,
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
		return pcln_too_big(size, err);
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
	return pcln_parse(data, size, text_start, NULL, ret_tab, err);
}

// SPDX-License-Identifier: MIT
/*
 * The binary index: every function of a file from its symbol table, pclntab
 * and DWARF, their names and match keys, and the address index.
 * binary_impl.h holds what the pieces share.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gelf.h>

#include "analysis/binary.h"
#include "analysis/binary_impl.h"
#include "base/cancel.h"
#include "base/demangle.h"
#include "analysis/disasm.h"
#include "analysis/elfbin.h"
#include "analysis/gopclntab.h"

const char *func_source__str(enum func_source s)
{
	switch (s) {
	case FUNC_SOURCE_SYMTAB: return "symtab";
	case FUNC_SOURCE_DWARF: return "dwarf";
	case FUNC_SOURCE_PCLNTAB: return "pclntab";
	}
	return "?";
}

const char *func_mode__str(enum func_mode m)
{
	switch (m) {
	case FUNC_MODE_ENTRY_RET: return "entry+ret";
	case FUNC_MODE_ENTRY_RET_TAILCALL: return "entry+ret+tailcall";
	case FUNC_MODE_ENTRY_ONLY: return "entry-only";
	}
	return "?";
}

/* ---- index ---- */

/* The analyzer gave up on this reading (cancel.h): its error is the analyzer's to say. */
int bin_index__cancelled(const struct binary *b, struct rw_error *err)
{
	return rw_error_set(err, ECANCELED, "reading %s was cancelled", b->path);
}

static const char *keep_name(struct binary *b, const char *s, size_t len)
{
	char *n;
	void *p;

	if (b->nnames == b->names_cap) {
		size_t ncap = b->names_cap ? b->names_cap * 2 : 64;

		p = realloc(b->names, ncap * sizeof(*b->names));
		if (!p)
			return NULL;
		b->names = p;
		b->names_cap = ncap;
	}
	n = strndup(s, len);
	if (n)
		b->names[b->nnames++] = n;
	return n;
}

/*
 * Room for n more entries, allocated once: doubling from what the symbols
 * took would leave up to half of a big Go binary's index unused (164,718
 * functions in 262,144 entries, 11 MB).
 */
static int reserve_fns(struct binary *b, size_t n)
{
	void *p;

	if (b->cap - b->nfns >= n)
		return 0;
	p = realloc(b->fns, (b->nfns + n) * sizeof(*b->fns));
	if (!p)
		return -ENOMEM;
	b->fns = p;
	b->cap = b->nfns + n;
	return 0;
}

static struct fn_entry *add_fn(struct binary *b, const char *name, uint64_t addr, uint64_t size,
			       enum func_source source)
{
	struct fn_entry *f;

	if (b->nfns >= MAX_FNS)
		return NULL; /* an index that large could not be held anyway: out of memory */
	if (b->nfns == b->cap) {
		size_t ncap = b->cap ? b->cap * 2 : 1024;
		void *p = realloc(b->fns, ncap * sizeof(*b->fns));

		if (!p)
			return NULL;
		b->fns = p;
		b->cap = ncap;
	}
	f = &b->fns[b->nfns++];
	memset(f, 0, sizeof(*f));
	f->name = name;
	f->addr = addr;
	f->size = size;
	f->source = source;
	return f;
}

/* Adds a range to f's cold parts: 0; 1 when they are full; -ENOMEM. */
static int extra_add(struct fn_entry *f, struct addr_range r)
{
	if (f->nextra == DWARF_MAX_RANGES - 1)
		return 1;
	if (!f->extra && !(f->extra = calloc(DWARF_MAX_RANGES - 1, sizeof(*f->extra))))
		return -ENOMEM;
	f->extra[f->nextra++] = r;
	return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !memcmp(s + n - m, suffix, m);
}

static int fn_cmp(const void *a, const void *b)
{
	const struct fn_entry *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* First entry named name in the sorted index, or b->nfns. */
static size_t lower_bound(const struct binary *b, const char *name)
{
	size_t lo = 0, hi = b->nfns;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(b->fns[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether the sorted first n entries hold name (entries appended since are
 * not sorted yet). */
static bool has_name(const struct binary *b, size_t n, const char *name)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(b->fns[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && !strcmp(b->fns[lo].name, name);
}

static void sort_index(struct binary *b)
{
	if (b->nfns)
		qsort(b->fns, b->nfns, sizeof(*b->fns), fn_cmp);
}

struct code_section {
	uint64_t lo, hi;
};

static int code_section_cmp(const void *a, const void *b)
{
	const struct code_section *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/*
 * The file's executable sections, sorted by address (none where the
 * headers cannot be read). 0 or -ENOMEM. The section headers were checked
 * against the file's size when it was opened.
 */
static int code_sections(struct binary *b, struct code_section **ret, size_t *ret_n)
{
	struct code_section *secs = NULL;
	size_t n = 0, cap = 0;
	Elf_Scn *scn = NULL;

	*ret = NULL;
	*ret_n = 0;
	while ((scn = elf_nextscn(elfbin__elf(b->eb), scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR) || !sh.sh_size ||
		    sh.sh_addr + sh.sh_size < sh.sh_addr)
			continue;
		if (n == cap) {
			void *p = realloc(secs, (cap = cap * 2 + 16) * sizeof(*secs));

			if (!p) {
				free(secs);
				return -ENOMEM;
			}
			secs = p;
		}
		secs[n++] = (struct code_section){ sh.sh_addr, sh.sh_addr + sh.sh_size };
	}
	if (n)
		qsort(secs, n, sizeof(*secs), code_section_cmp);
	*ret = secs;
	*ret_n = n;
	return 0;
}

/* The end of the executable section holding addr, or 0 (none known). */
static uint64_t code_section_end(const struct code_section *secs, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) { /* the first section starting past addr */
		size_t mid = lo + (hi - lo) / 2;

		if (secs[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && addr < secs[lo - 1].hi ? secs[lo - 1].hi : 0;
}

/*
 * .symtab and .dynsym. gcc's "foo.cold" fragments are not functions of their
 * own: they become extra ranges of foo (DWARF, when present, says the same).
 * Go's ".abi0" symbols are indexed under the name users know. A function's
 * code ends with its section: past it lie the alignment padding before the
 * next section (zeros, which do not decode: _init's size 0 taken up to the
 * next symbol, _fini, would end in them) or another section's bytes.
 */
static int index_symtab(struct binary *b)
{
	size_t n, nsecs;
	const struct elfbin_sym *syms = bin_index__syms(b, &n);
	struct code_section *secs;

	if (code_sections(b, &secs, &nsecs))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const char *name = syms[i].name;
		uint64_t size = syms[i].size, end;

		if (cancel__every(i)) {
			free(secs);
			return -ECANCELED;
		}
		if (strstr(name, ".cold") && (ends_with(name, ".cold") || strstr(name, ".cold.")))
			continue;
		/* a debug file's symbol names code of the file, or nothing */
		if (b->dbg && !elfbin__is_code(b->eb, syms[i].addr, 1))
			continue;
		if (ends_with(name, ".abi0")) {
			name = keep_name(b, name, strlen(name) - 5);
			if (!name)
				goto nomem;
		}
		/* size 0 (hand-written assembly): up to the next symbol, or
		 * for the last one to its section's end */
		end = code_section_end(secs, nsecs, syms[i].addr);
		if (!size && i + 1 < n && syms[i + 1].addr > syms[i].addr)
			size = syms[i + 1].addr - syms[i].addr;
		else if (!size && i + 1 == n && end)
			size = end - syms[i].addr;
		if (end && size > end - syms[i].addr)
			size = end - syms[i].addr;
		struct fn_entry *f = add_fn(b, name, syms[i].addr, size, FUNC_SOURCE_SYMTAB);

		if (!f)
			goto nomem;
		f->ifunc = syms[i].ifunc;
	}
	free(secs);
	sort_index(b);
	return 0;
nomem:
	free(secs);
	return -ENOMEM;
}

/*
 * Pairs each "foo.cold" symbol with the functions named foo. Every entry of
 * one name gets the same ranges, so the first entry of the run tells when the
 * whole run is full: a file of many same-named symbols costs O(n log n), not
 * O(n^2).
 */
static int attach_cold_symbols(struct binary *b)
{
	size_t n;
	const struct elfbin_sym *syms = bin_index__syms(b, &n);

	for (size_t i = 0; i < n; i++) {
		const char *cold = strstr(syms[i].name, ".cold");
		size_t j;

		if (!cold || !syms[i].size || (cold[5] && cold[5] != '.'))
			continue;
		char *base = strndup(syms[i].name, cold - syms[i].name);

		if (!base)
			return -ENOMEM;
		for (j = lower_bound(b, base); j < b->nfns && !strcmp(b->fns[j].name, base); j++) {
			struct fn_entry *f = &b->fns[j];

			int e = extra_add(f, (struct addr_range){ syms[i].addr,
								  syms[i].addr + syms[i].size });

			if (e < 0) {
				free(base);
				return -ENOMEM;
			}
			if (e)
				break; /* and so is the rest of the run */
		}
		free(base);
	}
	return 0;
}

/* name with each U+00B7 MIDDLE DOT replaced by '.' */
const char *bin_index__dot_name(struct binary *b, const char *name)
{
	char *n = strdup(name), *w = n;
	const char *kept;

	if (!n)
		return NULL;
	for (const char *r = name; *r; r++) {
		if ((unsigned char)r[0] == 0xc2 && (unsigned char)r[1] == 0xb7) {
			*w++ = '.';
			r++;
		} else {
			*w++ = *r;
		}
	}
	*w = 0;
	kept = keep_name(b, n, w - n);
	free(n);
	return kept;
}

/* Whether Go's function table has a function entering at addr (sorted by entry). */
bool bin_index__pcln_has_entry(const struct binary *b, uint64_t addr)
{
	size_t lo = 0, hi = b->pcln ? b->pcln->nfuncs : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->pcln->funcs[mid].entry < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return b->pcln && lo < b->pcln->nfuncs && b->pcln->funcs[lo].entry == addr;
}

/* The symbol (.symtab or .dynsym, sorted by address) at exactly addr, or NULL. */
const struct elfbin_sym *bin_index__sym_exactly_at(const struct binary *b, uint64_t addr)
{
	size_t n, lo = 0, hi;
	const struct elfbin_sym *syms = bin_index__syms(b, &n);

	hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (syms[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && syms[lo].addr == addr ? &syms[lo] : NULL;
}

const struct elfbin_sym *bin_index__syms(const struct binary *b, size_t *ret_n)
{
	return elfbin__syms(b->dbg ? b->dbg : b->eb, ret_n);
}

/* Whether .symtab or .dynsym has a function at addr. */
static bool sym_at(const struct binary *b, uint64_t addr)
{
	return bin_index__sym_exactly_at(b, addr) != NULL;
}

static int index_pclntab(struct binary *b, struct rw_error *err)
{
	size_t before = b->nfns;
	int ret;

	ret = gopclntab__load(elfbin__elf(b->eb), elfbin__fd(b->eb), &b->pcln, err);
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	b->go_version = gobuildinfo__version(elfbin__elf(b->eb));
	if (reserve_fns(b, b->pcln->nfuncs))
		return rw_error_set(err, ENOMEM, "out of memory for %zu functions",
				    b->pcln->nfuncs);
	for (size_t i = 0; i < b->pcln->nfuncs; i++) {
		const struct gofunc *g = &b->pcln->funcs[i];

		const char *name = g->name;

		if (cancel__every(i))
			return bin_index__cancelled(b, err);

		/* the symbol table names it already, maybe otherwise: Go 1.18
		 * and 1.19 write "Map[...]" here for "Map[go.shape.int_0]" */
		if (g->end <= g->entry || sym_at(b, g->entry))
			continue;
		/* the linker writes "·" of pclntab names as "." in .symtab (as
		 * `go tool nm` prints them): index the name users will type */
		if (strstr(name, "\xc2\xb7")) {
			name = bin_index__dot_name(b, name);
			if (!name)
				return rw_error_set(err, ENOMEM, "out of memory");
		}
		if (has_name(b, before, name))
			continue;
		if (!add_fn(b, name, g->entry, g->end - g->entry, FUNC_SOURCE_PCLNTAB))
			return rw_error_set(err, ENOMEM, "out of memory");
	}
	if (b->nfns != before)
		sort_index(b);
	return 0;
}

/* DWARF gives a split function all its ranges, and names what .symtab lost. */
static int index_dwarf(struct binary *b, struct rw_error *err)
{
	const struct dwarf_func *df;
	size_t n, before = b->nfns;
	int ret;

	/* a stripped file's DWARF is in its debug file, at the same addresses */
	ret = dwarfinfo__load(elfbin__elf(b->dbg ? b->dbg : b->eb), &b->dwarf, err);
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	df = dwarfinfo__funcs(b->dwarf, &n);
	for (size_t i = 0; i < b->nfns; i++) {
		struct fn_entry *f = &b->fns[i];
		const struct dwarf_func *d = dwarfinfo__find_entry(b->dwarf, f->addr);

		if (cancel__every(i))
			return bin_index__cancelled(b, err);
		if (!d || d->nranges < 2)
			continue;
		f->nextra = 0;
		for (size_t r = 1; r < d->nranges; r++)
			if (extra_add(f, d->ranges[r]) < 0)
				return rw_error_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		struct fn_entry *f;

		if (cancel__every(i))
			return bin_index__cancelled(b, err);
		/* a function the linker discarded keeps its DWARF at address 0
		 * (or wherever its section would have been): it is no function
		 * of this binary. One entry per address: the symbol table's
		 * name wins, and DWARF lists some functions in several units. */
		if (!elfbin__is_code(b->eb, df[i].entry, 1) ||
		    (i && df[i - 1].entry == df[i].entry) || sym_at(b, df[i].entry) ||
		    has_name(b, before, df[i].name))
			continue;
		f = add_fn(b, df[i].name, df[i].entry, df[i].ranges[0].hi - df[i].entry,
			   FUNC_SOURCE_DWARF);
		if (!f)
			return rw_error_set(err, ENOMEM, "out of memory");
		for (size_t r = 1; r < df[i].nranges; r++)
			if (extra_add(f, df[i].ranges[r]) < 0)
				return rw_error_set(err, ENOMEM, "out of memory");
	}
	if (b->nfns != before)
		sort_index(b);
	return 0;
}

static unsigned int leading_underscores(const char *s);

/* Which of two entries at one address names it: a symbol-table name over
 * pclntab's and DWARF's, then the larger, then the one with fewer leading
 * underscores (memcpy, not __memcpy), then the first by name. */
static int canon_cmp(const void *a, const void *b, void *ctx)
{
	const struct binary *bin = ctx;
	const struct fn_entry *x = &bin->fns[*(const size_t *)a],
			      *y = &bin->fns[*(const size_t *)b];
	unsigned int ux, uy;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->source != y->source)
		return x->source < y->source ? -1 : 1;
	if (x->size != y->size)
		return x->size > y->size ? -1 : 1;
	ux = leading_underscores(x->name);
	uy = leading_underscores(y->name);
	if (ux != uy)
		return ux < uy ? -1 : 1;
	return strcmp(x->name, y->name);
}

/*
 * One function per address, always: names that share an entry address
 * (aliases, a function both in .symtab and DWARF, versioned symbols) are
 * one function, listed and probed once, under the name canon_cmp prefers.
 */
static int pick_canonical(struct binary *b)
{
	size_t *order = malloc((b->nfns ? b->nfns : 1) * sizeof(*order));

	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < b->nfns; i++)
		order[i] = i;
	qsort_r(order, b->nfns, sizeof(*order), canon_cmp, b);
	b->ncanon = 0;
	for (size_t i = 0, first = 0; i < b->nfns; i++) {
		if (!i || b->fns[order[i]].addr != b->fns[order[first]].addr) {
			first = i;
			b->ncanon++;
		}
		b->fns[order[i]].canon = order[first];
	}
	/* an address with an IFUNC symbol holds a resolver, whatever its aliases say */
	for (size_t i = 0; i < b->nfns; i++)
		b->fns[b->fns[i].canon].ifunc |= b->fns[i].ifunc;
	free(order);
	return 0;
}

static int key_cmp(const void *a, const void *b)
{
	const struct name_key *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return x->fn < y->fn ? -1 : x->fn > y->fn;
}

/*
 * Rust's v0 names print a method of an inherent impl as "<main::Cart>::total"
 * where legacy names print "main::Cart::total": the legacy spelling of a v0
 * name, into buf. False when name is no such method (trait impls, "<T as
 * Trait>::f", keep their brackets in both).
 */
static bool inherent_path(const char *name, char *buf, size_t len)
{
	size_t depth = 0, n = strlen(name), i;

	if (name[0] != '<' || n >= len)
		return false;
	for (i = 0; i < n; i++) {
		if (name[i] == '<')
			depth++;
		else if (name[i] == '>' && !--depth)
			break;
	}
	if (i == n || strncmp(name + i + 1, "::", 2) || memmem(name, i, " as ", 4))
		return false;
	memcpy(buf, name + 1, i - 1);
	memcpy(buf + i - 1, name + i + 1, n - i); /* with the terminator */
	return true;
}

/*
 * A Go generic function's name without its instantiation, into buf: each
 * bracketed list that follows a name is dropped ("main.Sum[go.shape.int]"
 * is "main.Sum", "main.(*Box[go.shape.string]).Get" is "main.(*Box).Get").
 * False when name has no such list. Brackets after anything else ("[2]int"
 * in an array type's name) stay.
 */
bool bin_index__generic_base(const char *name, char *buf, size_t len)
{
	size_t n = 0, depth = 0;
	bool dropped = false;

	for (const char *p = name; *p; p++) {
		bool ident = p > name && (isalnum((unsigned char)p[-1]) || p[-1] == '_');

		if (*p == '[' && (depth || ident)) {
			depth++;
			dropped = true;
			continue;
		}
		if (depth) {
			depth -= *p == ']';
			continue;
		}
		if (n + 1 >= len)
			return false;
		buf[n++] = *p;
	}
	buf[n] = '\0';
	return dropped && !depth && n;
}

/*
 * The names patterns are matched against: each entry's own, for a Go generic
 * function its name without the instantiation (bin_index__generic_base), and for a C++
 * or Rust symbol its demangled forms, with and without C++ parameter lists
 * ("shop::Cart::total(int) const", "shop::Cart::total"; "main::compute",
 * and for a v0 method "main::Cart::total" besides "<main::Cart>::total").
 */
static int build_keys(struct binary *b)
{
	char full[DEMANGLE_MAX_OUT + 1], bare[DEMANGLE_MAX_OUT + 1];
	size_t cap = b->nfns ? b->nfns : 1, n = 0;
	struct name_key *k = malloc(cap * sizeof(*k));
	bool demangled = false;

	if (!k)
		return -ENOMEM;
	for (size_t i = 0; i < b->nfns; i++) {
		struct fn_entry *f = &b->fns[i];
		const char *forms[3] = { f->name };
		size_t nforms = 1;

		if (cancel__every(i)) {
			free(k);
			return -ECANCELED;
		}
		if (b->pcln && strchr(f->name, '[') &&
		    bin_index__generic_base(f->name, bare, sizeof(bare))) {
			forms[nforms] = keep_name(b, bare, strlen(bare));
			if (!forms[nforms++])
				goto nomem;
		} else if (demangle(f->name, true, full, sizeof(full))) {
			f->demangled = keep_name(b, full, strlen(full));
			if (!f->demangled)
				goto nomem;
			forms[nforms++] = f->demangled;
			if (!strncmp(f->name, "_R", 2) && inherent_path(full, bare, sizeof(bare))) {
				forms[nforms] = keep_name(b, bare, strlen(bare));
				if (!forms[nforms++])
					goto nomem;
			} else if (demangle(f->name, false, bare, sizeof(bare)) &&
				   strcmp(bare, full)) {
				forms[nforms] = keep_name(b, bare, strlen(bare));
				if (!forms[nforms++])
					goto nomem;
			}
		}
		if (n + nforms > cap) {
			void *p = realloc(k, (cap = cap * 2 + nforms) * sizeof(*k));

			if (!p)
				goto nomem;
			k = p;
		}
		for (size_t j = 0; j < nforms; j++)
			k[n++] = (struct name_key){ forms[j], i };
		demangled |= nforms > 1;
	}
	/* the entries' own names alone are in the index's order already (by
	 * name, then address: then by entry) */
	if (demangled)
		qsort(k, n, sizeof(*k), key_cmp);
	b->keys = k;
	b->nkeys = n;
	return 0;
nomem:
	free(k);
	return -ENOMEM;
}

int bin_index__build(struct binary *b, struct rw_error *err)
{
	int ret;

	ret = index_symtab(b);
	if (!ret)
		ret = attach_cold_symbols(b);
	if (ret == -ECANCELED)
		return bin_index__cancelled(b, err);
	if (ret)
		return rw_error_set(err, ENOMEM, "out of memory");
	ret = index_pclntab(b, err);
	if (ret)
		return ret;
	/* Go functions are never split, and Go's DWARF is large: skip it */
	if (!b->pcln)
		ret = index_dwarf(b, err);
	if (!ret && !(ret = pick_canonical(b)))
		ret = build_keys(b);
	if (ret == -ECANCELED)
		return bin_index__cancelled(b, err);
	if (ret == -ENOMEM)
		return rw_error_set(err, ENOMEM, "out of memory");
	return ret;
}

/* ---- addresses ---- */

static unsigned int leading_underscores(const char *s)
{
	unsigned int n = 0;

	while (s[n] == '_')
		n++;
	return n;
}

/* By lo; among ranges at the same lo, the one to report last (see func_at). */
static int range_cmp(const void *a, const void *b, void *ctx)
{
	const struct fn_range *x = a, *y = b;
	const struct binary *bin = ctx;
	const struct fn_entry *fx = &bin->fns[x->fn], *fy = &bin->fns[y->fn];
	unsigned int ux, uy;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	/* prefer an entry range, then the narrower, then a symbol-table name,
	 * then the name with fewer leading underscores (memcpy, not __memcpy) */
	if (x->entry != y->entry)
		return x->entry ? 1 : -1;
	if (x->hi != y->hi)
		return x->hi > y->hi ? -1 : 1;
	if (fx->source != fy->source)
		return fx->source > fy->source ? -1 : 1;
	ux = leading_underscores(fx->name);
	uy = leading_underscores(fy->name);
	if (ux != uy)
		return ux > uy ? -1 : 1;
	return strcmp(fy->name, fx->name);
}

static void add_range(struct fn_range *r, size_t *n, size_t fn, uint64_t lo, uint64_t hi,
		      bool entry)
{
	if (hi <= lo) /* empty, or a size that wraps around */
		return;
	r[(*n)++] = (struct fn_range){ .lo = lo, .hi = hi, .fn = fn, .entry = entry };
}

static int build_addr_index(struct binary *b)
{
	struct fn_range *r;
	size_t n = 0;

	for (size_t i = 0; i < b->nfns; i++)
		n += 1 + b->fns[i].nextra;
	r = calloc(n + 1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	n = 0;
	for (size_t i = 0; i < b->nfns; i++) {
		const struct fn_entry *f = &b->fns[i];

		if (f->canon != i)
			continue; /* an alias: its address's function is indexed */
		add_range(r, &n, i, f->addr, f->addr + f->size, true);
		for (size_t k = 0; k < f->nextra; k++)
			add_range(r, &n, i, f->extra[k].lo, f->extra[k].hi, false);
	}
	qsort_r(r, n, sizeof(*r), range_cmp, b);
	for (size_t i = 0; i < n; i++)
		r[i].max_hi = i && r[i - 1].max_hi > r[i].hi ? r[i - 1].max_hi : r[i].hi;
	b->by_addr = r;
	b->nby_addr = n;
	return 0;
}

const struct func_info *binary__func_at(struct binary *b, uint64_t vaddr)
{
	size_t lo = 0, hi;
	int ret;

	if (!b->by_addr) {
		ret = build_addr_index(b);
		if (ret) {
			errno = -ret;
			return NULL;
		}
	}
	hi = b->nby_addr;
	/* ranges starting at or before vaddr are [0, lo) */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->by_addr[mid].lo <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* the latest start first: the innermost range; max_hi ends the walk
	 * once no earlier range reaches vaddr */
	for (size_t i = lo; i-- > 0 && b->by_addr[i].max_hi > vaddr;) {
		struct fn_entry *f = &b->fns[b->by_addr[i].fn];

		if (vaddr >= b->by_addr[i].hi)
			continue;
		ret = bin_analysis__analyzed(b, f);
		if (ret) {
			errno = -ret;
			return NULL;
		}
		return f->info;
	}
	/* a cold part of a function analysed so far, found from its FDE */
	if (bin_analysis__cold_at(b, vaddr))
		return bin_analysis__cold_at(b, vaddr)->f->info;
	errno = ENOENT;
	return NULL;
}

/* First index of by_addr whose range starts after addr. */
static size_t ranges_after(const struct binary *b, uint64_t addr)
{
	size_t lo = 0, hi = b->nby_addr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->by_addr[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether a known function's range (of the symbol tables, DWARF or pclntab) holds addr. */
bool bin_index__addr_known(struct binary *b, uint64_t addr)
{
	if (!b->by_addr && build_addr_index(b))
		return true; /* out of memory: claim nothing */
	for (size_t i = ranges_after(b, addr); i-- > 0 && b->by_addr[i].max_hi > addr;)
		if (addr < b->by_addr[i].hi)
			return true;
	return bin_analysis__cold_at(b, addr) != NULL;
}

/* Whether [lo, hi) overlaps a known function's range. */
bool bin_index__range_known(struct binary *b, uint64_t lo, uint64_t hi)
{
	size_t i;

	if (bin_index__addr_known(b, lo))
		return true;
	i = ranges_after(b, lo);
	if (i < b->nby_addr && b->by_addr[i].lo < hi)
		return true;
	i = bin_analysis__cold_after(b, lo);
	return i < b->ncold && b->cold[i].lo < hi;
}

int binary__read(const struct binary *b, uint64_t addr, void *buf, size_t len)
{
	return elfbin__read(b->eb, addr, buf, len);
}

int binary__offset_to_addr(const struct binary *b, uint64_t off, uint64_t *ret_addr)
{
	return elfbin__offset_to_addr(b->eb, off, ret_addr);
}

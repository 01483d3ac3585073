// SPDX-License-Identifier: MIT
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
#include "base/cancel.h"
#include "base/demangle.h"
#include "analysis/disasm.h"
#include "analysis/elfbin.h"
#include "analysis/gopclntab.h"

/* Larger "functions" come from corrupted tables, not compilers. */
#define MAX_FUNC_SIZE (64u << 20)

/*
 * One function of the index; a big Go binary has 165,000 of them, held for
 * as long as the file is cached: the fields are laid out small (80 bytes).
 */
struct fn_entry {
	const char *name;
	uint64_t addr, size;
	const char *demangled; /* C++ with parameters, Rust without hash; or NULL */
	/* The three below are allocated when needed: a probe analyses a few
	 * functions and few have cold parts (held in place, they made the
	 * index 6 times as large). */
	struct addr_range *extra;  /* .cold parts: DWARF_MAX_RANGES - 1 at most */
	struct func_info *info;	   /* analysis, made on first match (struct analysis) */
	struct disasm_result *dis; /* with it, in the same allocation */
	uint32_t canon;		   /* the entry listed for its address (itself, or an alias's) */
	unsigned int match_gen;	   /* binary__match call that last listed it */
	unsigned int count_gen;	   /* the glob that last counted it */
	uint8_t source;		   /* enum func_source */
	uint8_t nextra;
	bool dropped;	       /* a Go ABI wrapper whose body is another entry */
	bool wrappers_checked; /* its name's run went through drop_abi_wrappers */
	bool ifunc;	       /* an IFUNC's resolver (set on its address's canon) */
	bool tails_followed;
};

_Static_assert(DWARF_MAX_RANGES - 1 <= UINT8_MAX, "fn_entry.nextra holds the cold parts' count");

/* fn_entry.canon is an index: the index holds fewer entries than this. */
#define MAX_FNS UINT32_MAX

struct binary {
	struct binary_cache *cache;
	struct binary *next; /* in the cache */
	int refs;
	uint64_t last_use;
	char *path;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	struct timespec ctime;
	struct elfbin *eb;
	struct dwarfinfo *dwarf;
	struct gopclntab *pcln;
	char *go_version;
	struct fn_entry *fns; /* sorted by name, then address */
	size_t nfns, cap;
	char **names; /* storage for names we made */
	size_t nnames, names_cap;
	unsigned int match_gen, count_gen;
	size_t ncanon;	       /* entries that are their address's own */
	struct name_key *keys; /* every name a pattern matches, sorted */
	size_t nkeys;
	/* functions without a symbol (a stripped binary's static ones) that
	 * tail calls reach, found from their FDEs; each allocated on its own */
	struct fn_entry **anon;
	size_t nanon;
	struct fn_range *by_addr; /* built by binary__func_at */
	size_t nby_addr;
	struct match_memo *memo; /* the last successful binary__match calls, latest first */
	/* cold parts of named functions found from the unwind tables as the
	 * functions are analysed (add_cold_parts), sorted, disjoint */
	struct cold_part *cold;
	size_t ncold;
};

/*
 * A match's answer, kept for the next call with the same patterns and
 * limit: the analyzer matches on its thread, and the attach on the main
 * loop asks again (as does each further process of the same file), where
 * the globs over every name and the suggestions for a name that matches
 * nothing took a second for a big Go binary. The last MEMO_MAX are kept.
 */
struct match_memo {
	char *key; /* the patterns, each with its NUL */
	size_t key_len, limit, npatterns;
	struct binary_match m; /* unmatched[k].pattern: NULL, see at */
	size_t *at;	       /* unmatched[k] is patterns[at[k]] */
	struct match_memo *next;
};

#define MEMO_MAX 8

struct cold_part {
	uint64_t lo, hi; /* [lo, hi) */
	struct fn_entry *f;
};

/* The name of a function found from its FDE alone (anon_func_at). */
static const char anon_name[] = "(no symbol)";

/* A name of entry fn: its own, or a demangled form of it. */
struct name_key {
	const char *name;
	size_t fn;
};

/* One address range of a function, in the address index. */
struct fn_range {
	uint64_t lo, hi; /* [lo, hi) */
	uint64_t max_hi; /* the largest hi of this and every earlier range */
	size_t fn;	 /* index in fns */
	bool entry;	 /* the range holding the entry */
};

struct binary_cache {
	struct binary *head;
	size_t count, max;
	size_t hits, misses;
	uint64_t clock;
};

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

/* ---- globs ---- */

bool glob_has_wildcards(const char *p)
{
	for (; *p; p++) {
		if (*p == '\\' && p[1])
			p++;
		else if (*p == '*' || *p == '?')
			return true;
	}
	return false;
}

/*
 * "LIB:FUNC": the first colon that is not half of "::" (C++ and Rust paths),
 * before anything of a C++ signature or a Go generic name; LIB holds ".so"
 * or a wildcard, so Go's "type:.eq.T" stays a function name.
 */
bool binary_pattern__library(const char *pattern, char *lib, size_t liblen, const char **ret_func)
{
	size_t i;

	for (i = 0; pattern[i] && !strchr("(<[{ ", pattern[i]); i++) {
		if (pattern[i] == '\\' && pattern[i + 1]) {
			i++;
			continue;
		}
		if (pattern[i] != ':')
			continue;
		if (pattern[i + 1] == ':') {
			i++;
			continue;
		}
		break;
	}
	if (pattern[i] != ':' || i == 0 || !pattern[i + 1] || i >= liblen)
		return false;
	memcpy(lib, pattern, i);
	lib[i] = '\0';
	if (!strstr(lib, ".so") && !glob_has_wildcards(lib))
		return false;
	*ret_func = pattern + i + 1;
	return true;
}

int glob_check(const char *p, struct rw_error *err)
{
	size_t len = strlen(p), stars = 0;

	for (const char *c = p; *c; c++) {
		if (*c == '\\' && c[1])
			c++;
		else if (*c == '*')
			stars++;
	}
	if (len > GLOB_MAX_LEN)
		return rw_error_set(
			err, EINVAL,
			"pattern '%.64s...' is %zu bytes long, more than %d (the limit of "
			"a pattern with '*' or '?'): shorten it, or give the exact name",
			p, len, GLOB_MAX_LEN);
	if (stars > GLOB_MAX_STARS)
		return rw_error_set(err, EINVAL,
				    "pattern '%s' holds %zu '*', more than %d (the limit of a "
				    "pattern): merge them, or give the exact name",
				    p, stars, GLOB_MAX_STARS);
	return 0;
}

/* `*` and `?` with backtracking to the last star only: linear in practice,
 * O(len(p) * len(s)) at worst, never exponential. */
bool glob_match(const char *p, const char *s)
{
	const char *star_p = NULL, *star_s = NULL;

	while (*s) {
		if (*p == '*') {
			star_p = ++p;
			star_s = s;
			continue;
		}
		if (*p == '?' || (*p == '\\' && p[1] && p[1] == *s) || (*p != '\\' && *p == *s)) {
			p += (*p == '\\') ? 2 : 1;
			s++;
			continue;
		}
		if (*p == '\\' && !p[1] && *s == '\\') {
			p++;
			s++;
			continue;
		}
		if (!star_p)
			return false;
		p = star_p;
		s = ++star_s;
	}
	while (*p == '*')
		p++;
	return !*p;
}

/* ---- index ---- */

/* The analyzer gave up on this reading (cancel.h): its error is the analyzer's to say. */
static int cancelled(const struct binary *b, struct rw_error *err)
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
	const struct elfbin_sym *syms = elfbin__syms(b->eb, &n);
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
	const struct elfbin_sym *syms = elfbin__syms(b->eb, &n);

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
static const char *dot_name(struct binary *b, const char *name)
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
static bool pcln_has_entry(const struct binary *b, uint64_t addr)
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
static const struct elfbin_sym *sym_exactly_at(const struct binary *b, uint64_t addr)
{
	size_t n, lo = 0, hi;
	const struct elfbin_sym *syms = elfbin__syms(b->eb, &n);

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

/* Whether .symtab or .dynsym has a function at addr. */
static bool sym_at(const struct binary *b, uint64_t addr)
{
	return sym_exactly_at(b, addr) != NULL;
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
			return cancelled(b, err);

		/* the symbol table names it already, maybe otherwise: Go 1.18
		 * and 1.19 write "Map[...]" here for "Map[go.shape.int_0]" */
		if (g->end <= g->entry || sym_at(b, g->entry))
			continue;
		/* the linker writes "·" of pclntab names as "." in .symtab (as
		 * `go tool nm` prints them): index the name users will type */
		if (strstr(name, "\xc2\xb7")) {
			name = dot_name(b, name);
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

	ret = dwarfinfo__load(elfbin__elf(b->eb), &b->dwarf, err);
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	df = dwarfinfo__funcs(b->dwarf, &n);
	for (size_t i = 0; i < b->nfns; i++) {
		struct fn_entry *f = &b->fns[i];
		const struct dwarf_func *d = dwarfinfo__find_entry(b->dwarf, f->addr);

		if (cancel__every(i))
			return cancelled(b, err);
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
			return cancelled(b, err);
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
 * The names patterns are matched against: each entry's own, and for a C++
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
		if (demangle(f->name, true, full, sizeof(full))) {
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

static int build_index(struct binary *b, struct rw_error *err)
{
	int ret;

	ret = index_symtab(b);
	if (!ret)
		ret = attach_cold_symbols(b);
	if (ret == -ECANCELED)
		return cancelled(b, err);
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
		return cancelled(b, err);
	if (ret == -ENOMEM)
		return rw_error_set(err, ENOMEM, "out of memory");
	return ret;
}

/* ---- analysis ---- */

/*
 * Sweeps fi's ranges into f->dis. 0; 1 when they cannot be read (fi->reason
 * says why); or -ENOMEM.
 */
static int sweep(struct binary *b, struct fn_entry *f, struct func_info *fi)
{
	struct code_range cr[DWARF_MAX_RANGES];
	uint64_t total = 0;
	size_t n = 0;
	int ret = 0;

	for (size_t i = 0; i < fi->nranges; i++)
		total += fi->ranges[i].hi - fi->ranges[i].lo;
	for (size_t i = 0; i < fi->nranges; i++) {
		uint64_t lo = fi->ranges[i].lo, len = fi->ranges[i].hi - lo;
		uint8_t *buf;

		if (!len || len > MAX_FUNC_SIZE || !elfbin__is_code(b->eb, lo, len)) {
			fi->reason = len ? "the function's range is not inside an executable segment"
					 : "the symbol has no size";
			ret = 1;
			goto out;
		}
		/* past the budget disasm__scan decodes nothing: nothing to read
		 * (a 64 MiB function was read whole to be refused) */
		if (total > DISASM_MAX_BYTES) {
			cr[n++] = (struct code_range){ lo, NULL, len };
			continue;
		}
		buf = malloc(len);
		if (!buf) {
			ret = -ENOMEM;
			goto out;
		}
		cr[n++] = (struct code_range){ lo, buf, len };
		if (elfbin__read(b->eb, lo, buf, len)) {
			fi->reason = "the function's bytes could not be read from the file";
			ret = 1;
			goto out;
		}
	}
	ret = disasm__scan(cr, n, f->addr, f->dis);
out:
	for (size_t i = 0; i < n; i++)
		free((void *)cr[i].bytes);
	return ret;
}

static bool addr_known(struct binary *b, uint64_t addr);
static bool range_known(struct binary *b, uint64_t lo, uint64_t hi);

static bool in_func_ranges(const struct func_info *fi, uint64_t addr)
{
	for (size_t i = 0; i < fi->nranges; i++)
		if (addr >= fi->ranges[i].lo && addr < fi->ranges[i].hi)
			return true;
	return false;
}

/*
 * A stripped binary has lost the ".cold" symbols that name the parts a
 * compiler moved out of a function (gcc's unlikely paths), so jumps into
 * them look like tail calls. Every x86-64 ELF carries unwind tables. A jump
 * target is code of this function's own when it is no known function's
 * entry nor inside one, not a PLT stub, starts an FDE whose range overlaps
 * no known function, and its unwind rules say it runs inside a frame: every
 * function starts with CFA = RSP + 8 and nothing saved. A target in that
 * entry state is taken for a function without a symbol (anon_func_at), also
 * when it is the cold part of a function that had no frame to set up: its
 * RETs then end the call as a tail call's would. Adds the ranges to fi;
 * returns how many.
 */
static size_t add_cold_parts(struct binary *b, struct fn_entry *f, struct func_info *fi)
{
	size_t added = 0;

	for (size_t k = 0; k < f->dis->ntail_calls && fi->nranges < DWARF_MAX_RANGES; k++) {
		uint64_t t = f->dis->tail_targets[k], lo, hi;

		if (!t || in_func_ranges(fi, t) || addr_known(b, t) || elfbin__in_plt(b->eb, t) ||
		    elfbin__fde_at(b->eb, t, &lo, &hi) || hi - lo > MAX_FUNC_SIZE ||
		    !elfbin__is_code(b->eb, lo, hi - lo) || range_known(b, lo, hi) ||
		    elfbin__entry_state_at(b->eb, t) != 0)
			continue;
		fi->ranges[fi->nranges++] = (struct addr_range){ lo, hi };
		added++;
	}
	return added;
}

/* First cold part that starts after addr. */
static size_t cold_after(const struct binary *b, uint64_t addr)
{
	size_t lo = 0, hi = b->ncold;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->cold[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The cold part holding addr, or NULL. */
static const struct cold_part *cold_at(const struct binary *b, uint64_t addr)
{
	size_t i = cold_after(b, addr);

	return i && addr < b->cold[i - 1].hi ? &b->cold[i - 1] : NULL;
}

/*
 * Indexes f's cold parts found from the unwind tables (its ranges past
 * those the symbols and DWARF gave), so that binary__func_at finds f there
 * and no other function takes them for its own. add_cold_parts took only
 * ranges that overlap no known one: the index stays disjoint.
 */
static int cold_index(struct binary *b, struct fn_entry *f, const struct func_info *fi)
{
	for (size_t r = 1 + f->nextra; r < fi->nranges; r++) {
		size_t i = cold_after(b, fi->ranges[r].lo);
		struct cold_part *p = realloc(b->cold, (b->ncold + 1) * sizeof(*p));

		if (!p)
			return -ENOMEM;
		b->cold = p;
		memmove(&p[i + 1], &p[i], (b->ncold - i) * sizeof(*p));
		p[i] = (struct cold_part){ fi->ranges[r].lo, fi->ranges[r].hi, f };
		b->ncold++;
	}
	return 0;
}

/*
 * A function's analysis, in one allocation: inspect '*' of a big Go binary
 * makes 165,000 of them. A Go function has one range (no cold parts are
 * looked for), native code room for DWARF_MAX_RANGES.
 */
struct analysis {
	struct func_info fi;
	struct disasm_result dis;
	struct addr_range ranges[];
};

/* Frees what analyze made for f (f->info holds it all); NULL-tolerant. */
static void analysis_free(struct fn_entry *f)
{
	disasm_result__clear(f->dis);
	if (f->info)
		free((void *)f->info->tail_returns);
	free(f->info);
	f->info = NULL;
	f->dis = NULL;
}

static int analyze(struct binary *b, struct fn_entry *f)
{
	bool go = f->source == FUNC_SOURCE_PCLNTAB || pcln_has_entry(b, f->addr);
	size_t nranges = go ? 1 + f->nextra : DWARF_MAX_RANGES;
	struct analysis *a = calloc(1, sizeof(*a) + nranges * sizeof(a->ranges[0]));
	struct func_info *fi;
	int ret;

	if (!a)
		return -ENOMEM;
	fi = &a->fi;
	f->dis = &a->dis;
	fi->ranges = a->ranges;
	fi->name = f->name;
	fi->demangled = f->demangled;
	fi->address = f->addr;
	fi->size = f->size;
	fi->source = f->source;
	fi->go = go;
	fi->ranges[0] = (struct addr_range){ f->addr, f->addr + f->size };
	for (size_t i = 0; i < f->nextra; i++)
		fi->ranges[1 + i] = f->extra[i];
	fi->nranges = 1 + f->nextra;
	fi->mode = FUNC_MODE_ENTRY_ONLY;
	f->info = fi;

	if (elfbin__addr_to_offset(b->eb, f->addr, &fi->file_offset)) {
		fi->reason = "the entry address is not in a loaded segment of the file";
		return 0;
	}
	ret = sweep(b, f, fi);
	/* Go keeps its code in one range: no cold parts to look for */
	while (!ret && !fi->go && !f->dis->undecodable && !f->dis->over_budget &&
	       add_cold_parts(b, f, fi)) {
		disasm_result__clear(f->dis);
		ret = sweep(b, f, fi);
	}
	if (ret == -ECANCELED) {
		analysis_free(f); /* not half an analysis for a later match to trust */
		return ret;
	}
	if (ret)
		return ret < 0 ? ret : 0;
	/* functions without a symbol stay out of binary__func_at (frames print
	 * as file+offset) */
	if (f->name != anon_name && cold_index(b, f, fi))
		return -ENOMEM;
	/* pclntab ends a function where the next begins: drop the int3 padding */
	if (f->source == FUNC_SOURCE_PCLNTAB && !f->dis->undecodable &&
	    f->dis->code_end > f->addr) {
		fi->size = f->dis->code_end - f->addr;
		fi->ranges[0].hi = f->dis->code_end;
	}
	fi->returns = f->dis->returns;
	fi->nreturns = f->dis->nreturns;
	fi->tail_calls = f->dis->tail_calls;
	fi->tail_targets = f->dis->tail_targets;
	fi->ntail_calls = f->dis->ntail_calls;
	fi->nindirect_jumps = f->dis->nindirect_jumps;
	fi->exits_known = !f->dis->undecodable && !f->dis->over_budget;
	if (f->dis->reason)
		fi->reason = f->dis->reason;
	else
		fi->mode = fi->ntail_calls ? FUNC_MODE_ENTRY_RET_TAILCALL : FUNC_MODE_ENTRY_RET;
	return 0;
}

static int analyzed(struct binary *b, struct fn_entry *f)
{
	return f->info ? 0 : analyze(b, f);
}

/* ---- tail calls ---- */

static int cmp_offset(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

struct tail_walk {
	const struct func_info *funcs[BINARY_TAIL_MAX_FUNCS];
	unsigned int depth[BINARY_TAIL_MAX_FUNCS];
	size_t nfuncs;
	int64_t *returns;
	size_t nreturns;
	size_t untimed, indirect;
};

static bool tail_walk__seen(const struct tail_walk *w, const struct func_info *g)
{
	for (size_t i = 0; i < w->nfuncs; i++)
		if (w->funcs[i] == g)
			return true;
	return false;
}

/*
 * The function at addr that has no symbol, from the unwind tables: an FDE
 * starts there in a function's entry state (add_cold_parts), inside no
 * known function. Analysed once; NULL when there is none.
 */
static const struct func_info *anon_func_at(struct binary *b, uint64_t addr)
{
	struct fn_entry *f, **p;
	uint64_t lo, hi;

	for (size_t i = 0; i < b->nanon; i++)
		if (b->anon[i]->addr == addr)
			return b->anon[i]->info;
	if (addr_known(b, addr) || elfbin__in_plt(b->eb, addr) ||
	    elfbin__fde_at(b->eb, addr, &lo, &hi) || hi - lo > MAX_FUNC_SIZE ||
	    range_known(b, lo, hi) || elfbin__entry_state_at(b->eb, addr) != 1)
		return NULL;
	p = realloc(b->anon, (b->nanon + 1) * sizeof(*p));
	if (!p)
		return NULL;
	b->anon = p;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->name = anon_name;
	f->addr = lo;
	f->size = hi - lo;
	f->source = FUNC_SOURCE_SYMTAB;
	b->anon[b->nanon++] = f;
	if (analyze(b, f))
		return NULL;
	return f->info;
}

/*
 * Follows the tail call of w->funcs[from] to target: a function whose RETs
 * end the call, or one more jump that cannot be followed. false on -ENOMEM.
 */
static bool tail_walk__follow(struct binary *b, struct tail_walk *w, size_t from, uint64_t target)
{
	const struct func_info *f = w->funcs[0], *g;

	g = target ? binary__func_at(b, target) : NULL;
	if (!g && target)
		g = anon_func_at(b, target);
	if (!g || g->address != target || g->go || !g->exits_known) {
		w->untimed++; /* through memory, no function's entry, or exits unknown */
		return true;
	}
	if (tail_walk__seen(w, g))
		return true;
	if (w->depth[from] + 1 > BINARY_TAIL_MAX_DEPTH || w->nfuncs == BINARY_TAIL_MAX_FUNCS ||
	    w->nreturns + g->nreturns > BINARY_TAIL_MAX_RETURNS) {
		w->untimed++;
		return true;
	}
	if (g->nreturns) {
		void *p = realloc(w->returns, (w->nreturns + g->nreturns) * sizeof(*w->returns));

		if (!p)
			return false;
		w->returns = p;
	}
	/* file offsets, not addresses: the two functions may lie in different segments */
	for (size_t k = 0; k < g->nreturns; k++)
		w->returns[w->nreturns++] = (int64_t)(g->file_offset - f->file_offset) +
					    g->returns[k];
	w->depth[w->nfuncs] = w->depth[from] + 1;
	w->funcs[w->nfuncs++] = g;
	return true;
}

/*
 * Fills f's tail_returns and counts (struct func_info): a breadth-first walk
 * from f over direct jumps to other functions' entries, in native code only
 * (Go's jumps out of a function are ABI wrappers' and the runtime's).
 */
static int follow_tails(struct binary *b, struct fn_entry *f)
{
	struct func_info *fi = f->info;
	struct tail_walk w = { .funcs = { fi }, .nfuncs = 1 };

	if (f->tails_followed || fi->go || !fi->exits_known)
		return 0;
	for (size_t i = 0; i < w.nfuncs; i++) {
		const struct func_info *x = w.funcs[i];

		w.indirect += x->nindirect_jumps;
		for (size_t k = 0; k < x->ntail_calls; k++) {
			size_t untimed = w.untimed;

			if (!tail_walk__follow(b, &w, i, x->tail_targets[k])) {
				free(w.returns);
				return -ENOMEM;
			}
			if (i == 0 && w.untimed == untimed)
				fi->ntail_followed++;
		}
	}
	if (w.nreturns)
		qsort(w.returns, w.nreturns, sizeof(*w.returns), cmp_offset);
	fi->tail_returns = w.returns; /* freed with the analysis */
	fi->ntail_returns = w.nreturns;
	fi->ntail_untimed = w.untimed;
	fi->nindirect_jumps = w.indirect;
	f->tails_followed = true;
	/* no RET of its own, but the functions it jumps to return for it
	 * (`return other(x);` its only exit): timed at their RETs */
	if (fi->mode == FUNC_MODE_ENTRY_ONLY && !fi->nreturns && fi->ntail_calls &&
	    fi->ntail_returns) {
		fi->mode = FUNC_MODE_ENTRY_RET_TAILCALL;
		fi->reason = NULL;
	}
	return 0;
}

#define MAX_WRAPPER_SIZE 256

/* First entry of [first, end) (sorted by address within one name) at addr, or end. */
static size_t run_find_addr(const struct binary *b, size_t first, size_t end, uint64_t addr)
{
	size_t lo = first, hi = end;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->fns[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < end && b->fns[lo].addr == addr ? lo : end;
}

/* Whether entry i of the run [first, end) calls or jumps to another entry of
 * the run that is not dropped. */
static bool wraps_other(const struct binary *b, size_t i, size_t first, size_t end)
{
	const struct fn_entry *from = &b->fns[i];
	uint8_t buf[MAX_WRAPPER_SIZE];
	size_t len = from->size < sizeof(buf) ? from->size : sizeof(buf);

	/* an ABI wrapper is a few instructions that end in a CALL or JMP to the
	 * body: look for a rel32 displacement that reaches an entry of the same
	 * name. A byte scan is enough here since it only classifies (no probe
	 * goes where it points), and a false match would need an entry's exact
	 * distance. */
	if (len < 5 || elfbin__read(b->eb, from->addr, buf, len))
		return false;
	for (size_t k = 0; k + 5 <= len; k++) {
		uint64_t target;
		int32_t rel;

		if (buf[k] != 0xe8 && buf[k] != 0xe9)
			continue;
		memcpy(&rel, buf + k + 1, 4);
		target = from->addr + k + 5 + (int64_t)rel;
		for (size_t j = run_find_addr(b, first, end, target);
		     j < end && b->fns[j].addr == target; j++)
			if (j != i && !b->fns[j].dropped)
				return true;
	}
	return false;
}

/*
 * Go emits, for a function called across ABIs, a body and a small wrapper
 * under the same name (the ABI0 one is "name.abi0" in .symtab). Keep the body:
 * the entry that does not merely call into the other. One read and at most
 * MAX_WRAPPER_SIZE lookups per entry: a run of thousands of same-named
 * entries in a hostile file costs O(n log n).
 */
static void drop_abi_wrappers(struct binary *b, size_t first, size_t end)
{
	for (size_t i = first; i < end; i++)
		if (!b->fns[i].dropped && b->fns[i].size <= MAX_WRAPPER_SIZE &&
		    wraps_other(b, i, first, end))
			b->fns[i].dropped = true;
}

/* ---- matching ---- */

static int add_match(struct binary *b, struct binary_match *m, struct fn_entry *f, size_t *cap)
{
	int ret;

	f = &b->fns[f->canon];
	if (f->match_gen == b->match_gen)
		return 0; /* listed by an earlier pattern */
	ret = analyzed(b, f);
	if (!ret)
		ret = follow_tails(b, f);
	if (ret)
		return ret;
	f->match_gen = b->match_gen;
	if (m->nfuncs == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		void *p = realloc(m->funcs, ncap * sizeof(*m->funcs));

		if (!p)
			return -ENOMEM;
		m->funcs = p;
		*cap = ncap;
	}
	m->funcs[m->nfuncs++] = f->info;
	return 0;
}

/*
 * Work bound of one pattern's suggestions, in edit-distance cells: a binary
 * of many long names (or 64 patterns against it) must not stall the caller.
 * Real names rarely get near it: most fail the length test, the rest leave
 * the band within a few rows.
 */
#define SUGGEST_CELL_BUDGET (1u << 20)
#define SUGGEST_MAX_LEN 255

/*
 * Edit distance, or max + 1 once it must exceed max. Only the band of cells
 * within max of the diagonal can hold a distance of at most max (O(max * la),
 * not O(la * lb)); each cell computed is taken from *budget, and an empty
 * budget answers max + 1.
 */
static size_t bounded_distance(const char *a, size_t la, const char *b, size_t lb, size_t max,
			       size_t *budget)
{
	size_t row[SUGGEST_MAX_LEN + 1], inf = max + 1;

	if (la > SUGGEST_MAX_LEN || lb > SUGGEST_MAX_LEN || (la > lb ? la - lb : lb - la) > max)
		return inf;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j <= max ? j : inf;
	for (size_t i = 1; i <= la; i++) {
		size_t lo = i > max ? i - max : 1, hi = i + max < lb ? i + max : lb;
		size_t prev, best;

		if (lo > hi)
			return inf;
		if (*budget < hi - lo + 1) {
			*budget = 0;
			return inf;
		}
		*budget -= hi - lo + 1;
		prev = row[lo - 1];
		/* column lo - 1 of this row lies outside the band unless it is 0 */
		row[lo - 1] = lo == 1 && i <= max ? i : inf;
		best = row[lo - 1];
		for (size_t j = lo; j <= hi; j++) {
			size_t cur = row[j];
			size_t sub = prev + (a[i - 1] != b[j - 1]);
			size_t del = cur + 1, ins = row[j - 1] + 1;
			size_t v = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);

			row[j] = v < inf ? v : inf;
			prev = cur;
			if (row[j] < best)
				best = row[j];
		}
		if (best > max)
			return inf;
	}
	return row[lb] <= max ? row[lb] : inf;
}

/* One unmatched pattern's search for similar names. */
struct suggester {
	char lit[SUGGEST_MAX_LEN + 1]; /* the pattern without wildcards */
	size_t lp, max;		       /* its length, the largest distance kept */
	int diff[256];		       /* its letter counts minus those of a tail */
	size_t budget;		       /* cells left (bounded_distance) */
};

static bool is_name_sep(char c)
{
	return c == '.' || c == '/' || c == ':';
}

/*
 * The distance from the pattern to the name or to any tail of it after a
 * '.', '/' or ':', so "ProcessPaymnt" finds "main.ProcessPayment" and
 * "total" finds "shop::Cart::total"; max + 1 when above max. The tails are
 * walked from the end, keeping the difference of letter counts between the
 * pattern and the tail: a distance is at least the larger of its positive and
 * negative sums, so most tails are ruled out in O(1), and the whole name in
 * O(length).
 */
static size_t name_distance(struct suggester *sg, const char *name)
{
	size_t ln = strlen(name), best = sg->max + 1, pos = sg->lp, neg = 0;

	for (size_t k = ln + 1; k-- > 0;) {
		size_t tl = ln - k;

		if ((!k || is_name_sep(name[k - 1])) && (pos > neg ? pos : neg) < best &&
		    (tl > sg->lp ? tl - sg->lp : sg->lp - tl) < best && sg->budget) {
			size_t d = bounded_distance(sg->lit, sg->lp, name + k, tl, best - 1,
						    &sg->budget);

			if (d < best)
				best = d;
		}
		if (k) {
			unsigned char c = name[k - 1];

			if (sg->diff[c]-- > 0)
				pos--;
			else
				neg++;
		}
	}
	for (size_t k = 0; k < ln; k++)
		sg->diff[(unsigned char)name[k]]++;
	return best;
}

/* The name to show for entry f: demangled when it was mangled. */
static const char *display_name(const struct fn_entry *f)
{
	return f->demangled ? f->demangled : f->name;
}

static void suggest(const struct binary *b, struct binary_unmatched *u)
{
	struct suggester sg = { .budget = SUGGEST_CELL_BUDGET };
	size_t dist[BINARY_MAX_SUGGESTIONS], fn[BINARY_MAX_SUGGESTIONS];

	for (const char *p = u->pattern; *p && sg.lp < SUGGEST_MAX_LEN; p++)
		if (*p != '*' && *p != '?' && *p != '\\')
			sg.lit[sg.lp++] = *p;
	for (size_t i = 0; i < sg.lp; i++)
		sg.diff[(unsigned char)sg.lit[i]]++;
	sg.max = sg.lp / 4 > 2 ? sg.lp / 4 : 2;
	for (size_t i = 0, d = 0; i < b->nkeys; i++) {
		const char *name = b->keys[i].name;
		size_t c = b->fns[b->keys[i].fn].canon, k;

		if (cancel__requested())
			return; /* the caller tells */
		/* a name shared by several functions (overloads) is measured once */
		if (!i || strcmp(name, b->keys[i - 1].name)) {
			/* past the budget only the linear substring test is left */
			d = name_distance(&sg, name);
			if (d > sg.max && sg.lp >= 4 && strcasestr(name, sg.lit))
				d = sg.max; /* a substring is a fair guess too */
		}
		if (d > sg.max || b->fns[c].dropped)
			continue;
		/* one function once, at its best distance (its names are several) */
		for (k = 0; k < u->nsuggestions && fn[k] != c; k++)
			;
		if (k < u->nsuggestions) {
			if (d >= dist[k])
				continue;
			memmove(&dist[k], &dist[k + 1], (u->nsuggestions - k - 1) * sizeof(*dist));
			memmove(&fn[k], &fn[k + 1], (u->nsuggestions - k - 1) * sizeof(*fn));
			memmove(&u->suggestions[k], &u->suggestions[k + 1],
				(u->nsuggestions - k - 1) * sizeof(*u->suggestions));
			u->nsuggestions--;
		}
		/* insertion into the best few, ordered by distance then key */
		k = u->nsuggestions;
		if (k == BINARY_MAX_SUGGESTIONS) {
			if (d >= dist[k - 1])
				continue;
			k--;
		} else {
			u->nsuggestions++;
		}
		while (k > 0 && dist[k - 1] > d) {
			dist[k] = dist[k - 1];
			fn[k] = fn[k - 1];
			u->suggestions[k] = u->suggestions[k - 1];
			k--;
		}
		dist[k] = d;
		fn[k] = c;
		u->suggestions[k] = display_name(&b->fns[c]);
	}
}

/* End of the run of entries sharing the name of entry i. */
static size_t same_name_end(const struct binary *b, size_t i)
{
	size_t j = i + 1;

	while (j < b->nfns && !strcmp(b->fns[j].name, b->fns[i].name))
		j++;
	return j;
}

/* In a Go binary, drops the ABI wrappers among the entries named as entry
 * j, once per name. The run of the name is found from j (a glob over every
 * name asks for each entry: a binary search each was 17 string compares). */
static void check_wrappers(struct binary *b, size_t j)
{
	size_t first = j, end;

	if (!b->pcln || b->fns[j].wrappers_checked)
		return;
	while (first > 0 && !strcmp(b->fns[first - 1].name, b->fns[j].name))
		first--;
	end = same_name_end(b, first);
	if (end - first > 1)
		drop_abi_wrappers(b, first, end);
	for (size_t i = first; i < end; i++)
		b->fns[i].wrappers_checked = true;
}

/* First key equal to name, or b->nkeys. */
static size_t key_lower_bound(const struct binary *b, const char *name)
{
	size_t lo = 0, hi = b->nkeys;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(b->keys[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static size_t key_run_end(const struct binary *b, size_t i)
{
	size_t j = i + 1;

	while (j < b->nkeys && !strcmp(b->keys[j].name, b->keys[i].name))
		j++;
	return j;
}

/* Lists the functions of the keys [first, end), Go ABI wrappers left out. */
static int add_keys(struct binary *b, struct binary_match *m, size_t first, size_t end, size_t *cap,
		    struct rw_error *err)
{
	int ret;

	for (size_t k = first; k < end; k++) {
		struct fn_entry *f = &b->fns[b->keys[k].fn];

		if (cancel__requested())
			return cancelled(b, err);
		check_wrappers(b, b->keys[k].fn);
		if (f->dropped || b->fns[f->canon].ifunc)
			continue;
		ret = add_match(b, m, f, cap);
		if (ret == -ECANCELED)
			return cancelled(b, err);
		if (ret)
			return rw_error_set(err, -ret, "out of memory");
	}
	return 0;
}

/* ---- IFUNCs ---- */

#define IFUNC_MAX_IMPLS 8

/* A symbol's name at exactly addr, or NULL. */
static const char *sym_name_at(const struct binary *b, uint64_t addr)
{
	const struct elfbin_sym *s = sym_exactly_at(b, addr);

	return s ? s->name : NULL;
}

/*
 * The code an IFUNC's resolver can return: x86-64 resolvers load each
 * candidate's address with a RIP-relative LEA (REX.W 8D /r, mod 00, rm 101)
 * and return one. A byte scan is enough: it only names candidates in a
 * message (no probe goes there), and a target must lie in executable code
 * outside the resolver. Distinct targets in the order found, at most max.
 */
static size_t ifunc_impls(const struct binary *b, const struct fn_entry *f, uint64_t *out,
			  size_t max)
{
	uint8_t buf[MAX_WRAPPER_SIZE * 2];
	size_t len = f->size < sizeof(buf) ? f->size : sizeof(buf), n = 0;

	if (len < 7 || elfbin__read(b->eb, f->addr, buf, len))
		return 0;
	for (size_t k = 0; k + 7 <= len && n < max; k++) {
		uint64_t target;
		int32_t rel;
		bool seen = false;

		if ((buf[k] & 0xfb) != 0x48 || buf[k + 1] != 0x8d || (buf[k + 2] & 0xc7) != 0x05)
			continue;
		memcpy(&rel, buf + k + 3, 4);
		target = f->addr + k + 7 + (int64_t)rel;
		if ((target >= f->addr && target < f->addr + f->size) ||
		    !elfbin__is_code(b->eb, target, 1))
			continue;
		for (size_t i = 0; i < n; i++)
			seen |= out[i] == target;
		if (!seen)
			out[n++] = target;
	}
	return n;
}

/*
 * A name whose symbol is an IFUNC is refused: the code there is the
 * resolver, run once per process by the dynamic linker, while calls go
 * straight to the implementation it chose. Say so and name what to trace.
 */
static int ifunc_refuse(const struct binary *b, const char *pat, const struct fn_entry *f,
			struct rw_error *err)
{
	uint64_t impl[IFUNC_MAX_IMPLS];
	size_t n = ifunc_impls(b, &b->fns[f->canon], impl, IFUNC_MAX_IMPLS), named = 0, unnamed = 0;
	char names[320] = "", addrs[160] = "";

	for (size_t i = 0; i < n; i++) {
		const char *name = sym_name_at(b, impl[i]);
		char *dst;
		size_t cap, used;

		/* memcpy@GLIBC_2.2.5 is a candidate of memcpy@@GLIBC_2.14: the
		 * name is refused, so it is no name to trace */
		if (name && (!strcmp(name, pat) || !strcmp(name, f->name)))
			name = NULL;
		dst = name ? names : addrs;
		cap = name ? sizeof(names) : sizeof(addrs);
		used = strlen(dst);
		if (name)
			snprintf(dst + used, cap - used, "%s%s", named++ ? ", " : "", name);
		else
			snprintf(dst + used, cap - used, "%s0x%" PRIx64, unnamed++ ? ", " : "",
				 impl[i]);
	}
	if (named)
		return rw_error_set(
			err, EINVAL,
			"'%s' is an IFUNC in %s: the code at its symbol is a resolver the dynamic linker runs once to pick an implementation for the CPU, and calls go to that implementation; trace the implementations instead: %s",
			pat, b->path, names);
	return rw_error_set(
		err, EINVAL,
		"'%s' is an IFUNC in %s: the code at its symbol is a resolver the dynamic linker runs once to pick an implementation for the CPU, and calls go to that implementation; %s%s%s",
		pat, b->path,
		unnamed ? "its implementations have no symbols in this file, at "
			: "no implementation could be named",
		addrs,
		unnamed ? ": trace the functions that call it, or use a build with symbols" : "");
}

/* How many functions (one per address, wrappers left out) the keys
 * [first, end) add to the current count. */
static size_t count_keys(struct binary *b, size_t first, size_t end)
{
	size_t n = 0;

	for (size_t k = first; k < end; k++) {
		struct fn_entry *f = &b->fns[b->keys[k].fn], *c;

		check_wrappers(b, b->keys[k].fn);
		c = &b->fns[f->canon];
		if (f->dropped || c->ifunc || c->count_gen == b->count_gen)
			continue;
		c->count_gen = b->count_gen;
		n++;
	}
	return n;
}

/* A name past GLOB_MAX_NAME is found by its exact name only (binary.h). */
static bool glob_matches_key(const char *pat, const char *name)
{
	return strnlen(name, GLOB_MAX_NAME + 1) <= GLOB_MAX_NAME && glob_match(pat, name);
}

/*
 * A glob over every name, matched once a name (it costs the pattern's length
 * times the name's): the runs it matches are kept from the count for the
 * listing.
 */
static int match_glob(struct binary *b, const char *pat, size_t limit, struct binary_match *m,
		      size_t *cap, bool *ret_found, struct rw_error *err)
{
	size_t *runs = NULL, nruns = 0, runs_cap = 0, count = 0, end;
	int ret = 0;

	b->count_gen++;
	for (size_t i = 0; i < b->nkeys; i = end) {
		end = key_run_end(b, i);
		if (cancel__requested()) {
			ret = cancelled(b, err);
			goto out;
		}
		if (!glob_matches_key(pat, b->keys[i].name))
			continue;
		count += count_keys(b, i, end);
		/* past the limit only the count is wanted, for the message */
		if (count > limit)
			continue;
		if (nruns == runs_cap) {
			size_t ncap = runs_cap ? runs_cap * 2 : 16;
			void *p = reallocarray(runs, ncap, sizeof(*runs));

			if (!p) {
				ret = rw_error_set(err, ENOMEM, "out of memory");
				goto out;
			}
			runs = p;
			runs_cap = ncap;
		}
		runs[nruns++] = i;
	}
	if (count > limit) {
		ret = rw_error_set(
			err, E2BIG,
			"pattern '%s' matches %zu functions, more than the limit of %zu; narrow the pattern or raise the limit",
			pat, count, limit);
		goto out;
	}
	for (size_t r = 0; r < nruns && !ret; r++) {
		ret = add_keys(b, m, runs[r], key_run_end(b, runs[r]), cap, err);
		*ret_found = !ret;
	}
out:
	free(runs);
	return ret;
}

static int match_one(struct binary *b, const char *pat, size_t limit, struct binary_match *m,
		     size_t *cap, bool *ret_found, struct rw_error *err)
{
	size_t i = key_lower_bound(b, pat), count = 0, end;
	int ret;

	*ret_found = false;
	/* an exact name wins over reading it as a glob: main.(*Cart).Add */
	if (i < b->nkeys && !strcmp(b->keys[i].name, pat)) {
		end = key_run_end(b, i);
		for (size_t k = i; k < end; k++)
			if (b->fns[b->fns[b->keys[k].fn].canon].ifunc)
				return ifunc_refuse(b, pat, &b->fns[b->keys[k].fn], err);
		/* a name many functions share (static C functions, overloads) is bounded too */
		b->count_gen++;
		count = count_keys(b, i, end);
		if (count > limit)
			return rw_error_set(
				err, E2BIG,
				"name '%s' matches %zu functions, more than the limit of %zu; give a longer name (a C++ signature) or raise the limit",
				pat, count, limit);
		*ret_found = true;
		return add_keys(b, m, i, end, cap, err);
	}
	if (!glob_has_wildcards(pat))
		return 0;
	ret = glob_check(pat, err);
	if (ret)
		return ret;
	return match_glob(b, pat, limit, m, cap, ret_found, err);
}

static void memo_free(struct match_memo *mm)
{
	if (!mm)
		return;
	free(mm->key);
	binary_match__clear(&mm->m);
	free(mm->at);
	free(mm);
}

/* patterns and limit as one key; NULL when out of memory */
static char *memo_key(const char *const *patterns, size_t npatterns, size_t *ret_len)
{
	size_t len = 0;
	char *key;

	for (size_t i = 0; i < npatterns; i++)
		len += strlen(patterns[i]) + 1;
	key = malloc(len ? len : 1);
	if (!key)
		return NULL;
	*ret_len = 0;
	for (size_t i = 0; i < npatterns; i++) {
		size_t n = strlen(patterns[i]) + 1;

		memcpy(key + *ret_len, patterns[i], n);
		*ret_len += n;
	}
	return key;
}

/* The remembered answer for a key (memo_key), or NULL. */
static const struct match_memo *memo_find_key(const struct binary *b, const char *key, size_t len,
					      size_t npatterns, size_t limit)
{
	const struct match_memo *mm;

	for (mm = b->memo; mm; mm = mm->next)
		if (mm->limit == limit && mm->npatterns == npatterns && mm->key_len == len &&
		    !memcmp(mm->key, key, len))
			break;
	return mm;
}

/* The remembered answer for patterns and limit, or NULL. */
static const struct match_memo *memo_find(const struct binary *b, const char *const *patterns,
					  size_t npatterns, size_t limit)
{
	const struct match_memo *mm = NULL;
	size_t len;
	char *key = memo_key(patterns, npatterns, &len);

	if (key)
		mm = memo_find_key(b, key, len, npatterns, limit);
	free(key);
	return mm;
}

/* Keeps mm, latest first, and forgets the oldest past MEMO_MAX. */
static void memo_push(struct binary *b, struct match_memo *mm)
{
	struct match_memo **pp;
	size_t n = 1;

	mm->next = b->memo;
	b->memo = mm;
	for (pp = &mm->next; *pp && n < MEMO_MAX; pp = &(*pp)->next)
		n++;
	while (*pp) {
		struct match_memo *old = *pp;

		*pp = old->next;
		memo_free(old);
	}
}

/* A copy of the remembered answer, for patterns; false when there is none. */
static bool memo_get(const struct binary *b, const char *const *patterns, size_t npatterns,
		     size_t limit, struct binary_match *m)
{
	const struct match_memo *mm = memo_find(b, patterns, npatterns, limit);

	if (!mm)
		return false;
	memset(m, 0, sizeof(*m));
	m->funcs = calloc(mm->m.nfuncs + 1, sizeof(*m->funcs));
	m->unmatched = calloc(mm->m.nunmatched + 1, sizeof(*m->unmatched));
	if (!m->funcs || !m->unmatched) {
		binary_match__clear(m);
		return false;
	}
	if (mm->m.nfuncs)
		memcpy(m->funcs, mm->m.funcs, mm->m.nfuncs * sizeof(*m->funcs));
	m->nfuncs = mm->m.nfuncs;
	for (size_t k = 0; k < mm->m.nunmatched; k++) {
		m->unmatched[k] = mm->m.unmatched[k];
		m->unmatched[k].pattern = patterns[mm->at[k]];
	}
	m->nunmatched = mm->m.nunmatched;
	return true;
}

/* Remembers m, the answer for patterns; nothing when out of memory. */
static void memo_put(struct binary *b, const char *const *patterns, size_t npatterns, size_t limit,
		     const struct binary_match *m)
{
	struct match_memo *mm = calloc(1, sizeof(*mm));
	size_t k = 0;

	if (!mm)
		return;
	mm->key = memo_key(patterns, npatterns, &mm->key_len);
	mm->m.funcs = calloc(m->nfuncs + 1, sizeof(*mm->m.funcs));
	mm->m.unmatched = calloc(m->nunmatched + 1, sizeof(*mm->m.unmatched));
	mm->at = calloc(m->nunmatched + 1, sizeof(*mm->at));
	if (!mm->key || !mm->m.funcs || !mm->m.unmatched || !mm->at) {
		memo_free(mm);
		return;
	}
	mm->limit = limit;
	mm->npatterns = npatterns;
	if (m->nfuncs)
		memcpy(mm->m.funcs, m->funcs, m->nfuncs * sizeof(*m->funcs));
	mm->m.nfuncs = m->nfuncs;
	/* unmatched are in the patterns' order */
	for (size_t i = 0; i < npatterns && k < m->nunmatched; i++) {
		if (m->unmatched[k].pattern != patterns[i])
			continue;
		mm->m.unmatched[k] = m->unmatched[k];
		mm->m.unmatched[k].pattern = NULL;
		mm->at[k++] = i;
	}
	if (k != m->nunmatched) {
		memo_free(mm);
		return;
	}
	mm->m.nunmatched = k;
	memo_push(b, mm);
}

/* b's entry of the function another reading of the same file listed as fi. */
static struct fn_entry *entry_of(struct binary *b, const struct func_info *fi)
{
	for (size_t i = key_lower_bound(b, fi->name);
	     i < b->nkeys && !strcmp(b->keys[i].name, fi->name); i++) {
		struct fn_entry *f = &b->fns[b->fns[b->keys[i].fn].canon];

		if (f->addr == fi->address && !f->dropped)
			return f;
	}
	return NULL;
}

/* b's string for a suggestion another reading of the same file made. */
static const char *suggestion_of(const struct binary *b, const char *name)
{
	for (size_t i = key_lower_bound(b, name); i < b->nkeys && !strcmp(b->keys[i].name, name);
	     i++) {
		const char *d = display_name(&b->fns[b->fns[b->keys[i].fn].canon]);

		if (!strcmp(d, name))
			return d;
	}
	return NULL;
}

/* mm, an answer of another reading of the same file, as b's own; NULL when it cannot be. */
static struct match_memo *memo_translate(struct binary *b, const struct match_memo *from)
{
	struct match_memo *mm = calloc(1, sizeof(*mm));
	size_t cap = 0;

	if (!mm)
		return NULL;
	*mm = (struct match_memo){ .key_len = from->key_len,
				   .limit = from->limit,
				   .npatterns = from->npatterns };
	mm->key = malloc(from->key_len ? from->key_len : 1);
	mm->m.unmatched = calloc(from->m.nunmatched + 1, sizeof(*mm->m.unmatched));
	mm->at = calloc(from->m.nunmatched + 1, sizeof(*mm->at));
	if (!mm->key || !mm->m.unmatched || !mm->at)
		goto fail;
	memcpy(mm->key, from->key, from->key_len);
	/* the same functions, analysed here: bounded by the limit, as the match was */
	b->match_gen++;
	for (size_t i = 0; i < from->m.nfuncs; i++) {
		struct fn_entry *f = entry_of(b, from->m.funcs[i]);

		if (!f || add_match(b, &mm->m, f, &cap))
			goto fail;
	}
	if (mm->m.nfuncs != from->m.nfuncs)
		goto fail;
	for (size_t k = 0; k < from->m.nunmatched; k++) {
		struct binary_unmatched *u = &mm->m.unmatched[k];

		*u = from->m.unmatched[k];
		for (size_t s = 0; s < u->nsuggestions; s++)
			if (!(u->suggestions[s] = suggestion_of(b, u->suggestions[s])))
				goto fail;
		mm->at[k] = from->at[k];
	}
	mm->m.nunmatched = from->m.nunmatched;
	return mm;
fail:
	memo_free(mm);
	return NULL;
}

/*
 * Takes the answers another reading of the same file remembers (the
 * analyzer's, on its thread) as b's own, so that the attach finds them: the
 * matched functions are analysed here, the globs and suggestions are not
 * computed again. An answer b cannot take is left out: b matches it itself.
 */
static void memo_import(struct binary *b, const struct binary *from)
{
	const struct match_memo *list[MEMO_MAX];
	size_t n = 0;

	for (const struct match_memo *mm = from->memo; mm && n < MEMO_MAX; mm = mm->next)
		list[n++] = mm;
	/* oldest first, so that b's order is from's */
	while (n--) {
		struct match_memo *mm;

		if (memo_find_key(b, list[n]->key, list[n]->key_len, list[n]->npatterns,
				  list[n]->limit))
			continue;
		mm = memo_translate(b, list[n]);
		if (mm)
			memo_push(b, mm);
	}
}

static int match_uncached(struct binary *b, const char *const *patterns, size_t npatterns,
			  size_t limit, struct binary_match *m, struct rw_error *err);

int binary__match(struct binary *b, const char *const *patterns, size_t npatterns, size_t limit,
		  struct binary_match *m, struct rw_error *err)
{
	int ret;

	if (memo_get(b, patterns, npatterns, limit, m))
		return 0;
	ret = match_uncached(b, patterns, npatterns, limit, m, err);
	if (!ret)
		memo_put(b, patterns, npatterns, limit, m);
	return ret;
}

static int match_uncached(struct binary *b, const char *const *patterns, size_t npatterns,
			  size_t limit, struct binary_match *m, struct rw_error *err)
{
	size_t cap = 0;
	int ret = 0;

	memset(m, 0, sizeof(*m));
	b->match_gen++;
	m->unmatched = calloc(npatterns ? npatterns : 1, sizeof(*m->unmatched));
	if (!m->unmatched)
		return rw_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < npatterns; i++) {
		bool found;

		if (!*patterns[i]) {
			ret = rw_error_set(
				err, EINVAL,
				"empty function name; give a name or a glob such as 'main.*'");
			break;
		}
		const char *pat = patterns[i];

		/* "key·1" as the runtime prints it is "key.1" in the index */
		if (strstr(pat, "\xc2\xb7")) {
			pat = dot_name(b, pat);
			if (!pat) {
				ret = rw_error_set(err, ENOMEM, "out of memory");
				break;
			}
		}
		ret = match_one(b, pat, limit, m, &cap, &found, err);
		if (ret)
			break;
		if (!found) {
			struct binary_unmatched *u = &m->unmatched[m->nunmatched++];

			u->pattern = patterns[i];
			suggest(b, u);
			if (cancel__requested()) {
				ret = cancelled(b, err);
				break;
			}
		}
	}
	if (ret)
		binary_match__clear(m);
	return ret;
}

void binary_match__clear(struct binary_match *m)
{
	if (!m)
		return;
	free(m->funcs);
	free(m->unmatched);
	memset(m, 0, sizeof(*m));
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
		ret = analyzed(b, f);
		if (ret) {
			errno = -ret;
			return NULL;
		}
		return f->info;
	}
	/* a cold part of a function analysed so far, found from its FDE */
	if (cold_at(b, vaddr))
		return cold_at(b, vaddr)->f->info;
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
static bool addr_known(struct binary *b, uint64_t addr)
{
	if (!b->by_addr && build_addr_index(b))
		return true; /* out of memory: claim nothing */
	for (size_t i = ranges_after(b, addr); i-- > 0 && b->by_addr[i].max_hi > addr;)
		if (addr < b->by_addr[i].hi)
			return true;
	return cold_at(b, addr) != NULL;
}

/* Whether [lo, hi) overlaps a known function's range. */
static bool range_known(struct binary *b, uint64_t lo, uint64_t hi)
{
	size_t i;

	if (addr_known(b, lo))
		return true;
	i = ranges_after(b, lo);
	if (i < b->nby_addr && b->by_addr[i].lo < hi)
		return true;
	i = cold_after(b, lo);
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

/* ---- lifecycle and cache ---- */

static void binary_free(struct binary *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->nfns; i++) {
		analysis_free(&b->fns[i]);
		free(b->fns[i].extra);
	}
	for (size_t i = 0; i < b->nanon; i++) {
		analysis_free(b->anon[i]);
		free(b->anon[i]->extra);
		free(b->anon[i]);
	}
	free(b->anon);
	free(b->cold);
	free(b->fns);
	free(b->by_addr);
	while (b->memo) {
		struct match_memo *mm = b->memo;

		b->memo = mm->next;
		memo_free(mm);
	}
	free(b->keys);
	for (size_t i = 0; i < b->nnames; i++)
		free(b->names[i]);
	free(b->names);
	gopclntab__free(b->pcln);
	dwarfinfo__free(b->dwarf);
	elfbin__free(b->eb);
	free(b->go_version);
	free(b->path);
	free(b);
}

static bool same_file(const struct binary *b, const struct stat *st)
{
	return b->dev == st->st_dev && b->ino == st->st_ino && b->size == st->st_size &&
	       b->mtime.tv_sec == st->st_mtim.tv_sec && b->mtime.tv_nsec == st->st_mtim.tv_nsec &&
	       b->ctime.tv_sec == st->st_ctim.tv_sec && b->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

static void cache_evict(struct binary_cache *c)
{
	while (c->count > c->max) {
		struct binary **pp, **victim = NULL;

		for (pp = &c->head; *pp; pp = &(*pp)->next)
			if (!(*pp)->refs && (!victim || (*pp)->last_use < (*victim)->last_use))
				victim = pp;
		if (!victim)
			return; /* everything is in use */
		struct binary *v = *victim;

		*victim = v->next;
		c->count--;
		binary_free(v);
	}
}

/* What a path that is not a regular file names, for an error. */
static const char *file_kind(mode_t mode)
{
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISCHR(mode) || S_ISBLK(mode))
		return "a device";
	if (S_ISSOCK(mode))
		return "a socket";
	return "not a file";
}

struct binary *binary__open(struct binary_cache *cache, const char *path, struct rw_error *err)
{
	struct binary *b;
	struct stat st;
	int fd, ret;

	/* O_NONBLOCK: opening a FIFO for reading waits for a writer (for ever) */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		ret = errno;
		rw_error_set(err, ret, "failed to open %s: %s", path, strerror(ret));
		errno = ret;
		return NULL;
	}
	if (fstat(fd, &st)) {
		ret = errno;
		rw_error_set(err, ret, "failed to stat %s: %s", path, strerror(ret));
		close(fd);
		errno = ret;
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		rw_error_set(err, EINVAL,
			     "%s is not a regular file (%s): name an executable or library", path,
			     file_kind(st.st_mode));
		close(fd);
		errno = EINVAL;
		return NULL;
	}
	for (b = cache ? cache->head : NULL; b; b = b->next) {
		if (same_file(b, &st)) {
			close(fd);
			b->refs++;
			b->last_use = ++cache->clock;
			cache->hits++;
			return b;
		}
	}
	b = calloc(1, sizeof(*b));
	if (!b || !(b->path = strdup(path))) {
		free(b);
		close(fd);
		rw_error_set(err, ENOMEM, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	b->refs = 1;
	b->dev = st.st_dev;
	b->ino = st.st_ino;
	b->size = st.st_size;
	b->mtime = st.st_mtim;
	b->ctime = st.st_ctim;
	b->eb = elfbin__open_fd(fd, path, err);
	if (!b->eb) {
		ret = errno;
		binary_free(b);
		errno = ret;
		return NULL;
	}
	ret = build_index(b, err);
	if (ret) {
		binary_free(b);
		errno = -ret;
		return NULL;
	}
	if (cache) {
		b->cache = cache;
		b->next = cache->head;
		cache->head = b;
		cache->count++;
		cache->misses++;
		b->last_use = ++cache->clock;
		cache_evict(cache);
	}
	return b;
}

void binary__put(struct binary *b)
{
	if (!b)
		return;
	if (--b->refs > 0)
		return;
	if (!b->cache)
		binary_free(b);
	else
		cache_evict(b->cache);
}

struct binary_cache *binary_cache__new(size_t max_entries)
{
	struct binary_cache *c = calloc(1, sizeof(*c));

	if (c)
		c->max = max_entries ? max_entries : 1;
	return c;
}

void binary_cache__free(struct binary_cache *c)
{
	struct binary *b, *next;

	if (!c)
		return;
	for (b = c->head; b; b = next) {
		next = b->next;
		b->next = NULL;
		if (b->refs)
			b->cache = NULL; /* its holder frees it */
		else
			binary_free(b);
	}
	free(c);
}

bool binary_cache__has(const struct binary_cache *c, int fd)
{
	return binary_cache__answers(c, fd, NULL, 0, 0);
}

bool binary_cache__answers(const struct binary_cache *c, int fd, const char *const *patterns,
			   size_t npatterns, size_t limit)
{
	struct stat st;

	if (!c || fstat(fd, &st))
		return false;
	for (const struct binary *b = c->head; b; b = b->next)
		if (same_file(b, &st))
			return !npatterns || memo_find(b, patterns, npatterns, limit);
	return false;
}

void binary_cache__adopt(struct binary_cache *c, struct binary *b)
{
	struct stat st = { .st_dev = b->dev,
			   .st_ino = b->ino,
			   .st_size = b->size,
			   .st_mtim = b->mtime,
			   .st_ctim = b->ctime };

	for (struct binary *o = c->head; o; o = o->next) {
		if (same_file(o, &st)) {
			/* analysed twice: the first stays, with the second's answers */
			memo_import(o, b);
			binary__put(b);
			return;
		}
	}
	b->cache = c;
	b->next = c->head;
	c->head = b;
	c->count++;
	b->last_use = ++c->clock;
	b->refs--; /* the cache holds it now, unused */
	cache_evict(c);
}

void binary_cache__stats(const struct binary_cache *c, size_t *ret_hits, size_t *ret_misses)
{
	*ret_hits = c->hits;
	*ret_misses = c->misses;
}

const char *binary__path(const struct binary *b)
{
	return b->path;
}

const char *binary__go_version(const struct binary *b)
{
	return b->go_version;
}

const char *binary__build_id(const struct binary *b)
{
	return elfbin__build_id(b->eb);
}

bool binary__stripped(const struct binary *b)
{
	return !elfbin__has_symtab(b->eb);
}

bool binary__is_go(const struct binary *b)
{
	return b->pcln != NULL;
}

size_t binary__nfuncs(const struct binary *b)
{
	return b->ncanon;
}

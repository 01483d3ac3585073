// SPDX-License-Identifier: MIT
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>

#include "base/cancel.h"
#include "analysis/dwarfinfo.h"
#include "analysis/dwarfinfo_impl.h"
#include "analysis/elfimg.h"
#include "analysis/inlined.h"
#include "base/demangle.h"

/* Hostile DWARF can nest without end; real code is far shallower. */
#define MAX_DEPTH 32

const char *dwarfinfo__checked(const struct dwarfinfo *di, const char *s)
{
	for (size_t i = 0; s && i < di->nspans; i++) {
		const struct span *sp = &di->spans[i];

		if (s >= sp->p && s < sp->p + sp->n)
			return memchr(s, 0, sp->p + sp->n - s) ? s : NULL;
	}
	return NULL;
}

static void find_spans(struct dwarfinfo *di, Elf *elf)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return;
	while ((scn = elf_nextscn(elf, scn)) && di->nspans < MAX_SPANS) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = elf_safe_strptr(elf, shstrndx, sh.sh_name);
		if (!name || (strncmp(name, ".debug_", 7) && strncmp(name, ".zdebug_", 8)))
			continue;
		/* after dwarf_begin_elf(): the same (decompressed) buffer libdw reads */
		d = elf_getdata(scn, NULL);
		if (d && d->d_buf && d->d_size)
			di->spans[di->nspans++] = (struct span){ d->d_buf, d->d_size };
	}
}

static const char *func_name(const struct dwarfinfo *di, Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	const char *name;

	/* a C++ or Rust symbol is found by its linkage name, as in .symtab */
	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr)) {
		name = dwarfinfo__checked(di, dwarf_formstring(&attr));
		if (name && *name)
			return name;
	}
	name = dwarfinfo__checked(di, dwarf_diename(die));
	return name && *name ? name : NULL;
}

static int add_func(struct dwarfinfo *di, Dwarf_Die *die)
{
	struct dwarf_func f = { .name = func_name(di, die) };
	Dwarf_Addr base, lo, hi, entry;
	ptrdiff_t off = 0;
	bool have_entry;

	if (!f.name)
		return 0;
	have_entry = dwarf_entrypc(die, &entry) == 0;
	while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0 &&
	       f.nranges < DWARF_MAX_RANGES) {
		if (hi <= lo)
			continue;
		f.ranges[f.nranges++] = (struct addr_range){ lo, hi };
	}
	if (!f.nranges)
		return 0; /* a declaration or an inlined-only abstract instance */
	f.entry = have_entry ? entry : f.ranges[0].lo;
	for (size_t i = 1; i < f.nranges; i++) {
		if (f.entry >= f.ranges[i].lo && f.entry < f.ranges[i].hi) {
			struct addr_range t = f.ranges[0];

			f.ranges[0] = f.ranges[i];
			f.ranges[i] = t;
		}
	}
	if (di->nfuncs == di->cap) {
		size_t ncap = di->cap ? di->cap * 2 : 256;
		void *p = realloc(di->funcs, ncap * sizeof(*di->funcs));

		if (!p)
			return -ENOMEM;
		di->funcs = p;
		di->cap = ncap;
	}
	di->funcs[di->nfuncs++] = f;
	return 0;
}

static int walk(struct dwarfinfo *di, Dwarf_Die *parent, int depth)
{
	Dwarf_Die child;
	int err;

	if (depth > MAX_DEPTH || dwarf_child(parent, &child) != 0)
		return 0;
	do {
		/* a unit can hold millions of entries: asked at each, it is cheap */
		if (cancel__requested())
			return -ECANCELED;
		switch (dwarf_tag(&child)) {
		case DW_TAG_subprogram:
			err = add_func(di, &child);
			if (err)
				return err;
			break;
		case DW_TAG_namespace:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_module:
			err = walk(di, &child, depth + 1);
			if (err)
				return err;
			break;
		default: break;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return 0;
}

static int func_cmp(const void *a, const void *b)
{
	const struct dwarf_func *x = a, *y = b;

	return x->entry < y->entry ? -1 : x->entry > y->entry;
}

size_t dwarfinfo__bytes(const struct dwarfinfo *di)
{
	size_t n;

	if (!di)
		return 0;
	n = sizeof(*di) + di->cap * sizeof(*di->funcs);
	for (size_t i = 0; i < di->nspans; i++)
		n += di->spans[i].n;
	return n;
}

int dwarfinfo__open(Elf *elf, struct dwarfinfo **ret_di)
{
	struct dwarfinfo *di = calloc(1, sizeof(*di));

	if (!di)
		return -ENOMEM;
	di->dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
	if (!di->dw) {
		free(di);
		return -ENOENT;
	}
	find_spans(di, elf);
	*ret_di = di;
	return 0;
}

int dwarfinfo__load(Elf *elf, struct dwarfinfo **ret_di, struct rw_error *err)
{
	struct dwarfinfo *di;
	Dwarf_Off off = 0, next;
	size_t hsize;
	int ret = 0;

	di = calloc(1, sizeof(*di));
	if (!di)
		return rw_error_set(err, ENOMEM, "out of memory");
	di->dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
	if (!di->dw) {
		free(di);
		return -ENOENT;
	}
	find_spans(di, elf);
	while (dwarf_nextcu(di->dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;

		if (next <= off)
			break; /* a malformed unit length must not loop */
		if (dwarf_offdie(di->dw, off + hsize, &cu)) {
			ret = walk(di, &cu, 0);
			if (ret) {
				rw_error_set(err, -ret,
					     ret == -ECANCELED ? "reading DWARF was cancelled"
							       : "out of memory reading DWARF");
				break;
			}
		}
		off = next;
	}
	if (ret) {
		dwarfinfo__free(di);
		return ret;
	}
	if (di->nfuncs)
		qsort(di->funcs, di->nfuncs, sizeof(*di->funcs), func_cmp);
	*ret_di = di;
	return 0;
}

void dwarfinfo__free(struct dwarfinfo *di)
{
	if (!di)
		return;
	if (di->dw)
		dwarf_end(di->dw);
	free(di->funcs);
	free(di);
}

const struct dwarf_func *dwarfinfo__funcs(const struct dwarfinfo *di, size_t *ret_n)
{
	*ret_n = di->nfuncs;
	return di->funcs;
}

const struct dwarf_func *dwarfinfo__find_entry(const struct dwarfinfo *di, uint64_t entry)
{
	size_t lo = 0, hi = di->nfuncs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (di->funcs[mid].entry < entry)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < di->nfuncs && di->funcs[lo].entry == entry ? &di->funcs[lo] : NULL;
}

/* ---- inlined copies ---- */

/* Ranges of the function holding the copies, for the containment check. */
#define INL_OUTER_RANGES 64
/* Lexical blocks and inlined calls nest deeper than namespaces do. */
#define INL_MAX_DEPTH 64

struct inl_walk {
	const struct dwarfinfo *di;
	bool (*match)(const char *name, void *arg);
	void *arg;
	struct inl_list *out;
	size_t cap, steps;
	const char *outer;
	uint64_t entry;
	struct addr_range r[INL_OUTER_RANGES];
	size_t nr;
	bool r_all; /* every range of outer is in r */
	struct rw_error *err;
	char dem[DEMANGLE_MAX_OUT + 1]; /* the last name demangled */
};

static int inl_spend(struct inl_walk *w, size_t n)
{
	w->steps += n;
	if (w->steps > DWARF_INL_MAX_STEPS)
		return rw_error_set(
			w->err, EFBIG,
			"the DWARF of inlined calls takes more than %u steps to read (the limit)",
			DWARF_INL_MAX_STEPS);
	if (cancel__every(w->steps))
		return rw_error_set(w->err, ECANCELED, "reading DWARF was cancelled");
	return 0;
}

static int range_cmp(const void *a, const void *b)
{
	const struct addr_range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sets w's function to die when it has code (1), its name, entry and ranges; 0 when not. */
static int inl_outer(struct inl_walk *w, Dwarf_Die *die)
{
	Dwarf_Addr base, lo, hi, entry;
	ptrdiff_t off = 0;
	const char *name = func_name(w->di, die);
	int ret;

	w->nr = 0;
	w->r_all = true;
	while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
		ret = inl_spend(w, 1);
		if (ret)
			return ret;
		if (hi <= lo)
			continue;
		if (w->nr == INL_OUTER_RANGES) {
			w->r_all = false;
			break;
		}
		w->r[w->nr++] = (struct addr_range){ lo, hi };
	}
	if (!name || !w->nr)
		return 0;
	w->outer = name;
	w->entry = dwarf_entrypc(die, &entry) == 0 ? entry : w->r[0].lo;
	return 1;
}

static bool inl_inside(const struct inl_walk *w, uint64_t lo, uint64_t hi)
{
	for (size_t i = 0; i < w->nr; i++)
		if (w->r[i].lo <= lo && hi <= w->r[i].hi)
			return true;
	return !w->r_all;
}

/* The copy at die, of the function name, called from caller: its ranges, checked. */
static int inl_add(struct inl_walk *w, Dwarf_Die *die, const char *name, const char *caller,
		   unsigned int depth)
{
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;
	struct inl_copy *c;
	size_t i;
	int ret = inl_list__add(w->out, &w->cap, name, caller, w->outer, w->entry, depth, &i);

	if (ret)
		return rw_error_set(w->err, ENOMEM, "out of memory for the inlined copies");
	if (i == SIZE_MAX)
		return 0;
	c = &w->out->copies[i];
	while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
		ret = inl_spend(w, 1);
		if (ret)
			return ret;
		if (hi <= lo)
			continue;
		if (!inl_inside(w, lo, hi))
			return rw_error_set(
				w->err, EINVAL,
				"corrupted DWARF: the inlined copy of %s in %s has range 0x%llx-0x%llx, outside %s",
				name, w->outer, (unsigned long long)lo, (unsigned long long)hi,
				w->outer);
		ret = inl_copy__add_range(w->out, c, lo, hi);
		if (ret)
			return rw_error_set(
				w->err, -ret,
				ret == -E2BIG
					? "the inlined copies have more than %u ranges (the limit)"
					: "out of memory for the inlined copies (%u ranges at most)",
				INL_MAX_RANGES);
	}
	if (c->nranges > 1)
		qsort(c->ranges, c->nranges, sizeof(*c->ranges), range_cmp);
	for (size_t k = 1; k < c->nranges; k++)
		if (c->ranges[k].lo < c->ranges[k - 1].hi)
			return rw_error_set(
				w->err, EINVAL,
				"corrupted DWARF: the inlined copy of %s in %s has overlapping ranges at 0x%llx",
				name, w->outer, (unsigned long long)c->ranges[k].lo);
	return 0;
}

/*
 * The name a pattern gives an inlined function, when one does: its plain
 * name, its linkage name, or that demangled as inspect matches functions
 * ("shop::Cart::total", with or without parameters; Rust without the hash).
 */
static const char *inl_name(struct inl_walk *w, Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	const char *plain = NULL, *linkage = func_name(w->di, die);

	if (dwarf_attr_integrate(die, DW_AT_name, &attr))
		plain = dwarfinfo__checked(w->di, dwarf_formstring(&attr));
	if (plain && *plain && w->match(plain, w->arg))
		return plain;
	if (!linkage || linkage == plain)
		return NULL;
	if (w->match(linkage, w->arg))
		return linkage;
	/* a few microseconds each (demangle.h): counted as 64 steps */
	for (int params = 0; params < 2; params++)
		if (!inl_spend(w, 64) && demangle(linkage, params, w->dem, sizeof(w->dem)) &&
		    w->match(w->dem, w->arg))
			return w->dem;
	return NULL;
}

/*
 * The inlined calls under parent, inside function w->outer, whose code
 * belongs to caller. Namespaces and classes are walked for their functions,
 * functions and lexical blocks for their inlined calls.
 */
static int inl_walk(struct inl_walk *w, Dwarf_Die *parent, const char *caller, unsigned int inl,
		    int depth)
{
	Dwarf_Die child;
	const char *name;
	int ret = 0;

	if (depth > INL_MAX_DEPTH || dwarf_child(parent, &child) != 0)
		return 0;
	do {
		ret = inl_spend(w, 1);
		if (ret)
			return ret;
		switch (dwarf_tag(&child)) {
		case DW_TAG_subprogram:
			/* abstract instances and declarations hold no code; a
			 * function nested in one (GNU C) is left out */
			if (!caller)
				ret = inl_outer(w, &child);
			if (ret > 0) {
				size_t before = w->out->ntree;

				ret = inl_walk(w, &child, w->outer, 0, depth + 1);
				w->out->nfuncs += w->out->ntree > before;
			}
			break;
		case DW_TAG_inlined_subroutine:
			if (!caller)
				break; /* outside a function with code */
			w->out->ntree++;
			name = inl_name(w, &child);
			if (name)
				ret = inl_add(w, &child, name, caller, inl);
			if (!ret) {
				const char *self = func_name(w->di, &child);

				ret = inl_walk(w, &child, self ? self : "?", inl + 1, depth + 1);
			}
			break;
		case DW_TAG_lexical_block:
		case DW_TAG_try_block:
		case DW_TAG_catch_block:
			if (caller)
				ret = inl_walk(w, &child, caller, inl, depth + 1);
			break;
		case DW_TAG_namespace:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_module: ret = inl_walk(w, &child, NULL, 0, depth + 1); break;
		default: break;
		}
	} while (!ret && dwarf_siblingof(&child, &child) == 0);
	return ret;
}

int dwarfinfo__inlined(const struct dwarfinfo *di, bool (*match)(const char *name, void *arg),
		       void *arg, struct inl_list **ret_list, struct rw_error *err)
{
	struct inl_walk w = { .di = di, .match = match, .arg = arg, .err = err };
	Dwarf_Off off = 0, next;
	size_t hsize;
	int ret = 0;

	*ret_list = NULL;
	w.out = calloc(1, sizeof(*w.out));
	if (!w.out)
		return rw_error_set(err, ENOMEM, "out of memory for the inlined copies");
	while (!ret && dwarf_nextcu(di->dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;

		if (next <= off)
			break; /* a malformed unit length must not loop */
		if (dwarf_offdie(di->dw, off + hsize, &cu))
			ret = inl_walk(&w, &cu, NULL, 0, 0);
		off = next;
	}
	if (ret) {
		inl_list__free(w.out);
		return ret;
	}
	w.out->steps = w.steps;
	*ret_list = w.out;
	return 0;
}

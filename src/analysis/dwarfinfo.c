// SPDX-License-Identifier: MIT
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>

#include "base/cancel.h"
#include "analysis/dwarfinfo.h"
#include "analysis/elfimg.h"

/* Hostile DWARF can nest without end; real code is far shallower. */
#define MAX_DEPTH 32

#define MAX_SPANS 64

/* The bytes of a .debug_* section, as libdw reads them. */
struct span {
	const char *p;
	size_t n;
};

struct dwarfinfo {
	Dwarf *dw;
	struct span spans[MAX_SPANS];
	size_t nspans;
	struct dwarf_func *funcs;
	size_t nfuncs, cap;
};

/*
 * libdw returns a string of a hostile .debug_str without checking that it
 * ends inside the section: accept a name only when its terminator does.
 */
static const char *checked(const struct dwarfinfo *di, const char *s)
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
		name = checked(di, dwarf_formstring(&attr));
		if (name && *name)
			return name;
	}
	name = checked(di, dwarf_diename(die));
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

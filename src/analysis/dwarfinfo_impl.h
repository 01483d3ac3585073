/* SPDX-License-Identifier: MIT */
/* What the readers of DWARF in analysis/ share (dwarfinfo.c, params.c). */
#ifndef RETWATCH_DWARFINFO_IMPL_H
#define RETWATCH_DWARFINFO_IMPL_H

#include <elfutils/libdw.h>

#include "analysis/dwarfinfo.h"

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
 * ends inside the section: a name is accepted only when its terminator
 * does; else NULL.
 */
const char *dwarfinfo__checked(const struct dwarfinfo *di, const char *s);

#endif

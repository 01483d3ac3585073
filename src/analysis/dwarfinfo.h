/* SPDX-License-Identifier: MIT */
/*
 * Functions and their address ranges from DWARF (libdw). A C function that
 * the compiler split into a hot part and a .cold part has both ranges here,
 * which the symbol table cannot tell.
 */
#ifndef RETWATCH_DWARFINFO_H
#define RETWATCH_DWARFINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libelf.h>

#include "base/rwerr.h"

#define DWARF_MAX_RANGES 16

struct addr_range {
	uint64_t lo, hi; /* [lo, hi) */
};

struct dwarf_func {
	const char *name;
	uint64_t entry;
	struct addr_range ranges[DWARF_MAX_RANGES]; /* the range holding entry first */
	size_t nranges;
};

struct dwarfinfo;

/* 0, -ENOENT when the file has no DWARF, -EINVAL/-ENOMEM with a message. */
int dwarfinfo__load(Elf *elf, struct dwarfinfo **ret_di, struct rw_error *err);
/*
 * The file's DWARF without its function list (dwarfinfo__funcs is empty):
 * for params.h's lookups in a Go binary, whose DWARF is large. 0, -ENOENT
 * when the file has none, -ENOMEM.
 */
int dwarfinfo__open(Elf *elf, struct dwarfinfo **ret_di);
void dwarfinfo__free(struct dwarfinfo *di);
/* The memory di holds, as counted for the analysis cache's budget: the
 * debug sections libdw read (held until the end) and the functions. */
size_t dwarfinfo__bytes(const struct dwarfinfo *di);
/* Sorted by entry. */
const struct dwarf_func *dwarfinfo__funcs(const struct dwarfinfo *di, size_t *ret_n);
const struct dwarf_func *dwarfinfo__find_entry(const struct dwarfinfo *di, uint64_t entry);

/*
 * Work bound of dwarfinfo__inlined, in entries visited and ranges read: a
 * 50 MB unit of hostile DWARF must not stall the caller.
 */
#define DWARF_INL_MAX_STEPS (64u << 20)

struct inl_list;
/*
 * The inlined copies (inlined.h) of the functions match accepts (by name,
 * or by linkage name for C++ and Rust): every DW_TAG_inlined_subroutine of
 * every function with code, its caller (the function or copy it sits in)
 * and its ranges. A copy whose ranges overlap or lie outside the function
 * holding it is an error. 0, -EFBIG past DWARF_INL_MAX_STEPS, -EINVAL,
 * -ENOMEM, -ECANCELED, with a message in err.
 */
int dwarfinfo__inlined(const struct dwarfinfo *di, bool (*match)(const char *name, void *arg),
		       void *arg, struct inl_list **ret_list, struct rw_error *err);

#endif

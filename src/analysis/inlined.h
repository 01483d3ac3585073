/* SPDX-License-Identifier: MIT */
/*
 * Inlined copies of functions, as the readers find them: Go's inline tree
 * (goinline.h) and DWARF's inlined subroutines (dwarfinfo.h). A copy has no
 * entry instruction and no RET of its own: its code lies inside another
 * function's, in one or more ranges.
 */
#ifndef RETWATCH_INLINED_H
#define RETWATCH_INLINED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/dwarfinfo.h"

/* Copies listed at most: a glob over a big binary stops there (the count goes on). */
#define INL_MAX_COPIES 4096
/* Ranges of all the copies listed: a hostile table could make each of them
 * hold millions (a copy's code interleaved byte by byte with its caller's). */
#define INL_MAX_RANGES (1u << 20)

/* One call inlined somewhere: its code lies inside another function's. */
struct inl_copy {
	char *name;	      /* the function inlined */
	char *caller;	      /* the function whose call it replaced (maybe itself inlined) */
	char *outer;	      /* the function whose code holds it */
	uint64_t outer_entry; /* virtual address */
	unsigned int depth;   /* 0: inlined into outer itself; 1: into a copy inlined there... */
	struct addr_range *ranges; /* ascending, disjoint, inside outer; none: no code left */
	size_t nranges;
	struct inl_sites *sites; /* where it is probed (inlsites.h), once asked; else NULL */
};

struct inl_list {
	struct inl_copy *copies; /* in the order of the functions holding them */
	size_t ncopies;
	size_t nmatched; /* copies found; more than ncopies past INL_MAX_COPIES */
	size_t nfuncs;	 /* functions holding inlined calls */
	size_t ntree;	 /* inlined calls, all functions (matched or not) */
	size_t steps;	 /* work done, as the reader's budget counts it */
	size_t nranges;	 /* of all the copies, INL_MAX_RANGES at most */
};

struct inl_sites;

/* Which inlined functions to list, by name. */
typedef bool (*inl_match_fn)(const char *name, void *arg);

void inl_list__free(struct inl_list *l);

/* How many distinct callers (names) the copies have. */
size_t inl_list__ncallers(const struct inl_list *l);

/*
 * Appends a copy (strings copied, no ranges yet) to l, whose array holds
 * *cap; past INL_MAX_COPIES only l->nmatched counts it and *ret_i is
 * SIZE_MAX. 0 or -ENOMEM.
 */
int inl_list__add(struct inl_list *l, size_t *cap, const char *name, const char *caller,
		  const char *outer, uint64_t entry, unsigned int depth, size_t *ret_i);
/*
 * Adds [lo, hi) to the ranges of c, a copy of l, merged with the last one
 * when they touch. 0, -E2BIG past INL_MAX_RANGES in l, or -ENOMEM.
 */
int inl_copy__add_range(struct inl_list *l, struct inl_copy *c, uint64_t lo, uint64_t hi);

#endif

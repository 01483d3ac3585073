/* SPDX-License-Identifier: MIT */
/*
 * Where an inlined copy (inlined.h) can be probed. A copy has no entry
 * instruction and no RET: a call of it begins where control comes into its
 * code from the rest of the function holding it, and ends where control goes
 * out. Its ranges are taken as one span, first byte to last: compilers
 * schedule a few of the caller's instructions between a copy's own (a
 * register move), and those run inside the call. The sites are found from the
 * holding function's instructions, decoded in one linear sweep per range:
 *
 *   entries  targets of the edges (fall-through or direct jump) from outside
 *            the span into it, and the function's entry when the span holds it
 *   exits    targets of the edges from inside the span out of it
 *
 * An entry probe that fires while the copy is in flight on the same frame
 * is a loop inside the copy; an exit probe that fires with none in flight is
 * the caller's own code reached another way. Both are ignored in the kernel.
 * A call is keyed by its caller's stack pointer, so every site must run with
 * the same one: a dataflow over the function's edges from its entry tracks
 * the stack pointer's offset (pushes, pops, immediate adds and subtracts;
 * on AArch64 the loads and stores that write SP back, inlsites_a64.c).
 *
 * What cannot be decided is said (reason): a jump through a register inside
 * the copy (its exits are not known: the copy is counted at its entries
 * only), a jump through a register elsewhere in the function, a jump out of
 * the function or into the caller's code inside the span (not probed), a RET
 * inside the span, sites with different stack pointers, undecodable bytes.
 */
#ifndef RETWATCH_INLSITES_H
#define RETWATCH_INLSITES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/disasm.h"
#include "analysis/dwarfinfo.h"

/* Sites of one copy at most: entries and exits (each a uprobe). */
#define INLSITES_MAX 64
/* Instructions of the holding function decoded at most. */
#define INLSITES_MAX_INSNS (1u << 20)

enum inlsites_mode {
	INLSITES_TIMED,	     /* entries and exits: calls timed */
	INLSITES_ENTRY_ONLY, /* entries only: calls counted, not timed */
	INLSITES_NOT_PROBED, /* neither can be trusted */
};

struct inl_sites {
	enum inlsites_mode mode;
	uint64_t entries[INLSITES_MAX]; /* virtual addresses, ascending */
	size_t nentries;
	uint64_t exits[INLSITES_MAX];
	size_t nexits;
	int64_t sp;	  /* the stack pointer at every site, from the function's entry */
	char reason[160]; /* why not INLSITES_TIMED */
};

/* Whether the function at addr never returns (a panic, abort): a call to it is not followed. */
typedef bool (*inlsites_noreturn_fn)(uint64_t addr, void *arg);

/*
 * Finds the sites of a copy whose ranges (ascending) lie in the function
 * entered at entry, whose code (arch's) is outer (nouter ranges); noreturn
 * may be NULL. 0, or -ENOMEM.
 */
int inlsites__find(enum disasm_arch arch, const struct code_range *outer, size_t nouter,
		   uint64_t entry, const struct addr_range *ranges, size_t nranges,
		   inlsites_noreturn_fn noreturn, void *arg, struct inl_sites *ret);

#endif

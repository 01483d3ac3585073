/* SPDX-License-Identifier: MIT */
/*
 * Where a function's jumps through a register go, when they are switch
 * tables: what the entry site needs to know (entrysite.h), since a jump
 * that could land on an instruction the entry probe skips keeps the probe
 * at the first byte. Three forms are read, each from the instructions just
 * before the jump:
 *
 *   gcc, clang (PIC):  lea TABLE(%rip),%B; movslq (%B,%I,4),%R;
 *                      add %B,%R; jmp *%R       entries: int32, from TABLE
 *   Go:                lea TABLE(%rip),%B; jmp *(%B,%I,8)
 *                                               entries: addresses
 *   non-PIC:           jmp *TABLE(,%I,8)        entries: addresses
 *
 * The index's bound (a CMP and JA before) is not read: the table is read
 * from its first entry for as long as its entries land in the function's
 * ranges, which every case of a switch does, so a table is never read
 * short; reading on into other data that happens to land there only adds
 * targets. Any other jump through a register or memory (a tail call
 * through a function pointer, a table of another form) leaves the jumps
 * unknown. x86-64 only. The file is untrusted: every read is bounded.
 */
#ifndef RETWATCH_JUMPTABLE_H
#define RETWATCH_JUMPTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/disasm.h"

/* Entries read per table at most: a larger one leaves the jumps unknown. */
#define JUMPTABLE_MAX_ENTRIES 4096

/* Reads len bytes of the file at virtual address addr; 0, or nonzero when not there. */
typedef int (*jumptable_read_fn)(void *ctx, uint64_t addr, void *buf, size_t len);

struct jumptable {
	uint64_t *targets; /* every table's, unsorted, repeats kept */
	size_t ntargets;
	size_t njumps;	  /* the jumps through a register or memory found */
	size_t nresolved; /* of them, switch tables read */
	/* where the jumps of a table's form are, read or not (not hooks) */
	uint64_t *tables_at;
	size_t ntables_at;
};

/*
 * Sweeps ranges (ranges[0] the entry's) for jumps through a register or
 * memory and reads each one's switch table through read. 0 (ret->nresolved
 * < ret->njumps when some were not tables), or -ENOMEM. jumptable__clear
 * frees it either way.
 */
int jumptable__read(const struct code_range *ranges, size_t nranges, jumptable_read_fn read,
		    void *ctx, struct jumptable *ret);
void jumptable__clear(struct jumptable *jt);

#endif

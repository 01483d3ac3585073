/* SPDX-License-Identifier: MIT */
/*
 * What entrysite.c (x86-64) and entrysite_a64.c (AArch64) share. Internal
 * to the analysis.
 */
#ifndef RETWATCH_ENTRYSITE_IMPL_H
#define RETWATCH_ENTRYSITE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/disasm.h"

/* Instructions looked at: the entry run, and a Go stack check's block. */
#define ENTRYSITE_RUN_MAX_INSNS 32
#define ENTRYSITE_BLOCK_MAX_INSNS 48
/* The morestack blocks whose jump back to the entry is allowed. */
#define ENTRYSITE_MAX_BLOCKS 4

/*
 * Whether the function's jump j leaves a probe at site (an offset from
 * entry) passed once a call: it lands neither on an instruction the probe
 * skips nor on the probe, and on the entry only from one of the nback
 * morestack blocks' jumps back (at back).
 */
bool entrysite__jump_allowed(const struct disasm_jump *j, uint64_t entry, int64_t site,
			     const uint64_t *back, size_t nback);

#endif

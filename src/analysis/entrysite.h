/* SPDX-License-Identifier: MIT */
/*
 * Where a function's entry probe goes. A uprobe on an instruction the
 * kernel emulates (a PUSH of a register, a NOP, a relative JMP or Jcc, a
 * direct CALL: disasm__probe_kind) costs one trap; on any other the kernel
 * also steps the instruction out of line, a second trap. Many functions
 * begin with one of the others (Go's stack check, ENDBR64, a TEST, a MOV of
 * an argument) and reach one of these a few bytes on, by the branch or call
 * that ends the entry's straight run at the latest: the entry probe goes
 * there when every call passes it exactly once, with the entry's stack
 * pointer known there and its return address where it was (a CALL probed
 * pushes its own only after the programs ran). That holds when the
 * instructions skipped move RSP only by a known amount (SUB RSP, imm: the
 * probe adds it back), store nowhere in the return address's slot (a new
 * frame's slots, the red zone below it, an argument's spill above it, and
 * memory through other registers are all outside it), none of them branches
 * (but Go's stack check, whose block calls runtime.morestack and jumps back
 * to the entry before the probe: a stack growth's restart then reaches it
 * once) or may take long (REP MOVS), in Go none writes g (R14), no jump of
 * the function lands on one of them or on the probe, a CALL probed does not
 * go back to one of them, and each of the function's jumps through a
 * register is a switch table none of whose cases is one of them (any other
 * could land anywhere). Anything else keeps its probe at the first byte:
 * a leaf that loads and returns (`mov; ret`) has nothing emulated before its
 * RET, which this kernel steps, nor has a system call's wrapper before its
 * SYSCALL, which the call's duration must hold.
 */
#ifndef RETWATCH_ENTRYSITE_H
#define RETWATCH_ENTRYSITE_H

#include <stdbool.h>
#include <stdint.h>

#include "analysis/disasm.h"
#include "analysis/jumptable.h"

/* Whether addr is runtime.morestack or runtime.morestack_noctxt. */
typedef bool (*entrysite_morestack_fn)(void *ctx, uint64_t addr);

/*
 * The entry site of the function whose entry range is r (r->addr its entry),
 * swept into dis: an offset from the entry, 0 for the first byte. go: Go
 * code, whose stack check may be skipped (is_morestack tells its block).
 * jt: where its jumps through a register go (jumptable.h), when it has
 * any; NULL, or one not read, keeps such a function at the first byte.
 * *ret_sp: how far below the entry's the stack pointer is at the site (the
 * skipped instructions' SUB RSP), which the probe adds back; 0 at the first
 * byte.
 */
int64_t entrysite__choose(const struct code_range *r, const struct disasm_result *dis, bool go,
			  entrysite_morestack_fn is_morestack, void *ctx,
			  const struct jumptable *jt, uint32_t *ret_sp);

/* Every general-purpose register, for entrysite__clobbers. */
#define ENTRYSITE_ALL_GPRS 0xffffu

/*
 * The general-purpose registers the instructions from r's entry up to site
 * (excluded) write, any width of them: bit n for the 64-bit register whose
 * hardware number is n (0 RAX, 1 RCX, 2 RDX, 3 RBX, 4 RSP, 5 RBP, 6 RSI,
 * 7 RDI, 8-15 R8-R15). 0 when site is 0; every one when they do not decode
 * up to site.
 */
uint32_t entrysite__clobbers(const struct code_range *r, int64_t site);

/*
 * The same three for AArch64 code (entrysite_a64.c): the site is where the
 * arm64 kernel simulates the instruction (a branch, disasm__probe_kind_a64),
 * Go's stack check's B.cond or past it, with the stack pointer, X30 (the
 * return address) and (Go) X28 untouched before it; clobbers' bit n is Xn,
 * and ENTRYSITE_ALL_X every one.
 */
int64_t entrysite__choose_a64(const struct code_range *r, const struct disasm_result *dis, bool go,
			      entrysite_morestack_fn is_morestack, void *ctx);
#define ENTRYSITE_ALL_X 0x7fffffffu
uint32_t entrysite__clobbers_a64(const struct code_range *r, int64_t site);
bool entrysite__past_check_a64(const struct code_range *r, int64_t site,
			       entrysite_morestack_fn is_morestack, void *ctx);

/*
 * Whether Go's stack check lies before site (a Jcc to the function's
 * morestack block): then a call that grows its stack reaches the entry
 * probe once, after runtime.morestack, not before it and again after.
 */
bool entrysite__past_check(const struct code_range *r, int64_t site,
			   entrysite_morestack_fn is_morestack, void *ctx);

#endif

// SPDX-License-Identifier: MIT
/*
 * Where an AArch64 function's entry probe goes (entrysite.h says why, for
 * x86-64). The arm64 kernel simulates branches (B, B.cond, CBZ, TBZ, BL)
 * and steps anything else out of line, a second trap. Go's prologue loads
 * its stack guard and compares before its first branch, the stack check's
 * B.LS: the probe goes on that branch, or on an instruction the kernel
 * simulates a few words on, when every call passes it once with the
 * entry's registers where the programs read them. The return address is
 * in X30, not on the stack, so what the skipped instructions may not do is
 * write X30, the stack pointer, or (Go) X28, which holds g; they may be
 * none but a list of plain ones (below) read whole, none a branch but Go's
 * stack check, whose block calls runtime.morestack and branches back to
 * the entry.
 *
 * Encodings (Arm ARM, A64 base instructions), each with its destination in
 * bits 0-4 (31: XZR, or SP where the list says so):
 *   ADD, SUB (immediate)         s0o1 0001 0...        11000000  Rd 31 is SP unless S
 *   ADD, SUB (shifted register)  s0o0 1011 ..0.        0b000000
 *   ADD, SUB (extended register) s0o0 1011 ..1.        0b200000  Rd 31 is SP unless S
 *   AND, ORR, EOR (immediate)    soo1 0010 0...        12000000  Rd 31 is SP unless ANDS
 *   AND, ORR, EOR (shifted reg.) soo0 1010 ....        0a000000
 *   MOVN, MOVZ, MOVK             soo1 0010 1...        12800000
 *   ADR, ADRP                    p..1 0000 ....        10000000
 *   LDR, STR (unsigned offset)   ss11 1001 oo..        39000000  stores write nothing
 *   LDUR, STUR                   ss11 1000 oo0. ... 00 38000000
 *   STP (signed offset)          oo10 1001 00..        29000000
 */
#include <stddef.h>

#include "analysis/disasm_impl.h"
#include "analysis/entrysite.h"
#include "analysis/entrysite_impl.h"

#define A64_INSN 4u
/* A destination that is no register written. */
#define NO_REG 31u

static uint32_t word_at(const struct code_range *r, uint64_t addr, bool *ok)
{
	*ok = addr >= r->addr && addr - r->addr + A64_INSN <= r->len;
	return *ok ? disasm_a64__word(r->bytes + (addr - r->addr)) : 0;
}

/*
 * Whether w is one of the plain instructions above, with the register it
 * writes in *ret_rd (NO_REG for none); false for anything else, and for
 * one of them that writes the stack pointer.
 */
static bool plain(uint32_t w, uint32_t *ret_rd)
{
	uint32_t rd = w & 31, opc = (w >> 22) & 3, size = w >> 30;
	bool s = w & (1U << 29);

	*ret_rd = rd;
	if ((w & 0x1f800000) == 0x11000000 || (w & 0x1f200000) == 0x0b200000)
		return rd != 31 || s; /* ADD/SUB immediate, extended: Rd 31 is SP */
	if ((w & 0x1f800000) == 0x12000000)
		return rd != 31 || ((w >> 29) & 3) == 3; /* logical immediate: ANDS writes XZR */
	if ((w & 0x1f200000) == 0x0b000000 || (w & 0x1f000000) == 0x0a000000 ||
	    (w & 0x1f800000) == 0x12800000 || (w & 0x1f000000) == 0x10000000)
		return true;
	if ((w & 0x3f000000) == 0x39000000 || (w & 0x3f200c00) == 0x38000000) {
		if (opc == 0) { /* a store */
			*ret_rd = NO_REG;
			return true;
		}
		if (size == 3 && opc == 2) { /* PRFM, PRFUM */
			*ret_rd = NO_REG;
			return true;
		}
		return !(size == 3 && opc == 3); /* unallocated */
	}
	if ((w & 0x3fc00000) == 0x29000000 && size != 3) { /* STP, no writeback */
		*ret_rd = NO_REG;
		return true;
	}
	return false;
}

/* Whether a plain instruction's destination is one the skipped ones may write. */
static bool may_write(uint32_t rd, bool go)
{
	return rd != 30 && !(go && rd == 28);
}

/*
 * Whether w, in a morestack block, neither branches nor traps: a spill or
 * reload of an argument (of any register file), a move.
 */
static bool spills(uint32_t w)
{
	int64_t rel;
	enum a64_kind k = disasm_a64__classify(w, &rel);

	return (k == A64_OTHER || k == A64_LDR_LIT) && (w & 0x7c000000) != 0x14000000 &&
	       (w & 0xff000000) != 0xd4000000 && (w & 0xfe000000) != 0xd6000000;
}

/*
 * Whether the code at block is a Go morestack block: a BL to
 * runtime.morestack (plain instructions around it spill and reload the
 * arguments), then a B back to the entry, whose address is *ret_jump.
 */
static bool morestack_block(const struct code_range *r, uint64_t block,
			    entrysite_morestack_fn is_morestack, void *ctx, uint64_t *ret_jump)
{
	uint64_t addr = block;
	bool called = false, ok;
	int64_t rel;

	for (int n = 0; n < ENTRYSITE_BLOCK_MAX_INSNS; n++, addr += A64_INSN) {
		uint32_t w = word_at(r, addr, &ok);

		if (!ok)
			return false;
		if (!called && disasm_a64__is_bl(w)) {
			rel = disasm_a64__bl_rel(w);
			called = is_morestack && is_morestack(ctx, addr + (uint64_t)rel);
			if (!called)
				return false;
			continue;
		}
		if (called && disasm_a64__classify(w, &rel) == A64_B &&
		    addr + (uint64_t)rel == r->addr) {
			*ret_jump = addr;
			return true;
		}
		if (!spills(w))
			return false;
	}
	return false;
}

/* Whether the word at addr is Go's stack check: a conditional branch to a morestack block. */
static bool stack_check(const struct code_range *r, uint64_t addr, uint32_t w,
			entrysite_morestack_fn is_morestack, void *ctx, uint64_t *ret_back)
{
	int64_t rel;

	return disasm_a64__classify(w, &rel) == A64_BCOND &&
	       morestack_block(r, addr + (uint64_t)rel, is_morestack, ctx, ret_back);
}

int64_t entrysite__choose_a64(const struct code_range *r, const struct disasm_result *dis, bool go,
			      entrysite_morestack_fn is_morestack, void *ctx)
{
	uint64_t addr = r->addr, back[ENTRYSITE_MAX_BLOCKS];
	int64_t site = -1, check = -1, rel;
	enum disasm_probe_kind kind;
	size_t nback = 0;
	uint32_t w, rd;
	bool ok;

	/* a jump through a register could land on a skipped instruction */
	if (!r->bytes || dis->undecodable || dis->over_budget || dis->nindirect_jumps)
		return 0;
	for (int n = 0; n < ENTRYSITE_RUN_MAX_INSNS && addr - r->addr < DISASM_ENTRY_RUN;
	     n++, addr += A64_INSN) {
		w = word_at(r, addr, &ok);
		if (!ok)
			break;
		if (go && nback < ENTRYSITE_MAX_BLOCKS &&
		    stack_check(r, addr, w, is_morestack, ctx, &back[nback])) {
			if (check < 0)
				check = (int64_t)(addr - r->addr);
			nback++;
			continue;
		}
		kind = disasm__probe_kind_a64(r->bytes + (addr - r->addr), A64_INSN);
		/* a BL probed must not come back to an instruction it skips */
		if (kind == DISASM_PROBE_CALL) {
			rel = disasm_a64__bl_rel(w);
			if (addr + (uint64_t)rel > r->addr && addr + (uint64_t)rel <= addr)
				return 0;
		}
		if (kind != DISASM_PROBE_STEPPED) {
			site = (int64_t)(addr - r->addr);
			break;
		}
		if (!plain(w, &rd) || !may_write(rd, go))
			break;
	}
	if (site < 0)
		site = check;
	if (site <= 0)
		return 0;
	for (size_t k = 0; k < dis->nentry_jumps; k++)
		if (!entrysite__jump_allowed(&dis->entry_jumps[k], r->addr, site, back, nback))
			return 0;
	return site;
}

uint32_t entrysite__clobbers_a64(const struct code_range *r, int64_t site)
{
	uint32_t ret = 0, w, rd;
	int64_t rel;
	bool ok;

	if (site <= 0)
		return 0;
	if (!r->bytes || site % A64_INSN)
		return ENTRYSITE_ALL_X;
	for (uint64_t addr = r->addr; addr - r->addr < (uint64_t)site; addr += A64_INSN) {
		w = word_at(r, addr, &ok);
		if (!ok)
			return ENTRYSITE_ALL_X;
		/* the stack check, passed: it writes no register */
		if (disasm_a64__classify(w, &rel) == A64_BCOND)
			continue;
		if (!plain(w, &rd))
			return ENTRYSITE_ALL_X;
		if (rd != NO_REG)
			ret |= 1U << rd;
	}
	return ret;
}

bool entrysite__past_check_a64(const struct code_range *r, int64_t site,
			       entrysite_morestack_fn is_morestack, void *ctx)
{
	uint64_t back;
	uint32_t w;
	bool ok;

	for (uint64_t addr = r->addr; site > 0 && r->bytes && addr - r->addr < (uint64_t)site;
	     addr += A64_INSN) {
		w = word_at(r, addr, &ok);
		if (ok && stack_check(r, addr, w, is_morestack, ctx, &back))
			return true;
	}
	return false;
}

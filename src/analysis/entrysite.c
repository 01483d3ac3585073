// SPDX-License-Identifier: MIT
#include <stddef.h>

#include <Zydis/Zydis.h>

#include "analysis/entrysite.h"
#include "analysis/entrysite_impl.h"

struct insn {
	ZydisDecodedInstruction i;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	uint64_t addr;
};

/* The instruction at addr, inside r; false when it is not there or does not decode. */
static bool decode(const ZydisDecoder *d, const struct code_range *r, uint64_t addr,
		   struct insn *ret)
{
	if (addr < r->addr || addr - r->addr >= r->len)
		return false;
	ret->addr = addr;
	return ZYAN_SUCCESS(ZydisDecoderDecodeFull(d, r->bytes + (addr - r->addr),
						   r->len - (addr - r->addr), &ret->i, ret->ops));
}

/* Whether it may change where the code goes: a branch, a call, a RET, a trap. */
static bool transfers(const struct insn *x)
{
	switch (x->i.meta.category) {
	case ZYDIS_CATEGORY_COND_BR:
	case ZYDIS_CATEGORY_UNCOND_BR:
	case ZYDIS_CATEGORY_CALL:
	case ZYDIS_CATEGORY_RET:
	case ZYDIS_CATEGORY_SYSCALL:
	case ZYDIS_CATEGORY_SYSRET:
	case ZYDIS_CATEGORY_INTERRUPT:
	case ZYDIS_CATEGORY_SYSTEM: return true;
	default: break;
	}
	switch (x->i.mnemonic) {
	case ZYDIS_MNEMONIC_UD0:
	case ZYDIS_MNEMONIC_UD1:
	case ZYDIS_MNEMONIC_UD2:
	case ZYDIS_MNEMONIC_HLT: return true;
	default: return x->i.meta.branch_type != ZYDIS_BRANCH_TYPE_NONE;
	}
}

/*
 * Whether it may take long enough to matter to a call's duration, which
 * begins at the site: a repeated string instruction (REP MOVS copies any
 * length), port I/O, a serializing or waiting one. The run ends before it.
 */
static bool takes_long(const struct insn *x)
{
	if (x->i.attributes &
	    (ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE | ZYDIS_ATTRIB_HAS_REPNE))
		return true;
	switch (x->i.meta.category) {
	case ZYDIS_CATEGORY_IO:
	case ZYDIS_CATEGORY_IOSTRINGOP:
	case ZYDIS_CATEGORY_SERIALIZE:
	case ZYDIS_CATEGORY_WAITPKG: return true;
	default: return x->i.mnemonic == ZYDIS_MNEMONIC_CPUID;
	}
}

/* Whether r is RSP, at any width. */
static bool is_sp(ZydisRegister r)
{
	return ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r) ==
	       ZYDIS_REGISTER_RSP;
}

/*
 * The stack pointer through the entry run: how far below the entry's it
 * is (SUB RSP, imm makes a frame without a PUSH: printf's `sub $0xd8,%rsp`
 * before it spills its arguments), so that a store can be placed against
 * the return address and the site's probe can find the entry's stack
 * pointer again (func_info.entry_sp).
 */
#define SP_MAX (1 << 20)

/*
 * What x does to the stack pointer, applied to *sp: true for none, or for
 * SUB/ADD RSP, imm and LEA RSP, [RSP + disp], which leave it a known
 * distance below the entry's; false for anything else that writes it (POP,
 * AND RSP, -16, a MOV to it, LEAVE: the entry's is not known from it).
 */
static bool moves_sp(const struct insn *x, int64_t *sp)
{
	const ZydisDecodedOperand *o = x->ops;
	int64_t by;
	bool writes = false;

	for (uint8_t k = 0; k < x->i.operand_count; k++)
		writes |= (x->ops[k].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
			  x->ops[k].type == ZYDIS_OPERAND_TYPE_REGISTER &&
			  is_sp(x->ops[k].reg.value);
	if (!writes)
		return true;
	if (x->i.operand_count_visible != 2 || o[0].type != ZYDIS_OPERAND_TYPE_REGISTER ||
	    o[0].reg.value != ZYDIS_REGISTER_RSP)
		return false;
	if ((x->i.mnemonic == ZYDIS_MNEMONIC_SUB || x->i.mnemonic == ZYDIS_MNEMONIC_ADD) &&
	    o[1].type == ZYDIS_OPERAND_TYPE_IMMEDIATE)
		by = x->i.mnemonic == ZYDIS_MNEMONIC_SUB ? o[1].imm.value.s : -o[1].imm.value.s;
	else if (x->i.mnemonic == ZYDIS_MNEMONIC_LEA && o[1].type == ZYDIS_OPERAND_TYPE_MEMORY &&
		 o[1].mem.base == ZYDIS_REGISTER_RSP && o[1].mem.index == ZYDIS_REGISTER_NONE)
		by = -o[1].mem.disp.value;
	else
		return false;
	if (by <= -SP_MAX || by >= SP_MAX || *sp + by < 0 || *sp + by >= SP_MAX)
		return false;
	*sp += by;
	return true;
}

/*
 * Whether a store through op, with the stack pointer sp bytes below the
 * entry's, leaves the return address ([entry RSP, +8)) as it was, which is
 * all the probe reads of the stack (the in-flight key's tail-call and
 * morestack checks). Through RSP (the base, no index, the stack segment,
 * 64-bit addressing) it is known: a slot of the new frame or below it, or
 * one above the return address (an argument's spill, Go's and C's stack
 * arguments). A store through RSP any other way is taken to reach it.
 * Through any other register (a pointer argument, RIP, TLS) it is not the
 * function's own return address: no compiler's code writes that slot but
 * through RSP, and code that did would only mislead its own probe.
 * What a store overwrites, an argument passed on the stack, is as the site
 * sees it: the arguments are read there with the DWARF of the site's address.
 */
static bool store_keeps_return(const struct insn *x, const ZydisDecodedOperand *op, int64_t sp)
{
	int64_t at;

	if (!is_sp(op->mem.base) && !is_sp(op->mem.index))
		return true;
	if (op->mem.base != ZYDIS_REGISTER_RSP || op->mem.index != ZYDIS_REGISTER_NONE ||
	    op->mem.segment != ZYDIS_REGISTER_SS || x->i.address_width != 64 || !op->size)
		return false;
	at = op->mem.disp.value - sp; /* from the entry's stack pointer */
	return at >= 8 || at + op->size / 8 <= 0;
}

/*
 * Whether x leaves what the probe reads as the entry left it: the stack
 * pointer, moved a known distance (*sp), and the return address; and in
 * Go code g, in R14.
 */
static bool keeps_entry(const struct insn *x, int64_t *sp, bool go)
{
	for (uint8_t k = 0; k < x->i.operand_count; k++) {
		const ZydisDecodedOperand *op = &x->ops[k];

		if (!(op->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
			continue;
		if (op->type == ZYDIS_OPERAND_TYPE_MEMORY && !store_keeps_return(x, op, *sp))
			return false;
		if (go && op->type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, op->reg.value) ==
			    ZYDIS_REGISTER_R14)
			return false;
	}
	return moves_sp(x, sp);
}

/* The general-purpose registers x writes, a bit each (entrysite__clobbers). */
static uint32_t gprs_written(const struct insn *x)
{
	uint32_t ret = 0;

	for (uint8_t k = 0; k < x->i.operand_count; k++) {
		const ZydisDecodedOperand *op = &x->ops[k];
		ZydisRegister r;

		if (!(op->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) ||
		    op->type != ZYDIS_OPERAND_TYPE_REGISTER)
			continue;
		r = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, op->reg.value);
		/* Zydis orders RAX..R15 as the hardware encodes them */
		if (r >= ZYDIS_REGISTER_RAX && r <= ZYDIS_REGISTER_R15)
			ret |= 1u << (r - ZYDIS_REGISTER_RAX);
	}
	return ret;
}

/* Where a relative branch goes; false for any other. */
static bool branch_target(const struct insn *x, uint64_t *ret)
{
	ZyanU64 t;

	if (!x->i.operand_count_visible || x->ops[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE ||
	    !x->ops[0].imm.is_relative ||
	    !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&x->i, &x->ops[0], x->addr, &t)))
		return false;
	*ret = t;
	return true;
}

/*
 * Whether the Go stack check's branch to block leads through runtime.morestack
 * back to the entry: stores (argument spills) and other plain instructions,
 * a call of runtime.morestack*, loads, and a JMP to the entry, at *ret_jump.
 */
static bool morestack_block(const ZydisDecoder *d, const struct code_range *r, uint64_t block,
			    entrysite_morestack_fn is_morestack, void *ctx, uint64_t *ret_jump)
{
	uint64_t addr = block, to;
	bool called = false;
	struct insn x;

	for (int n = 0; n < ENTRYSITE_BLOCK_MAX_INSNS && decode(d, r, addr, &x);
	     n++, addr += x.i.length) {
		if (!transfers(&x))
			continue;
		if (!called && x.i.meta.category == ZYDIS_CATEGORY_CALL && branch_target(&x, &to) &&
		    is_morestack && is_morestack(ctx, to)) {
			called = true;
			continue;
		}
		if (called && x.i.meta.category == ZYDIS_CATEGORY_UNCOND_BR &&
		    branch_target(&x, &to) && to == r->addr) {
			*ret_jump = x.addr;
			return true;
		}
		return false;
	}
	return false;
}

/*
 * Whether the CALL x, the site, goes where the probe is not passed again
 * at its stack pointer: not onto an instruction it skips nor onto itself
 * (the entry is a call of the function, as any other).
 */
static bool call_leaves_run(const struct insn *x, uint64_t entry)
{
	uint64_t to;

	return branch_target(x, &to) && (to <= entry || to > x->addr);
}

bool entrysite__jump_allowed(const struct disasm_jump *j, uint64_t entry, int64_t site,
			     const uint64_t *back, size_t nback)
{
	if (j->to > entry && j->to - entry <= (uint64_t)site)
		return false; /* lands on an instruction the probe skips */
	if (j->to != entry)
		return true;
	for (size_t k = 0; k < nback; k++)
		if (j->from == back[k])
			return true;
	return false; /* a loop back to the entry would pass the probe again */
}

/* Whether every jump of the function through a register is a switch table read whole. */
static bool tables_known(const struct disasm_result *dis, const struct jumptable *jt)
{
	return !dis->nindirect_jumps ||
	       (jt && jt->njumps == dis->nindirect_jumps && jt->nresolved == jt->njumps);
}

int64_t entrysite__choose(const struct code_range *r, const struct disasm_result *dis, bool go,
			  entrysite_morestack_fn is_morestack, void *ctx,
			  const struct jumptable *jt, uint32_t *ret_sp)
{
	uint64_t addr = r->addr, back[ENTRYSITE_MAX_BLOCKS], to;
	size_t nback = 0;
	/* the stack check's branch, where nothing after it fits (Go before
	 * 1.21 makes its frame with SUB, no PUSH, and may reach no emulated
	 * instruction after it): a restart passes it twice, taken for one
	 * call as at the first byte (runtime.morestack's probe) */
	int64_t site = -1, check = -1, sp = 0, sp_site = 0, sp_check = 0;
	enum disasm_probe_kind kind;
	ZydisDecoder d;
	struct insn x;

	*ret_sp = 0;
	if (!r->bytes || dis->undecodable || dis->over_budget || !tables_known(dis, jt) ||
	    !ZYAN_SUCCESS(ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)))
		return 0;
	for (int n = 0; n < ENTRYSITE_RUN_MAX_INSNS && addr - r->addr < DISASM_ENTRY_RUN &&
			decode(&d, r, addr, &x);
	     n++, addr += x.i.length) {
		/* Go's stack check: a Jcc to its morestack block */
		if (go && x.i.meta.category == ZYDIS_CATEGORY_COND_BR &&
		    nback < ENTRYSITE_MAX_BLOCKS && branch_target(&x, &to) &&
		    morestack_block(&d, r, to, is_morestack, ctx, &back[nback])) {
			if (check < 0 &&
			    disasm__probe_kind(r->bytes + (addr - r->addr),
					       r->len - (addr - r->addr)) == DISASM_PROBE_JUMP) {
				check = (int64_t)(addr - r->addr);
				sp_check = sp;
			}
			nback++;
			continue;
		}
		kind = disasm__probe_kind(r->bytes + (addr - r->addr), r->len - (addr - r->addr));
		if (kind == DISASM_PROBE_CALL && !call_leaves_run(&x, r->addr))
			return 0;
		if (kind != DISASM_PROBE_STEPPED) {
			site = (int64_t)(addr - r->addr);
			sp_site = sp;
			break;
		}
		if (transfers(&x) || takes_long(&x) || !keeps_entry(&x, &sp, go))
			break;
	}
	if (site < 0) {
		site = check;
		sp_site = sp_check;
	}
	if (site <= 0 || site >= DISASM_ENTRY_RUN)
		return 0;
	for (size_t k = 0; k < dis->nentry_jumps; k++)
		if (!entrysite__jump_allowed(&dis->entry_jumps[k], r->addr, site, back, nback))
			return 0;
	for (size_t k = 0; dis->nindirect_jumps && k < jt->ntargets; k++)
		if (!entrysite__jump_allowed(&(struct disasm_jump){ 0, jt->targets[k] }, r->addr,
					     site, back, 0))
			return 0;
	*ret_sp = (uint32_t)sp_site;
	return site;
}

uint32_t entrysite__clobbers(const struct code_range *r, int64_t site)
{
	uint64_t addr = r->addr;
	uint32_t ret = 0;
	ZydisDecoder d;
	struct insn x;

	if (site <= 0)
		return 0;
	if (!r->bytes ||
	    !ZYAN_SUCCESS(ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)))
		return ENTRYSITE_ALL_GPRS;
	while (addr - r->addr < (uint64_t)site) {
		if (!decode(&d, r, addr, &x))
			return ENTRYSITE_ALL_GPRS;
		ret |= gprs_written(&x);
		addr += x.i.length;
	}
	/* the site must begin where an instruction ends, as entrysite__choose walked */
	return addr - r->addr == (uint64_t)site ? ret : ENTRYSITE_ALL_GPRS;
}

bool entrysite__past_check(const struct code_range *r, int64_t site,
			   entrysite_morestack_fn is_morestack, void *ctx)
{
	uint64_t addr = r->addr, to, back;
	ZydisDecoder d;
	struct insn x;

	if (site <= 0 || !r->bytes ||
	    !ZYAN_SUCCESS(ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)))
		return false;
	while (addr - r->addr < (uint64_t)site && decode(&d, r, addr, &x)) {
		if (x.i.meta.category == ZYDIS_CATEGORY_COND_BR && branch_target(&x, &to) &&
		    morestack_block(&d, r, to, is_morestack, ctx, &back))
			return true;
		addr += x.i.length;
	}
	return false;
}

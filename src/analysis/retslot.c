// SPDX-License-Identifier: MIT
/*
 * Whether a function's own code reaches its return slot, the word at the
 * stack pointer of its entry that holds its return address: a POP of it
 * (vfork keeps it in a register across the system call), a read or write
 * of it (__builtin_return_address in a leaf), or its address taken. Where
 * the kernel's return trampoline is used, that word is the trampoline's
 * address while the call runs, and such code would see it (disasm.h).
 *
 * A linear sweep of the function's x86-64 code, decoded in full by Zydis,
 * keeps how far below the entry's the stack pointer is (PUSH, POP, SUB and
 * ADD of an immediate, a frame pointer made with `mov %rsp,%rbp` and
 * undone by LEAVE or `mov %rbp,%rsp`); after a RET or a JMP it is known
 * again only at a branch target whose depth a jump seen before gave. An
 * access through RSP, or a POP, where the depth is not known is taken for
 * one that reaches the slot: the answer errs towards yes, which only keeps
 * the RET probes. Run only on the functions that call nothing (few, and
 * small), so decoding them in full costs little.
 */
#include <stdbool.h>
#include <stdint.h>

#include <Zydis/Zydis.h>

#include "analysis/disasm.h"

/* Branch targets remembered with their depth; past them, a target's depth is not known. */
#define RETSLOT_TARGETS 64

struct retslot_target {
	uint64_t addr;
	int64_t depth;
};

struct retslot {
	int64_t depth; /* bytes below the entry's SP */
	bool known;
	int64_t fp; /* RBP is the entry's SP less fp */
	bool fp_known;
	struct retslot_target targets[RETSLOT_TARGETS];
	size_t ntargets;
};

static void note_target(struct retslot *s, uint64_t addr)
{
	if (s->known && s->ntargets < RETSLOT_TARGETS)
		s->targets[s->ntargets++] = (struct retslot_target){ addr, s->depth };
}

/* At addr: its depth, when a jump seen before goes there; false when it disagrees. */
static bool at_target(struct retslot *s, uint64_t addr)
{
	for (size_t i = 0; i < s->ntargets; i++) {
		if (s->targets[i].addr != addr)
			continue;
		if (s->known && s->depth != s->targets[i].depth)
			return false;
		s->depth = s->targets[i].depth;
		s->known = true;
	}
	return true;
}

static bool is_sp(ZydisRegister r)
{
	return ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r) ==
	       ZYDIS_REGISTER_RSP;
}

static bool is_bp(ZydisRegister r)
{
	return ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r) ==
	       ZYDIS_REGISTER_RBP;
}

/* Whether [base + disp, + size) holds the return slot, the base slot bytes below it. */
static bool covers(int64_t slot, int64_t disp, int64_t size, bool lea)
{
	if (lea)
		return disp == slot;
	return disp <= slot && slot < disp + (size > 0 ? size : 8);
}

/* Whether an explicit memory operand of insn reaches the return slot. */
static bool memory_reaches(const struct retslot *s, const ZydisDecodedInstruction *insn,
			   const ZydisDecodedOperand *op)
{
	bool lea = insn->mnemonic == ZYDIS_MNEMONIC_LEA;
	int64_t size = op->size / 8;

	if (is_sp(op->mem.base) || is_sp(op->mem.index))
		return !s->known || op->mem.index != ZYDIS_REGISTER_NONE ||
		       covers(s->depth, op->mem.disp.value, size, lea);
	if (is_bp(op->mem.base) && s->fp_known)
		return op->mem.index != ZYDIS_REGISTER_NONE ||
		       covers(s->fp, op->mem.disp.value, size, lea);
	return false;
}

/* The source operand's immediate, when insn's second operand is one. */
static bool imm_of(const ZydisDecodedInstruction *insn, const ZydisDecodedOperand *ops,
		   int64_t *ret)
{
	if (insn->operand_count_visible < 2 || ops[1].type != ZYDIS_OPERAND_TYPE_IMMEDIATE)
		return false;
	*ret = ops[1].imm.is_signed ? ops[1].imm.value.s : (int64_t)ops[1].imm.value.u;
	return true;
}

/* Follows an instruction's moves of RSP and RBP; false where it reaches the slot. */
static bool step_stack(struct retslot *s, const ZydisDecodedInstruction *insn,
		       const ZydisDecodedOperand *ops)
{
	bool dst_sp = insn->operand_count_visible && ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		      is_sp(ops[0].reg.value);
	int64_t imm;

	switch (insn->mnemonic) {
	case ZYDIS_MNEMONIC_PUSH: s->depth += 8; return true;
	case ZYDIS_MNEMONIC_POP:
		if (!s->known || s->depth < 8)
			return false; /* pops the return address, or may */
		s->depth -= 8;
		if (ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER && is_bp(ops[0].reg.value))
			s->fp_known = false;
		return true;
	case ZYDIS_MNEMONIC_LEAVE:
		s->known = s->fp_known && s->fp >= 8;
		s->depth = s->fp - 8;
		s->fp_known = false;
		return true;
	case ZYDIS_MNEMONIC_SUB:
	case ZYDIS_MNEMONIC_ADD:
		if (dst_sp && imm_of(insn, ops, &imm))
			s->depth += insn->mnemonic == ZYDIS_MNEMONIC_SUB ? imm : -imm;
		else if (dst_sp)
			s->known = false;
		return !s->known || s->depth >= 0;
	case ZYDIS_MNEMONIC_MOV:
		if (ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER && is_bp(ops[0].reg.value)) {
			s->fp_known = s->known && ops[1].type == ZYDIS_OPERAND_TYPE_REGISTER &&
				      is_sp(ops[1].reg.value);
			s->fp = s->depth;
		} else if (dst_sp) {
			s->known = s->fp_known && ops[1].type == ZYDIS_OPERAND_TYPE_REGISTER &&
				   is_bp(ops[1].reg.value);
			s->depth = s->fp;
		}
		return true;
	default:
		if (dst_sp && (ops[0].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
			s->known = false; /* AND for alignment, or any other */
		else if (insn->operand_count_visible &&
			 ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER && is_bp(ops[0].reg.value) &&
			 (ops[0].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
			s->fp_known = false;
		return true;
	}
}

/* Follows one instruction at addr; false where it reaches the slot. */
static bool step(struct retslot *s, uint64_t addr, const ZydisDecodedInstruction *insn,
		 const ZydisDecodedOperand *ops)
{
	ZyanU64 target;

	for (size_t i = 0; i < insn->operand_count_visible; i++)
		if (ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY && memory_reaches(s, insn, &ops[i]))
			return false;
	if (insn->meta.category == ZYDIS_CATEGORY_COND_BR ||
	    insn->meta.category == ZYDIS_CATEGORY_UNCOND_BR) {
		if (ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
		    ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(insn, &ops[0], addr, &target)))
			note_target(s, target);
		if (insn->meta.category == ZYDIS_CATEGORY_UNCOND_BR)
			s->known = false;
		return true;
	}
	if (insn->mnemonic == ZYDIS_MNEMONIC_RET) {
		bool at_entry = !s->known || s->depth == 0;

		s->known = false;
		return at_entry; /* a RET elsewhere: the depth was followed wrong */
	}
	return step_stack(s, insn, ops);
}

bool disasm__return_slot_used(const struct code_range *ranges, size_t nranges)
{
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	ZydisDecodedInstruction insn;
	struct retslot s = { .known = true };
	ZydisDecoder dec;

	if (!ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)))
		return true;
	for (size_t r = 0; r < nranges; r++) {
		const struct code_range *cr = &ranges[r];

		if (!cr->bytes)
			return true;
		if (r > 0)
			s.known = false; /* a cold part: reached by a jump */
		for (size_t off = 0; off < cr->len; off += insn.length) {
			if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, cr->bytes + off,
								 cr->len - off, &insn, ops)) ||
			    !at_target(&s, cr->addr + off) || !step(&s, cr->addr + off, &insn, ops))
				return true;
		}
	}
	return false;
}

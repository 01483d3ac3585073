// SPDX-License-Identifier: MIT
/*
 * One AArch64 instruction as the sweep for inlined copies' sites sees it
 * (inlsites.h): where control goes, and what it does to SP. Branches are
 * disasm_a64's; the stack pointer moves by (Arm ARM, A64 base encodings):
 *
 *   ADD, SUB (immediate)       sfo0 1000 10sh imm12 Rn Rd   91000000, d1000000
 *       Rd SP and Rn SP: by imm12 (<< 12 when sh); Rd SP from another register: unknown
 *   ADD, SUB (extended)        sfo0 1011 001. ...           Rd SP: unknown
 *   AND, ORR, EOR (immediate)  sfoo 1001 00.. ...           Rd SP: unknown
 *   LDR, STR (pre-, post-index) ss11 1v00 oo0 imm9 p1 Rn Rt  Rn SP: by imm9
 *   LDP, STP (pre-, post-index) oo10 1v0p 1L imm7 Rt2 Rn Rt  Rn SP: by imm7 x size
 *
 * Go's frame is made by a pre-indexed STR of X30 and unmade by an ADD (or a
 * post-indexed LDR); C's by a pre-indexed STP and a post-indexed LDP.
 */
#include "analysis/disasm_impl.h"
#include "analysis/inlsites_impl.h"

#define SP 31u

/* What w does to SP: a change by a known amount, or SP_UNKNOWN. */
static int64_t sp_delta(uint32_t w)
{
	uint32_t rd = w & 31, rn = (w >> 5) & 31, opc = w >> 30;
	int64_t imm;

	if ((w & 0x1f800000) == 0x11000000 && !(w & (1U << 29))) { /* ADD/SUB imm, not S */
		if (rd != SP)
			return 0;
		if (rn != SP || !(w >> 31))
			return SP_UNKNOWN; /* MOV SP, Xn; a 32-bit SP */
		imm = (int64_t)((w >> 10) & 0xfff) << ((w >> 22) & 1 ? 12 : 0);
		return (w >> 30) & 1 ? -imm : imm;
	}
	if ((w & 0x1fe00000) == 0x0b200000 && !(w & (1U << 29)))
		return rd == SP ? SP_UNKNOWN : 0; /* ADD/SUB extended */
	if ((w & 0x1f800000) == 0x12000000 && ((w >> 29) & 3) != 3)
		return rd == SP ? SP_UNKNOWN : 0; /* AND/ORR/EOR immediate, not ANDS */
	if ((w & 0x3b200400) == 0x38000400)	  /* LDR/STR pre- or post-index */
		return rn == SP ? disasm_a64__sext((w >> 12) & 0x1ff, 9) : 0;
	if ((w & 0x3a800000) == 0x28800000) { /* LDP/STP pre- or post-index */
		unsigned int size = w & (1U << 26) ? 4u << opc : (opc == 2 ? 8u : 4u);

		return rn == SP ? disasm_a64__sext((w >> 15) & 0x7f, 7) * (int64_t)size : 0;
	}
	return 0;
}

void inlsites__step_a64(uint32_t w, uint64_t addr, struct inl_step *ret)
{
	int64_t rel;

	*ret = (struct inl_step){ .flow = FLOW_NEXT, .sp_delta = sp_delta(w) };
	switch (disasm_a64__classify(w, &rel)) {
	case A64_RET: ret->flow = FLOW_RET; return;
	case A64_BR: ret->flow = FLOW_JMP_REG; return;
	case A64_B:
		ret->flow = FLOW_JMP;
		ret->target = addr + (uint64_t)rel;
		return;
	case A64_BCOND:
		ret->flow = FLOW_JCC;
		ret->target = addr + (uint64_t)rel;
		return;
	default: break;
	}
	if (disasm_a64__is_bl(w)) {
		ret->call = ret->call_known = true;
		ret->target = addr + (uint64_t)disasm_a64__bl_rel(w);
	} else if ((w & 0xfffffc1f) == 0xd63f0000 || (w & 0xfffff81f) == 0xd63f081f ||
		   (w & 0xfffff800) == 0xd73f0800) { /* BLR and its authenticated forms */
		ret->call = true;
	} else if ((w & 0xffe0001f) == 0xd4200000 || (w & 0xffe0001f) == 0xd4400000 ||
		   (w >> 16) == 0) { /* BRK, HLT, UDF */
		ret->flow = FLOW_STOP;
	}
}

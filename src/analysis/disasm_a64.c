// SPDX-License-Identifier: MIT
/*
 * The exits of an AArch64 function. Every instruction is one aligned 32-bit
 * word, so a sweep cannot fall out of step the way an x86 one can: the only
 * hazard is data among the instructions. gcc and clang keep constants out
 * of .text on AArch64; Go's assembler puts a literal pool after an
 * unconditional branch, read by LDR (literal). The words those loads name
 * are data: they are skipped, never taken for a RET (a probe written over a
 * constant would change the traced program's numbers).
 *
 * Encodings (Arm ARM, A64 base instructions):
 *   RET Xn          1101 0110 0101 1111 0000 00nn nnn0 0000   d65f0000 | n << 5
 *   RETAA, RETAB    d65f0bff, d65f0fff (pointer authentication)
 *   BR Xn           d61f0000 | n << 5
 *   BRAAZ, BRABZ    d61f081f, d61f0c1f | n << 5;  BRAA, BRAB  d71f0800 | ...
 *   B imm26         0001 01ii ...                 14000000
 *   B.cond, BC.cond 0101 0100 i{19} 0 cccc / 1    54000000
 *   CBZ, CBNZ       s011 010o i{19} ttttt         34000000
 *   TBZ, TBNZ       b011 011o bbbb b i{14} ttttt  36000000
 *   LDR (literal)   oo01 1v00 i{19} ttttt         18000000: oo 00 W/S, 01 X/D,
 *                                                  10 LDRSW/Q, 11 PRFM
 */
#include <errno.h>
#include <stdlib.h>

#include "base/cancel.h"
#include "analysis/disasm_impl.h"

#define A64_INSN 4u

int64_t disasm_a64__sext(uint32_t v, unsigned int bits)
{
	uint32_t m = 1U << (bits - 1);

	return (int64_t)(int32_t)((v ^ m) - m);
}

uint32_t disasm_a64__word(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int64_t disasm_a64__bl_rel(uint32_t w)
{
	return disasm_a64__sext(w & 0x3ffffff, 26) * A64_INSN;
}

enum a64_kind disasm_a64__classify(uint32_t w, int64_t *ret_rel)
{
	*ret_rel = 0;
	if ((w & 0xfffffc1f) == 0xd65f0000 || w == 0xd65f0bff || w == 0xd65f0fff)
		return A64_RET;
	if ((w & 0xfffffc1f) == 0xd61f0000 || (w & 0xfffff81f) == 0xd61f081f ||
	    (w & 0xfffff800) == 0xd71f0800)
		return A64_BR;
	if ((w & 0xfc000000) == 0x14000000) {
		*ret_rel = disasm_a64__bl_rel(w);
		return A64_B;
	}
	if ((w & 0xff000000) == 0x54000000 || (w & 0x7e000000) == 0x34000000) {
		*ret_rel = disasm_a64__sext((w >> 5) & 0x7ffff, 19) * A64_INSN;
		return A64_BCOND;
	}
	if ((w & 0x7e000000) == 0x36000000) {
		*ret_rel = disasm_a64__sext((w >> 5) & 0x3fff, 14) * A64_INSN;
		return A64_BCOND;
	}
	if ((w & 0x3b000000) == 0x18000000 && (w >> 30) != 3) {
		*ret_rel = disasm_a64__sext((w >> 5) & 0x7ffff, 19) * A64_INSN;
		return A64_LDR_LIT;
	}
	return A64_OTHER;
}

enum disasm_probe_kind disasm__probe_kind_a64(const uint8_t *code, size_t len)
{
	int64_t rel;
	uint32_t w;

	if (len < A64_INSN)
		return DISASM_PROBE_STEPPED;
	w = disasm_a64__word(code);
	if ((w & 0xffc07fff) == 0xa9807bfd) /* STP X29, X30, [SP, #-n]! */
		return DISASM_PROBE_PUSH;
	if (w == 0xd503201f)
		return DISASM_PROBE_NOP;
	if ((w & 0xfffff01f) == 0xd503201f) /* HINT #n */
		return DISASM_PROBE_NOP5;
	if (disasm_a64__is_bl(w))
		return DISASM_PROBE_CALL;
	switch (disasm_a64__classify(w, &rel)) {
	case A64_B:
	case A64_BCOND: return DISASM_PROBE_JUMP;
	default: return DISASM_PROBE_STEPPED;
	}
}

/* Bytes an LDR (literal) reads: 4 (W, S, LDRSW), 8 (X, D) or 16 (Q). */
static unsigned int literal_size(uint32_t w)
{
	unsigned int opc = w >> 30;
	bool simd = w & (1U << 26);

	if (opc == 1)
		return 8;
	if (opc == 2 && simd)
		return 16;
	return 4;
}

int disasm_a64__mark_pool(const struct code_range *r, uint8_t **ret_data)
{
	size_t nwords = r->len / A64_INSN;
	/* whole words only: a range's tail of 1 to 3 bytes holds no instruction */
	uint64_t end = (uint64_t)nwords * A64_INSN;

	*ret_data = NULL;
	for (size_t i = 0; i < nwords; i++) {
		uint32_t w = disasm_a64__word(r->bytes + i * A64_INSN);
		uint64_t addr = r->addr + i * A64_INSN, target;
		int64_t rel;

		if (disasm_a64__classify(w, &rel) != A64_LDR_LIT)
			continue;
		target = addr + (uint64_t)rel;
		if (target < r->addr || target - r->addr >= end)
			continue;
		if (!*ret_data && !(*ret_data = calloc(nwords, 1)))
			return -ENOMEM;
		for (uint64_t o = target - r->addr;
		     o < target - r->addr + literal_size(w) && o < end; o += A64_INSN)
			(*ret_data)[o / A64_INSN] = 1;
	}
	return 0;
}

int disasm_a64__scan_range(const struct code_range *ranges, size_t nranges, size_t idx,
			   uint64_t entry, struct disasm_result *res)
{
	const struct code_range *r = &ranges[idx];
	uint8_t *data;
	int err;

	if (r->addr % A64_INSN || r->len % A64_INSN)
		return disasm__set_bad(res, r->addr, entry,
				       "a range not made of aligned 4-byte instructions");
	err = disasm_a64__mark_pool(r, &data);
	for (size_t off = 0; !err && !res->over_budget && off < r->len; off += A64_INSN) {
		uint32_t w = disasm_a64__word(r->bytes + off);
		uint64_t addr = r->addr + off, target;
		enum a64_kind k;
		int64_t rel;

		if (cancel__every(res->ninsns)) {
			err = -ECANCELED;
			break;
		}
		if (data && data[off / A64_INSN])
			continue;
		res->ninsns++;
		k = disasm_a64__classify(w, &rel);
		target = addr + (uint64_t)rel;
		if (k == A64_RET && res->nreturns == DISASM_MAX_RETURNS) {
			err = disasm__over_budget(
				res, "more than %d return sites (the limit per function)",
				DISASM_MAX_RETURNS);
		} else if (k == A64_RET) {
			err = disasm__push(&res->returns, &res->nreturns, (int64_t)(addr - entry));
		} else if ((k == A64_B || k == A64_BCOND) &&
			   !disasm__in_ranges(ranges, nranges, target)) {
			err = disasm__push_u64(&res->tail_targets, res->ntail_calls, target)
				      ?: disasm__push(&res->tail_calls, &res->ntail_calls,
						      (int64_t)(addr - entry));
		} else if (k == A64_BR) {
			res->nindirect_jumps++;
		} else if (k == A64_B || k == A64_BCOND) {
			err = disasm__note_entry_jump(res, entry, addr, target);
		}
		/* the zero words Go pads a function with end no code */
		if (idx == 0 && w)
			res->code_end = addr + A64_INSN;
	}
	free(data);
	return err;
}

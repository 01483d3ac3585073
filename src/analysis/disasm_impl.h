/* SPDX-License-Identifier: MIT */
/*
 * What disasm.c (the sweep, x86-64) and disasm_a64.c (AArch64) share: the
 * result's arrays and reasons. Internal to the analysis.
 */
#ifndef RETWATCH_DISASM_IMPL_H
#define RETWATCH_DISASM_IMPL_H

#include "analysis/disasm.h"

int disasm__push(int64_t **arr, size_t *n, int64_t v);
/* Stores v at arr[n], growing as disasm__push does (n is the count before). */
int disasm__push_u64(uint64_t **arr, size_t n, uint64_t v);
bool disasm__in_ranges(const struct code_range *ranges, size_t n, uint64_t addr);
/* Notes a direct jump inside the function when it lands near the entry. */
int disasm__note_entry_jump(struct disasm_result *res, uint64_t entry, uint64_t from, uint64_t to);
/* A budget ran out: no site of the function is trusted to be complete. 0 or -ENOMEM. */
int disasm__over_budget(struct disasm_result *res, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The sweep cannot go on at addr (what says why): the function is entry-only. */
int disasm__set_bad(struct disasm_result *res, uint64_t addr, uint64_t entry, const char *what);

/* One AArch64 instruction word as the sweep sees it. */
enum a64_kind {
	A64_OTHER,
	A64_RET,     /* RET, RETAA, RETAB */
	A64_BR,	     /* BR and its authenticated forms: a switch or a tail call via register */
	A64_B,	     /* B: *ret_rel from the instruction */
	A64_BCOND,   /* B.cond, BC.cond, CBZ, CBNZ, TBZ, TBNZ */
	A64_LDR_LIT, /* LDR (literal): *ret_rel to the data it reads */
};

enum a64_kind disasm_a64__classify(uint32_t w, int64_t *ret_rel);
/* Whether w is a BL (its offset: disasm_a64__bl_rel). */
static inline bool disasm_a64__is_bl(uint32_t w)
{
	return (w & 0xfc000000) == 0x94000000;
}
/* v's low bits bits as a signed number (an immediate field). */
int64_t disasm_a64__sext(uint32_t v, unsigned int bits);
/* The little-endian instruction word at p. */
uint32_t disasm_a64__word(const uint8_t *p);
/* The offset a B or BL (imm26) branches by, from the instruction. */
int64_t disasm_a64__bl_rel(uint32_t w);
/*
 * The words of range r that an LDR (literal) anywhere in it reads, data
 * among the instructions: (*ret_data)[i] set for word i; NULL when none is.
 * 0, or -ENOMEM.
 */
int disasm_a64__mark_pool(const struct code_range *r, uint8_t **ret_data);
/* Sweeps ranges[idx] of an AArch64 function into res. 0, or -errno. */
int disasm_a64__scan_range(const struct code_range *ranges, size_t nranges, size_t idx,
			   uint64_t entry, struct disasm_result *res);

#endif

// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "disasm.h"

static int push(int64_t **arr, size_t *n, int64_t v)
{
	/* capacity doubles from 4 whenever n reaches a power of two */
	if (*n == 0 || (*n >= 4 && !(*n & (*n - 1)))) {
		size_t cap = *n ? *n * 2 : 4;
		void *p = realloc(*arr, cap * sizeof(**arr));

		if (!p)
			return -ENOMEM;
		*arr = p;
	}
	(*arr)[(*n)++] = v;
	return 0;
}

static bool in_ranges(const struct code_range *ranges, size_t n, uint64_t addr)
{
	for (size_t i = 0; i < n; i++)
		if (addr >= ranges[i].addr && addr - ranges[i].addr < ranges[i].len)
			return true;
	return false;
}

static bool is_return(const ZydisDecodedInstruction *insn)
{
	/* C3, C2 iw, CB, CA iw; prefixes (rep, bnd, operand size) included */
	return insn->mnemonic == ZYDIS_MNEMONIC_RET;
}

enum jump_kind {
	JUMP_NONE,     /* not a jump, or one inside the function */
	JUMP_LEAVES,   /* leaves the function: *ret_target where it goes, 0 if not known */
	JUMP_INDIRECT, /* unconditional, through a register or a computed address */
};

/*
 * Whether a jump leaves the function: a direct JMP or Jcc whose target lies
 * outside every range, or an indirect JMP through a RIP-relative slot (a call
 * through the GOT). A JMP through a register or a computed address may be a
 * switch table inside the function: not counted as leaving, but told apart.
 */
static enum jump_kind jump_kind(const ZydisDecoder *dec, ZydisDecoderContext *ctx,
				const ZydisDecodedInstruction *insn, uint64_t addr,
				const struct code_range *ranges, size_t nranges,
				uint64_t *ret_target)
{
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	ZyanU64 target;
	bool uncond = insn->meta.category == ZYDIS_CATEGORY_UNCOND_BR;

	*ret_target = 0;
	if (!uncond && insn->meta.category != ZYDIS_CATEGORY_COND_BR)
		return JUMP_NONE;
	if (!ZYAN_SUCCESS(
		    ZydisDecoderDecodeOperands(dec, ctx, insn, ops, insn->operand_count_visible)))
		return JUMP_NONE;
	if (insn->operand_count_visible < 1)
		return JUMP_NONE;
	if (ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[0].imm.is_relative) {
		if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(insn, &ops[0], addr, &target)) ||
		    in_ranges(ranges, nranges, target))
			return JUMP_NONE;
		*ret_target = target;
		return JUMP_LEAVES;
	}
	if (uncond && ops[0].type == ZYDIS_OPERAND_TYPE_MEMORY &&
	    ops[0].mem.base == ZYDIS_REGISTER_RIP)
		return JUMP_LEAVES;
	/* a switch table, or a tail call through a function pointer */
	return uncond ? JUMP_INDIRECT : JUMP_NONE;
}

static int push_u64(uint64_t **arr, size_t n, uint64_t v)
{
	/* grows as push() does, one step ahead of it: n is the count before */
	if (n == 0 || (n >= 4 && !(n & (n - 1)))) {
		size_t cap = n ? n * 2 : 4;
		void *p = realloc(*arr, cap * sizeof(**arr));

		if (!p)
			return -ENOMEM;
		*arr = p;
	}
	(*arr)[n] = v;
	return 0;
}

static void describe_bad(struct disasm_result *res, const struct code_range *r, size_t off,
			 uint64_t entry)
{
	char bytes[3 * 8 + 1] = "";
	size_t n = r->len - off < 8 ? r->len - off : 8;

	for (size_t i = 0; i < n; i++)
		sprintf(bytes + 3 * i, "%s%02x", i ? " " : "", r->bytes[off + i]);
	res->undecodable = true;
	res->bad_addr = r->addr + off;
	snprintf(res->reason, sizeof(res->reason),
		 "undecodable instruction at %s0x%" PRIx64
		 " (bytes %s); return sites cannot be located safely",
		 res->bad_addr >= entry ? "+" : "-",
		 res->bad_addr >= entry ? res->bad_addr - entry : entry - res->bad_addr, bytes);
}

static void over_budget(struct disasm_result *res, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* A budget ran out: no site of the function is trusted to be complete. */
static void over_budget(struct disasm_result *res, const char *fmt, ...)
{
	va_list ap;
	int n;

	res->over_budget = true;
	va_start(ap, fmt);
	n = vsnprintf(res->reason, sizeof(res->reason), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(res->reason))
		snprintf(res->reason + n, sizeof(res->reason) - n,
			 "; calls are counted, not timed");
}

static int scan_range(const ZydisDecoder *dec, const struct code_range *ranges, size_t nranges,
		      size_t idx, uint64_t entry, struct disasm_result *res)
{
	const struct code_range *r = &ranges[idx];
	size_t off = 0;

	while (off < r->len) {
		ZydisDecoderContext ctx;
		ZydisDecodedInstruction insn;
		uint64_t addr = r->addr + off;

		if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(dec, &ctx, r->bytes + off,
								r->len - off, &insn))) {
			describe_bad(res, r, off, entry);
			return 0;
		}
		res->ninsns++;
		if (is_return(&insn) && res->nreturns == DISASM_MAX_RETURNS) {
			over_budget(res, "more than %d return sites (the limit per function)",
				    DISASM_MAX_RETURNS);
			return 0;
		}
		if (is_return(&insn)) {
			if (push(&res->returns, &res->nreturns, (int64_t)(addr - entry)))
				return -ENOMEM;
		} else {
			uint64_t target;

			switch (jump_kind(dec, &ctx, &insn, addr, ranges, nranges, &target)) {
			case JUMP_LEAVES:
				if (push_u64(&res->tail_targets, res->ntail_calls, target) ||
				    push(&res->tail_calls, &res->ntail_calls,
					 (int64_t)(addr - entry)))
					return -ENOMEM;
				break;
			case JUMP_INDIRECT: res->nindirect_jumps++; break;
			case JUMP_NONE: break;
			}
		}
		off += insn.length;
		if (idx == 0 && insn.mnemonic != ZYDIS_MNEMONIC_INT3)
			res->code_end = r->addr + off;
	}
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

struct tail_site {
	int64_t off;
	uint64_t target;
};

static int cmp_site(const void *a, const void *b)
{
	return cmp_i64(&((const struct tail_site *)a)->off, &((const struct tail_site *)b)->off);
}

/* Sorts tail_calls by offset, tail_targets along with them. */
static int sort_tail_calls(struct disasm_result *res)
{
	struct tail_site *s = calloc(res->ntail_calls, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < res->ntail_calls; i++)
		s[i] = (struct tail_site){ res->tail_calls[i], res->tail_targets[i] };
	qsort(s, res->ntail_calls, sizeof(*s), cmp_site);
	for (size_t i = 0; i < res->ntail_calls; i++) {
		res->tail_calls[i] = s[i].off;
		res->tail_targets[i] = s[i].target;
	}
	free(s);
	return 0;
}

int disasm__scan(const struct code_range *ranges, size_t nranges, uint64_t entry,
		 struct disasm_result *res)
{
	ZydisDecoder dec;
	size_t total = 0;
	int err = 0;

	memset(res, 0, sizeof(*res));
	if (!nranges)
		return -EINVAL;
	res->code_end = ranges[0].addr;
	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	for (size_t i = 0; i < nranges; i++)
		if (__builtin_add_overflow(total, ranges[i].len, &total))
			total = SIZE_MAX;
	/* decoding costs time in proportion to the bytes: refused before any */
	if (total > DISASM_MAX_BYTES)
		over_budget(res, "%zu bytes of code, more than %u MiB (the limit per function)",
			    total, DISASM_MAX_BYTES >> 20);
	for (size_t i = 0; i < nranges && !res->undecodable && !res->over_budget && !err; i++)
		err = scan_range(&dec, ranges, nranges, i, entry, res);
	if (err) {
		disasm_result__clear(res);
		return err;
	}
	if (res->over_budget) {
		free(res->returns);
		free(res->tail_calls);
		free(res->tail_targets);
		res->returns = res->tail_calls = NULL;
		res->tail_targets = NULL;
		res->nreturns = res->ntail_calls = res->nindirect_jumps = 0;
		res->code_end = ranges[0].addr; /* not known: the sweep stopped */
		return 0;
	}
	if (res->undecodable) {
		/* never report sites found before the failure: the sweep is not trusted */
		res->nreturns = res->ntail_calls = res->nindirect_jumps = 0;
		return 0;
	}
	if (res->nreturns)
		qsort(res->returns, res->nreturns, sizeof(int64_t), cmp_i64);
	if (res->ntail_calls && sort_tail_calls(res)) {
		disasm_result__clear(res);
		return -ENOMEM;
	}
	if (!res->nreturns && res->ntail_calls)
		snprintf(res->reason, sizeof(res->reason),
			 "no return instruction: the function leaves only through %zu tail call%s",
			 res->ntail_calls, res->ntail_calls == 1 ? "" : "s");
	else if (!res->nreturns)
		snprintf(
			res->reason, sizeof(res->reason),
			"no return instruction: the function never returns (it panics, exits or loops)");
	return 0;
}

void disasm_result__clear(struct disasm_result *res)
{
	if (!res)
		return;
	free(res->returns);
	free(res->tail_calls);
	free(res->tail_targets);
	memset(res, 0, sizeof(*res));
}

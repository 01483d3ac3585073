// SPDX-License-Identifier: MIT
/*
 * A function's bytes, from a container's file: the input split at its first
 * byte's position into an entry range and a second (cold) range. Every site
 * found lies inside a range, sorted, and never past the budgets; a function
 * over a budget has none. Where the table of common forms reads the input's
 * first instruction, Zydis reads the same one. The entry site (entrysite.h,
 * as Go code when the first byte is odd; runtime.morestack at the second
 * range) lies in the entry's first bytes, on an instruction of a kind the
 * kernel emulates, or at the entry; the stack pointer it is below the
 * entry's was moved by an instruction before it (entrysite__clobbers), and
 * at the entry none is written. The function's jumps through a register
 * read as switch tables (jumptable.h) from the input itself, mapped at the
 * entry: every target lies in a range, no more read than the jumps found. An inlined copy
 * made up from the input's second and third bytes (inlsites.h): when timed
 * or counted, its entries lie in its ranges, its exits in the function and
 * outside its ranges (counted: none), and there are at most INLSITES_MAX of
 * them; not probed, none. The same bytes read as AArch64: its sites lie
 * inside a range, sorted, each return a RET word. The check before a probe
 * is attached (disasm__boundaries) refuses none of the RETs and the entry
 * site found in the entry range. Silent on every input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "analysis/disasm_impl.h"
#include "analysis/entrysite.h"
#include "analysis/inlsites.h"

/* disasm__quick's answer at data against Zydis's full decoder. */
static void check_quick(const uint8_t *data, size_t size)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction insn;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	struct disasm_insn q;
	ZyanU64 target;
	bool ret, int3, jump;

	if (!disasm__quick(data, size, &q))
		return;
	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, data, size, &insn, ops)) ||
	    insn.length != q.length)
		__builtin_trap();
	ret = insn.mnemonic == ZYDIS_MNEMONIC_RET;
	int3 = insn.mnemonic == ZYDIS_MNEMONIC_INT3;
	jump = insn.meta.category == ZYDIS_CATEGORY_COND_BR ||
	       insn.meta.category == ZYDIS_CATEGORY_UNCOND_BR;
	if (ret != (q.kind == DISASM_RET) || int3 != (q.kind == DISASM_INT3) ||
	    jump != (q.kind == DISASM_JUMP_REL))
		__builtin_trap();
	if (jump && (ops[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE || !ops[0].imm.is_relative ||
		     !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&insn, &ops[0], 0x401000, &target)) ||
		     target != 0x401000 + q.length + (uint64_t)q.rel))
		__builtin_trap();
}

/* The whole input as the file's data, at the entry's address on. */
static int read_input(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct code_range *in = ctx;

	if (addr < in->addr || addr - in->addr > in->len || len > in->len - (addr - in->addr))
		return -1;
	memcpy(buf, in->bytes + (addr - in->addr), len);
	return 0;
}

static bool second_range(void *ctx, uint64_t addr)
{
	(void)ctx;
	return addr == 0x801000;
}

static int64_t offset_of(const struct code_range *r, size_t n, int64_t site, uint64_t entry)
{
	for (size_t i = 0; i < n; i++)
		if (entry + site >= r[i].addr && entry + site - r[i].addr < r[i].len)
			return 0;
	return -1;
}

static bool in_range(const struct addr_range *r, size_t n, uint64_t a)
{
	for (size_t i = 0; i < n; i++)
		if (a >= r[i].lo && a < r[i].hi)
			return true;
	return false;
}

/*
 * Two ranges of a copy inside r's bytes, from data[1] and data[2]; within
 * the first INL_FUZZ_BYTES of the function, which keeps the run's pace (the
 * seeds are whole binaries, decoded in full).
 */
#define INL_FUZZ_BYTES 4096

static void check_inlined(enum disasm_arch arch, const struct code_range *whole, size_t n,
			  const uint8_t *data, size_t size)
{
	struct code_range r[1] = { whole[0] };
	struct addr_range cr[2];
	struct inl_sites s;
	uint64_t a, b;

	(void)n;
	if (size < 3)
		return;
	if (r[0].len > INL_FUZZ_BYTES)
		r[0].len = INL_FUZZ_BYTES;
	n = 1;
	a = r[0].addr + (uint64_t)data[1] * r[0].len / 256;
	b = a + 1 + data[2] % 16;
	cr[0] = (struct addr_range){ a, b };
	cr[1] = (struct addr_range){ b + 2, b + 2 + data[2] / 16 };
	if (inlsites__find(arch, r, n, r[0].addr, cr, 2, NULL, NULL, &s))
		return;
	if (s.nentries + s.nexits > INLSITES_MAX ||
	    (s.mode == INLSITES_NOT_PROBED && (s.nentries || s.nexits || !s.reason[0])) ||
	    (s.mode == INLSITES_ENTRY_ONLY && (!s.nentries || s.nexits || !s.reason[0])))
		__builtin_trap();
	for (size_t i = 0; i < s.nentries; i++)
		if (!in_range(cr, 2, s.entries[i]) || (i && s.entries[i - 1] >= s.entries[i]))
			__builtin_trap();
	for (size_t i = 0; i < s.nexits; i++)
		if (in_range(cr, 2, s.exits[i]) || offset_of(r, n, 0, s.exits[i]))
			__builtin_trap();
}

/* The same ranges swept as AArch64 code. */
static void check_a64(const struct code_range *r, size_t n)
{
	struct disasm_result res;
	int64_t rel;

	if (disasm__scan(DISASM_AARCH64, r, n, 0x401000, &res))
		return;
	if (res.undecodable && res.nreturns)
		__builtin_trap();
	for (size_t i = 0; i < res.nreturns; i++) {
		uint64_t addr = 0x401000 + (uint64_t)res.returns[i];
		const struct code_range *in = NULL;

		for (size_t k = 0; k < n; k++)
			if (addr >= r[k].addr && addr - r[k].addr + 4 <= r[k].len)
				in = &r[k];
		if (!in || (i && res.returns[i - 1] >= res.returns[i]))
			__builtin_trap();
		const uint8_t *p = in->bytes + (addr - in->addr);
		uint32_t w = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			     (uint32_t)p[3] << 24;
		if (disasm_a64__classify(w, &rel) != A64_RET)
			__builtin_trap();
	}
	disasm_result__clear(&res);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The check before any probe is attached (disasm__boundaries, binvouch.c)
 * decodes from the entry as the sweep does: it refuses none of the RETs
 * the sweep found in the entry range, nor the entry site.
 */
static void check_boundaries(const struct code_range *r, const struct disasm_result *res,
			     int64_t site)
{
	uint64_t addrs[65];
	size_t n = 0, bad;

	if ((uint64_t)site < r->len)
		addrs[n++] = r->addr + (uint64_t)site;
	for (size_t i = 0; i < res->nreturns && n < 65; i++)
		if (res->returns[i] >= 0 && (uint64_t)res->returns[i] < r->len)
			addrs[n++] = r->addr + (uint64_t)res->returns[i];
	qsort(addrs, n, sizeof(addrs[0]), cmp_u64);
	if (disasm__boundaries(DISASM_X86_64, r->bytes, r->len, r->addr, addrs, n, &bad))
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct code_range r[2];
	struct disasm_result res;
	int64_t site;
	struct jumptable jt;
	uint32_t clobbers, sp;
	size_t split;

	if (!size)
		return 0;
	check_quick(data, size);
	split = 1 + (size_t)data[0] * size / 256;
	split = split > size ? size : split;
	r[0] = (struct code_range){ 0x401000, data, split };
	r[1] = (struct code_range){ 0x801000, data + split, size - split };
	check_inlined(DISASM_X86_64, r, r[1].len ? 2 : 1, data, size);
	check_inlined(DISASM_AARCH64, r, r[1].len ? 2 : 1, data, size);
	check_a64(r, r[1].len ? 2 : 1);
	if (disasm__scan(DISASM_X86_64, r, r[1].len ? 2 : 1, 0x401000, &res))
		return 0;
	if (res.nreturns > DISASM_MAX_RETURNS || (res.over_budget && res.nreturns) ||
	    (res.over_budget && !strstr(res.reason, "limit")))
		__builtin_trap();
	for (size_t i = 0; i < res.nreturns; i++)
		if (offset_of(r, 2, res.returns[i], 0x401000) ||
		    (i && res.returns[i - 1] >= res.returns[i]))
			__builtin_trap();
	if (jumptable__read(r, r[1].len ? 2 : 1, read_input,
			    &(struct code_range){ 0x401000, data, size }, &jt))
		__builtin_trap();
	if (jt.nresolved > jt.njumps)
		__builtin_trap();
	for (size_t i = 0; i < jt.ntargets; i++)
		if (!disasm__in_ranges(r, r[1].len ? 2 : 1, jt.targets[i]))
			__builtin_trap();
	site = entrysite__choose(&r[0], &res, data[0] & 1, second_range, NULL, &jt, &sp);
	jumptable__clear(&jt);
	if (site < 0 || site >= DISASM_ENTRY_RUN || (site && (uint64_t)site >= r[0].len) ||
	    (site && disasm__probe_kind(data + site, split - (size_t)site) == DISASM_PROBE_STEPPED))
		__builtin_trap();
	check_boundaries(&r[0], &res, site);
	clobbers = entrysite__clobbers(&r[0], site);
	/* a stack pointer moved to the site was written by a skipped instruction */
	if (site ? (sp && !(clobbers & (1u << 4))) || sp >= (1u << 20) : clobbers || sp)
		__builtin_trap();
	disasm_result__clear(&res);
	return 0;
}

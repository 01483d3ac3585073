// SPDX-License-Identifier: MIT
/*
 * Where a probe may go (binvouch.c): instruction boundaries of the file's
 * own code, decoded from a function start the file itself names. Each kind
 * of probe address the analysis derives (an entry, a moved entry site, a
 * RET, a tail-called function's RET, an inlined copy's entry and exit) is
 * vouched for as derived and refused one byte into its instruction; a debug
 * file that names a function inside an instruction is not used at all
 * (tests/fixtures/forge_debug.py made it), while the real one is.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "analysis/binary.h"
#include "analysis/disasm.h"
#include "analysis/inlined.h"
#include "analysis/inlsites.h"
#include "test.h"

/* movabs rdx, imm64 @0; mov rax, rdi @10; ret @13 */
static const uint8_t code[] = { 0x48, 0xba, 0x15, 0x7c, 0x4a, 0x7f, 0xb9,
				0x79, 0x37, 0x9e, 0x48, 0x89, 0xf8, 0xc3 };

TEST(vouch_boundaries_x86)
{
	const uint64_t good[] = { 0x1000, 0x100a, 0x100d }, one[] = { 0x1003 },
		       late[] = { 0x100a, 0x100c }, order[] = { 0x100a, 0x1000 },
		       past[] = { 0x100e };
	/* 06 does not decode in 64-bit mode: nothing past it is known */
	const uint8_t bad[] = { 0x06, 0xc3 };
	const uint64_t after_bad[] = { 0x2001 };
	size_t at = 9;

	return ASSERT_OK(disasm__boundaries(DISASM_X86_64, code, sizeof(code), 0x1000, good, 3,
					    &at)) &&
	       ASSERT_EQ(disasm__boundaries(DISASM_X86_64, code, sizeof(code), 0x1000, one, 1, &at),
			 -EILSEQ) &&
	       ASSERT_EQ(at, 0) &&
	       ASSERT_EQ(
		       disasm__boundaries(DISASM_X86_64, code, sizeof(code), 0x1000, late, 2, &at),
		       -EILSEQ) &&
	       ASSERT_EQ(at, 1) &&
	       ASSERT_EQ(
		       disasm__boundaries(DISASM_X86_64, code, sizeof(code), 0x1000, order, 2, &at),
		       -EINVAL) &&
	       ASSERT_EQ(
		       disasm__boundaries(DISASM_X86_64, code, sizeof(code), 0x1000, past, 1, &at),
		       -EINVAL) &&
	       ASSERT_EQ(disasm__boundaries(DISASM_X86_64, bad, sizeof(bad), 0x2000, after_bad, 1,
					    &at),
			 -EILSEQ);
}

TEST(vouch_boundaries_a64)
{
	uint8_t words[16] = { 0 };
	const uint64_t good[] = { 0x4000, 0x4008 }, bad[] = { 0x4000, 0x4006 };
	size_t at = 9;

	return ASSERT_OK(disasm__boundaries(DISASM_AARCH64, words, sizeof(words), 0x4000, good, 2,
					    &at)) &&
	       ASSERT_EQ(disasm__boundaries(DISASM_AARCH64, words, sizeof(words), 0x4000, bad, 2,
					    &at),
			 -EILSEQ) &&
	       ASSERT_EQ(at, 1);
}

/* The length of the instruction at addr of b, 0 when it does not decode. */
static size_t insn_len(struct binary *b, uint64_t addr)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction insn;
	ZydisDecoderContext ctx;
	uint8_t buf[15];

	if (binary__read(b, addr, buf, sizeof(buf)) ||
	    !ZYAN_SUCCESS(
		    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)) ||
	    !ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, &ctx, buf, sizeof(buf), &insn)))
		return 0;
	return insn.length;
}

/*
 * addr is vouched for, and the address one byte into its instruction is
 * refused (what a table that is off by a byte would name), or into the
 * next instruction when addr's is one byte long.
 */
static bool vouched_not_inside(struct binary *b, uint64_t addr, const char *what)
{
	struct rw_error err = { "" };
	size_t bad = 9, len;
	uint64_t inside = addr;

	for (int k = 0; k < 16 && (len = insn_len(b, inside)) == 1; k++)
		inside++;
	inside++;
	if (!CHECK(!binary__vouch(b, &addr, 1, &bad, &err), "%s at 0x%llx refused: %s", what,
		   (unsigned long long)addr, err.msg))
		return false;
	return CHECK(len > 1, "%s at 0x%llx: no longer instruction follows", what,
		     (unsigned long long)addr) &&
	       CHECK(binary__vouch(b, &inside, 1, &bad, &err) == -EILSEQ,
		     "%s: 0x%llx, inside an instruction, vouched for", what,
		     (unsigned long long)inside) &&
	       ASSERT_STRCONTAINS(err.msg, "is not an instruction boundary");
}

static const struct func_info *match1(struct binary *b, const char *pat, struct binary_match *m)
{
	struct rw_error err = { "" };

	if (!CHECK(!binary__match(b, &pat, 1, 16, m, &err) && m->nfuncs == 1,
		   "%s: %zu functions (%s)", pat, m->nfuncs, err.msg))
		return NULL;
	return m->funcs[0];
}

TEST(vouch_entry_site_and_returns)
{
	const char *exe = test__fixture("c/harm/harmfix"),
		   *dbg = test__fixture("c/harm/harmfix.debug");
	struct binary_match m = { 0 };
	struct rw_error err = { "" };
	const struct func_info *fi;
	struct binary *b;
	uint64_t nowhere = 0x10;
	size_t bad;
	bool ok;

	if (!exe || !dbg)
		return true;
	b = binary__open_with_debug_file(exe, dbg, &err);
	ok = CHECK(b, "%s", err.msg) && ASSERT_TRUE(binary__debug_file(b)) &&
	     (fi = match1(b, "mix", &m)) && ASSERT_TRUE(fi->nreturns > 0);
	ok = ok && vouched_not_inside(b, fi->address, "the entry") &&
	     vouched_not_inside(b, fi->address + (uint64_t)fi->entry_site, "the entry site");
	for (size_t k = 0; ok && k < fi->nreturns; k++)
		ok = vouched_not_inside(b, fi->address + (uint64_t)fi->returns[k], "a RET");
	/* nothing of the file's own names a start before it */
	ok = ok && ASSERT_EQ(binary__vouch(b, &nowhere, 1, &bad, &err), -EILSEQ) &&
	     ASSERT_STRCONTAINS(err.msg, "follows no function start");
	nowhere = ~0ull;
	ok = ok && ASSERT_EQ(binary__vouch_offsets(b, &nowhere, 1, &bad, &err), -EILSEQ) &&
	     ASSERT_STRCONTAINS(err.msg, "in no loaded segment");
	binary_match__clear(&m);
	binary__put(b);
	return ok;
}

TEST(vouch_tail_returns)
{
	const char *exe = test__fixture("c/tail/tailfix");
	struct binary_match m = { 0 };
	struct rw_error err = { "" };
	const struct func_info *fi;
	struct binary *b;
	bool ok;

	if (!exe)
		return true;
	b = binary__open(NULL, exe, &err);
	ok = CHECK(b, "%s", err.msg) && (fi = match1(b, "direct", &m)) &&
	     ASSERT_TRUE(fi->ntail_returns > 0);
	for (size_t k = 0; ok && k < fi->ntail_returns; k++) {
		uint64_t addr;

		ok = ASSERT_OK(binary__offset_to_addr(
			     b, fi->file_offset + (uint64_t)fi->tail_returns[k], &addr)) &&
		     vouched_not_inside(b, addr, "a tail-called function's RET");
	}
	binary_match__clear(&m);
	binary__put(b);
	return ok;
}

TEST(vouch_inlined_sites)
{
	const char *exe = test__fixture("c/inline/inlfix"), *pat = "mix_step";
	struct rw_error err = { "" };
	struct inl_list *l = NULL;
	struct binary *b;
	size_t n = 0;
	bool ok;

	if (!exe)
		return true;
	b = binary__open(NULL, exe, &err);
	ok = CHECK(b, "%s", err.msg) && ASSERT_OK(binary__inlined(b, &pat, 1, &l, &err)) &&
	     ASSERT_TRUE(l) && ASSERT_OK(binary__inlined_probe(b, l));
	for (size_t i = 0; ok && i < l->ncopies; i++) {
		const struct inl_sites *s = l->copies[i].sites;

		for (size_t k = 0; ok && s && k < s->nentries; k++, n++)
			ok = vouched_not_inside(b, s->entries[k], "an inlined copy's entry");
		for (size_t k = 0; ok && s && k < s->nexits; k++, n++)
			ok = vouched_not_inside(b, s->exits[k], "an inlined copy's exit");
	}
	ok = ok && ASSERT_TRUE(n > 0);
	inl_list__free(l);
	binary__put(b);
	return ok;
}

TEST(vouch_forged_debug_file_not_used)
{
	const char *exe = test__fixture("c/harm/harmfix"),
		   *forged = test__fixture("c/harm/harmfix.forged.debug"), *pat = "mix";
	struct binary_match m = { 0 };
	struct rw_error err = { "" };
	struct binary *b;
	bool ok;

	if (!exe || !forged)
		return true;
	b = binary__open_with_debug_file(exe, forged, &err);
	ok = CHECK(b, "%s", err.msg) && ASSERT_EQ(binary__debug_file(b), NULL) &&
	     ASSERT_TRUE(binary__debug_note(b)) &&
	     ASSERT_STRCONTAINS(binary__debug_note(b),
				"it does not match the executable: function mix: 0x") &&
	     ASSERT_STRCONTAINS(binary__debug_note(b), "is not an instruction boundary") &&
	     ASSERT_OK(binary__match(b, &pat, 1, 16, &m, &err)) && ASSERT_EQ(m.nfuncs, 0) &&
	     ASSERT_EQ(m.nunmatched, 1);
	binary_match__clear(&m);
	binary__put(b);
	return ok;
}

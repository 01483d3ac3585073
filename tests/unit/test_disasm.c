// SPDX-License-Identifier: MIT
#include <stdlib.h>

#include "disasm.h"
#include "test.h"

static bool scan(const uint8_t *code, size_t len, struct disasm_result *res)
{
	struct code_range r = { 0x1000, code, len };

	return ASSERT_OK(disasm__scan(&r, 1, 0x1000, res));
}

TEST(disasm_every_return_form)
{
	static const uint8_t code[] = {
		0x55,			      /* push rbp */
		0xc3,			      /* ret                @1 */
		0xf3, 0xc3,		      /* rep ret            @2 */
		0xc2, 0x08, 0x00,	      /* ret 8              @4 */
		0xcb,			      /* retf               @7 */
		0xca, 0x10, 0x00,	      /* retf 16            @8 */
		0xf2, 0xc3,		      /* bnd ret            @11 */
		0x66, 0xc3,		      /* o16 ret            @13 */
		0xf3, 0x0f, 0x1e, 0xfa,	      /* endbr64 */
		0xb8, 0xc3, 0xc3, 0xc3, 0xc3, /* mov eax, 0xc3c3c3c3: not returns */
		0xc3,			      /* ret                @24 */
	};
	static const int64_t want[] = { 1, 2, 4, 7, 8, 11, 13, 24 };
	struct disasm_result res;
	bool ok = scan(code, sizeof(code), &res) && ASSERT_EQ(res.nreturns, 8) &&
		  ASSERT_FALSE(res.undecodable) && ASSERT_EQ(res.ntail_calls, 0);

	for (size_t i = 0; ok && i < 8; i++)
		ok = ASSERT_EQ(res.returns[i], want[i]);
	disasm_result__clear(&res);
	return ok;
}

TEST(disasm_undecodable_never_resyncs)
{
	static const uint8_t code[] = {
		0xc3,	    /* ret */
		0x0f, 0xff, /* ud0 with a missing ModRM: the buffer ends */
	};
	struct disasm_result res;
	bool ok = scan(code, sizeof(code), &res) && ASSERT_TRUE(res.undecodable) &&
		  ASSERT_EQ(res.bad_addr, 0x1001) && ASSERT_EQ(res.nreturns, 0) &&
		  ASSERT_STRCONTAINS(res.reason, "undecodable instruction at +0x1");

	disasm_result__clear(&res);
	return ok;
}

TEST(disasm_instruction_cut_by_range_end)
{
	static const uint8_t code[] = { 0x48, 0x89 }; /* mov r/m64, r64 without ModRM */
	struct disasm_result res;
	bool ok = scan(code, sizeof(code), &res) && ASSERT_TRUE(res.undecodable);

	disasm_result__clear(&res);
	return ok;
}

TEST(disasm_tail_calls)
{
	static const uint8_t code[] = {
		0x85, 0xff,			    /* test edi, edi */
		0x74, 0x06,			    /* je +6 -> 0x100a, inside */
		0xe9, 0xf7, 0x0f, 0x00, 0x00,	    /* jmp 0x2000: tail call @4 */
		0x90,				    /* nop */
		0x0f, 0x85, 0xf0, 0x0f, 0x00, 0x00, /* jne 0x2000: conditional tail call @10 */
		0xff, 0x25, 0x00, 0x10, 0x00, 0x00, /* jmp [rip+0x1000]: through the GOT @16 */
		0xff, 0xe0,			    /* jmp rax: maybe a switch, not a tail call */
		0xeb, 0x00,			    /* jmp +0, inside */
		0xc3,				    /* ret @26 */
	};
	struct disasm_result res;
	bool ok = scan(code, sizeof(code), &res) && ASSERT_EQ(res.nreturns, 1) &&
		  ASSERT_EQ(res.returns[0], 26) && ASSERT_EQ(res.ntail_calls, 3) &&
		  ASSERT_EQ(res.tail_calls[0], 4) && ASSERT_EQ(res.tail_calls[1], 10) &&
		  ASSERT_EQ(res.tail_calls[2], 16) &&
		  /* where each goes; through the GOT: not known */
		  ASSERT_EQ(res.tail_targets[0], 0x2000) &&
		  ASSERT_EQ(res.tail_targets[1], 0x2000) && ASSERT_EQ(res.tail_targets[2], 0) &&
		  /* jmp rax: a switch table or a call through a pointer, told apart */
		  ASSERT_EQ(res.nindirect_jumps, 1);

	disasm_result__clear(&res);
	return ok;
}

/* Tail calls found in a cold range before the entry come out sorted, targets alongside. */
TEST(disasm_tail_targets_sorted)
{
	static const uint8_t hot[] = {
		0xe9, 0xfb, 0x0f, 0x00, 0x00, /* @0x1000 jmp 0x2000 */
		0xc3,			      /* ret */
	};
	static const uint8_t cold[] = {
		0xe9, 0xfb, 0x1f, 0x00, 0x00,		  /* @0x800 jmp 0x2800 */
		0xff, 0x24, 0xc5, 0x00, 0x30, 0x00, 0x00, /* jmp [rax*8+0x3000]: a table */
	};
	struct code_range r[] = { { 0x1000, hot, sizeof(hot) }, { 0x800, cold, sizeof(cold) } };
	struct disasm_result res;
	bool ok = ASSERT_OK(disasm__scan(r, 2, 0x1000, &res)) && ASSERT_EQ(res.ntail_calls, 2) &&
		  ASSERT_EQ(res.tail_calls[0], -0x800) && ASSERT_EQ(res.tail_targets[0], 0x2800) &&
		  ASSERT_EQ(res.tail_calls[1], 0) && ASSERT_EQ(res.tail_targets[1], 0x2000) &&
		  ASSERT_EQ(res.nindirect_jumps, 1);

	disasm_result__clear(&res);
	return ok;
}

TEST(disasm_cold_range_and_padding)
{
	static const uint8_t hot[] = { 0x85, 0xff, 0x0f, 0x85, 0xf8, 0xff,
				       0xff, 0xff, 0xc3, 0xcc, 0xcc };
	static const uint8_t cold[] = { 0x31, 0xc0, 0xc3, 0xcc };
	/* the cold part lies before the function, as gcc places .text.unlikely */
	struct code_range r[2] = { { 0x1000, hot, sizeof(hot) }, { 0x0f00, cold, sizeof(cold) } };
	struct disasm_result res;
	bool ok;

	/* jne 0x1000+8-8 = 0x1000: inside; a jne into the cold part is not a tail call */
	ok = ASSERT_OK(disasm__scan(r, 2, 0x1000, &res)) && ASSERT_EQ(res.nreturns, 2) &&
	     ASSERT_EQ(res.returns[0], -0x100 + 2) && ASSERT_EQ(res.returns[1], 8) &&
	     ASSERT_EQ(res.ntail_calls, 0) && ASSERT_EQ(res.code_end, 0x1009);
	disasm_result__clear(&res);
	return ok;
}

TEST(disasm_no_return)
{
	static const uint8_t code[] = { 0xe8, 0x00, 0x00, 0x00, 0x00, 0x0f, 0x0b }; /* call; ud2 */
	struct disasm_result res;
	bool ok = scan(code, sizeof(code), &res) && ASSERT_EQ(res.nreturns, 0) &&
		  ASSERT_FALSE(res.undecodable) &&
		  ASSERT_STRCONTAINS(res.reason, "no return instruction");

	disasm_result__clear(&res);
	return ok;
}

/* n bytes of code: RET (0xc3) at each multiple of every, NOP elsewhere. */
static uint8_t *rets_every(size_t n, size_t every)
{
	uint8_t *code = malloc(n);

	for (size_t i = 0; code && i < n; i++)
		code[i] = i % every ? 0x90 : 0xc3;
	return code;
}

/*
 * A crafted symbol full of RETs is the attack (one 64 MiB one was 67
 * million sites): at the limit every site is kept, one more and the
 * function has none, with the limit in its reason, found as soon as the
 * limit is passed.
 */
TEST(disasm_return_site_budget)
{
	uint8_t *at = rets_every(DISASM_MAX_RETURNS * 2, 2);
	uint8_t *over = rets_every(DISASM_MAX_RETURNS + 1, 1);
	uint8_t *big = rets_every((size_t)DISASM_MAX_BYTES / 2 * 2 + 2, 1 << 20);
	struct disasm_result res = {};
	struct code_range two[2] = { { 0x1000, big, DISASM_MAX_BYTES / 2 + 1 },
				     { 0x10000000, big, DISASM_MAX_BYTES / 2 + 1 } };
	bool ok = ASSERT_TRUE(at && over && big) && scan(at, DISASM_MAX_RETURNS * 2, &res) &&
		  ASSERT_EQ(res.nreturns, DISASM_MAX_RETURNS) && ASSERT_FALSE(res.over_budget) &&
		  ASSERT_EQ(res.returns[DISASM_MAX_RETURNS - 1], 2 * (DISASM_MAX_RETURNS - 1)) &&
		  ASSERT_STREQ(res.reason, "");

	disasm_result__clear(&res);
	ok = ok && scan(over, DISASM_MAX_RETURNS + 1, &res) && ASSERT_TRUE(res.over_budget) &&
	     ASSERT_EQ(res.nreturns, 0) && ASSERT_TRUE(!res.returns) &&
	     ASSERT_EQ(res.ninsns, DISASM_MAX_RETURNS + 1) &&
	     ASSERT_STRCONTAINS(res.reason,
				"more than 16384 return sites (the limit per function)");
	disasm_result__clear(&res);
	/* the bytes of all ranges count, and nothing is decoded past the limit */
	ok = ok && ASSERT_OK(disasm__scan(two, 2, 0x1000, &res)) && ASSERT_TRUE(res.over_budget) &&
	     ASSERT_EQ(res.ninsns, 0) && ASSERT_EQ(res.nreturns, 0) &&
	     ASSERT_STRCONTAINS(res.reason, "more than 4 MiB (the limit per function)");
	disasm_result__clear(&res);
	two[1].len = DISASM_MAX_BYTES / 2 - 1;
	ok = ok && ASSERT_OK(disasm__scan(two, 2, 0x1000, &res)) && ASSERT_FALSE(res.over_budget) &&
	     ASSERT_EQ(res.nreturns, 5);
	disasm_result__clear(&res);
	free(at);
	free(over);
	free(big);
	return ok;
}

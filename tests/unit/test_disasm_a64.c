// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "analysis/disasm_impl.h"
#include "test.h"

#define ENTRY 0x10000

/* The words as the file holds them (little-endian). */
static bool scan(const uint32_t *words, size_t n, struct disasm_result *res)
{
	uint8_t *bytes = malloc(n * 4);
	struct code_range r = { ENTRY, bytes, n * 4 };
	bool ok;

	for (size_t i = 0; bytes && i < n; i++)
		for (int b = 0; b < 4; b++)
			bytes[4 * i + b] = (uint8_t)(words[i] >> (8 * b));
	ok = ASSERT_TRUE(bytes != NULL) &&
	     ASSERT_OK(disasm__scan(DISASM_AARCH64, &r, 1, ENTRY, res));
	free(bytes);
	return ok;
}

TEST(disasm_a64_every_return_form)
{
	static const uint32_t code[] = {
		0xd503233f, /* paciasp */
		0xa9bf7bfd, /* stp x29, x30, [sp, #-16]! */
		0x910003fd, /* mov x29, sp */
		0x54000060, /* b.eq +12 */
		0xa8c17bfd, /* ldp x29, x30, [sp], #16 */
		0xd65f03c0, /* ret          @20 */
		0xd65f0200, /* ret x16      @24 */
		0xd65f0bff, /* retaa        @28 */
		0xd65f0fff, /* retab        @32 */
		0xd63f0200, /* blr x16: a call, not an exit */
		0x94000000, /* bl: a call */
		0xd503201f, /* nop */
	};
	static const int64_t want[] = { 20, 24, 28, 32 };
	struct disasm_result res;
	bool ok = scan(code, sizeof(code) / 4, &res) && ASSERT_EQ(res.nreturns, 4) &&
		  ASSERT_FALSE(res.undecodable) && ASSERT_EQ(res.ntail_calls, 0) &&
		  ASSERT_EQ(res.nindirect_jumps, 0) && ASSERT_EQ(res.ninsns, 12);

	for (size_t i = 0; ok && i < 4; i++)
		ok = ASSERT_EQ(res.returns[i], want[i]);
	/* the b.eq lands at +24, inside the entry's first bytes */
	ok = ok && ASSERT_EQ(res.nentry_jumps, 1) && ASSERT_EQ(res.entry_jumps[0].to, ENTRY + 24);
	disasm_result__clear(&res);
	return ok;
}

TEST(disasm_a64_tail_calls_and_register_jumps)
{
	static const uint32_t code[] = {
		0xb4000040, /* cbz x0, +8 */
		0x14000100, /* b +1024: leaves the function          @4 */
		0x37000800, /* tbnz w0, #0, +256: leaves              @8 */
		0x54fffe01, /* b.ne -64: leaves (below the entry)     @12 */
		0xd61f0200, /* br x16 */
		0xd61f081f, /* braaz x0 */
		0xd71f0a11, /* braa x16, x17 */
		0xd65f03c0, /* ret                                    @28 */
	};
	static const int64_t want_calls[] = { 4, 8, 12 };
	static const uint64_t want_targets[] = { ENTRY + 4 + 1024, ENTRY + 8 + 256,
						 ENTRY + 12 - 64 };
	struct disasm_result res;
	bool ok = scan(code, sizeof(code) / 4, &res) && ASSERT_EQ(res.nreturns, 1) &&
		  ASSERT_EQ(res.returns[0], 28) && ASSERT_EQ(res.ntail_calls, 3) &&
		  ASSERT_EQ(res.nindirect_jumps, 3);

	for (size_t i = 0; ok && i < 3; i++)
		ok = ASSERT_EQ(res.tail_calls[i], want_calls[i]) &&
		     ASSERT_EQ(res.tail_targets[i], want_targets[i]);
	disasm_result__clear(&res);
	return ok;
}

/* Go's literal pool after a function's last branch: its words are data,
 * even when one reads as RET. */
TEST(disasm_a64_literal_pool_is_data)
{
	static const uint32_t code[] = {
		0x58000080, /* ldr x0, +16: an 8-byte literal at @16 */
		0x1c0000a1, /* ldr s1, +20: a 4-byte literal at @24 */
		0xd65f03c0, /* ret                                   @8 */
		0x00000000, /* padding */
		0xd65f03c0, /* data: the 8-byte literal's low word   @16 */
		0xd65f03c0, /* data: its high word                   @20 */
		0xd65f03c0, /* data: the 4-byte literal              @24 */
		0xd65f03c0, /* ret                                   @28 */
	};
	struct disasm_result res;
	bool ok = scan(code, sizeof(code) / 4, &res) && ASSERT_EQ(res.nreturns, 2) &&
		  ASSERT_EQ(res.returns[0], 8) && ASSERT_EQ(res.returns[1], 28) &&
		  ASSERT_EQ(res.code_end, ENTRY + 32);

	disasm_result__clear(&res);
	return ok;
}

TEST(disasm_a64_misaligned_range_is_refused)
{
	static const uint8_t code[] = { 0xc0, 0x03, 0x5f, 0xd6, 0xc0, 0x03 };
	struct code_range r = { ENTRY, code, sizeof(code) };
	struct disasm_result res;
	bool ok = ASSERT_OK(disasm__scan(DISASM_AARCH64, &r, 1, ENTRY, &res)) &&
		  ASSERT_TRUE(res.undecodable) && ASSERT_EQ(res.nreturns, 0) &&
		  ASSERT_TRUE(res.reason && strstr(res.reason, "aligned 4-byte"));

	disasm_result__clear(&res);
	return ok;
}

TEST(disasm_a64_return_site_budget)
{
	size_t n = DISASM_MAX_RETURNS + 1;
	uint32_t *code = malloc(n * sizeof(*code));
	struct disasm_result res;
	bool ok = ASSERT_TRUE(code != NULL);

	for (size_t i = 0; ok && i < n; i++)
		code[i] = 0xd65f03c0;
	ok = ok && scan(code, n, &res) && ASSERT_TRUE(res.over_budget) &&
	     ASSERT_EQ(res.nreturns, 0) && ASSERT_TRUE(res.reason && strstr(res.reason, "limit"));
	if (ok)
		disasm_result__clear(&res);
	free(code);
	return ok;
}

// SPDX-License-Identifier: MIT
/* The sites of inlined copies in AArch64 code, hand-assembled. */
#include <string.h>

#include "analysis/inlsites.h"
#include "test.h"

#define ENTRY 0x1000

#define STR_X30_PRE_M32 0xf81e0ffeu   /* str x30, [sp, #-32]!  (Go's frame) */
#define LDR_X30_POST_32 0xf84207feu   /* ldr x30, [sp], #32 */
#define STP_FP_LR_PRE_M16 0xa9bf7bfdu /* stp x29, x30, [sp, #-16]!  (C's frame) */
#define LDP_FP_LR_POST_16 0xa8c17bfdu /* ldp x29, x30, [sp], #16 */
#define MOV_FP_SP 0x910003fdu	      /* mov x29, sp: writes X29, not SP */
#define SUB_SP_0X40 0xd10103ffu	      /* sub sp, sp, #0x40 */
#define ADD_SP_0X40 0x910103ffu	      /* add sp, sp, #0x40 */
#define MOV_SP_X1 0x9100003fu	      /* mov sp, x1 */
#define ADD_X0_1 0x91000400u	      /* add x0, x0, #1 */
#define ADD_X1_2 0x91000821u	      /* add x1, x1, #2 */
#define BL_PLUS_0X100 0x94000040u     /* bl .+0x100 */
#define BR_X16 0xd61f0200u	      /* br x16 */
#define RET 0xd65f03c0u

/* The sites of the copy at ranges in the function of words at ENTRY. */
static int sites_of(const uint32_t *words, size_t n, const struct addr_range *ranges,
		    size_t nranges, struct inl_sites *ret)
{
	uint8_t code[4 * 32];
	struct code_range r = { ENTRY, code, 4 * n };

	for (size_t i = 0; i < n && i < 32; i++)
		for (int b = 0; b < 4; b++)
			code[4 * i + b] = (uint8_t)(words[i] >> (8 * b));
	return inlsites__find(DISASM_AARCH64, &r, 1, ENTRY, ranges, nranges, NULL, NULL, ret);
}

TEST(inlsites_a64_go_frame_by_a_pre_indexed_store)
{
	static const uint32_t w[] = { STR_X30_PRE_M32, ADD_X0_1, ADD_X1_2, LDR_X30_POST_32, RET };
	struct addr_range r = { 0x1004, 0x100c };
	struct inl_sites s;

	return ASSERT_EQ(sites_of(w, 5, &r, 1, &s), 0) && ASSERT_EQ(s.mode, INLSITES_TIMED) &&
	       ASSERT_EQ(s.nentries, 1) && ASSERT_EQ(s.entries[0], 0x1004) &&
	       ASSERT_EQ(s.nexits, 1) && ASSERT_EQ(s.exits[0], 0x100c) && ASSERT_EQ(s.sp, -32);
}

TEST(inlsites_a64_c_frame_by_a_pair_and_an_immediate)
{
	/* a call inside the copy returns into it: still one entry, one exit */
	static const uint32_t w[] = { STP_FP_LR_PRE_M16, MOV_FP_SP,	    SUB_SP_0X40,
				      ADD_X0_1,		 BL_PLUS_0X100,	    ADD_X1_2,
				      ADD_SP_0X40,	 LDP_FP_LR_POST_16, RET };
	struct addr_range r = { 0x100c, 0x1018 };
	struct inl_sites s;

	return ASSERT_EQ(sites_of(w, 9, &r, 1, &s), 0) && ASSERT_EQ(s.mode, INLSITES_TIMED) &&
	       ASSERT_EQ(s.nentries, 1) && ASSERT_EQ(s.entries[0], 0x100c) &&
	       ASSERT_EQ(s.nexits, 1) && ASSERT_EQ(s.exits[0], 0x1018) && ASSERT_EQ(s.sp, -80);
}

TEST(inlsites_a64_a_jump_through_a_register_inside_it_counts_its_entries)
{
	static const uint32_t w[] = { STP_FP_LR_PRE_M16, ADD_X0_1, BR_X16, LDP_FP_LR_POST_16, RET };
	struct addr_range r = { 0x1004, 0x100c };
	struct inl_sites s;

	return ASSERT_EQ(sites_of(w, 5, &r, 1, &s), 0) && ASSERT_EQ(s.mode, INLSITES_ENTRY_ONLY) &&
	       ASSERT_EQ(s.nentries, 1) && ASSERT_EQ(s.entries[0], 0x1004) &&
	       ASSERT_EQ(s.nexits, 0);
}

TEST(inlsites_a64_a_stack_pointer_from_a_register_is_not_probed)
{
	static const uint32_t w[] = { STP_FP_LR_PRE_M16, MOV_SP_X1,	    ADD_X0_1,
				      ADD_X1_2,		 LDP_FP_LR_POST_16, RET };
	struct addr_range r = { 0x1008, 0x1010 };
	struct inl_sites s;

	return ASSERT_EQ(sites_of(w, 6, &r, 1, &s), 0) && ASSERT_EQ(s.mode, INLSITES_NOT_PROBED) &&
	       ASSERT_EQ(s.nentries, 0) && ASSERT_TRUE(s.reason[0] != 0);
}

TEST(inlsites_a64_no_site_on_literal_data)
{
	/* ldr w2, .+12 reads the word at 0x1010 (which would decode as an
	 * add): the copy's call there never returns, and the fall-through
	 * past it is no exit a probe may be written on */
	static const uint32_t w[] = { STR_X30_PRE_M32, 0x18000062u,	ADD_X0_1, BL_PLUS_0X100,
				      ADD_X1_2,	       LDR_X30_POST_32, RET };
	struct addr_range r = { 0x1004, 0x1010 };
	struct inl_sites s;

	return ASSERT_EQ(sites_of(w, 7, &r, 1, &s), 0) && ASSERT_EQ(s.mode, INLSITES_NOT_PROBED) &&
	       ASSERT_EQ(s.nexits, 0) && ASSERT_TRUE(strstr(s.reason, "on data") != NULL);
}

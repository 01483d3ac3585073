// SPDX-License-Identifier: MIT
#include <string.h>

#include "analysis/inlsites.h"
#include "test.h"

#define ENTRY 0x1000

/* The sites of the copy at ranges in the function code (at ENTRY). */
static int sites_of(const uint8_t *code, size_t len, const struct addr_range *ranges,
		    size_t nranges, struct inl_sites *ret)
{
	struct code_range r = { ENTRY, code, len };

	return inlsites__find(DISASM_X86_64, &r, 1, ENTRY, ranges, nranges, NULL, NULL, ret);
}

/* push rbp; sub rsp, 0x10; [the copy]; add rsp, 0x10; pop rbp; ret */
static const uint8_t prologue[] = { 0x55, 0x48, 0x83, 0xec, 0x10 };
static const uint8_t epilogue[] = { 0x48, 0x83, 0xc4, 0x10, 0x5d, 0xc3 };

static size_t build(uint8_t *buf, const uint8_t *body, size_t n)
{
	memcpy(buf, prologue, sizeof(prologue));
	memcpy(buf + sizeof(prologue), body, n);
	memcpy(buf + sizeof(prologue) + n, epilogue, sizeof(epilogue));
	return sizeof(prologue) + n + sizeof(epilogue);
}

TEST(inlsites_entered_and_left_at_one_stack_pointer)
{
	/* mov eax, 1; add eax, 2: the copy, 0x1005-0x100d */
	static const uint8_t body[] = { 0xb8, 0x01, 0x00, 0x00, 0x00, 0x83, 0xc0, 0x02 };
	struct addr_range r = { 0x1005, 0x100d };
	uint8_t code[64];
	struct inl_sites s;

	return ASSERT_EQ(sites_of(code, build(code, body, sizeof(body)), &r, 1, &s), 0) &&
	       ASSERT_EQ(s.mode, INLSITES_TIMED) && ASSERT_EQ(s.nentries, 1) &&
	       ASSERT_EQ(s.entries[0], 0x1005) && ASSERT_EQ(s.nexits, 1) &&
	       ASSERT_EQ(s.exits[0], 0x100d) && ASSERT_EQ(s.sp, -0x18);
}

TEST(inlsites_a_caller_move_between_its_ranges_runs_inside_it)
{
	/* mov eax, 1 | mov ebx, eax (the caller's) | add eax, 2 */
	static const uint8_t body[] = { 0xb8, 0x01, 0x00, 0x00, 0x00, 0x89, 0xc3, 0x83, 0xc0, 0x02 };
	struct addr_range r[2] = { { 0x1005, 0x100a }, { 0x100c, 0x100f } };
	uint8_t code[64];
	struct inl_sites s;

	return ASSERT_EQ(sites_of(code, build(code, body, sizeof(body)), r, 2, &s), 0) &&
	       ASSERT_EQ(s.mode, INLSITES_TIMED) && ASSERT_EQ(s.nentries, 1) &&
	       ASSERT_EQ(s.entries[0], 0x1005) && ASSERT_EQ(s.nexits, 1) &&
	       ASSERT_EQ(s.exits[0], 0x100f);
}

TEST(inlsites_a_callers_call_between_its_ranges_is_not_probed)
{
	/* mov eax, 1 | call 0x1000 (the caller's, scheduled there) | add eax, 2:
	 * left at the call and entered again after it, each call would count twice */
	static const uint8_t body[] = { 0xb8, 0x01, 0x00, 0x00, 0x00, 0xe8, 0xf1,
					0xff, 0xff, 0xff, 0x83, 0xc0, 0x02 };
	struct addr_range r[2] = { { 0x1005, 0x100a }, { 0x100f, 0x1012 } };
	uint8_t code[64];
	struct inl_sites s;

	return ASSERT_EQ(sites_of(code, build(code, body, sizeof(body)), r, 2, &s), 0) &&
	       ASSERT_EQ(s.mode, INLSITES_NOT_PROBED) && ASSERT_EQ(s.nentries, 0) &&
	       ASSERT_TRUE(strstr(s.reason, "splits it") != NULL);
}

TEST(inlsites_a_loop_back_to_its_entry_is_not_probed)
{
	/* mov eax, 1; dec ecx; jnz 0x1005 */
	static const uint8_t body[] = { 0xb8, 0x01, 0x00, 0x00, 0x00, 0xff, 0xc9, 0x75, 0xf7 };
	struct addr_range r = { 0x1005, 0x100e };
	uint8_t code[64];
	struct inl_sites s;

	return ASSERT_EQ(sites_of(code, build(code, body, sizeof(body)), &r, 1, &s), 0) &&
	       ASSERT_EQ(s.mode, INLSITES_NOT_PROBED) && ASSERT_EQ(s.nentries, 0) &&
	       ASSERT_TRUE(strstr(s.reason, "a loop inside it") != NULL);
}

TEST(inlsites_a_stack_pointer_that_moves_inside_it_is_said)
{
	/* push rax (the copy); pop rax */
	static const uint8_t body[] = { 0x50, 0x58 };
	struct addr_range r = { 0x1005, 0x1006 };
	uint8_t code[64];
	struct inl_sites s;

	return ASSERT_EQ(sites_of(code, build(code, body, sizeof(body)), &r, 1, &s), 0) &&
	       ASSERT_EQ(s.mode, INLSITES_NOT_PROBED) &&
	       ASSERT_TRUE(strstr(s.reason, "stack pointer differs") != NULL);
}

TEST(inlsites_a_jump_through_a_register_is_said)
{
	/* the copy of the first test, and a switch's jmp rax after the RET */
	static const uint8_t body[] = { 0xb8, 0x01, 0x00, 0x00, 0x00, 0x83, 0xc0, 0x02 };
	struct addr_range r = { 0x1005, 0x100d };
	uint8_t code[64];
	struct inl_sites s;
	size_t n = build(code, body, sizeof(body));

	code[n++] = 0xff;
	code[n++] = 0xe0;
	return ASSERT_EQ(sites_of(code, n, &r, 1, &s), 0) &&
	       ASSERT_EQ(s.mode, INLSITES_NOT_PROBED) &&
	       ASSERT_TRUE(strstr(s.reason, "jumps through a register") != NULL);
}

TEST(inlsites_a_jump_through_a_register_inside_it_counts_its_entries)
{
	/* mov eax, 1; jmp rax (a switch inside the copy); add eax, 2 */
	static const uint8_t body[] = { 0xb8, 0x01, 0x00, 0x00, 0x00, 0xff, 0xe0, 0x83, 0xc0, 0x02 };
	struct addr_range r = { 0x1005, 0x100f };
	uint8_t code[64];
	struct inl_sites s;

	return ASSERT_EQ(sites_of(code, build(code, body, sizeof(body)), &r, 1, &s), 0) &&
	       ASSERT_EQ(s.mode, INLSITES_ENTRY_ONLY) && ASSERT_EQ(s.nentries, 1) &&
	       ASSERT_EQ(s.entries[0], 0x1005) && ASSERT_EQ(s.nexits, 0) &&
	       ASSERT_TRUE(strstr(s.reason, "counted at its entries") != NULL);
}

TEST(inlsites_hostile_ranges_are_bounded)
{
	/* ranges past the code, and undecodable bytes: said, never read past */
	static const uint8_t bad[] = { 0x0f, 0x0b, 0x0f, 0xff, 0xff, 0xff };
	struct addr_range past = { 0x2000, 0x3000 }, none = { 0x1000, 0x1000 };
	uint8_t code[64];
	struct inl_sites s;
	size_t n = build(code, bad, sizeof(bad));

	return ASSERT_EQ(sites_of(code, n, &past, 1, &s), 0) &&
	       ASSERT_EQ(s.mode, INLSITES_NOT_PROBED) &&
	       ASSERT_EQ(sites_of(code, n, &none, 1, &s), 0) &&
	       ASSERT_EQ(s.mode, INLSITES_NOT_PROBED) &&
	       ASSERT_EQ(sites_of(code, n, &none, 0, &s), 0) &&
	       ASSERT_EQ(s.mode, INLSITES_NOT_PROBED);
}

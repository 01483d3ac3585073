// SPDX-License-Identifier: MIT
#include <string.h>

#include "analysis/entrysite.h"
#include "test.h"

#define ENTRY 0x1000
#define MORESTACK 0x9000

static bool morestack_at(void *ctx, uint64_t addr)
{
	(void)ctx;
	return addr == MORESTACK;
}

/*
 * The entry site of code at ENTRY, swept first as the analysis does, and in
 * *ret_sp how far below the entry's the stack pointer is there; -1 on error.
 */
static int64_t site_sp(const uint8_t *code, size_t len, bool go, uint32_t *ret_sp)
{
	struct code_range r = { ENTRY, code, len };
	struct disasm_result dis;
	int64_t site;

	*ret_sp = ~0u;
	if (disasm__scan(DISASM_X86_64, &r, 1, ENTRY, &dis))
		return -1;
	site = entrysite__choose(&r, &dis, go, morestack_at, NULL, NULL, ret_sp);
	disasm_result__clear(&dis);
	return site;
}

/* The same, for a site whose stack pointer is the entry's; -2 when it is not. */
static int64_t site_of(const uint8_t *code, size_t len, bool go)
{
	uint32_t sp;
	int64_t site = site_sp(code, len, go, &sp);

	return site >= 0 && sp ? -2 : site;
}

/* A Go function: stack check, body, and its morestack block at 0x10. */
static const uint8_t go_fn[] = {
	0x49, 0x3b, 0x66, 0x10,	      /* cmp rsp, [r14+0x10] */
	0x76, 0x0a,		      /* jbe 0x1010 (the block) */
	0x55,			      /* push rbp                 @6: the site */
	0x48, 0x89, 0xe5,	      /* mov rbp, rsp */
	0x5d,			      /* pop rbp */
	0xc3,			      /* ret */
	0xcc, 0xcc, 0xcc, 0xcc,	      /* int3 padding */
	0x48, 0x89, 0x44, 0x24, 0x08, /* mov [rsp+8], rax (a spill) @0x10 */
	0xe8, 0xe6, 0x7f, 0x00, 0x00, /* call 0x9000 (runtime.morestack_noctxt) */
	0x48, 0x8b, 0x44, 0x24, 0x08, /* mov rax, [rsp+8] */
	0xeb, 0xdf,		      /* jmp 0x1000 */
};

TEST(entrysite_go_skips_its_stack_check)
{
	return ASSERT_EQ(site_of(go_fn, sizeof(go_fn), true), 6) &&
	       /* the same bytes as C code: the branch ends the run */
	       ASSERT_EQ(site_of(go_fn, sizeof(go_fn), false), 0);
}

TEST(entrysite_go_frame_made_by_sub)
{
	uint8_t code[sizeof(go_fn)];
	uint32_t sp;

	/* Go before 1.21 makes its frame with SUB: past it, on the NOP, the
	 * stack pointer is 8 below the entry's */
	memcpy(code, go_fn, sizeof(code));
	code[6] = 0x48; /* sub rsp, 8 */
	code[7] = 0x83;
	code[8] = 0xec;
	code[9] = 0x08;
	code[10] = 0x90; /* nop   @10 */
	if (!ASSERT_EQ(site_sp(code, sizeof(code), true, &sp), 10) || !ASSERT_EQ(sp, 8))
		return false;
	/* nothing emulated past it before the RET: the stack check's JBE is
	 * the site (a restart passes it twice, as it does the first byte) */
	code[10] = 0xc3;
	return ASSERT_EQ(site_sp(code, sizeof(code), true, &sp), 4) && ASSERT_EQ(sp, 0);
}

TEST(entrysite_past_the_stack_check)
{
	struct code_range r = { ENTRY, go_fn, sizeof(go_fn) };

	/* on the PUSH, the check is behind: a restart reaches the probe once */
	return ASSERT_TRUE(entrysite__past_check(&r, 6, morestack_at, NULL)) &&
	       /* on the check's JBE, or at the first byte: twice */
	       ASSERT_TRUE(!entrysite__past_check(&r, 4, morestack_at, NULL)) &&
	       ASSERT_TRUE(!entrysite__past_check(&r, 0, morestack_at, NULL));
}

TEST(entrysite_go_block_must_call_morestack)
{
	uint8_t code[sizeof(go_fn)];

	memcpy(code, go_fn, sizeof(code));
	code[0x16] = 0xe6 - 0x10; /* call 0x8ff0: not runtime.morestack */
	return ASSERT_EQ(site_of(code, sizeof(code), true), 0);
}

TEST(entrysite_go_jump_onto_the_site)
{
	uint8_t code[sizeof(go_fn)];

	memcpy(code, go_fn, sizeof(code));
	code[0x0c] = 0xeb; /* jmp 0x1006: a loop back to the site */
	code[0x0d] = 0xf8;
	return ASSERT_EQ(site_of(code, sizeof(code), true), 0);
}

TEST(entrysite_endbr64_then_push)
{
	static const uint8_t code[] = {
		0xf3, 0x0f, 0x1e, 0xfa, /* endbr64 */
		0x53,			/* push rbx   @4 */
		0x89, 0xfb,		/* mov ebx, edi */
		0x5b,			/* pop rbx */
		0xc3,			/* ret */
	};
	return ASSERT_EQ(site_of(code, sizeof(code), false), 4);
}

/* The entry site of code at ENTRY and the registers written before it. */
static int64_t site_and_clobbers(const uint8_t *code, size_t len, bool go, uint32_t *clobbers)
{
	struct code_range r = { ENTRY, code, len };
	int64_t site = site_of(code, len, go);

	*clobbers = site < 0 ? 0 : entrysite__clobbers(&r, site);
	return site;
}

/* A leaf without a frame: a store at [RSP + disp], XORs, a JMP into its loop. */
static const uint8_t spills[] = {
	0x48, 0x89, 0x5c, 0x24, 0x10, /* mov [rsp+0x10], rbx (a spill) */
	0x31, 0xc0,		      /* xor eax, eax */
	0x31, 0xd2,		      /* xor edx, edx */
	0xeb, 0x03,		      /* jmp +3   @9: the site */
	0x48, 0x01, 0x13,	      /* add [rbx], rdx */
	0x48, 0x89, 0xd0,	      /* mov rax, rdx */
	0xc3,			      /* ret */
};

TEST(entrysite_past_a_store_above_the_return_address)
{
	/* mov [rsp+0x100], rbx: a disp32 */
	static const uint8_t far[] = { 0x48, 0x89, 0x9c, 0x24, 0x00, 0x01, 0x00, 0x00, 0x90, 0xc3 };
	/* movups [rsp+0x18], xmm0; mov dword [rsp+8], 0 */
	static const uint8_t wide[] = { 0x0f, 0x11, 0x44, 0x24, 0x18, 0xc7, 0x44, 0x24,
					0x08, 0x00, 0x00, 0x00, 0x00, 0x90, 0xc3 };
	uint8_t code[sizeof(spills)];
	uint32_t clob;

	memcpy(code, spills, sizeof(code));
	if (!ASSERT_EQ(site_and_clobbers(code, sizeof(code), true, &clob), 9) ||
	    !ASSERT_EQ(clob, (1u << 0) | (1u << 2)) || /* rax, rdx */
	    !ASSERT_EQ(site_of(code, sizeof(code), false), 9))
		return false;
	code[4] = 0x08; /* mov [rsp+8], rbx: the lowest slot above the return address */
	if (!ASSERT_EQ(site_of(code, sizeof(code), true), 9))
		return false;
	return ASSERT_EQ(site_and_clobbers(far, sizeof(far), false, &clob), 8) &&
	       ASSERT_EQ(clob, 0) && ASSERT_EQ(site_of(wide, sizeof(wide), false), 13);
}

#define ROW 10

/* code (ROW bytes) followed by a PUSH and a RET: the PUSH is the site, were code skipped */
static int64_t site_before_push(const uint8_t *code, bool go, uint32_t *ret_sp)
{
	uint8_t buf[ROW + 2];

	memcpy(buf, code, ROW);
	buf[ROW] = 0x53;
	buf[ROW + 1] = 0xc3;
	return site_sp(buf, sizeof(buf), go, ret_sp);
}

/* Whether each of n rows (site_before_push) keeps the probe at the first byte. */
static bool all_stay(const uint8_t (*rows)[ROW], size_t n, bool go)
{
	uint32_t sp;

	for (size_t i = 0; i < n; i++)
		if (!ASSERT_EQ(site_before_push(rows[i], go, &sp), 0) || !ASSERT_EQ(sp, 0))
			return false;
	return true;
}

TEST(entrysite_other_stores_stay_at_the_first_byte)
{
	/* each padded with NOPs, whose first would be the site */
	static const uint8_t stores[][ROW] = {
		/* mov [rsp], rbx: the return address */
		{ 0x48, 0x89, 0x1c, 0x24, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 },
		/* mov [rsp+7], bl: its last byte */
		{ 0x88, 0x5c, 0x24, 0x07, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 },
		/* mov [rsp-4], rbx: its first four bytes */
		{ 0x48, 0x89, 0x5c, 0x24, 0xfc, 0x90, 0x90, 0x90, 0x90, 0x90 },
		/* sub rsp, 0x18; mov [rsp+0x18], rbx: through the new frame */
		{ 0x48, 0x83, 0xec, 0x18, 0x48, 0x89, 0x5c, 0x24, 0x18, 0x90 },
		/* mov [rsp+rax+0x10], rbx: an index */
		{ 0x48, 0x89, 0x5c, 0x04, 0x10, 0x90, 0x90, 0x90, 0x90, 0x90 },
		/* mov fs:[rsp+0x10], rbx: another segment */
		{ 0x64, 0x48, 0x89, 0x5c, 0x24, 0x10, 0x90, 0x90, 0x90, 0x90 },
		/* mov [esp+0x10], rbx: a 32-bit address */
		{ 0x67, 0x48, 0x89, 0x5c, 0x24, 0x10, 0x90, 0x90, 0x90, 0x90 },
	};

	return all_stay(stores, sizeof(stores) / sizeof(stores[0]), false);
}

TEST(entrysite_past_stores_that_miss_the_return_address)
{
	/* each padded with NOPs: the first is the site */
	static const struct {
		uint8_t code[ROW];
		int64_t site;
	} stores[] = {
		/* mov [rsp-8], rbx: the red zone */
		{ { 0x48, 0x89, 0x5c, 0x24, 0xf8, 0x90, 0x90, 0x90, 0x90, 0x90 }, 5 },
		/* mov [rsp-0x80000000], rbx: a disp32 below */
		{ { 0x48, 0x89, 0x9c, 0x24, 0x00, 0x00, 0x00, 0x80, 0x90, 0x90 }, 8 },
		/* mov [rbp+0x10], rbx: another base */
		{ { 0x48, 0x89, 0x5d, 0x10, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 }, 4 },
		/* mov [rip+0x10], rbx */
		{ { 0x48, 0x89, 0x1d, 0x10, 0x00, 0x00, 0x00, 0x90, 0x90, 0x90 }, 7 },
		/* stosq: [rdi] */
		{ { 0x48, 0xab, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 }, 2 },
		/* lock add [rdi], eax */
		{ { 0xf0, 0x01, 0x07, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 }, 3 },
		/* sub rsp, 0x18; mov [rsp+0x10], rbx: the new frame's top slot */
		{ { 0x48, 0x83, 0xec, 0x18, 0x48, 0x89, 0x5c, 0x24, 0x10, 0x90 }, 9 },
	};
	uint32_t sp;

	for (size_t i = 0; i < sizeof(stores) / sizeof(stores[0]); i++)
		if (!ASSERT_EQ(site_before_push(stores[i].code, false, &sp), stores[i].site) ||
		    !ASSERT_EQ(sp, i == 6 ? 0x18 : 0))
			return false;
	return true;
}

/* A frame made without a PUSH, as printf makes its own. */
static const uint8_t sub_frame[] = {
	0xf3, 0x0f, 0x1e, 0xfa,				/* endbr64 */
	0x48, 0x81, 0xec, 0xd8, 0x00, 0x00, 0x00,	/* sub rsp, 0xd8 */
	0x48, 0x89, 0x74, 0x24, 0x28,			/* mov [rsp+0x28], rsi */
	0x48, 0x89, 0x94, 0x24, 0xd0, 0x00, 0x00, 0x00, /* mov [rsp+0xd0], rdx: -8 */
	0x48, 0x89, 0x8c, 0x24, 0xe0, 0x00, 0x00, 0x00, /* mov [rsp+0xe0], rcx: +8 */
	0x84, 0xc0,					/* test al, al */
	0x74, 0x05,					/* je +5   @34: the site */
	0x0f, 0x29, 0x44, 0x24, 0x50,			/* movaps [rsp+0x50], xmm0 */
	0x48, 0x81, 0xc4, 0xd8, 0x00, 0x00, 0x00,	/* add rsp, 0xd8 */
	0xc3,
};

TEST(entrysite_past_a_frame_made_by_sub)
{
	uint8_t code[sizeof(sub_frame)];
	uint32_t sp;

	memcpy(code, sub_frame, sizeof(code));
	if (!ASSERT_EQ(site_sp(code, sizeof(code), false, &sp), 34) || !ASSERT_EQ(sp, 0xd8))
		return false;
	/* mov [rsp+0xd8], rcx: the return address, 0xd8 above */
	code[28] = 0xd8;
	if (!ASSERT_EQ(site_sp(code, sizeof(code), false, &sp), 0) || !ASSERT_EQ(sp, 0))
		return false;
	/* sub then add back: the entry's own stack pointer */
	return ASSERT_EQ(site_sp((const uint8_t[]){ 0x48, 0x83, 0xec, 0x08, 0x48, 0x83, 0xc4, 0x08,
						    0x53, 0x5b, 0xc3 },
				 11, false, &sp),
			 8) &&
	       ASSERT_EQ(sp, 0) &&
	       /* lea rsp, [rsp-0x10] */
	       ASSERT_EQ(
		       site_sp((const uint8_t[]){ 0x48, 0x8d, 0x64, 0x24, 0xf0, 0x53, 0x5b, 0xc3 },
			       8, false, &sp),
		       5) &&
	       ASSERT_EQ(sp, 0x10);
}

TEST(entrysite_stack_pointer_lost_stays_at_the_first_byte)
{
	static const uint8_t moves[][ROW] = {
		/* and rsp, -16: by an amount not known */
		{ 0x48, 0x83, 0xe4, 0xf0, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 },
		/* sub rsp, rax */
		{ 0x48, 0x29, 0xc4, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 },
		/* mov rsp, rbp */
		{ 0x48, 0x89, 0xec, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 },
		/* add rsp, 8: above the entry's */
		{ 0x48, 0x83, 0xc4, 0x08, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 },
		/* pop rbx */
		{ 0x5b, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 },
		/* pushfq: not an emulated PUSH */
		{ 0x9c, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 },
		/* sub rsp, 0x7fffffff: past any frame */
		{ 0x48, 0x81, 0xec, 0xff, 0xff, 0xff, 0x7f, 0x90, 0x90, 0x90 },
	};

	return all_stay(moves, sizeof(moves) / sizeof(moves[0]), false);
}

TEST(entrysite_long_or_trapping_instructions_end_the_run)
{
	static const uint8_t ends[][ROW] = {
		/* rep movsb: any length, which the duration holds */
		{ 0xf3, 0xa4, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 },
		/* cpuid */
		{ 0x0f, 0xa2, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 },
		/* ud2 */
		{ 0x0f, 0x0b, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 },
		/* syscall */
		{ 0x0f, 0x05, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 },
	};
	/* Go: mov r14, rax writes g */
	static const uint8_t writes_g[ROW] = { 0x49, 0x89, 0xc6, 0x90, 0x90,
					       0x90, 0x90, 0x90, 0x90, 0x90 };
	uint32_t sp;

	return all_stay(ends, sizeof(ends) / sizeof(ends[0]), false) &&
	       ASSERT_EQ(site_before_push(writes_g, true, &sp), 0) &&
	       ASSERT_EQ(site_before_push(writes_g, false, &sp), 3);
}

TEST(entrysite_clobbers)
{
	static const uint8_t moves[] = {
		0xf3, 0x0f, 0x1e, 0xfa, /* endbr64 */
		0x48, 0x89, 0xfb,	/* mov rbx, rdi */
		0x41, 0x88, 0xf0,	/* mov r8b, sil */
		0x66, 0x41, 0xff, 0xc7, /* inc r15w */
		0x48, 0x99,		/* cqo: RDX, a register it does not name */
		0x53,			/* push rbx   @16: the site */
		0x5b, 0xc3,
	};
	static const uint8_t cet[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x53, 0x5b, 0xc3 };
	struct code_range cut = { ENTRY, moves, 15 };
	uint32_t clob;

	return ASSERT_EQ(site_and_clobbers(moves, sizeof(moves), false, &clob), 16) &&
	       ASSERT_EQ(clob, (1u << 3) | (1u << 8) | (1u << 15) | (1u << 2)) &&
	       /* nothing skipped but ENDBR64: none */
	       ASSERT_EQ(site_and_clobbers(cet, sizeof(cet), false, &clob), 4) &&
	       ASSERT_EQ(clob, 0) &&
	       /* the first byte, and the Go stack check (CMP, JBE) skipped */
	       ASSERT_EQ(entrysite__clobbers(&cut, 0), 0) &&
	       ASSERT_EQ(site_and_clobbers(go_fn, sizeof(go_fn), true, &clob), 6) &&
	       ASSERT_EQ(clob, 0) &&
	       /* not decoded up to the site (cut short, or a site inside an
		* instruction): every register */
	       ASSERT_EQ(entrysite__clobbers(&cut, 16), ENTRYSITE_ALL_GPRS) &&
	       ASSERT_EQ(
		       entrysite__clobbers(&(struct code_range){ ENTRY, moves, sizeof(moves) }, 5),
		       ENTRYSITE_ALL_GPRS);
}

TEST(entrysite_stays_at_the_first_byte)
{
	static const uint8_t writes_return[] = {
		0x48, 0x89, 0x3c, 0x24, /* mov [rsp], rdi */
		0x53, 0x5b, 0xc3,	/* push rbx; pop rbx; ret */
	};
	static const uint8_t loops_to_entry[] = {
		0xf3, 0x0f, 0x1e, 0xfa, /* endbr64 */
		0x53, 0x5b,		/* push rbx; pop rbx */
		0xff, 0xcf,		/* dec edi */
		0x7f, 0xf6,		/* jg 0x1000 */
		0xc3,
	};
	static const uint8_t jump_table[] = {
		0xf3, 0x0f, 0x1e, 0xfa, /* endbr64 */
		0x53, 0x5b,		/* push rbx; pop rbx */
		0x74, 0x02,		/* je +2 */
		0xff, 0xe0,		/* jmp rax: a switch table could land anywhere */
		0xc3,
	};
	static const uint8_t push_first[] = { 0x55, 0x5d, 0xc3 };

	return ASSERT_EQ(site_of(writes_return, sizeof(writes_return), false), 0) &&
	       ASSERT_EQ(site_of(loops_to_entry, sizeof(loops_to_entry), false), 0) &&
	       ASSERT_EQ(site_of(jump_table, sizeof(jump_table), false), 0) &&
	       ASSERT_EQ(site_of(push_first, sizeof(push_first), false), 0);
}

TEST(entrysite_on_the_branch_that_ends_the_run)
{
	static const uint8_t shrink_wrapped[] = {
		0x85, 0xff,	  /* test edi, edi */
		0x78, 0x03,	  /* js +3: an early exit before the pushes  @2 */
		0x53, 0x5b, 0xc3, /* push rbx; pop rbx; ret */
		0x31, 0xc0, 0xc3, /* xor eax, eax; ret */
	};
	static const uint8_t loops_to_the_branch[] = {
		0x85, 0xff, /* test edi, edi */
		0x78, 0x03, /* js +3 */
		0xff, 0xcf, /* dec edi */
		0xeb, 0xfa, /* jmp 0x1002: back onto the branch */
		0xc3,
	};
	return ASSERT_EQ(site_of(shrink_wrapped, sizeof(shrink_wrapped), false), 2) &&
	       ASSERT_EQ(site_of(loops_to_the_branch, sizeof(loops_to_the_branch), false), 0);
}

TEST(entrysite_probe_kinds)
{
	static const uint8_t push_r12[] = { 0x41, 0x54 }, nop5[] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 },
			     nop4[] = { 0x0f, 0x1f, 0x40, 0x00 }, lea[] = { 0x8d, 0x47, 0x01 },
			     jl[] = { 0x7c, 0x10 }, jne32[] = { 0x0f, 0x85, 0, 1, 0, 0 },
			     jmp32[] = { 0xe9, 0, 1, 0, 0 }, call[] = { 0xe8, 0, 1, 0, 0 },
			     callw[] = { 0x66, 0xe8, 0, 1 }, call_cut[] = { 0xe8, 0, 1, 0 };

	return ASSERT_EQ(disasm__probe_kind(push_r12, sizeof(push_r12)), DISASM_PROBE_PUSH) &&
	       ASSERT_EQ(disasm__probe_kind(nop5, sizeof(nop5)), DISASM_PROBE_NOP5) &&
	       ASSERT_EQ(disasm__probe_kind(nop4, sizeof(nop4)), DISASM_PROBE_NOP) &&
	       ASSERT_EQ(disasm__probe_kind(lea, sizeof(lea)), DISASM_PROBE_STEPPED) &&
	       ASSERT_EQ(disasm__probe_kind(jl, sizeof(jl)), DISASM_PROBE_JUMP) &&
	       ASSERT_EQ(disasm__probe_kind(jne32, sizeof(jne32)), DISASM_PROBE_JUMP) &&
	       ASSERT_EQ(disasm__probe_kind(jmp32, sizeof(jmp32)), DISASM_PROBE_JUMP) &&
	       ASSERT_EQ(disasm__probe_kind(call, sizeof(call)), DISASM_PROBE_CALL) &&
	       /* the kernel refuses an operand-size prefix on a CALL */
	       ASSERT_EQ(disasm__probe_kind(callw, sizeof(callw)), DISASM_PROBE_STEPPED) &&
	       ASSERT_EQ(disasm__probe_kind(call_cut, sizeof(call_cut)), DISASM_PROBE_STEPPED);
}

/* A function that passes its argument on: clc; lea; call g; add; ret. */
static const uint8_t calls_on[] = {
	0xf8,			      /* clc: stepped, writes neither RSP nor memory */
	0x8d, 0x7f, 0x01,	      /* lea edi, [rdi+1] */
	0xe8, 0xf7, 0x7f, 0x00, 0x00, /* call 0x9000  @4: the site */
	0x83, 0xc0, 0x01,	      /* add eax, 1 */
	0xc3,			      /* ret */
};

TEST(entrysite_on_the_call_that_ends_the_run)
{
	uint8_t code[sizeof(calls_on)];

	memcpy(code, calls_on, sizeof(code));
	code[0] = 0x90; /* nop: the site, the first emulated instruction */
	if (!ASSERT_EQ(site_of(code, sizeof(code), false), 0))
		return false;
	code[0] = 0xf8;
	if (!ASSERT_EQ(site_of(code, sizeof(code), false), 4) ||
	    !ASSERT_EQ(site_of(code, sizeof(code), true), 4))
		return false;
	code[5] = 0xf7; /* call 0x1000: a recursive call is a call */
	code[6] = 0xff;
	code[7] = 0xff;
	code[8] = 0xff;
	return ASSERT_EQ(site_of(code, sizeof(code), false), 4);
}

TEST(entrysite_call_stays_at_the_first_byte)
{
	uint8_t writes_memory[sizeof(calls_on) + 4], into_run[sizeof(calls_on)],
		onto_itself[sizeof(calls_on)], loops_to_call[sizeof(calls_on) + 2];

	/* mov [rsp+4], rdi: over the return address's upper half */
	memcpy(writes_memory, (const uint8_t[]){ 0x48, 0x89, 0x7c, 0x24, 0x04 }, 5);
	memcpy(writes_memory + 5, calls_on + 1, sizeof(calls_on) - 1);
	memcpy(into_run, calls_on, sizeof(into_run));
	into_run[5] = 0xf8; /* call 0x1001: back onto the LEA it would skip */
	into_run[6] = into_run[7] = into_run[8] = 0xff;
	memcpy(onto_itself, into_run, sizeof(onto_itself));
	onto_itself[5] = 0xfb; /* call 0x1004: onto the site */
	memcpy(loops_to_call, into_run, sizeof(calls_on) - 1);
	memcpy(loops_to_call + 5, calls_on + 5, 4); /* call 0x9000 again */
	/* jmp 0x1004 before the ret: a loop back onto the CALL */
	memcpy(loops_to_call + sizeof(calls_on) - 1, (const uint8_t[]){ 0xeb, 0xf6, 0xc3 }, 3);
	return ASSERT_EQ(site_of(writes_memory, sizeof(writes_memory), false), 0) &&
	       ASSERT_EQ(site_of(into_run, sizeof(into_run), false), 0) &&
	       ASSERT_EQ(site_of(onto_itself, sizeof(onto_itself), false), 0) &&
	       ASSERT_EQ(site_of(loops_to_call, sizeof(loops_to_call), false), 0);
}

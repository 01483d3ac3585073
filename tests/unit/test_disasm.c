// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "analysis/disasm.h"
#include "test.h"

static bool scan(const uint8_t *code, size_t len, struct disasm_result *res)
{
	struct code_range r = { 0x1000, code, len };

	return ASSERT_OK(disasm__scan(DISASM_X86_64, &r, 1, 0x1000, res));
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

/*
 * Every form of CALL is counted (a function that calls nothing is one whose
 * calls may end at the kernel's return trampoline: one that calls, never).
 */
TEST(disasm_counts_calls)
{
	static const uint8_t code[] = {
		0xe8, 0x00, 0x00, 0x00, 0x00,	    /* call rel32 (quick table) */
		0xff, 0xd0,			    /* call rax */
		0xff, 0x15, 0x00, 0x10, 0x00, 0x00, /* call [rip+0x1000] */
		0x41, 0xff, 0x54, 0x24, 0x08,	    /* call [r12+8] */
		0xc3,				    /* ret */
	};
	static const uint8_t leaf[] = {
		0x48, 0x8d, 0x47, 0x01, /* lea rax, [rdi+1] */
		0xc3,			/* ret */
	};
	struct disasm_result res;
	bool ok = scan(code, sizeof(code), &res) && ASSERT_EQ(res.ncalls, 4) &&
		  ASSERT_EQ(res.nreturns, 1) && ASSERT_EQ(res.ntail_calls, 0);

	disasm_result__clear(&res);
	ok = ok && scan(leaf, sizeof(leaf), &res) && ASSERT_EQ(res.ncalls, 0);
	disasm_result__clear(&res);
	return ok;
}

/*
 * A load of the stack pointer from off the stack is a switch of stacks
 * (swapcontext's `mov 0xa0(%rdx),%rsp`), by the quick table and by Zydis;
 * a frame's own moves of it are not.
 */
TEST(disasm_stack_switches)
{
	static const struct {
		uint8_t bytes[12];
		size_t len;
		bool switches;
	} forms[] = {
		{ { 0x48, 0x8b, 0xa2, 0xa0, 0, 0, 0 }, 7, true }, /* mov 0xa0(%rdx),%rsp */
		{ { 0x5c }, 1, true },				  /* pop %rsp */
		{ { 0x48, 0x94 }, 2, true },			  /* xchg %rax,%rsp */
		{ { 0x48, 0x89, 0xfc }, 3, true },		  /* mov %rdi,%rsp */
		{ { 0x48, 0x8d, 0x67, 0x08 }, 4, true },	  /* lea 8(%rdi),%rsp */
		{ { 0x48, 0x0f, 0x45, 0xe0 }, 4, true },	  /* cmovne %rax,%rsp */
		{ { 0x64, 0x48, 0x8b, 0x24, 0x25, 0x10, 0, 0, 0 }, 9, true }, /* mov %fs:0x10,%rsp */
		{ { 0x48, 0x89, 0xec }, 3, false },			      /* mov %rbp,%rsp */
		{ { 0x48, 0x8d, 0x65, 0xf0 }, 4, false },	/* lea -0x10(%rbp),%rsp */
		{ { 0x48, 0x8d, 0x64, 0x24, 0x08 }, 5, false }, /* lea 8(%rsp),%rsp */
		{ { 0x48, 0x83, 0xc4, 0x08 }, 4, false },	/* add $8,%rsp */
		{ { 0x48, 0x83, 0xe4, 0xf0 }, 4, false },	/* and $-16,%rsp */
		{ { 0x48, 0x29, 0xc4 }, 3, false },		/* sub %rax,%rsp */
		{ { 0xc9 }, 1, false },				/* leave */
		{ { 0x5d }, 1, false },				/* pop %rbp */
	};
	bool ok = true;

	for (size_t i = 0; ok && i < sizeof(forms) / sizeof(forms[0]); i++) {
		uint8_t code[16];
		struct disasm_result res;

		memcpy(code, forms[i].bytes, forms[i].len);
		code[forms[i].len] = 0xc3; /* ret */
		ok = scan(code, forms[i].len + 1, &res) &&
		     CHECK(res.nstack_switches == (forms[i].switches ? 1U : 0U),
			   "form %zu: %zu stack switches", i, res.nstack_switches);
		disasm_result__clear(&res);
	}
	return ok;
}

/*
 * A leaf that reaches its return slot, which holds the trampoline's address
 * while a uretprobe'd call runs: vfork's POP of it, a read of it through
 * RSP or a frame pointer, its address taken. A frame's own locals, stack
 * arguments above the slot and an early return's other depth do not.
 */
TEST(disasm_return_slot)
{
	static const struct {
		uint8_t bytes[32];
		size_t len;
		bool used;
	} forms[] = {
		/* pop %rdi; mov $58,%eax; syscall; push %rdi; ret */
		{ { 0x5f, 0xb8, 0x3a, 0, 0, 0, 0x0f, 0x05, 0x57, 0xc3 }, 10, true },
		/* mov (%rsp),%rax; ret */
		{ { 0x48, 0x8b, 0x04, 0x24, 0xc3 }, 5, true },
		/* push %rbp; mov %rsp,%rbp; mov 8(%rbp),%rax; pop %rbp; ret */
		{ { 0x55, 0x48, 0x89, 0xe5, 0x48, 0x8b, 0x45, 0x08, 0x5d, 0xc3 }, 10, true },
		/* sub $0x18,%rsp; mov 0x18(%rsp),%rax; add $0x18,%rsp; ret */
		{ { 0x48, 0x83, 0xec, 0x18, 0x48, 0x8b, 0x44, 0x24, 0x18, 0x48, 0x83, 0xc4, 0x18,
		    0xc3 },
		  14,
		  true },
		/* lea (%rsp),%rax; ret */
		{ { 0x48, 0x8d, 0x04, 0x24, 0xc3 }, 5, true },
		/* push %rbp; mov %rsp,%rbp; mov %rdi,-8(%rbp); mov -8(%rbp),%rax; pop %rbp; ret */
		{ { 0x55, 0x48, 0x89, 0xe5, 0x48, 0x89, 0x7d, 0xf8, 0x48, 0x8b, 0x45, 0xf8, 0x5d,
		    0xc3 },
		  14,
		  false },
		/* sub $0x18,%rsp; mov %rdi,8(%rsp); mov 8(%rsp),%rax; add $0x18,%rsp; ret */
		{ { 0x48, 0x83, 0xec, 0x18, 0x48, 0x89, 0x7c, 0x24, 0x08, 0x48, 0x8b, 0x44, 0x24,
		    0x08, 0x48, 0x83, 0xc4, 0x18, 0xc3 },
		  19,
		  false },
		/* test %edi,%edi; je 1f; push %rbx; mov %rdi,%rbx; pop %rbx; ret; 1: mov %rdi,%rax; ret */
		{ { 0x85, 0xff, 0x74, 0x06, 0x53, 0x48, 0x89, 0xfb, 0x5b, 0xc3, 0x48, 0x89, 0xf8,
		    0xc3 },
		  14,
		  false },
		/* mov 8(%rsp),%rax (a stack argument); ret */
		{ { 0x48, 0x8b, 0x44, 0x24, 0x08, 0xc3 }, 6, false },
	};
	bool ok = true;

	for (size_t i = 0; ok && i < sizeof(forms) / sizeof(forms[0]); i++) {
		struct disasm_result res;

		ok = scan(forms[i].bytes, forms[i].len, &res) &&
		     CHECK(res.return_slot_used == forms[i].used, "form %zu: return slot used %d",
			   i, res.return_slot_used);
		disasm_result__clear(&res);
	}
	return ok;
}

/* Jumps through a pointer: their operands, for the kernel to read where each goes. */
TEST(disasm_hook_sites)
{
	static const uint8_t code[] = {
		0x48, 0x85, 0xc0,		    /* test rax, rax */
		0x74, 0x02,			    /* je +2 */
		0xff, 0xe0,			    /* jmp rax @5 */
		0x41, 0xff, 0xe3,		    /* jmp r11 @7 */
		0xff, 0x25, 0x10, 0x00, 0x00, 0x00, /* jmp [rip+0x10] @10 */
		0xff, 0x64, 0xd8, 0x20,		    /* jmp [rax+rbx*8+0x20] @16 */
		0x64, 0xff, 0x20,		    /* jmp fs:[rax]: not read */
		0xe9, 0xf7, 0x0f, 0x00, 0x00,	    /* jmp 0x2000: direct, not a hook */
		0xc3,				    /* ret */
	};
	struct disasm_result res;
	bool ok = scan(code, sizeof(code), &res) && ASSERT_EQ(res.nhooks, 4) &&
		  ASSERT_EQ(res.hooks[0].off, 5) && ASSERT_EQ(res.hooks[0].kind, DISASM_HOOK_REG) &&
		  ASSERT_EQ(res.hooks[0].base, 1) && ASSERT_EQ(res.hooks[0].len, 2) &&
		  ASSERT_EQ(res.hooks[1].off, 7) && ASSERT_EQ(res.hooks[1].base, 12) &&
		  ASSERT_EQ(res.hooks[2].off, 10) &&
		  ASSERT_EQ(res.hooks[2].kind, DISASM_HOOK_MEM) &&
		  ASSERT_EQ(res.hooks[2].base, DISASM_REG_IP) &&
		  ASSERT_EQ(res.hooks[2].disp, 0x10) && ASSERT_EQ(res.hooks[2].len, 6) &&
		  ASSERT_EQ(res.hooks[2].index, 0) && ASSERT_EQ(res.hooks[3].off, 16) &&
		  ASSERT_EQ(res.hooks[3].base, 1) && ASSERT_EQ(res.hooks[3].index, 4) &&
		  ASSERT_EQ(res.hooks[3].scale, 8) && ASSERT_EQ(res.hooks[3].disp, 0x20);

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
	bool ok = ASSERT_OK(disasm__scan(DISASM_X86_64, r, 2, 0x1000, &res)) &&
		  ASSERT_EQ(res.ntail_calls, 2) && ASSERT_EQ(res.tail_calls[0], -0x800) &&
		  ASSERT_EQ(res.tail_targets[0], 0x2800) && ASSERT_EQ(res.tail_calls[1], 0) &&
		  ASSERT_EQ(res.tail_targets[1], 0x2000) && ASSERT_EQ(res.nindirect_jumps, 1);

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
	ok = ASSERT_OK(disasm__scan(DISASM_X86_64, r, 2, 0x1000, &res)) &&
	     ASSERT_EQ(res.nreturns, 2) && ASSERT_EQ(res.returns[0], -0x100 + 2) &&
	     ASSERT_EQ(res.returns[1], 8) && ASSERT_EQ(res.ntail_calls, 0) &&
	     ASSERT_EQ(res.code_end, 0x1009);
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
		  ASSERT_TRUE(!res.reason);

	disasm_result__clear(&res);
	ok = ok && scan(over, DISASM_MAX_RETURNS + 1, &res) && ASSERT_TRUE(res.over_budget) &&
	     ASSERT_EQ(res.nreturns, 0) && ASSERT_TRUE(!res.returns) &&
	     ASSERT_EQ(res.ninsns, DISASM_MAX_RETURNS + 1) &&
	     ASSERT_STRCONTAINS(res.reason,
				"more than 16384 return sites (the limit per function)");
	disasm_result__clear(&res);
	/* the bytes of all ranges count, and nothing is decoded past the limit */
	ok = ok && ASSERT_OK(disasm__scan(DISASM_X86_64, two, 2, 0x1000, &res)) &&
	     ASSERT_TRUE(res.over_budget) && ASSERT_EQ(res.ninsns, 0) &&
	     ASSERT_EQ(res.nreturns, 0) &&
	     ASSERT_STRCONTAINS(res.reason, "more than 4 MiB (the limit per function)");
	disasm_result__clear(&res);
	two[1].len = DISASM_MAX_BYTES / 2 - 1;
	ok = ok && ASSERT_OK(disasm__scan(DISASM_X86_64, two, 2, 0x1000, &res)) &&
	     ASSERT_FALSE(res.over_budget) && ASSERT_EQ(res.nreturns, 5);
	disasm_result__clear(&res);
	free(at);
	free(over);
	free(big);
	return ok;
}

/* ---- the table of common forms against Zydis ---- */

/*
 * Whether Zydis, configured as the sweep's full decoder, reads the same
 * instruction from p (n bytes) as disasm__quick did: decodes it, at the same
 * length, a RET or INT3 or CALL or relative jump (to the same target)
 * exactly when q says so. Prints the bytes when not.
 */
static bool zydis_agrees(const uint8_t *p, size_t n, const struct disasm_insn *q)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction insn;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	enum disasm_kind kind = DISASM_OTHER;
	uint64_t target = 0;
	bool ok;

	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	ok = ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, p, n, &insn, ops));
	if (ok && insn.mnemonic == ZYDIS_MNEMONIC_RET)
		kind = DISASM_RET;
	else if (ok && insn.mnemonic == ZYDIS_MNEMONIC_INT3)
		kind = DISASM_INT3;
	else if (ok && insn.meta.category == ZYDIS_CATEGORY_CALL)
		kind = DISASM_CALL;
	else if (ok && (insn.meta.category == ZYDIS_CATEGORY_COND_BR ||
			insn.meta.category == ZYDIS_CATEGORY_UNCOND_BR))
		kind = ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[0].imm.is_relative &&
				       ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(
					       &insn, &ops[0], 0xfffffffffffff000ull, &target))
			       ? DISASM_JUMP_REL
			       : (enum disasm_kind) - 1; /* a jump the table must leave */
	ok = ok && insn.length == q->length && kind == q->kind &&
	     (kind != DISASM_JUMP_REL ||
	      target == 0xfffffffffffff000ull + q->length + (uint64_t)q->rel);
	if (!ok) {
		fprintf(stderr, "  disasm__quick and Zydis differ on");
		for (size_t i = 0; i < n; i++)
			fprintf(stderr, " %02x", p[i]);
		fprintf(stderr, " (table: length %zu, kind %d)\n", q->length, q->kind);
	}
	return ok;
}

/*
 * Every opcode of both maps, after no REX and each of the 16, with every
 * ModRM and, where a SIB follows, every base under two indexes and scales;
 * the bytes after them random (fixed seed), the buffer whole and cut one
 * short of what the table reads: wherever the table answers, Zydis answers
 * the same. The table covers the common forms it claims (so the test fails
 * without it).
 */
TEST(disasm_quick_agrees_with_zydis)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	size_t checked = 0;
	bool ok = true;

	for (int rex = -1; rex < 16 && ok; rex++) {
		for (unsigned int op = 0; op < 512 && ok; op++) {
			for (unsigned int modrm = 0; modrm < 256 && ok; modrm++) {
				unsigned int nsib = (modrm & 7) == 4 && modrm >> 6 != 3 ? 32 : 1;

				for (unsigned int s = 0; s < nsib && ok; s++) {
					uint8_t buf[16];
					size_t i = 0;
					struct disasm_insn q;

					for (size_t k = 0; k < sizeof(buf); k++) {
						seed = seed * 6364136223846793005ull +
						       1442695040888963407ull;
						buf[k] = seed >> 56;
					}
					if (rex >= 0)
						buf[i++] = 0x40 | rex;
					if (op >= 256)
						buf[i++] = 0x0f;
					buf[i++] = op & 0xff;
					buf[i++] = modrm;
					/* base s % 8; index rcx or none; scale 1 or 8 */
					buf[i] = (s & 8 ? 0xc0 : 0) | (s & 16 ? 0x20 : 0x08) |
						 (s & 7);
					if (!disasm__quick(buf, sizeof(buf), &q))
						continue;
					checked++;
					ok = zydis_agrees(buf, sizeof(buf), &q) &&
					     zydis_agrees(buf, q.length, &q);
					if (ok && disasm__quick(buf, q.length - 1, &q))
						ok = zydis_agrees(buf, q.length, &q) &&
						     CHECK(false,
							   "the table read %zu bytes from %zu",
							   q.length, q.length - 1);
				}
			}
		}
	}
	return ok && ASSERT_TRUE(checked > 1000000);
}

/* The forms that make most of a Go binary's code are read by the table. */
TEST(disasm_quick_reads_common_forms)
{
	static const struct {
		uint8_t bytes[12];
		size_t length;
		enum disasm_kind kind;
		int64_t rel;
	} forms[] = {
		{ { 0x48, 0x89, 0x44, 0x24, 0x08 }, 5, DISASM_OTHER, 0 }, /* mov [rsp+8], rax */
		{ { 0x48, 0x8b, 0x05, 1, 2, 3, 4 }, 7, DISASM_OTHER, 0 }, /* mov rax, [rip+x] */
		{ { 0x48, 0x8d, 0x04, 0x25, 1, 2, 3, 4 }, 8, DISASM_OTHER, 0 },	 /* lea, no base */
		{ { 0x44, 0x0f, 0x11, 0x7c, 0x24, 0x10 }, 6, DISASM_OTHER, 0 },	 /* movups */
		{ { 0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8 }, 10, DISASM_OTHER, 0 }, /* mov rax, imm64 */
		{ { 0xb8, 1, 2, 3, 4 }, 5, DISASM_OTHER, 0 },		     /* mov eax, imm32 */
		{ { 0x48, 0x81, 0xec, 0x80, 0, 0, 0 }, 7, DISASM_OTHER, 0 }, /* sub rsp, 128 */
		{ { 0xf7, 0xd8 }, 2, DISASM_OTHER, 0 },			     /* neg eax */
		{ { 0xf7, 0xc0, 1, 0, 0, 0 }, 6, DISASM_OTHER, 0 },	     /* test eax, 1 */
		{ { 0xe8, 0, 0, 0, 0 }, 5, DISASM_CALL, 0 },		     /* call */
		{ { 0xc3 }, 1, DISASM_RET, 0 },
		{ { 0xcc }, 1, DISASM_INT3, 0 },
		{ { 0x74, 0xfe }, 2, DISASM_JUMP_REL, -2 },
		{ { 0x0f, 0x85, 0x10, 0, 0, 0 }, 6, DISASM_JUMP_REL, 16 },
		{ { 0xe9, 0xff, 0xff, 0xff, 0x7f }, 5, DISASM_JUMP_REL, 0x7fffffff },
	};
	bool ok = true;

	for (size_t i = 0; ok && i < sizeof(forms) / sizeof(forms[0]); i++) {
		struct disasm_insn q = {};

		ok = ASSERT_TRUE(disasm__quick(forms[i].bytes, forms[i].length, &q)) &&
		     ASSERT_EQ(q.length, forms[i].length) && ASSERT_EQ(q.kind, forms[i].kind) &&
		     ASSERT_EQ(q.rel, forms[i].rel) &&
		     /* one byte short: left to Zydis, which says it is cut */
		     ASSERT_FALSE(disasm__quick(forms[i].bytes, forms[i].length - 1, &q));
	}
	/* prefixed, and jumps through memory: Zydis's */
	ok = ok &&
	     ASSERT_FALSE(
		     disasm__quick((const uint8_t[]){ 0x66, 0x90 }, 2, &(struct disasm_insn){})) &&
	     ASSERT_FALSE(disasm__quick((const uint8_t[]){ 0xff, 0x25, 0, 0, 0, 0 }, 6,
					&(struct disasm_insn){})) &&
	     ASSERT_FALSE(
		     disasm__quick((const uint8_t[]){ 0x8d, 0xc0 }, 2, &(struct disasm_insn){}));
	return ok;
}

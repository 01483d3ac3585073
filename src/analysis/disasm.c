// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "base/cancel.h"
#include "analysis/disasm_impl.h"

int disasm__push(int64_t **arr, size_t *n, int64_t v)
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

bool disasm__in_ranges(const struct code_range *ranges, size_t n, uint64_t addr)
{
	for (size_t i = 0; i < n; i++)
		if (addr >= ranges[i].addr && addr - ranges[i].addr < ranges[i].len)
			return true;
	return false;
}

/*
 * The sweep reads the common instructions with disasm__quick and the rest
 * with Zydis in its minimal mode (length, mnemonic and category: what finds
 * RETs and tells jumps apart; Zydis's semantic analysis of every
 * instruction took most of an inspect of a big binary), and decodes a jump
 * read so again in full for its operands. Both modes read the same bytes
 * the same way: an instruction decodes, and at the same length, in both or
 * in neither.
 */
struct decoders {
	ZydisDecoder brief, full;
};

enum jump_kind {
	JUMP_NONE,     /* not a jump, or one whose target is not known */
	JUMP_INSIDE,   /* direct, to *ret_target inside the function */
	JUMP_LEAVES,   /* leaves the function: *ret_target where it goes, 0 if not known */
	JUMP_INDIRECT, /* unconditional, through a register or a computed address */
};

/* ---- the common forms ---- */

/* What the table knows of an opcode; 0: left to Zydis. */
enum {
	Q_KNOWN = 1 << 0,     /* no ModRM, no immediate unless said below */
	Q_MODRM = 1 << 1,     /* a ModRM (and SIB, displacement) follows */
	Q_IMM8 = 1 << 2,      /* an 8-bit immediate ends it */
	Q_IMM32 = 1 << 3,     /* a 32-bit immediate ends it */
	Q_IMMV = 1 << 4,      /* 32-bit, or 64-bit with REX.W (MOV r64, imm64) */
	Q_MEM = 1 << 5,	      /* ModRM names memory, never a register (LEA) */
	Q_REG0 = 1 << 6,      /* ModRM.reg is 0 (other values are other instructions) */
	Q_REG01 = 1 << 7,     /* ModRM.reg is 0 or 1 */
	Q_GRP3 = 1 << 8,      /* TEST r/m, imm for reg 0, no immediate for 2-7, not 1 */
	Q_GRP5 = 1 << 9,      /* INC, DEC, PUSH r/m only (reg 0, 1, 6): no CALL, no JMP */
	Q_NOT_REG6 = 1 << 10, /* shifts: reg 6 is left to Zydis */
	Q_JUMP = 1 << 11,     /* a relative JMP or Jcc: its immediate is the displacement */
	Q_RET = 1 << 12,
	Q_INT3 = 1 << 13,
	Q_CALL = 1 << 14,
};

#define Q_RM (Q_KNOWN | Q_MODRM)

/* One-byte opcodes, then those after 0F. */
static const uint16_t quick_table[2][256] = {
	{
		/* ADD, OR, ADC, SBB, AND, SUB, XOR, CMP: r/m forms, AL and eAX forms */
		[0x00 ... 0x03] = Q_RM,
		[0x08 ... 0x0b] = Q_RM,
		[0x10 ... 0x13] = Q_RM,
		[0x18 ... 0x1b] = Q_RM,
		[0x20 ... 0x23] = Q_RM,
		[0x28 ... 0x2b] = Q_RM,
		[0x30 ... 0x33] = Q_RM,
		[0x38 ... 0x3b] = Q_RM,
		[0x04] = Q_KNOWN | Q_IMM8,
		[0x0c] = Q_KNOWN | Q_IMM8,
		[0x14] = Q_KNOWN | Q_IMM8,
		[0x1c] = Q_KNOWN | Q_IMM8,
		[0x24] = Q_KNOWN | Q_IMM8,
		[0x2c] = Q_KNOWN | Q_IMM8,
		[0x34] = Q_KNOWN | Q_IMM8,
		[0x3c] = Q_KNOWN | Q_IMM8,
		[0x05] = Q_KNOWN | Q_IMM32,
		[0x0d] = Q_KNOWN | Q_IMM32,
		[0x15] = Q_KNOWN | Q_IMM32,
		[0x1d] = Q_KNOWN | Q_IMM32,
		[0x25] = Q_KNOWN | Q_IMM32,
		[0x2d] = Q_KNOWN | Q_IMM32,
		[0x35] = Q_KNOWN | Q_IMM32,
		[0x3d] = Q_KNOWN | Q_IMM32,
		[0x50 ... 0x5f] = Q_KNOWN,		     /* PUSH, POP r64 */
		[0x63] = Q_RM,				     /* MOVSXD */
		[0x68] = Q_KNOWN | Q_IMM32,		     /* PUSH imm32 */
		[0x69] = Q_RM | Q_IMM32,		     /* IMUL r, r/m, imm32 */
		[0x6a] = Q_KNOWN | Q_IMM8,		     /* PUSH imm8 */
		[0x6b] = Q_RM | Q_IMM8,			     /* IMUL r, r/m, imm8 */
		[0x70 ... 0x7f] = Q_KNOWN | Q_IMM8 | Q_JUMP, /* Jcc rel8 */
		[0x80] = Q_RM | Q_IMM8,			     /* group 1 */
		[0x81] = Q_RM | Q_IMM32,
		[0x83] = Q_RM | Q_IMM8,
		[0x84 ... 0x8b] = Q_RM,			      /* TEST, XCHG, MOV */
		[0x8d] = Q_RM | Q_MEM,			      /* LEA */
		[0x90 ... 0x99] = Q_KNOWN,		      /* NOP, XCHG, CWDE, CDQ */
		[0xa8] = Q_KNOWN | Q_IMM8,		      /* TEST AL, imm8 */
		[0xa9] = Q_KNOWN | Q_IMM32,		      /* TEST eAX, imm32 */
		[0xb0 ... 0xb7] = Q_KNOWN | Q_IMM8,	      /* MOV r8, imm8 */
		[0xb8 ... 0xbf] = Q_KNOWN | Q_IMMV,	      /* MOV r, imm */
		[0xc0 ... 0xc1] = Q_RM | Q_IMM8 | Q_NOT_REG6, /* shifts by imm8 */
		[0xc3] = Q_KNOWN | Q_RET,
		[0xc6] = Q_RM | Q_IMM8 | Q_REG0,  /* MOV r/m8, imm8 */
		[0xc7] = Q_RM | Q_IMM32 | Q_REG0, /* MOV r/m, imm32 */
		[0xcc] = Q_KNOWN | Q_INT3,
		[0xd0 ... 0xd3] = Q_RM | Q_NOT_REG6, /* shifts by 1 or CL */
		[0xe8] = Q_KNOWN | Q_IMM32 | Q_CALL, /* CALL rel32: a call, no jump */
		[0xe9] = Q_KNOWN | Q_IMM32 | Q_JUMP, /* JMP rel32 */
		[0xeb] = Q_KNOWN | Q_IMM8 | Q_JUMP,  /* JMP rel8 */
		[0xf6] = Q_RM | Q_IMM8 | Q_GRP3,
		[0xf7] = Q_RM | Q_IMM32 | Q_GRP3,
		[0xfe] = Q_RM | Q_REG01, /* INC, DEC r/m8 */
		[0xff] = Q_RM | Q_GRP5,
	},
	{
		[0x10 ... 0x11] = Q_RM,			      /* MOVUPS */
		[0x1f] = Q_RM | Q_REG0,			      /* NOP r/m */
		[0x28 ... 0x29] = Q_RM,			      /* MOVAPS */
		[0x40 ... 0x4f] = Q_RM,			      /* CMOVcc */
		[0x57] = Q_RM,				      /* XORPS */
		[0x80 ... 0x8f] = Q_KNOWN | Q_IMM32 | Q_JUMP, /* Jcc rel32 */
		[0x90 ... 0x9f] = Q_RM | Q_REG0,	      /* SETcc */
		[0xaf] = Q_RM,				      /* IMUL r, r/m */
		[0xb6 ... 0xb7] = Q_RM,			      /* MOVZX */
		[0xbe ... 0xbf] = Q_RM,			      /* MOVSX */
	},
};

/* The length of ModRM, SIB and displacement at p (n bytes), or 0 when cut short. */
static size_t modrm_length(const uint8_t *p, size_t n)
{
	unsigned int mod = p[0] >> 6, rm = p[0] & 7;
	size_t len = 1;

	if (mod == 3)
		return 1;
	if (rm == 4) {
		if (n < 2)
			return 0;
		len++;
		if (mod == 0 && (p[1] & 7) == 5)
			len += 4; /* no base: disp32 */
	} else if (mod == 0 && rm == 5) {
		len += 4; /* RIP-relative disp32 */
	}
	len += mod == 1 ? 1 : mod == 2 ? 4 : 0;
	return len <= n ? len : 0;
}

/* Whether ModRM's reg field (and mod) suit the opcode's table entry q. */
static bool modrm_fits(uint16_t q, uint8_t modrm)
{
	unsigned int reg = (modrm >> 3) & 7;

	return !((q & Q_MEM) && modrm >> 6 == 3) && !((q & Q_REG0) && reg) &&
	       !((q & Q_REG01) && reg > 1) && !((q & Q_NOT_REG6) && reg == 6) &&
	       !((q & Q_GRP3) && reg == 1) && !((q & Q_GRP5) && reg > 1 && reg != 6);
}

/*
 * Whether LEA's memory operand (ModRM m, then a SIB at p when it has one;
 * rex its REX) is based on RSP or RBP: a frame's address, on the stack.
 */
static bool lea_on_stack(uint8_t m, const uint8_t *p, size_t n, uint8_t rex)
{
	uint8_t mod = m >> 6, rm = m & 7;

	if (rex & 1)
		return false; /* R12 or R13 */
	if (rm == 4)
		return n >= 1 && (p[0] & 7) == 4; /* SIB based on RSP */
	return rm == 5 && mod != 0;		  /* RBP plus a displacement */
}

/* Whether the quick-decoded instruction at p (len bytes) switches stacks (disasm_insn). */
static bool quick_switches_stack(const uint8_t *p, size_t len)
{
	size_t i = 0;
	uint8_t rex = 0, m, reg, rm;

	if (len && (p[0] & 0xf0) == 0x40)
		rex = p[i++];
	if (i >= len)
		return false;
	if ((p[i] == 0x5c || p[i] == 0x94) && !(rex & 1))
		return true; /* POP RSP, XCHG eAX with RSP */
	if (i + 1 >= len)
		return false;
	if (p[i] == 0x0f) /* CMOVcc into RSP */
		return p[i + 1] >= 0x40 && p[i + 1] <= 0x4f && i + 2 < len &&
		       ((p[i + 2] >> 3) & 7) == 4 && !(rex & 4);
	m = p[i + 1];
	reg = ((m >> 3) & 7) | (rex & 4 ? 8 : 0);
	rm = (m & 7) | (rex & 1 ? 8 : 0);
	switch (p[i]) {
	case 0x8b: return reg == 4 && !(m >> 6 == 3 && rm == 5); /* MOV RSP, r/m; not RBP */
	case 0x89: return m >> 6 == 3 && rm == 4 && reg != 5;	 /* MOV RSP, r; not RBP */
	case 0x8d: return reg == 4 && !lea_on_stack(m, p + i + 2, len - i - 2, rex);
	case 0x87: return reg == 4 || (m >> 6 == 3 && rm == 4); /* XCHG */
	default: return false;
	}
}

bool disasm__quick(const uint8_t *p, size_t n, struct disasm_insn *ret)
{
	size_t i = 0, imm = 0;
	bool rex_w = false;
	uint16_t q;

	if (n && (p[0] & 0xf0) == 0x40) { /* REX */
		rex_w = p[0] & 8;
		i++;
	}
	if (i < n && p[i] == 0x0f)
		q = ++i < n ? quick_table[1][p[i]] : 0;
	else
		q = i < n ? quick_table[0][p[i]] : 0;
	if (!q)
		return false;
	i++;
	if (q & Q_MODRM) {
		size_t m;

		if (i >= n || !modrm_fits(q, p[i]) || !(m = modrm_length(p + i, n - i)))
			return false;
		/* group 3: NOT, NEG, MUL, IMUL, DIV, IDIV take no immediate */
		if ((q & Q_GRP3) && (p[i] >> 3) & 7)
			q &= ~(Q_IMM8 | Q_IMM32);
		i += m;
	}
	if (q & Q_IMM8)
		imm = 1;
	else if (q & Q_IMM32)
		imm = 4;
	else if (q & Q_IMMV)
		imm = rex_w ? 8 : 4;
	if (n - i < imm)
		return false;
	*ret = (struct disasm_insn){ .length = i + imm, .kind = DISASM_OTHER };
	ret->switches_stack = quick_switches_stack(p, ret->length);
	if (q & Q_JUMP) {
		int32_t rel32;

		ret->kind = DISASM_JUMP_REL;
		if (imm == 1) {
			ret->rel = (int8_t)p[i];
		} else {
			memcpy(&rel32, p + i, 4);
			ret->rel = rel32;
		}
	} else if (q & Q_RET) {
		ret->kind = DISASM_RET;
	} else if (q & Q_INT3) {
		ret->kind = DISASM_INT3;
	} else if (q & Q_CALL) {
		ret->kind = DISASM_CALL;
	}
	return true;
}

/* ---- Zydis ---- */

/*
 * Whether an instruction Zydis read (in its minimal mode) writes RSP as an
 * explicit operand, other than by ADD, SUB or AND: decoded in full only
 * when its ModRM names RSP, which few do.
 */
static bool zydis_switches_stack(const struct decoders *dec, const uint8_t *bytes, size_t len,
				 const ZydisDecodedInstruction *brief)
{
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	ZydisDecodedInstruction full;
	ZydisDecoderContext ctx;
	uint8_t reg = brief->raw.modrm.reg | brief->raw.rex.R << 3;
	uint8_t rm = brief->raw.modrm.rm | brief->raw.rex.B << 3;

	if (!(brief->attributes & ZYDIS_ATTRIB_HAS_MODRM) ||
	    (reg != 4 && !(brief->raw.modrm.mod == 3 && rm == 4)))
		return false;
	if (brief->mnemonic == ZYDIS_MNEMONIC_ADD || brief->mnemonic == ZYDIS_MNEMONIC_SUB ||
	    brief->mnemonic == ZYDIS_MNEMONIC_AND)
		return false;
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec->full, &ctx, bytes, len, &full)) ||
	    !ZYAN_SUCCESS(ZydisDecoderDecodeOperands(&dec->full, &ctx, &full, ops,
						     full.operand_count_visible)))
		return true; /* not known: taken for one */
	for (size_t i = 0; i < full.operand_count_visible; i++)
		if (ops[i].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    (ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
		    ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64,
						     ops[i].reg.value) == ZYDIS_REGISTER_RSP)
			return true;
	return false;
}

/*
 * The instruction at bytes (len of them) as Zydis reads it; false when it
 * does not decode. A jump is decoded again in full: *ret_jump tells that
 * ret_full and ops hold it.
 */
static bool zydis_read(const struct decoders *dec, const uint8_t *bytes, size_t len,
		       struct disasm_insn *ret, ZydisDecodedInstruction *ret_full,
		       ZydisDecodedOperand *ops, bool *ret_jump)
{
	ZydisDecoderContext ctx;
	ZydisDecodedInstruction brief;

	*ret_jump = false;
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec->brief, &ctx, bytes, len, &brief)))
		return false;
	*ret = (struct disasm_insn){ .length = brief.length, .kind = DISASM_OTHER };
	/* C3, C2 iw, CB, CA iw; prefixes (rep, bnd, operand size) included */
	if (brief.mnemonic == ZYDIS_MNEMONIC_RET)
		ret->kind = DISASM_RET;
	else if (brief.mnemonic == ZYDIS_MNEMONIC_INT3)
		ret->kind = DISASM_INT3;
	else if (brief.meta.category == ZYDIS_CATEGORY_CALL)
		ret->kind = DISASM_CALL;
	ret->switches_stack = zydis_switches_stack(dec, bytes, len, &brief);
	if (brief.meta.category != ZYDIS_CATEGORY_UNCOND_BR &&
	    brief.meta.category != ZYDIS_CATEGORY_COND_BR)
		return true;
	*ret_jump = ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec->full, &ctx, bytes, len,
							       ret_full)) &&
		    ret_full->length == brief.length &&
		    ZYAN_SUCCESS(ZydisDecoderDecodeOperands(&dec->full, &ctx, ret_full, ops,
							    ret_full->operand_count_visible)) &&
		    ret_full->operand_count_visible >= 1;
	return true;
}

/*
 * Whether a jump leaves the function: a direct JMP or Jcc whose target lies
 * outside every range, or an indirect JMP through a RIP-relative slot (a call
 * through the GOT). A JMP through a register or a computed address may be a
 * switch table inside the function: not counted as leaving, but told apart.
 */
static enum jump_kind jump_kind(const ZydisDecodedInstruction *insn, const ZydisDecodedOperand *ops,
				uint64_t addr, const struct code_range *ranges, size_t nranges,
				uint64_t *ret_target)
{
	ZyanU64 target;
	bool uncond = insn->meta.category == ZYDIS_CATEGORY_UNCOND_BR;

	*ret_target = 0;
	if (ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[0].imm.is_relative) {
		if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(insn, &ops[0], addr, &target)))
			return JUMP_NONE;
		*ret_target = target;
		return disasm__in_ranges(ranges, nranges, target) ? JUMP_INSIDE : JUMP_LEAVES;
	}
	if (uncond && ops[0].type == ZYDIS_OPERAND_TYPE_MEMORY &&
	    ops[0].mem.base == ZYDIS_REGISTER_RIP)
		return JUMP_LEAVES;
	/* a switch table, or a tail call through a function pointer */
	return uncond ? JUMP_INDIRECT : JUMP_NONE;
}

/* A 64-bit general-purpose register as struct disasm_hook numbers it; 0: none or another. */
static uint8_t hook_reg(ZydisRegister r)
{
	if (r == ZYDIS_REGISTER_RIP)
		return DISASM_REG_IP;
	if (r == ZYDIS_REGISTER_NONE || ZydisRegisterGetClass(r) != ZYDIS_REGCLASS_GPR64)
		return 0;
	return (uint8_t)(ZydisRegisterGetId(r) + 1);
}

/*
 * The operand of a jump through a register or memory, as a hook jump site
 * (struct disasm_hook); false when it is of another form (a segment
 * override, a vector index, a register not 64 bits wide).
 */
static bool hook_of(const ZydisDecodedInstruction *insn, const ZydisDecodedOperand *op, int64_t off,
		    struct disasm_hook *ret)
{
	*ret = (struct disasm_hook){ .off = off, .len = insn->length };
	if (op->type == ZYDIS_OPERAND_TYPE_REGISTER) {
		ret->kind = DISASM_HOOK_REG;
		ret->base = hook_reg(op->reg.value);
		return ret->base && ret->base != DISASM_REG_IP;
	}
	if (op->type != ZYDIS_OPERAND_TYPE_MEMORY || op->size != 64 ||
	    (op->mem.segment != ZYDIS_REGISTER_DS && op->mem.segment != ZYDIS_REGISTER_SS &&
	     op->mem.segment != ZYDIS_REGISTER_NONE) ||
	    op->mem.disp.value < INT32_MIN || op->mem.disp.value > INT32_MAX)
		return false;
	ret->kind = DISASM_HOOK_MEM;
	ret->base = hook_reg(op->mem.base);
	ret->index = hook_reg(op->mem.index);
	ret->scale = op->mem.index == ZYDIS_REGISTER_NONE ? 0 : op->mem.scale;
	ret->disp = (int32_t)op->mem.disp.value;
	return (ret->base || op->mem.base == ZYDIS_REGISTER_NONE) &&
	       (ret->index || op->mem.index == ZYDIS_REGISTER_NONE) && ret->index != DISASM_REG_IP;
}

static int push_hook(struct disasm_result *res, const struct disasm_hook *h)
{
	struct disasm_hook *p = realloc(res->hooks, (res->nhooks + 1) * sizeof(*p));

	if (!p)
		return -ENOMEM;
	res->hooks = p;
	res->hooks[res->nhooks++] = *h;
	return 0;
}

enum disasm_probe_kind disasm__probe_kind_of(enum disasm_arch arch, const uint8_t *code, size_t len)
{
	return arch == DISASM_AARCH64 ? disasm__probe_kind_a64(code, len)
				      : disasm__probe_kind(code, len);
}

enum disasm_probe_kind disasm__probe_kind(const uint8_t *code, size_t len)
{
	static const uint8_t nop5[] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

	size_t i = len >= 1 && code[0] == 0x66; /* operand size */

	if (len >= sizeof(nop5) && !memcmp(code, nop5, sizeof(nop5)))
		return DISASM_PROBE_NOP5;
	if (i < len && code[i] == 0x90)
		return DISASM_PROBE_NOP;
	if (i + 2 < len && code[i] == 0x0f && code[i + 1] == 0x1f && !(code[i + 2] & 0x38))
		return DISASM_PROBE_NOP;
	if (len >= 1 && code[0] >= 0x50 && code[0] <= 0x57)
		return DISASM_PROBE_PUSH;
	if (len >= 2 && code[0] == 0x41 && code[1] >= 0x50 && code[1] <= 0x57)
		return DISASM_PROBE_PUSH;
	if (len >= 2 && (code[0] == 0xeb || (code[0] >= 0x70 && code[0] <= 0x7f)))
		return DISASM_PROBE_JUMP;
	if (len >= 5 && code[0] == 0xe9)
		return DISASM_PROBE_JUMP;
	if (len >= 6 && code[0] == 0x0f && code[1] >= 0x80 && code[1] <= 0x8f)
		return DISASM_PROBE_JUMP;
	if (len >= 5 && code[0] == 0xe8)
		return DISASM_PROBE_CALL;
	return DISASM_PROBE_STEPPED;
}

int disasm__note_entry_jump(struct disasm_result *res, uint64_t entry, uint64_t from, uint64_t to)
{
	struct disasm_jump *p;

	if (to < entry || to - entry >= DISASM_ENTRY_RUN)
		return 0;
	p = realloc(res->entry_jumps, (res->nentry_jumps + 1) * sizeof(*p));
	if (!p)
		return -ENOMEM;
	res->entry_jumps = p;
	p[res->nentry_jumps++] = (struct disasm_jump){ from, to };
	return 0;
}

int disasm__push_u64(uint64_t **arr, size_t n, uint64_t v)
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

static int set_reason(struct disasm_result *res, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Sets res->reason (few functions have one: allocated, not held in each). 0 or -ENOMEM. */
static int set_reason(struct disasm_result *res, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	free(res->reason);
	res->reason = s;
	return 0;
}

static int describe_bad(struct disasm_result *res, const struct code_range *r, size_t off,
			uint64_t entry)
{
	char bytes[3 * 8 + 1] = "";
	size_t n = r->len - off < 8 ? r->len - off : 8;

	for (size_t i = 0; i < n; i++)
		sprintf(bytes + 3 * i, "%s%02x", i ? " " : "", r->bytes[off + i]);
	res->undecodable = true;
	res->bad_addr = r->addr + off;
	return set_reason(res,
			  "undecodable instruction at %s0x%" PRIx64
			  " (bytes %s); return sites cannot be located safely",
			  res->bad_addr >= entry ? "+" : "-",
			  res->bad_addr >= entry ? res->bad_addr - entry : entry - res->bad_addr,
			  bytes);
}

int disasm__over_budget(struct disasm_result *res, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	res->over_budget = true;
	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	n = set_reason(res, "%s; calls are counted, not timed", s);
	free(s);
	return n;
}

int disasm__set_bad(struct disasm_result *res, uint64_t addr, uint64_t entry, const char *what)
{
	res->undecodable = true;
	res->bad_addr = addr;
	return set_reason(res, "%s at %s0x%" PRIx64 "; return sites cannot be located safely", what,
			  addr >= entry ? "+" : "-", addr >= entry ? addr - entry : entry - addr);
}

static int scan_range(const struct decoders *dec, const struct code_range *ranges, size_t nranges,
		      size_t idx, uint64_t entry, struct disasm_result *res)
{
	const struct code_range *r = &ranges[idx];
	size_t off = 0;

	while (off < r->len) {
		ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
		ZydisDecodedInstruction full;
		struct disasm_insn insn;
		uint64_t addr = r->addr + off, target = 0;
		enum jump_kind jk = JUMP_NONE;
		struct disasm_hook hook = { 0 };
		bool jump;

		if (cancel__every(res->ninsns))
			return -ECANCELED;
		if (disasm__quick(r->bytes + off, r->len - off, &insn)) {
			/* as Zydis computes it: 64-bit arithmetic, wrapping */
			target = addr + insn.length + (uint64_t)insn.rel;
			if (insn.kind == DISASM_JUMP_REL)
				jk = disasm__in_ranges(ranges, nranges, target) ? JUMP_INSIDE
										: JUMP_LEAVES;
		} else if (zydis_read(dec, r->bytes + off, r->len - off, &insn, &full, ops,
				      &jump)) {
			if (jump)
				jk = jump_kind(&full, ops, addr, ranges, nranges, &target);
			/* through a register or memory: where it goes is read where it runs */
			if ((jk == JUMP_INDIRECT || (jk == JUMP_LEAVES && !target)) &&
			    !hook_of(&full, &ops[0], (int64_t)(addr - entry), &hook))
				hook.kind = 0;
		} else {
			return describe_bad(res, r, off, entry);
		}
		res->ninsns++;
		if (insn.kind == DISASM_RET && res->nreturns == DISASM_MAX_RETURNS)
			return disasm__over_budget(
				res, "more than %d return sites (the limit per function)",
				DISASM_MAX_RETURNS);
		if (insn.kind == DISASM_RET) {
			if (disasm__push(&res->returns, &res->nreturns, (int64_t)(addr - entry)))
				return -ENOMEM;
		} else if (jk == JUMP_LEAVES) {
			if (disasm__push_u64(&res->tail_targets, res->ntail_calls, target) ||
			    disasm__push(&res->tail_calls, &res->ntail_calls,
					 (int64_t)(addr - entry)))
				return -ENOMEM;
		} else if (jk == JUMP_INDIRECT) {
			res->nindirect_jumps++;
		} else if (insn.kind == DISASM_CALL) {
			res->ncalls++;
		}
		if (insn.switches_stack) {
			res->nstack_switches++;
		} else if (jk == JUMP_INSIDE && disasm__note_entry_jump(res, entry, addr, target)) {
			return -ENOMEM;
		}
		if (hook.kind && push_hook(res, &hook))
			return -ENOMEM;
		off += insn.length;
		if (idx == 0 && insn.kind != DISASM_INT3)
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

static bool decoders_init(struct decoders *dec)
{
	return ZYAN_SUCCESS(ZydisDecoderInit(&dec->brief, ZYDIS_MACHINE_MODE_LONG_64,
					     ZYDIS_STACK_WIDTH_64)) &&
	       ZYAN_SUCCESS(ZydisDecoderEnableMode(&dec->brief, ZYDIS_DECODER_MODE_MINIMAL,
						   ZYAN_TRUE)) &&
	       ZYAN_SUCCESS(ZydisDecoderInit(&dec->full, ZYDIS_MACHINE_MODE_LONG_64,
					     ZYDIS_STACK_WIDTH_64));
}

/* Whether res, read to its end, is of x86-64 code that calls nothing and stays on its stack:
 * a candidate for the kernel's return trampoline, whose return slot is looked at. */
static bool may_use_trampoline(enum disasm_arch arch, const struct disasm_result *res)
{
	return arch == DISASM_X86_64 && !res->undecodable && !res->over_budget && !res->ncalls &&
	       !res->ntail_calls && !res->nindirect_jumps && !res->nstack_switches;
}

int disasm__scan(enum disasm_arch arch, const struct code_range *ranges, size_t nranges,
		 uint64_t entry, struct disasm_result *res)
{
	struct decoders dec;
	size_t total = 0;
	int err = 0;

	memset(res, 0, sizeof(*res));
	if (!nranges)
		return -EINVAL;
	res->code_end = ranges[0].addr;
	if (!decoders_init(&dec))
		return -EINVAL;
	for (size_t i = 0; i < nranges; i++)
		if (__builtin_add_overflow(total, ranges[i].len, &total))
			total = SIZE_MAX;
	/* decoding costs time in proportion to the bytes: refused before any */
	if (total > DISASM_MAX_BYTES)
		err = disasm__over_budget(
			res, "%zu bytes of code, more than %u MiB (the limit per function)", total,
			DISASM_MAX_BYTES >> 20);
	for (size_t i = 0; i < nranges && !res->undecodable && !res->over_budget && !err; i++)
		err = arch == DISASM_AARCH64
			      ? disasm_a64__scan_range(ranges, nranges, i, entry, res)
			      : scan_range(&dec, ranges, nranges, i, entry, res);
	if (err) {
		disasm_result__clear(res);
		return err;
	}
	res->return_slot_used = may_use_trampoline(arch, res) &&
				disasm__return_slot_used(ranges, nranges);
	if (res->over_budget) {
		free(res->returns);
		free(res->tail_calls);
		free(res->tail_targets);
		free(res->entry_jumps);
		free(res->hooks);
		res->returns = res->tail_calls = NULL;
		res->tail_targets = NULL;
		res->entry_jumps = NULL;
		res->hooks = NULL;
		res->nreturns = res->ntail_calls = res->nindirect_jumps = res->nentry_jumps = 0;
		res->ncalls = res->nstack_switches = 0;
		res->nhooks = 0;
		res->code_end = ranges[0].addr; /* not known: the sweep stopped */
		return 0;
	}
	if (res->undecodable) {
		/* never report sites found before the failure: the sweep is not trusted */
		res->nreturns = res->ntail_calls = res->nindirect_jumps = res->nentry_jumps = 0;
		res->ncalls = res->nstack_switches = 0;
		res->nhooks = 0;
		return 0;
	}
	if (res->nreturns)
		qsort(res->returns, res->nreturns, sizeof(int64_t), cmp_i64);
	if (res->ntail_calls && sort_tail_calls(res)) {
		disasm_result__clear(res);
		return -ENOMEM;
	}
	if (!res->nreturns && res->ntail_calls)
		err = set_reason(
			res,
			"no return instruction: the function leaves only through %zu tail call%s",
			res->ntail_calls, res->ntail_calls == 1 ? "" : "s");
	else if (!res->nreturns && res->nindirect_jumps)
		err = set_reason(res,
				 "no return instruction: the function leaves through %zu jump%s "
				 "through a register (a tail call to a function pointer)",
				 res->nindirect_jumps, res->nindirect_jumps == 1 ? "" : "s");
	else if (!res->nreturns)
		err = set_reason(
			res,
			"no return instruction: the function never returns (it panics, exits or loops)");
	if (err)
		disasm_result__clear(res);
	return err;
}

void disasm_result__clear(struct disasm_result *res)
{
	if (!res)
		return;
	free(res->returns);
	free(res->tail_calls);
	free(res->tail_targets);
	free(res->entry_jumps);
	free(res->hooks);
	free(res->reason);
	memset(res, 0, sizeof(*res));
}

/* ---- instruction boundaries ---- */

/* The length of the instruction at p (n bytes there), or 0 when it does not decode. */
static size_t insn_length(const struct decoders *dec, const uint8_t *p, size_t n)
{
	ZydisDecoderContext ctx;
	ZydisDecodedInstruction brief;
	struct disasm_insn insn;

	if (disasm__quick(p, n, &insn))
		return insn.length;
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec->brief, &ctx, p, n, &brief)))
		return 0;
	return brief.length;
}

int disasm__boundaries(enum disasm_arch arch, const uint8_t *code, size_t len, uint64_t start,
		       const uint64_t *addrs, size_t n, size_t *ret_bad)
{
	struct decoders dec;
	size_t off = 0, steps = 0;

	*ret_bad = 0;
	for (size_t i = 0; i < n; i++)
		if (addrs[i] < start || addrs[i] - start >= len || (i && addrs[i] < addrs[i - 1]))
			return -EINVAL;
	if (arch == DISASM_AARCH64) {
		/* fixed width: a boundary is a whole number of words from start */
		for (size_t i = 0; i < n; i++) {
			if ((start & 3) || ((addrs[i] - start) & 3)) {
				*ret_bad = i;
				return -EILSEQ;
			}
		}
		return 0;
	}
	if (!ZYAN_SUCCESS(ZydisDecoderInit(&dec.brief, ZYDIS_MACHINE_MODE_LONG_64,
					   ZYDIS_STACK_WIDTH_64)) ||
	    !ZYAN_SUCCESS(
		    ZydisDecoderEnableMode(&dec.brief, ZYDIS_DECODER_MODE_MINIMAL, ZYAN_TRUE)))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		uint64_t want = addrs[i] - start;

		while (off < want) {
			size_t l = insn_length(&dec, code + off, len - off);

			if (cancel__every(steps++))
				return -ECANCELED;
			if (!l)
				break; /* bytes that do not decode: nothing past them is known */
			off += l;
		}
		if (off != want) {
			*ret_bad = i;
			return -EILSEQ;
		}
	}
	return 0;
}

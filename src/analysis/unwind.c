// SPDX-License-Identifier: MIT
#include <dwarf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <gelf.h>

#include "analysis/elfimg.h"
#include "analysis/unwind.h"

#if defined(__aarch64__)
/*
 * DWARF register numbers of AArch64 (its DWARF ABI): X0-X30 are 0-30, SP 31.
 * The return address column is X30 itself, the link register: at a RET it
 * holds the return address, which a call saves in its frame first.
 */
enum { REG_FP = 29, REG_RA = 30, REG_SP = 31, NREGS = 32 };
/* What a call leaves on the stack: nothing, its return address is in X30. */
#define CALL_PUSHES 0
/* struct unwind_regs.saved[i]'s register */
static const unsigned int saved_regno[UNWIND_SAVED] = { 30, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28 };
#else
/* DWARF register numbers of x86-64 (System V psABI); 16 is the return address. */
enum { REG_FP = 6, REG_SP = 7, REG_RA = 16, NREGS = 17 };
#define CALL_PUSHES 8
static const unsigned int saved_regno[UNWIND_SAVED] = { 3, 12, 13, 14, 15 };
#endif

/* A DWARF expression longer than this, or deeper, is not one a compiler wrote. */
#define MAX_OPS 64
#define MAX_DEPTH 16

struct state {
	uint64_t pc; /* the frame's: the return address column's value once stepped */
	uint64_t reg[NREGS];
	uint32_t known; /* bit per register */
};
_Static_assert(NREGS <= 32, "a bit of state.known per register");

struct walk {
	const uint8_t *stack;
	size_t len;
	uint64_t base; /* the address of stack[0] */
};

static bool known(const struct state *st, unsigned int r)
{
	return r < NREGS && (st->known >> r) & 1;
}

static void set(struct state *st, unsigned int r, uint64_t v)
{
	st->reg[r] = v;
	st->known |= 1U << r;
}

/* 8 bytes at addr, from the copy only: the process's memory is not ours to read. */
static bool read64(const struct walk *w, uint64_t addr, uint64_t *ret)
{
	if (addr < w->base || w->len < 8 || addr - w->base > w->len - 8)
		return false;
	memcpy(ret, w->stack + (addr - w->base), 8);
	return true;
}

/* The stack of a DWARF expression's evaluation. */
struct estack {
	uint64_t s[MAX_DEPTH];
	size_t n;
};

static bool push(struct estack *e, uint64_t v)
{
	if (e->n == MAX_DEPTH)
		return false;
	e->s[e->n++] = v;
	return true;
}

/* Operations on the top of the stack: arithmetic on it, copies, a dereference. */
static bool eval_stack_op(const struct walk *w, unsigned int op, uint64_t number, struct estack *e)
{
	uint64_t *s = e->s, a;
	size_t n = e->n;

	if (n < (op == DW_OP_over || op == DW_OP_swap ? 2 : 1))
		return false;
	switch (op) {
	case DW_OP_plus_uconst: s[n - 1] += number; return true;
	case DW_OP_dup: return push(e, s[n - 1]);
	case DW_OP_over: return push(e, s[n - 2]);
	case DW_OP_drop: e->n--; return true;
	case DW_OP_swap:
		a = s[n - 1];
		s[n - 1] = s[n - 2];
		s[n - 2] = a;
		return true;
	case DW_OP_deref: return read64(w, s[n - 1], &s[n - 1]);
	case DW_OP_neg: s[n - 1] = -s[n - 1]; return true;
	case DW_OP_not: s[n - 1] = ~s[n - 1]; return true;
	default: return false;
	}
}

/* Operations that pop two values and push one; false for any other operation. */
static bool eval_binary(unsigned int op, struct estack *e)
{
	uint64_t *s = e->s, a;
	size_t n = e->n;

	if (n < 2)
		return false;
	a = s[--n];
	switch (op) {
	case DW_OP_plus: s[n - 1] += a; break;
	case DW_OP_minus: s[n - 1] -= a; break;
	case DW_OP_mul: s[n - 1] *= a; break;
	case DW_OP_and: s[n - 1] &= a; break;
	case DW_OP_or: s[n - 1] |= a; break;
	case DW_OP_xor: s[n - 1] ^= a; break;
	case DW_OP_shl: s[n - 1] = a < 64 ? s[n - 1] << a : 0; break;
	case DW_OP_shr: s[n - 1] = a < 64 ? s[n - 1] >> a : 0; break;
	case DW_OP_ge: s[n - 1] = (int64_t)s[n - 1] >= (int64_t)a; break;
	case DW_OP_gt: s[n - 1] = (int64_t)s[n - 1] > (int64_t)a; break;
	case DW_OP_le: s[n - 1] = (int64_t)s[n - 1] <= (int64_t)a; break;
	case DW_OP_lt: s[n - 1] = (int64_t)s[n - 1] < (int64_t)a; break;
	case DW_OP_eq: s[n - 1] = s[n - 1] == a; break;
	case DW_OP_ne: s[n - 1] = s[n - 1] != a; break;
	default: return false; /* anything else is not CFI's */
	}
	e->n = n;
	return true;
}

/*
 * One operation that is neither a register location nor DW_OP_stack_value
 * (which only make sense at the ends of the whole expression, see eval):
 * those that push a value (literals, constants, a register plus an offset,
 * the CFA), then the stack operations, then the binary ones.
 */
static bool eval_op(const struct walk *w, const struct state *st, const Dwarf_Op *op, bool have_cfa,
		    uint64_t cfa, struct estack *e)
{
	unsigned int a = op->atom;

	if (a >= DW_OP_lit0 && a <= DW_OP_lit31)
		return push(e, a - DW_OP_lit0);
	if (a >= DW_OP_breg0 && a <= DW_OP_breg31)
		return known(st, a - DW_OP_breg0) &&
		       push(e, st->reg[a - DW_OP_breg0] + (int64_t)op->number);
	switch (a) {
	case DW_OP_bregx:
		return known(st, op->number) && push(e, st->reg[op->number] + (int64_t)op->number2);
	case DW_OP_call_frame_cfa: return have_cfa && push(e, cfa);
	case DW_OP_const1u:
	case DW_OP_const2u:
	case DW_OP_const4u:
	case DW_OP_const8u:
	case DW_OP_constu: return push(e, op->number);
	case DW_OP_const1s:
	case DW_OP_const2s:
	case DW_OP_const4s:
	case DW_OP_const8s:
	case DW_OP_consts: return push(e, (int64_t)op->number);
	case DW_OP_plus_uconst:
	case DW_OP_dup:
	case DW_OP_over:
	case DW_OP_drop:
	case DW_OP_swap:
	case DW_OP_deref:
	case DW_OP_neg:
	case DW_OP_not: return eval_stack_op(w, a, op->number, e);
	default: return eval_binary(a, e);
	}
}

/*
 * Evaluates the subset of DWARF expressions compilers put in CFI (register
 * plus offset, the PLT's masked RIP, a dereference). cfa is pushed by
 * DW_OP_call_frame_cfa when have_cfa. *ret_value tells a value
 * (DW_OP_stack_value, or a register named by DW_OP_regN) from an address.
 */
static bool eval(const struct walk *w, const struct state *st, const Dwarf_Op *ops, size_t nops,
		 bool have_cfa, uint64_t cfa, uint64_t *ret, bool *ret_value)
{
	struct estack e = { .n = 0 };

	*ret_value = false;
	if (!nops || nops > MAX_OPS)
		return false;
	for (size_t i = 0; i < nops; i++) {
		unsigned int op = ops[i].atom;

		if ((op >= DW_OP_reg0 && op <= DW_OP_reg31) || op == DW_OP_regx) {
			unsigned int r = op == DW_OP_regx ? ops[i].number : op - DW_OP_reg0;

			/* a register location: only as the whole expression */
			if (nops != 1 || !known(st, r))
				return false;
			*ret = st->reg[r];
			*ret_value = true;
			return true;
		}
		if (op == DW_OP_stack_value) {
			/* the last operation, if any */
			if (i + 1 != nops)
				return false;
			*ret_value = true;
		} else if (!eval_op(w, st, &ops[i], have_cfa, cfa, &e)) {
			return false;
		}
	}
	if (!e.n)
		return false;
	*ret = e.s[e.n - 1];
	return true;
}

/* The caller's value of register r under frame's rule, into next. */
static bool step_reg(const struct walk *w, const struct state *st, Dwarf_Frame *frame,
		     unsigned int r, uint64_t cfa, struct state *next)
{
	Dwarf_Op mem[3], *ops = NULL;
	size_t nops = 0;
	uint64_t v;
	bool value;

	if (dwarf_frame_register(frame, r, mem, &ops, &nops))
		return false;
	if (!nops) {
		/* ops == mem: undefined (no caller's value); NULL: the same value */
		if (!ops && known(st, r))
			set(next, r, st->reg[r]);
		return true;
	}
	if (!eval(w, st, ops, nops, true, cfa, &v, &value))
		return false;
	if (!value && !read64(w, v, &v))
		return false;
	set(next, r, v);
	return true;
}

/* One step by the CFI rules at lookup (a runtime address): .eh_frame's, else .debug_frame's. */
static bool step_cfi(const struct walk *w, const struct state *st, unwind_cfi_fn find, void *ctx,
		     uint64_t lookup, struct state *next)
{
	static const enum unwind_table tables[] = { UNWIND_EH_FRAME, UNWIND_DEBUG_FRAME };
	Dwarf_Frame *frame = NULL;
	Dwarf_Op *ops;
	size_t nops;
	uint64_t cfa;
	bool value, ok = false;

	for (size_t k = 0; k < 2 && !frame; k++) {
		uint64_t bias = 0;
		Dwarf_CFI *cfi = find(ctx, lookup, tables[k], &bias);

		if (cfi && dwarf_cfi_addrframe(cfi, lookup - bias, &frame))
			frame = NULL;
	}
	if (!frame)
		return false;
	/* the architecture's return address column: another is not a frame we know */
	if (dwarf_frame_info(frame, NULL, NULL, NULL) != REG_RA)
		goto out;
	if (dwarf_frame_cfa(frame, &ops, &nops) || !nops ||
	    !eval(w, st, ops, nops, false, 0, &cfa, &value))
		goto out;
	memset(next, 0, sizeof(*next));
	set(next, REG_SP, cfa); /* the CFA is the caller's SP before its CALL */
	ok = step_reg(w, st, frame, REG_FP, cfa, next) && step_reg(w, st, frame, REG_RA, cfa, next);
	for (size_t i = 0; ok && i < UNWIND_SAVED; i++)
		ok = saved_regno[i] == REG_RA || step_reg(w, st, frame, saved_regno[i], cfa, next);
	/* no return address (the outermost frame's is undefined): the walk ends */
	next->pc = known(next, REG_RA) ? next->reg[REG_RA] : 0;
out:
	free(frame);
	return ok;
}

/*
 * One step by the frame pointer: [fp] is the caller's, [fp + 8] the return
 * address (x86-64's pushed RBP, AArch64's frame record).
 */
static bool step_fp(const struct walk *w, const struct state *st, struct state *next)
{
	uint64_t fp = st->reg[REG_FP], ra, up;

	if (!known(st, REG_FP) || fp < st->reg[REG_SP] || !read64(w, fp, &up) ||
	    !read64(w, fp + 8, &ra))
		return false;
	memset(next, 0, sizeof(*next));
	set(next, REG_FP, up);
	set(next, REG_RA, ra);
	set(next, REG_SP, fp + 16);
	next->pc = ra;
	return true;
}

/*
 * Frame 0 at a RET of code with no unwind table: the return address is at
 * SP (x86-64) or in the link register (AArch64), and the caller's SP is
 * past what its call pushed.
 */
static bool step_ret(const struct walk *w, const struct state *st, struct state *next)
{
	uint64_t ra;

	if (CALL_PUSHES ? !read64(w, st->reg[REG_SP], &ra) : !known(st, REG_RA))
		return false;
	if (!CALL_PUSHES)
		ra = st->reg[REG_RA];
	*next = *st;
	set(next, REG_RA, ra);
	set(next, REG_SP, st->reg[REG_SP] + CALL_PUSHES);
	next->pc = ra;
	return true;
}

/* ---- checking a table before libdw executes it ---- */

struct cursor {
	const uint8_t *p, *end;
	bool bad;
};

static uint64_t uleb(struct cursor *c)
{
	uint64_t v = 0;

	for (unsigned int shift = 0; c->p < c->end; shift += 7) {
		uint8_t b = *c->p++;

		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	c->bad = true;
	return 0;
}

static void skip(struct cursor *c, uint64_t n)
{
	if (n > (uint64_t)(c->end - c->p))
		c->bad = true;
	else
		c->p += n;
}

/* A register operand: one libdw would make room for. */
static void reg(struct cursor *c)
{
	if (uleb(c) > UNWIND_MAX_REGNO)
		c->bad = true;
}

/* Bytes of a pointer in encoding enc (DW_EH_PE_*); 0 for LEB128 or unknown. */
static unsigned int ptr_size(uint8_t enc)
{
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8: return 8;
	case DW_EH_PE_udata2:
	case DW_EH_PE_sdata2: return 2;
	case DW_EH_PE_udata4:
	case DW_EH_PE_sdata4: return 4;
	default: return 0;
	}
}

/* Whether CFA instructions [p, end) name only registers up to UNWIND_MAX_REGNO. */
static bool insns_ok(const uint8_t *p, const uint8_t *end, uint8_t enc)
{
	struct cursor c = { p, end, false };

	while (c.p < c.end && !c.bad) {
		uint8_t op = *c.p++;

		switch (op & 0xc0) {
		case DW_CFA_advance_loc: continue;
		case DW_CFA_offset: uleb(&c); continue;
		case DW_CFA_restore: continue;
		}
		switch (op) {
		case DW_CFA_nop:
		case DW_CFA_remember_state:
		case DW_CFA_restore_state:
		case DW_CFA_GNU_window_save: break;
		case DW_CFA_set_loc:
			if (!ptr_size(enc))
				return false;
			skip(&c, ptr_size(enc));
			break;
		case DW_CFA_advance_loc1: skip(&c, 1); break;
		case DW_CFA_advance_loc2: skip(&c, 2); break;
		case DW_CFA_advance_loc4: skip(&c, 4); break;
		case DW_CFA_restore_extended:
		case DW_CFA_undefined:
		case DW_CFA_same_value:
		case DW_CFA_def_cfa_register: reg(&c); break;
		case DW_CFA_offset_extended:
		case DW_CFA_offset_extended_sf:
		case DW_CFA_def_cfa:
		case DW_CFA_def_cfa_sf:
		case DW_CFA_val_offset:
		case DW_CFA_val_offset_sf:
		case DW_CFA_GNU_negative_offset_extended:
			reg(&c);
			uleb(&c); /* an SLEB128 is skipped alike */
			break;
		case DW_CFA_register:
			reg(&c);
			reg(&c);
			break;
		case DW_CFA_def_cfa_offset:
		case DW_CFA_def_cfa_offset_sf:
		case DW_CFA_GNU_args_size: uleb(&c); break;
		case DW_CFA_def_cfa_expression: skip(&c, uleb(&c)); break;
		case DW_CFA_expression:
		case DW_CFA_val_expression:
			reg(&c);
			skip(&c, uleb(&c));
			break;
		default: return false;
		}
	}
	return !c.bad;
}

/* The FDE pointer encoding of a CIE ('R' of a "z" augmentation); false if not understood. */
static bool cie_encoding(const Dwarf_CIE *cie, bool eh_frame, uint8_t *ret_enc, bool *ret_z)
{
	struct cursor c = { cie->augmentation_data,
			    cie->augmentation_data + cie->augmentation_data_size, false };
	const char *a = cie->augmentation;

	*ret_enc = eh_frame ? DW_EH_PE_absptr : DW_EH_PE_udata8;
	*ret_z = a[0] == 'z';
	if (!a[0])
		return true;
	if (!*ret_z || !cie->augmentation_data)
		return false;
	for (a++; *a && !c.bad; a++) {
		uint8_t enc;

		switch (*a) {
		case 'R':
		case 'L':
			if (c.p >= c.end)
				return false;
			enc = *c.p++;
			if (*a == 'R')
				*ret_enc = enc;
			break;
		case 'P':
			if (c.p >= c.end)
				return false;
			enc = *c.p++;
			if (!ptr_size(enc))
				return false;
			skip(&c, ptr_size(enc));
			break;
		case 'S':
		case 'B': break;
		default: return false;
		}
	}
	return !c.bad && ptr_size(*ret_enc);
}

bool unwind__table_ok(Elf *elf, Elf_Data *data, bool eh_frame)
{
	unsigned char ident[EI_NIDENT];
	const char *id = elf_getident(elf, NULL);
	Dwarf_Off off = 0, next;
	size_t entries = 0;

	if (!id || !data || !data->d_buf)
		return false;
	memcpy(ident, id, EI_NIDENT);
	for (;; off = next) {
		Dwarf_CFI_Entry e, ce;
		Dwarf_Off cnext;
		struct cursor c;
		uint8_t enc;
		bool z;
		int ret = dwarf_next_cfi(ident, data, eh_frame, off, &next, &e);

		if (ret > 0)
			return true;
		if (ret < 0 || next <= off || ++entries > UNWIND_MAX_TABLE_ENTRIES)
			return false;
		if (dwarf_cfi_cie_p(&e)) {
			if (e.cie.return_address_register > UNWIND_MAX_REGNO ||
			    !cie_encoding(&e.cie, eh_frame, &enc, &z) ||
			    !insns_ok(e.cie.initial_instructions, e.cie.initial_instructions_end,
				      enc))
				return false;
			continue;
		}
		if (dwarf_next_cfi(ident, data, eh_frame, e.fde.CIE_pointer, &cnext, &ce) ||
		    !dwarf_cfi_cie_p(&ce) || !cie_encoding(&ce.cie, eh_frame, &enc, &z))
			return false;
		c = (struct cursor){ e.fde.start, e.fde.end, false };
		skip(&c, 2 * ptr_size(enc)); /* initial location, address range */
		if (z)
			skip(&c, uleb(&c));
		if (c.bad || !insns_ok(c.p, c.end, enc))
			return false;
	}
}

bool unwind__section_ok(Elf *elf, const char *name, bool eh_frame)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return false;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *n;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			return false;
		n = elf_safe_strptr(elf, shstrndx, sh.sh_name);
		/* and found by libdw's own lookup (elf_strptr()): where that finds
		 * no .eh_frame, dwarf_getcfi_elf() reads the file through its
		 * segments with elf_rawfile(), after which libelf never frees the
		 * sections already read (a leak per file) */
		if (n && !strcmp(n, name))
			return !(sh.sh_flags & SHF_COMPRESSED) &&
			       elf_strptr(elf, shstrndx, sh.sh_name) &&
			       unwind__table_ok(elf, elf_getdata(scn, NULL), eh_frame);
	}
	return false;
}

size_t unwind__stack(const struct unwind_regs *regs, const void *stack, size_t len, uint64_t base,
		     unwind_cfi_fn find, void *ctx, uint64_t *pcs, size_t max)
{
	const struct walk w = { stack, len, base };
	struct state st = {}, next;
	size_t n = 0;

	st.pc = regs->ip;
	set(&st, REG_RA, regs->ip); /* x86-64: a column of its own, no register */
	set(&st, REG_SP, regs->sp);
	set(&st, REG_FP, regs->fp);
	for (size_t i = 0; i < UNWIND_SAVED; i++)
		set(&st, saved_regno[i], regs->saved[i]);
	if (max > UNWIND_MAX_FRAMES)
		max = UNWIND_MAX_FRAMES;
	while (n < max && unwind__canonical(st.pc)) {
		uint64_t pc = st.pc;
		bool stepped;

		pcs[n++] = pc;
		/* a return address is just past its CALL: the CALL's rules apply */
		stepped = step_cfi(&w, &st, find, ctx, n == 1 ? pc : pc - 1, &next) ||
			  (n == 1 && step_ret(&w, &st, &next)) || step_fp(&w, &st, &next);
		/*
		 * callers' frames lie above: a step that does not climb is
		 * garbage, but for frame 0's where its call pushed nothing (an
		 * AArch64 leaf function, or its RET)
		 */
		if (!stepped || !known(&next, REG_SP) || next.reg[REG_SP] < st.reg[REG_SP] ||
		    (next.reg[REG_SP] == st.reg[REG_SP] && (CALL_PUSHES || n > 1 || next.pc == pc)))
			break;
		st = next;
	}
	return n;
}

// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "analysis/disasm_impl.h"
#include "analysis/inlsites.h"
#include "analysis/inlsites_impl.h"

struct insn {
	uint64_t addr, target;
	int64_t sp_delta; /* SP_UNKNOWN: it sets the stack pointer to something else */
	int64_t sp;	  /* at its start, from the function's entry */
	uint8_t len;
	uint8_t flow;
	bool call;   /* a CALL: its fall-through is where it returns */
	bool inside; /* the copy's, or the caller's between two of its ranges (mark_inside) */
};

struct sweep {
	struct insn *insns;
	size_t n, cap;
	const struct code_range *outer;
	size_t nouter;
	const struct addr_range *ranges;
	size_t nranges;
	enum disasm_arch arch;
	inlsites_noreturn_fn noreturn;
	void *arg;
};

static bool writes_sp(const ZydisDecodedInstruction *i, const ZydisDecodedOperand *ops)
{
	for (uint8_t k = 0; k < i->operand_count; k++)
		if (ops[k].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    (ops[k].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
		    ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64,
						     ops[k].reg.value) == ZYDIS_REGISTER_RSP)
			return true;
	return false;
}

/* How far an instruction moves the stack pointer, or SP_UNKNOWN. */
static int64_t sp_delta(const ZydisDecodedInstruction *i, const ZydisDecodedOperand *ops)
{
	bool rsp0 = i->operand_count_visible >= 1 && ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    ops[0].reg.value == ZYDIS_REGISTER_RSP;
	bool imm1 = i->operand_count_visible >= 2 && ops[1].type == ZYDIS_OPERAND_TYPE_IMMEDIATE;

	switch (i->mnemonic) {
	case ZYDIS_MNEMONIC_PUSH:
	case ZYDIS_MNEMONIC_PUSHFQ: return -(int64_t)(i->operand_width / 8);
	case ZYDIS_MNEMONIC_POP:
	case ZYDIS_MNEMONIC_POPFQ: return rsp0 ? SP_UNKNOWN : (int64_t)(i->operand_width / 8);
	case ZYDIS_MNEMONIC_CALL:
	case ZYDIS_MNEMONIC_RET: return 0;
	case ZYDIS_MNEMONIC_SUB:
		if (rsp0 && imm1)
			return -ops[1].imm.value.s;
		break;
	case ZYDIS_MNEMONIC_ADD:
		if (rsp0 && imm1)
			return ops[1].imm.value.s;
		break;
	case ZYDIS_MNEMONIC_LEA:
		if (rsp0 && ops[1].mem.base == ZYDIS_REGISTER_RSP &&
		    ops[1].mem.index == ZYDIS_REGISTER_NONE)
			return ops[1].mem.disp.value;
		break;
	default: break;
	}
	return writes_sp(i, ops) ? SP_UNKNOWN : 0;
}

static enum inl_flow flow_of(const ZydisDecodedInstruction *i, const ZydisDecodedOperand *ops,
			     uint64_t addr, uint64_t *ret_target)
{
	ZyanU64 t;

	*ret_target = 0;
	switch (i->mnemonic) {
	case ZYDIS_MNEMONIC_INT3:
	case ZYDIS_MNEMONIC_UD0:
	case ZYDIS_MNEMONIC_UD1:
	case ZYDIS_MNEMONIC_UD2:
	case ZYDIS_MNEMONIC_HLT: return FLOW_STOP;
	case ZYDIS_MNEMONIC_RET: return FLOW_RET;
	default: break;
	}
	if (i->meta.category != ZYDIS_CATEGORY_UNCOND_BR &&
	    i->meta.category != ZYDIS_CATEGORY_COND_BR)
		return FLOW_NEXT;
	if (ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[0].imm.is_relative &&
	    ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(i, &ops[0], addr, &t))) {
		*ret_target = t;
		return i->meta.category == ZYDIS_CATEGORY_COND_BR ? FLOW_JCC : FLOW_JMP;
	}
	/* a conditional jump is always relative; this is JMP reg/mem */
	return FLOW_JMP_REG;
}

static bool call_target(const ZydisDecodedInstruction *i, const ZydisDecodedOperand *ops,
			uint64_t addr, uint64_t *ret)
{
	ZyanU64 t;

	if (ops[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE || !ops[0].imm.is_relative ||
	    !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(i, &ops[0], addr, &t)))
		return false;
	*ret = t;
	return true;
}

/* Room for the next instruction; NULL when there is none (*err: 1, said; or -ENOMEM). */
static struct insn *insn_new(struct sweep *s, struct inl_sites *ret, int *err)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		struct insn *p;

		if (cap > INLSITES_MAX_INSNS) {
			snprintf(ret->reason, sizeof(ret->reason),
				 "the function holding it has more than %u instructions",
				 INLSITES_MAX_INSNS);
			*err = 1;
			return NULL;
		}
		p = realloc(s->insns, cap * sizeof(*p));
		if (!p) {
			*err = -ENOMEM;
			return NULL;
		}
		s->insns = p;
		s->cap = cap;
	}
	return &s->insns[s->n++];
}

/* x, at addr, len bytes long, as st says; a call of a function that never returns stops. */
static void insn_set(const struct sweep *s, struct insn *x, uint64_t addr, uint8_t len,
		     const struct inl_step *st)
{
	x->addr = addr;
	x->len = len;
	x->flow = st->flow;
	x->target = st->target;
	x->call = st->call;
	if (st->call_known && s->noreturn && s->noreturn(st->target, s->arg))
		x->flow = FLOW_STOP;
	x->inside = false;
	x->sp_delta = st->sp_delta;
	x->sp = SP_UNSET;
}

static int decode_x86(struct sweep *s, struct inl_sites *ret)
{
	ZydisDecoder d;
	int err = 0;

	ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	for (size_t r = 0; r < s->nouter; r++) {
		const struct code_range *cr = &s->outer[r];

		for (size_t off = 0; off < cr->len;) {
			ZydisDecodedInstruction i;
			ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
			struct inl_step st = {};
			struct insn *x;

			if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&d, cr->bytes + off, cr->len - off,
								 &i, ops))) {
				/* padding past the code ends the sweep harmlessly */
				if (cr->bytes[off] == 0xcc || cr->bytes[off] == 0x00)
					break;
				snprintf(ret->reason, sizeof(ret->reason),
					 "the function holding it does not decode at 0x%llx",
					 (unsigned long long)(cr->addr + off));
				return 1;
			}
			x = insn_new(s, ret, &err);
			if (!x)
				return err;
			st.flow = (uint8_t)flow_of(&i, ops, cr->addr + off, &st.target);
			st.call = i.meta.category == ZYDIS_CATEGORY_CALL;
			st.call_known = st.call && call_target(&i, ops, cr->addr + off, &st.target);
			st.sp_delta = sp_delta(&i, ops);
			insn_set(s, x, cr->addr + off, i.length, &st);
			off += i.length;
		}
	}
	return 0;
}

/*
 * AArch64: a word each, every one decodes (what is not known moves neither
 * SP nor control), but for the data an LDR (literal) reads, which is no
 * instruction: no site can be put there, and a probe written over it would
 * change what the program reads.
 */
static int decode_a64(struct sweep *s, struct inl_sites *ret)
{
	int err = 0;

	for (size_t r = 0; r < s->nouter && !err; r++) {
		const struct code_range *cr = &s->outer[r];
		uint8_t *pool;

		err = disasm_a64__mark_pool(cr, &pool);
		for (size_t off = 0; !err && off + INLSITES_A64_INSN <= cr->len;
		     off += INLSITES_A64_INSN) {
			struct inl_step st;
			struct insn *x;

			if (pool && pool[off / INLSITES_A64_INSN])
				continue;
			x = insn_new(s, ret, &err);
			if (!x)
				break;
			inlsites__step_a64(disasm_a64__word(cr->bytes + off), cr->addr + off, &st);
			insn_set(s, x, cr->addr + off, INLSITES_A64_INSN, &st);
		}
		free(pool);
	}
	return err;
}

static int decode_all(struct sweep *s, struct inl_sites *ret)
{
	return s->arch == DISASM_AARCH64 ? decode_a64(s, ret) : decode_x86(s, ret);
}

/* The instruction starting at addr, or NULL (insns ascending: the ranges are). */
static struct insn *insn_at(const struct sweep *s, uint64_t addr)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->insns[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->n && s->insns[lo].addr == addr ? &s->insns[lo] : NULL;
}

static bool insns_sorted(const struct sweep *s)
{
	for (size_t k = 1; k < s->n; k++)
		if (s->insns[k].addr <= s->insns[k - 1].addr)
			return false;
	return true;
}

/* Where x may go next: up to two addresses. */
static size_t successors(const struct insn *x, uint64_t next[2])
{
	size_t n = 0;

	if (x->flow == FLOW_NEXT || x->flow == FLOW_JCC)
		next[n++] = x->addr + x->len;
	if (x->flow == FLOW_JMP || x->flow == FLOW_JCC)
		next[n++] = x->target;
	return n;
}

/* The stack pointer at each instruction reached from entry by known edges. */
static int track_sp(struct sweep *s, uint64_t entry)
{
	struct insn *first = insn_at(s, entry);
	size_t *work, nwork = 0;

	if (!first)
		return 0;
	/* each instruction is queued at most twice: set, then made unknown */
	work = malloc(2 * s->n * sizeof(*work) + sizeof(*work));
	if (!work)
		return -ENOMEM;
	first->sp = 0;
	work[nwork++] = (size_t)(first - s->insns);
	while (nwork) {
		const struct insn *x = &s->insns[work[--nwork]];
		int64_t out = x->sp == SP_UNKNOWN || x->sp_delta == SP_UNKNOWN
				      ? SP_UNKNOWN
				      : x->sp + x->sp_delta;
		uint64_t next[2];
		size_t nn = successors(x, next);

		for (size_t k = 0; k < nn; k++) {
			struct insn *y = insn_at(s, next[k]);

			/* the entry's is 0 by definition: a jump back to it (Go's
			 * morestack block, a loop a C compiler made of a self tail
			 * call) restores it, and the fall-through after a call that
			 * does not return, which may reach such a block, is not real */
			if (!y || y == first || y->sp == out || y->sp == SP_UNKNOWN)
				continue;
			y->sp = y->sp == SP_UNSET ? out : SP_UNKNOWN;
			work[nwork++] = (size_t)(y - s->insns);
		}
	}
	free(work);
	return 0;
}

static bool in_copy(const struct sweep *s, uint64_t a)
{
	for (size_t k = 0; k < s->nranges; k++)
		if (a >= s->ranges[k].lo && a < s->ranges[k].hi)
			return true;
	return false;
}

/*
 * Marks the copy's instructions inside, and with them the instructions
 * between two of its ranges that make no call and no RET: compilers
 * schedule a register move of the caller's there, attribute a branch of the
 * copy's own condition to the caller, or place another copy's code there,
 * all of which run inside the call. A gap that calls or returns (the
 * caller's return between a copy's common path and its panic path) is the
 * caller's: leaving into it ends the call.
 */
static void mark_inside(struct sweep *s)
{
	for (size_t k = 0; k < s->n; k++)
		s->insns[k].inside = in_copy(s, s->insns[k].addr);
	for (size_t r = 0; r + 1 < s->nranges; r++) {
		uint64_t lo = s->ranges[r].hi, hi = s->ranges[r + 1].lo;
		struct insn *x = insn_at(s, lo), *end;
		bool straight = x != NULL;

		for (end = x; straight && end < s->insns + s->n && end->addr < hi; end++)
			straight = end->flow != FLOW_RET && end->flow != FLOW_JMP_REG &&
				   !end->call && end->addr + end->len <= hi;
		if (!straight || end == s->insns + s->n || end->addr != hi)
			continue;
		for (; x < end; x++)
			x->inside = true;
	}
}

/* Whether addr is inside the copy (mark_inside); an address no instruction starts at, by its ranges. */
static bool in_span(const struct sweep *s, uint64_t a)
{
	const struct insn *x = insn_at(s, a);

	return x ? x->inside : in_copy(s, a);
}

static bool in_outer(const struct sweep *s, uint64_t a)
{
	for (size_t k = 0; k < s->nouter; k++)
		if (a >= s->outer[k].addr && a - s->outer[k].addr < s->outer[k].len)
			return true;
	return false;
}

static int refuse(struct inl_sites *ret, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int refuse(struct inl_sites *ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ret->reason, sizeof(ret->reason), fmt, ap);
	va_end(ap);
	ret->mode = INLSITES_NOT_PROBED;
	return 1;
}

/* Adds addr to a sorted set of at most INLSITES_MAX; 1 (refused) when full. */
static int add_site(struct inl_sites *ret, uint64_t *set, size_t *n, uint64_t addr)
{
	size_t k = 0;

	while (k < *n && set[k] < addr)
		k++;
	if (k < *n && set[k] == addr)
		return 0;
	if (ret->nentries + ret->nexits >= INLSITES_MAX)
		return refuse(ret, "it has more than %d entries and exits", INLSITES_MAX);
	memmove(&set[k + 1], &set[k], (*n - k) * sizeof(*set));
	set[k] = addr;
	(*n)++;
	return 0;
}

/* One edge from -> to: an entry, an exit, or neither; 1 when the copy cannot be probed. */
static int edge(const struct sweep *s, uint64_t from, uint64_t to, struct inl_sites *ret)
{
	bool a = in_span(s, from), b = in_span(s, to);

	if (!a && b) {
		if (!in_copy(s, to))
			return refuse(
				ret,
				"the caller's code at 0x%llx inside its span is entered from 0x%llx",
				(unsigned long long)to, (unsigned long long)from);
		return add_site(ret, ret->entries, &ret->nentries, to);
	}
	if (a && !b) {
		if (!in_outer(s, to))
			return refuse(ret, "it leaves the function holding it at 0x%llx",
				      (unsigned long long)from);
		return add_site(ret, ret->exits, &ret->nexits, to);
	}
	return 0;
}

/*
 * The edges into and out of the copy. A jump through a register inside it
 * leaves its exits unknown, not its entries (every edge from outside is
 * still seen): INLSITES_ENTRY_ONLY, once the rest is checked.
 */
static int find_edges(const struct sweep *s, uint64_t entry, struct inl_sites *ret)
{
	uint64_t jump_inside = 0;

	if (in_span(s, entry)) {
		if (!in_copy(s, entry))
			return refuse(ret, "the caller's code at its entry lies inside its span");
		if (add_site(ret, ret->entries, &ret->nentries, entry))
			return 1;
	}
	for (size_t k = 0; k < s->n; k++) {
		const struct insn *x = &s->insns[k];
		uint64_t next[2];
		size_t nn = successors(x, next);

		/* not reached from the entry: padding, code after a call that does
		 * not return, a block only the runtime enters (after a recover) */
		if (x->sp == SP_UNSET && x->flow != FLOW_JMP_REG)
			continue;
		if (x->flow == FLOW_JMP_REG && in_span(s, x->addr)) {
			jump_inside = jump_inside ? jump_inside : x->addr;
			continue;
		}
		if (x->flow == FLOW_JMP_REG)
			return refuse(
				ret,
				"the function holding it jumps through a register at 0x%llx (a switch table): a jump could enter it anywhere",
				(unsigned long long)x->addr);
		if (x->flow == FLOW_RET && in_span(s, x->addr))
			return refuse(ret, "it returns from the function holding it at 0x%llx",
				      (unsigned long long)x->addr);
		for (size_t j = 0; j < nn; j++)
			if (edge(s, x->addr, next[j], ret))
				return 1;
	}
	if (jump_inside) {
		ret->mode = INLSITES_ENTRY_ONLY;
		snprintf(ret->reason, sizeof(ret->reason),
			 "it jumps through a register at 0x%llx: counted at its entries (its exits "
			 "are not known)",
			 (unsigned long long)jump_inside);
	}
	return 0;
}

/*
 * A call the compiler placed between two of the copy's ranges (the
 * caller's, scheduled there) leaves the copy and falls through into it
 * again: every call would be counted twice, once per part. Such a copy is
 * not probed. Only the straight line from an exit inside the copy's first
 * and last addresses is followed: a loop around the copy, which enters it
 * again for a new call, goes back by a jump.
 */
static int check_reentry(const struct sweep *s, struct inl_sites *ret)
{
	uint64_t lo = s->ranges[0].lo, hi = s->ranges[s->nranges - 1].hi;

	for (size_t k = 0; k < ret->nexits; k++) {
		uint64_t a = ret->exits[k];
		const struct insn *x;

		while (a >= lo && a < hi && !in_copy(s, a) && (x = insn_at(s, a)) &&
		       x->flow == FLOW_NEXT)
			a = x->addr + x->len;
		for (size_t e = 0; a != ret->exits[k] && e < ret->nentries; e++)
			if (a == ret->entries[e])
				return refuse(
					ret,
					"the caller's code at 0x%llx splits it: it is left there "
					"and entered again at 0x%llx, each call twice",
					(unsigned long long)ret->exits[k], (unsigned long long)a);
	}
	return 0;
}

/*
 * An entry reached from inside the span too (a loop in the copy back to its
 * first instruction) would look like a new call: such a copy is not probed.
 */
static int check_loops(const struct sweep *s, struct inl_sites *ret)
{
	for (size_t k = 0; k < s->n; k++) {
		const struct insn *x = &s->insns[k];
		uint64_t next[2];
		size_t nn = successors(x, next);

		if (!in_span(s, x->addr) || x->sp == SP_UNSET)
			continue;
		for (size_t j = 0; j < nn; j++)
			for (size_t e = 0; e < ret->nentries; e++)
				if (next[j] == ret->entries[e])
					return refuse(
						ret,
						"a loop inside it at 0x%llx returns to its entry",
						(unsigned long long)x->addr);
	}
	return 0;
}

/* Every site an instruction's start, all with one known stack pointer. */
static int check_sites(const struct sweep *s, struct inl_sites *ret)
{
	const uint64_t *sets[2] = { ret->entries, ret->exits };
	size_t ns[2] = { ret->nentries, ret->nexits };
	bool first = true;

	if (!ret->nentries || (!ret->nexits && ret->mode == INLSITES_TIMED))
		return refuse(ret, ret->nentries ? "no edge leaves it" : "no edge enters it");
	/* counted at its entries only: no call is keyed, no stack pointer needed */
	for (int k = 0; k < (ret->mode == INLSITES_TIMED ? 2 : 1); k++) {
		for (size_t j = 0; j < ns[k]; j++) {
			const struct insn *x = insn_at(s, sets[k][j]);

			if (!x)
				return refuse(
					ret,
					"a jump lands on no instruction at 0x%llx (inside one, "
					"or on data among them)",
					(unsigned long long)sets[k][j]);
			if (ret->mode != INLSITES_TIMED)
				continue;
			if (x->sp == SP_UNSET || x->sp == SP_UNKNOWN)
				return refuse(ret, "the stack pointer at 0x%llx is not known",
					      (unsigned long long)x->addr);
			if (first)
				ret->sp = x->sp;
			else if (x->sp != ret->sp)
				return refuse(
					ret, "the stack pointer differs between its sites (0x%llx)",
					(unsigned long long)x->addr);
			first = false;
		}
	}
	return 0;
}

int inlsites__find(enum disasm_arch arch, const struct code_range *outer, size_t nouter,
		   uint64_t entry, const struct addr_range *ranges, size_t nranges,
		   inlsites_noreturn_fn noreturn, void *arg, struct inl_sites *ret)
{
	struct sweep s = { .arch = arch,
			   .outer = outer,
			   .nouter = nouter,
			   .ranges = ranges,
			   .nranges = nranges,
			   .noreturn = noreturn,
			   .arg = arg };
	int e;

	memset(ret, 0, sizeof(*ret));
	ret->mode = INLSITES_TIMED;
	if (!nranges) {
		refuse(ret, "no code is left of it");
		return 0;
	}
	e = decode_all(&s, ret);
	if (e > 0) {
		ret->mode = INLSITES_NOT_PROBED;
		e = 0;
	} else if (!e && !insns_sorted(&s)) {
		refuse(ret, "the ranges of the function holding it are not in order");
	} else if (!e) {
		mark_inside(&s);
		e = track_sp(&s, entry);
		if (!e && !find_edges(&s, entry, ret) && !check_reentry(&s, ret) &&
		    !check_loops(&s, ret))
			check_sites(&s, ret);
	}
	if (ret->mode != INLSITES_TIMED)
		ret->nexits = 0;
	if (ret->mode == INLSITES_NOT_PROBED)
		ret->nentries = 0;
	free(s.insns);
	return e;
}

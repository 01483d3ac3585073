// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "analysis/disasm_impl.h"
#include "analysis/jumptable.h"

/* The instructions before a jump looked at for its table's base. */
#define RING 8
/* Entries read over all of a function's tables: a crafted file's thousands of
 * jumps through one large table cost no more than this. */
#define MAX_TOTAL_ENTRIES (16 * JUMPTABLE_MAX_ENTRIES)
/* Entries read at a time. */
#define CHUNK 64

struct insn {
	ZydisDecodedInstruction i;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	uint64_t addr;
};

struct sweep {
	const struct code_range *ranges;
	size_t nranges;
	jumptable_read_fn read;
	void *ctx;
	struct insn ring[RING]; /* the last instructions, ring[n % RING] the next */
	size_t n;
	size_t entries; /* read so far, over every table */
	struct jumptable *jt;
};

static ZydisRegister reg64(ZydisRegister r)
{
	return ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
}

/* The latest instruction before the jump, back past skip of them, that writes
 * reg (any width of it); NULL when none is among the last RING. */
static const struct insn *writer(const struct sweep *s, ZydisRegister reg, size_t *skip)
{
	for (size_t k = *skip; k < RING && k < s->n; k++) {
		const struct insn *x = &s->ring[(s->n - 1 - k) % RING];

		for (uint8_t o = 0; o < x->i.operand_count; o++)
			if ((x->ops[o].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
			    x->ops[o].type == ZYDIS_OPERAND_TYPE_REGISTER &&
			    reg64(x->ops[o].reg.value) == reg) {
				*skip = k + 1;
				return x;
			}
	}
	return NULL;
}

/* Whether x is LEA reg, [RIP + disp] (64-bit): *ret the address it computes. */
static bool lea_rip(const struct insn *x, ZydisRegister reg, uint64_t *ret)
{
	ZyanU64 a;

	if (!x || x->i.mnemonic != ZYDIS_MNEMONIC_LEA || x->i.operand_count_visible != 2 ||
	    x->ops[0].reg.value != reg || x->ops[1].mem.base != ZYDIS_REGISTER_RIP ||
	    x->ops[1].mem.index != ZYDIS_REGISTER_NONE ||
	    !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&x->i, &x->ops[1], x->addr, &a)))
		return false;
	*ret = a;
	return true;
}

/* The table base of reg as of the jump's instructions, back past skip: a LEA [RIP + disp]. */
static bool base_of(const struct sweep *s, ZydisRegister reg, size_t skip, uint64_t *ret)
{
	return lea_rip(writer(s, reg, &skip), reg, ret);
}

/* Whether x is MOVSXD r, dword [base + index*4] (no displacement): gcc's entry load. */
static bool entry_load(const struct insn *x, ZydisRegister r, ZydisRegister *ret_base)
{
	const ZydisDecodedOperand *m;

	if (!x || x->i.mnemonic != ZYDIS_MNEMONIC_MOVSXD || x->ops[0].reg.value != r)
		return false;
	m = &x->ops[1];
	if (m->type != ZYDIS_OPERAND_TYPE_MEMORY || m->mem.index == ZYDIS_REGISTER_NONE ||
	    m->mem.scale != 4 || m->mem.disp.value != 0 || m->size != 32 ||
	    reg64(m->mem.base) != m->mem.base || m->mem.base == ZYDIS_REGISTER_NONE ||
	    m->mem.base == ZYDIS_REGISTER_RIP)
		return false;
	*ret_base = m->mem.base;
	return true;
}

/*
 * jmp R, R = B + [B + I*4] (ADD R, X with one of R, X the table base B from
 * a LEA [RIP], the other the entry MOVSXD'd from [B + I*4]): the table at
 * *ret_table, of 32-bit offsets from it.
 */
static bool gcc_table(const struct sweep *s, ZydisRegister r, uint64_t *ret_table)
{
	size_t skip = 0, after;
	const struct insn *add = writer(s, r, &skip), *w;
	ZydisRegister x, base;

	if (!add || add->i.mnemonic != ZYDIS_MNEMONIC_ADD || add->i.operand_count_visible != 2 ||
	    add->ops[0].reg.value != r || add->ops[1].type != ZYDIS_OPERAND_TYPE_REGISTER ||
	    reg64(add->ops[1].reg.value) != add->ops[1].reg.value)
		return false;
	x = add->ops[1].reg.value;
	/* the entry in R, the base in X; or the other way round */
	after = skip;
	w = writer(s, r, &after);
	if (w && entry_load(w, r, &base) && base == x)
		return base_of(s, x, skip, ret_table);
	after = skip;
	w = writer(s, x, &after);
	return w && entry_load(w, x, &base) && base == r && base_of(s, r, skip, ret_table);
}

/* jmp [B + I*8] with B from a LEA [RIP] (Go), or jmp [TABLE + I*8] (non-PIC): 8-byte addresses. */
static bool address_table(const struct sweep *s, const ZydisDecodedOperand *m, uint64_t *ret_table)
{
	if (m->mem.index == ZYDIS_REGISTER_NONE || m->mem.scale != 8 || m->size != 64 ||
	    (m->mem.segment != ZYDIS_REGISTER_DS && m->mem.segment != ZYDIS_REGISTER_SS))
		return false;
	if (m->mem.base == ZYDIS_REGISTER_NONE) {
		*ret_table = (uint64_t)m->mem.disp.value;
		return m->mem.disp.value > 0;
	}
	return m->mem.disp.value == 0 && reg64(m->mem.base) == m->mem.base &&
	       base_of(s, m->mem.base, 0, ret_table);
}

static int add_target(struct jumptable *jt, uint64_t t)
{
	if (jt->ntargets % 256 == 0) {
		uint64_t *n = realloc(jt->targets, (jt->ntargets + 256) * sizeof(*n));

		if (!n)
			return -ENOMEM;
		jt->targets = n;
	}
	jt->targets[jt->ntargets++] = t;
	return 0;
}

/*
 * Reads the table at table (entries of 4 bytes, offsets from it, or of 8,
 * addresses) while its entries land in the function. 0 when read (at least
 * one entry), 1 when not, or -ENOMEM.
 */
static int read_table(struct sweep *s, uint64_t table, size_t width)
{
	uint8_t buf[CHUNK * 8];
	size_t n = 0;

	while (n < JUMPTABLE_MAX_ENTRIES) {
		if (s->entries + CHUNK > MAX_TOTAL_ENTRIES || table + n * width < table ||
		    s->read(s->ctx, table + n * width, buf, CHUNK * width))
			break;
		s->entries += CHUNK;
		for (size_t k = 0; k < CHUNK; k++, n++) {
			uint64_t t;
			int32_t off;
			int e;

			if (width == 4) {
				memcpy(&off, buf + k * 4, 4);
				t = table + (uint64_t)(int64_t)off;
			} else {
				memcpy(&t, buf + k * 8, 8);
			}
			if (!disasm__in_ranges(s->ranges, s->nranges, t))
				return n ? 0 : 1;
			e = add_target(s->jt, t);
			if (e)
				return e;
		}
	}
	/* cut short by a read or a budget: its end was not seen */
	return 1;
}

/* The jump x through a register or memory: its table's targets, when it has one. */
static int resolve(struct sweep *s, const struct insn *x)
{
	const ZydisDecodedOperand *o = &x->ops[0];
	size_t before = s->jt->ntargets;
	uint64_t table;
	int e = 1;

	bool form = false;

	if (o->type == ZYDIS_OPERAND_TYPE_REGISTER && reg64(o->reg.value) == o->reg.value &&
	    gcc_table(s, o->reg.value, &table)) {
		form = true;
		e = read_table(s, table, 4);
	} else if (o->type == ZYDIS_OPERAND_TYPE_MEMORY && address_table(s, o, &table)) {
		form = true;
		e = read_table(s, table, 8);
	}
	if (e < 0)
		return e;
	/* of a table's form, read or not: a switch, not a hook */
	if (form) {
		uint64_t *p = realloc(s->jt->tables_at, (s->jt->ntables_at + 1) * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->jt->tables_at = p;
		p[s->jt->ntables_at++] = x->addr;
	}
	if (e)
		s->jt->ntargets = before; /* a table not read whole adds nothing */
	else
		s->jt->nresolved++;
	return 0;
}

int jumptable__read(const struct code_range *ranges, size_t nranges, jumptable_read_fn read,
		    void *ctx, struct jumptable *ret)
{
	struct sweep s = {
		.ranges = ranges, .nranges = nranges, .read = read, .ctx = ctx, .jt = ret
	};
	ZydisDecoder d;

	memset(ret, 0, sizeof(*ret));
	if (!ZYAN_SUCCESS(ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)))
		return 0;
	for (size_t i = 0; i < nranges; i++) {
		const struct code_range *r = &ranges[i];

		s.n = 0;
		for (size_t off = 0; r->bytes && off < r->len;) {
			struct insn *x = &s.ring[s.n % RING];
			int e;

			if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&d, r->bytes + off, r->len - off,
								 &x->i, x->ops)))
				break; /* the sweep stopped here too: the function stays entry-only */
			x->addr = r->addr + off;
			off += x->i.length;
			/* as the sweep tells them (disasm.c): not a direct JMP,
			 * nor one through a RIP-relative slot (a GOT's, a tail call) */
			if (x->i.meta.category != ZYDIS_CATEGORY_UNCOND_BR ||
			    x->ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE ||
			    (x->ops[0].type == ZYDIS_OPERAND_TYPE_MEMORY &&
			     x->ops[0].mem.base == ZYDIS_REGISTER_RIP)) {
				s.n++;
				continue;
			}
			ret->njumps++;
			e = resolve(&s, x);
			if (e)
				return e;
			s.n++;
		}
	}
	return 0;
}

void jumptable__clear(struct jumptable *jt)
{
	free(jt->targets);
	free(jt->tables_at);
	memset(jt, 0, sizeof(*jt));
}

// SPDX-License-Identifier: MIT
/*
 * Parameters from DWARF: the function's DW_TAG_subprogram found by its entry
 * (through the unit whose ranges hold it: a Go binary's DWARF is large, and
 * only that unit is walked), its DW_TAG_formal_parameter children, their
 * types reduced to what a probe can show, and their location at the probe's
 * address. Every step is bounded: the DWARF is the file's, and the file may
 * be a container's.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "analysis/dwarfinfo_impl.h"
#include "analysis/params.h"
#include "base/cancel.h"

/* DIEs visited looking for a function, and the depth of types and scopes. */
#define MAX_STEPS (1u << 22)
#define MAX_SCOPE_DEPTH 16
#define MAX_TYPE_DEPTH 12

struct finder {
	const struct dwarfinfo *di;
	uint64_t entry;
	size_t steps;
	Dwarf_Die found;
};

/* 1 found, 0 not, -EFBIG past the bound, -ECANCELED. */
static int find_in(struct finder *f, Dwarf_Die *parent, int depth)
{
	Dwarf_Die child;
	Dwarf_Addr pc;
	int ret;

	if (depth > MAX_SCOPE_DEPTH || dwarf_child(parent, &child) != 0)
		return 0;
	do {
		if (++f->steps > MAX_STEPS)
			return -EFBIG;
		if (cancel__every(f->steps))
			return -ECANCELED;
		switch (dwarf_tag(&child)) {
		case DW_TAG_subprogram:
			if ((dwarf_entrypc(&child, &pc) == 0 || dwarf_lowpc(&child, &pc) == 0) &&
			    pc == f->entry) {
				f->found = child;
				return 1;
			}
			break;
		case DW_TAG_namespace:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_module:
			ret = find_in(f, &child, depth + 1);
			if (ret)
				return ret;
			break;
		default: break;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return 0;
}

/* The subprogram entered at f->entry, in the unit whose ranges hold it. */
static int find_subprogram(struct finder *f)
{
	Dwarf_Off off = 0, next;
	size_t hsize, units = 0;
	int ret;

	while (dwarf_nextcu(f->di->dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;

		if (next <= off || ++units > MAX_STEPS)
			break; /* a malformed unit length must not loop */
		/* a unit without ranges (dwarf_haspc < 0) is walked */
		if (dwarf_offdie(f->di->dw, off + hsize, &cu) && dwarf_haspc(&cu, f->entry) != 0) {
			ret = find_in(f, &cu, 0);
			if (ret)
				return ret;
		}
		off = next;
	}
	return 0;
}

static bool type_of(Dwarf_Die *die, Dwarf_Die *ret)
{
	Dwarf_Attribute attr;

	return dwarf_attr_integrate(die, DW_AT_type, &attr) && dwarf_formref_die(&attr, ret);
}

static bool is_qualifier(int tag)
{
	return tag == DW_TAG_typedef || tag == DW_TAG_const_type || tag == DW_TAG_volatile_type ||
	       tag == DW_TAG_restrict_type || tag == DW_TAG_atomic_type;
}

/* The type under typedefs and qualifiers; false past MAX_TYPE_DEPTH or a broken reference. */
static bool strip(Dwarf_Die *t)
{
	for (int i = 0; i < MAX_TYPE_DEPTH; i++) {
		if (!is_qualifier(dwarf_tag(t)))
			return true;
		if (!type_of(t, t))
			return false; /* const void */
	}
	return false;
}

/* A C type's name as written ("const char *"), bounded; Go types carry their own. */
static void type_name(const struct dwarfinfo *di, Dwarf_Die *t, bool go, char *buf, size_t len,
		      int depth)
{
	const char *name = dwarfinfo__checked(di, dwarf_diename(t));
	char inner[PARAM_TYPE_LEN];
	Dwarf_Die sub;
	int tag = dwarf_tag(t);

	if (name && *name) {
		snprintf(buf, len, "%s%s", tag == DW_TAG_structure_type && !go ? "struct " : "",
			 name);
		return;
	}
	if (depth >= MAX_TYPE_DEPTH || (tag != DW_TAG_pointer_type && !is_qualifier(tag))) {
		snprintf(buf, len, "%s",
			 tag == DW_TAG_structure_type ? "struct"
			 : tag == DW_TAG_union_type   ? "union"
						      : "?");
		return;
	}
	if (!type_of(t, &sub))
		snprintf(inner, sizeof(inner), "void");
	else
		type_name(di, &sub, go, inner, sizeof(inner), depth + 1);
	/* a name too long for buf is cut */
	if (snprintf(buf, len, "%s%s%s",
		     tag == DW_TAG_const_type	   ? "const "
		     : tag == DW_TAG_volatile_type ? "volatile "
						   : "",
		     inner, tag == DW_TAG_pointer_type ? " *" : "") < 0)
		buf[0] = 0;
}

static void base_kind(Dwarf_Die *t, struct param *p)
{
	Dwarf_Attribute attr;
	Dwarf_Word enc = 0, size = 0;

	if (dwarf_attr_integrate(t, DW_AT_encoding, &attr))
		dwarf_formudata(&attr, &enc);
	if (dwarf_attr_integrate(t, DW_AT_byte_size, &attr))
		dwarf_formudata(&attr, &size);
	p->size = size >= 1 && size <= 8 ? (uint8_t)size : 8;
	switch (enc) {
	case DW_ATE_boolean: p->kind = PARAM_BOOL; break;
	case DW_ATE_signed:
	case DW_ATE_signed_char: p->kind = PARAM_INT; break;
	case DW_ATE_unsigned:
	case DW_ATE_unsigned_char:
	case DW_ATE_UTF: p->kind = PARAM_UINT; break;
	case DW_ATE_float:
	case DW_ATE_complex_float:
		p->kind = PARAM_OTHER;
		p->why = "a floating-point value: its register is not one a probe can read";
		break;
	default: p->kind = PARAM_OTHER; p->why = "a value of an encoding not read";
	}
	if (size > 8 && p->kind != PARAM_OTHER) {
		p->kind = PARAM_OTHER;
		p->why = "wider than a register: not read";
	}
}

/* Whether a pointer's target is a C character type: char * is read as a string. */
static bool points_to_char(Dwarf_Die *ptr)
{
	Dwarf_Attribute attr;
	Dwarf_Word enc = 0, size = 0;
	Dwarf_Die t;

	if (!type_of(ptr, &t) || !strip(&t) || dwarf_tag(&t) != DW_TAG_base_type)
		return false;
	if (dwarf_attr_integrate(&t, DW_AT_encoding, &attr))
		dwarf_formudata(&attr, &enc);
	if (dwarf_attr_integrate(&t, DW_AT_byte_size, &attr))
		dwarf_formudata(&attr, &size);
	return size == 1 && (enc == DW_ATE_signed_char || enc == DW_ATE_unsigned_char);
}

/* What kind of value p is, from its type t (under typedefs and qualifiers). */
static void kind_of(Dwarf_Die *t, bool go, const char *name, struct param *p)
{
	p->kind = PARAM_OTHER;
	switch (dwarf_tag(t)) {
	case DW_TAG_base_type: base_kind(t, p); return;
	case DW_TAG_enumeration_type:
		p->kind = PARAM_INT;
		p->size = 4;
		return;
	case DW_TAG_pointer_type:
	case DW_TAG_reference_type:
	case DW_TAG_rvalue_reference_type:
		p->kind = !go && points_to_char(t) ? PARAM_CSTRING : PARAM_PTR;
		p->size = 8;
		return;
	case DW_TAG_structure_type:
		if (go && name && !strcmp(name, "string")) {
			p->kind = PARAM_STRING;
			return;
		}
		if (go && name && !strcmp(name, "[]uint8")) {
			p->kind = PARAM_BYTES;
			return;
		}
		if (go && name && !strncmp(name, "[]", 2)) {
			p->kind = PARAM_SLICE;
			return;
		}
		p->why = "a structure: not read";
		return;
	default: p->why = "a value of this type is not read";
	}
}

/*
 * The capture slot (enum param_reg) of the register DWARF numbers dwreg,
 * or -1: x86-64's numbering, or AArch64's (0-30: X0-X30; slot i is Xi).
 */
static int capture_index(unsigned int dwreg, bool a64)
{
	static const int map[] = { PREG_RAX, PREG_RDX, PREG_RCX, PREG_RBX, PREG_RSI, PREG_RDI,
				   -1,	     -1,       PREG_R8,	 PREG_R9,  PREG_R10, PREG_R11 };

	if (a64)
		return dwreg < PREG__COUNT ? (int)dwreg : -1;
	return dwreg < sizeof(map) / sizeof(map[0]) ? map[dwreg] : -1;
}

/* Whether DWARF's register dwreg is a floating-point or vector one (XMM; V0-V31). */
static bool fp_reg(int dwreg, bool a64)
{
	return a64 ? dwreg >= 64 && dwreg <= 95 : dwreg >= 17 && dwreg <= 32;
}

/* DW_OP_reg0-31, DW_OP_regx: the register's number, else -1. */
static int op_reg(const Dwarf_Op *op)
{
	if (op->atom >= DW_OP_reg0 && op->atom <= DW_OP_reg31)
		return op->atom - DW_OP_reg0;
	if (op->atom == DW_OP_regx && op->number < 256)
		return (int)op->number;
	return -1;
}

/* The registers holding p at site: one, or pieces of one register each. */
static void locate(Dwarf_Die *die, uint64_t site, bool a64, struct param *p)
{
	size_t want = p->kind == PARAM_SLICE				  ? 3
		      : p->kind == PARAM_STRING || p->kind == PARAM_BYTES ? 2
									  : 1,
	       len = 0;
	Dwarf_Attribute attr;
	Dwarf_Op *expr;
	int reg;

	if (!dwarf_attr_integrate(die, DW_AT_location, &attr)) {
		p->why = "optimized out";
		return;
	}
	if (dwarf_getlocation_addr(&attr, site, &expr, &len, 1) != 1 || !len) {
		p->why = "no location at the function's entry";
		return;
	}
	p->nregs = 0;
	for (size_t i = 0; i < len; i++) {
		if (expr[i].atom == DW_OP_piece)
			continue;
		reg = op_reg(&expr[i]);
		if (reg < 0) {
			p->why = expr[i].atom == DW_OP_fbreg ||
						 expr[i].atom == DW_OP_call_frame_cfa ||
						 (expr[i].atom >= DW_OP_breg0 &&
						  expr[i].atom <= DW_OP_breg31)
					 ? "passed on the stack: not captured"
					 : "not in a register at the entry";
			return;
		}
		if (fp_reg(reg, a64)) {
			p->why = "in a floating-point register: not one a probe can read";
			return;
		}
		if (capture_index((unsigned int)reg, a64) < 0) {
			p->why = "in a register the probe does not capture";
			return;
		}
		if (p->nregs < want)
			p->regs[p->nregs++] = (uint8_t)capture_index((unsigned int)reg, a64);
	}
	if (p->nregs < want)
		p->why = "only part of it is in registers: not read";
}

/*
 * The hardware number of the register of capture slot i (enum param_reg's
 * order): x86-64's, or AArch64's (Xi).
 */
static unsigned int hw_reg(unsigned int i, bool a64)
{
	static const uint8_t x86[PREG__COUNT] = { 0, 3, 1, 2, 6, 7, 8, 9, 10, 11 };

	return a64 ? i : x86[i];
}

/*
 * A parameter DWARF places where a probe cannot read it at a moved entry
 * site (a spill slot): where it was at the entry, when that is registers
 * none of the instructions skipped to the site writes (clobbers).
 */
static void locate_at_entry(Dwarf_Die *die, const struct params_at *at, struct param *p)
{
	struct param q = *p;

	q.why = NULL;
	q.nregs = 0;
	locate(die, at->entry, at->a64, &q);
	for (size_t i = 0; !q.why && i < q.nregs; i++)
		if (q.regs[i] >= PREG__COUNT || (at->clobbers & (1U << hw_reg(q.regs[i], at->a64))))
			return;
	if (!q.why)
		*p = q;
}

static void add_param(const struct dwarfinfo *di, Dwarf_Die *die, const struct params_at *at,
		      bool go, struct func_params *fp)
{
	struct param *p = &fp->p[fp->n++];
	const char *name = dwarfinfo__checked(di, dwarf_diename(die));
	const char *tname;
	Dwarf_Die t, bare;

	memset(p, 0, sizeof(*p));
	p->string = -1;
	snprintf(p->name, sizeof(p->name), "%s", name && *name ? name : "?");
	if (!type_of(die, &t)) {
		snprintf(p->type, sizeof(p->type), "?");
		p->kind = PARAM_OTHER;
		p->why = "its type is not described";
		return;
	}
	type_name(di, &t, go, p->type, sizeof(p->type), 0);
	bare = t;
	if (!strip(&bare)) {
		p->kind = PARAM_OTHER;
		p->why = "its type is not described";
		return;
	}
	tname = dwarfinfo__checked(di, dwarf_diename(&bare));
	kind_of(&bare, go, tname, p);
	if (!p->why) {
		locate(die, at->site, at->a64, p);
		if (p->why && at->site != at->entry)
			locate_at_entry(die, at, p);
	}
	if (p->why) {
		p->kind = PARAM_OTHER;
		return;
	}
	if ((p->kind == PARAM_STRING || p->kind == PARAM_BYTES || p->kind == PARAM_CSTRING) &&
	    fp->nstrings < PARAMS_MAX_STRINGS)
		p->string = (int8_t)fp->nstrings++;
}

/* Whether a formal parameter is one of Go's results (DW_AT_variable_parameter). */
static bool go_result(Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	bool flag = false;

	return dwarf_attr(die, DW_AT_variable_parameter, &attr) &&
	       dwarf_formflag(&attr, &flag) == 0 && flag;
}

int params__from_dwarf(const struct dwarfinfo *di, const struct params_at *at, bool go,
		       struct func_params *ret, struct rw_error *err)
{
	struct finder f = { .di = di, .entry = at->entry };
	Dwarf_Die child;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (!di || !di->dw)
		return -ENOENT;
	r = find_subprogram(&f);
	if (r == -EFBIG)
		return rw_error_set(err, EFBIG,
				    "the DWARF is too large to search for the function");
	if (r < 0)
		return rw_error_set(err, -r, "reading DWARF was cancelled");
	if (!r)
		return -ENOENT;
	if (dwarf_child(&f.found, &child) != 0)
		return 0;
	for (size_t steps = 0; steps < MAX_STEPS; steps++) {
		if (dwarf_tag(&child) == DW_TAG_formal_parameter && !(go && go_result(&child))) {
			if (ret->n < PARAMS_MAX)
				add_param(di, &child, at, go, ret);
			else
				ret->more++;
		}
		if (dwarf_siblingof(&child, &child) != 0)
			break;
	}
	return 0;
}

void params__raw(struct func_params *ret, bool go, bool a64, const char *why)
{
	static const uint8_t go_regs[] = { PREG_RAX, PREG_RBX, PREG_RCX, PREG_RDI, PREG_RSI,
					   PREG_R8,  PREG_R9,  PREG_R10, PREG_R11 };
	static const uint8_t sysv_regs[] = { PREG_RDI, PREG_RSI, PREG_RDX,
					     PREG_RCX, PREG_R8,	 PREG_R9 };
	/* AArch64: Go passes integers in X0-X15, AAPCS64 in X0-X7; slot i is Xi */
	static const uint8_t a64_regs[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	static const char *const names[PREG__COUNT] = { "rax", "rbx", "rcx", "rdx", "rsi",
							"rdi", "r8",  "r9",  "r10", "r11" };
	static const char *const a64_names[PREG__COUNT] = { "x0", "x1", "x2", "x3", "x4",
							    "x5", "x6", "x7", "x8", "x9" };
	const uint8_t *regs = a64 ? a64_regs : go ? go_regs : sysv_regs;
	size_t n = a64 ? (go ? PREG__COUNT : 8) : go ? sizeof(go_regs) : sizeof(sysv_regs);

	memset(ret, 0, sizeof(*ret));
	ret->raw = true;
	ret->raw_why = why;
	for (size_t i = 0; i < n; i++) {
		struct param *p = &ret->p[ret->n++];

		snprintf(p->name, sizeof(p->name), "%s", (a64 ? a64_names : names)[regs[i]]);
		snprintf(p->type, sizeof(p->type), "register");
		p->kind = PARAM_UINT;
		p->size = 8;
		p->nregs = 1;
		p->regs[0] = regs[i];
		p->string = -1;
	}
}

uint64_t params__kernel_strings(const struct func_params *fp)
{
	uint64_t v = ~0ULL;

	for (size_t i = 0; i < fp->n; i++) {
		const struct param *p = &fp->p[i];
		uint64_t b;

		if (p->string < 0 || p->string >= PARAMS_MAX_STRINGS)
			continue;
		b = p->regs[0] | (uint64_t)(p->kind == PARAM_CSTRING ? 0xf : p->regs[1]) << 4;
		v &= ~(0xffULL << (8 * p->string));
		v |= b << (8 * p->string);
	}
	return v;
}

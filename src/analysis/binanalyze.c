// SPDX-License-Identifier: MIT
/*
 * A matched function's analysis, made on first use: its code swept for
 * RETs, its cold parts, the tail calls it makes.
 * binary_impl.h holds what the pieces share.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gelf.h>

#include "analysis/binary.h"
#include "analysis/binary_impl.h"
#include "base/cancel.h"
#include "base/demangle.h"
#include "analysis/disasm.h"
#include "analysis/elfbin.h"
#include "analysis/entrysite.h"
#include "analysis/gopclntab.h"
#include "analysis/jumptable.h"

/* The name of a function found from its FDE alone (anon_func_at). */
static const char anon_name[] = "(no symbol)";

/* ---- analysis ---- */

/* Whether addr is the entry of runtime.morestack or runtime.morestack_noctxt. */
static bool is_morestack(void *ctx, uint64_t addr)
{
	static const char *const names[] = { "runtime.morestack", "runtime.morestack_noctxt" };
	const struct binary *b = ctx;

	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		size_t i = bin_match__key_lower_bound(b, names[k]);

		for (; i < b->nkeys && !strcmp(b->keys[i].name, names[k]); i++)
			if (b->fns[b->keys[i].fn].addr == addr)
				return true;
	}
	return false;
}

/* Reads the file for a switch table (jumptable.h). */
static int read_table(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct binary *b = ctx;

	return elfbin__read(b->eb, addr, buf, len);
}

/* The jumps through a register that are a switch table's are not hooks. */
static void drop_table_hooks(struct disasm_result *dis, uint64_t entry, const struct jumptable *jt)
{
	size_t n = 0;

	for (size_t i = 0; i < dis->nhooks; i++) {
		bool table = false;

		for (size_t k = 0; k < jt->ntables_at && !table; k++)
			table = jt->tables_at[k] == entry + (uint64_t)dis->hooks[i].off;
		if (!table)
			dis->hooks[n++] = dis->hooks[i];
	}
	dis->nhooks = n;
}

/*
 * Sweeps fi's ranges into f->dis, and chooses its entry site. 0; 1 when they
 * cannot be read (fi->reason says why); or -ENOMEM.
 */
static int sweep(struct binary *b, struct fn_entry *f, struct func_info *fi)
{
	struct code_range cr[DWARF_MAX_RANGES] = { 0 };
	bool a64 = elfbin__machine(b->eb) == EM_AARCH64;
	uint64_t total = 0;
	size_t n = 0;
	int ret = 0;

	for (size_t i = 0; i < fi->nranges; i++)
		total += fi->ranges[i].hi - fi->ranges[i].lo;
	for (size_t i = 0; i < fi->nranges; i++) {
		uint64_t lo = fi->ranges[i].lo, len = fi->ranges[i].hi - lo;
		uint8_t *buf;

		if (!len || len > MAX_FUNC_SIZE || !elfbin__is_code(b->eb, lo, len)) {
			fi->reason = len ? "the function's range is not inside an executable segment"
					 : "the symbol has no size";
			ret = 1;
			goto out;
		}
		/* past the budget disasm__scan decodes nothing: nothing to read
		 * (a 64 MiB function was read whole to be refused) */
		if (total > DISASM_MAX_BYTES) {
			cr[n++] = (struct code_range){ lo, NULL, len };
			continue;
		}
		buf = malloc(len);
		if (!buf) {
			ret = -ENOMEM;
			goto out;
		}
		cr[n++] = (struct code_range){ lo, buf, len };
		if (elfbin__read(b->eb, lo, buf, len)) {
			fi->reason = "the function's bytes could not be read from the file";
			ret = 1;
			goto out;
		}
	}
	ret = disasm__scan(a64 ? DISASM_AARCH64 : DISASM_X86_64, cr, n, f->addr, f->dis);
	if (!ret && n && a64) {
		fi->entry_site = entrysite__choose_a64(&cr[0], f->dis, fi->go, is_morestack, b);
		fi->entry_clobbers = entrysite__clobbers_a64(&cr[0], fi->entry_site);
		fi->entry_past_check = fi->go && entrysite__past_check_a64(&cr[0], fi->entry_site,
									   is_morestack, b);
	} else if (!ret && n) {
		struct jumptable jt = { 0 };

		/* a function with a jump through a register: is each a switch table's? */
		if (f->dis->nindirect_jumps)
			ret = jumptable__read(cr, n, read_table, b, &jt);
		if (!ret)
			drop_table_hooks(f->dis, f->addr, &jt);
		if (!ret)
			fi->entry_site = entrysite__choose(&cr[0], f->dis, fi->go, is_morestack, b,
							   &jt, &fi->entry_sp);
		jumptable__clear(&jt);
		fi->entry_clobbers = entrysite__clobbers(&cr[0], fi->entry_site);
		fi->entry_past_check = fi->go && entrysite__past_check(&cr[0], fi->entry_site,
								       is_morestack, b);
	}
out:
	for (size_t i = 0; i < n; i++)
		free((void *)cr[i].bytes);
	return ret;
}

static bool in_func_ranges(const struct func_info *fi, uint64_t addr)
{
	for (size_t i = 0; i < fi->nranges; i++)
		if (addr >= fi->ranges[i].lo && addr < fi->ranges[i].hi)
			return true;
	return false;
}

/*
 * A stripped binary has lost the ".cold" symbols that name the parts a
 * compiler moved out of a function (gcc's unlikely paths), so jumps into
 * them look like tail calls. Every x86-64 ELF carries unwind tables. A jump
 * target is code of this function's own when it is no known function's
 * entry nor inside one, not a PLT stub, starts an FDE whose range overlaps
 * no known function, and its unwind rules say it runs inside a frame: every
 * function starts with CFA = RSP + 8 and nothing saved. A target in that
 * entry state is taken for a function without a symbol (anon_func_at), also
 * when it is the cold part of a function that had no frame to set up: its
 * RETs then end the call as a tail call's would. Adds the ranges to fi;
 * returns how many.
 */
static size_t add_cold_parts(struct binary *b, struct fn_entry *f, struct func_info *fi)
{
	size_t added = 0;

	/* the entry state checked is x86-64's */
	if (elfbin__machine(b->eb) != EM_X86_64)
		return 0;
	for (size_t k = 0; k < f->dis->ntail_calls && fi->nranges < DWARF_MAX_RANGES; k++) {
		uint64_t t = f->dis->tail_targets[k], lo, hi;

		if (!t || in_func_ranges(fi, t) || bin_index__addr_known(b, t) ||
		    elfbin__in_plt(b->eb, t) || elfbin__fde_at(b->eb, t, &lo, &hi) ||
		    hi - lo > MAX_FUNC_SIZE || !elfbin__is_code(b->eb, lo, hi - lo) ||
		    bin_index__range_known(b, lo, hi) || elfbin__entry_state_at(b->eb, t) != 0)
			continue;
		fi->ranges[fi->nranges++] = (struct addr_range){ lo, hi };
		added++;
	}
	return added;
}

/* First cold part that starts after addr. */
size_t bin_analysis__cold_after(const struct binary *b, uint64_t addr)
{
	size_t lo = 0, hi = b->ncold;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->cold[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The cold part holding addr, or NULL. */
const struct cold_part *bin_analysis__cold_at(const struct binary *b, uint64_t addr)
{
	size_t i = bin_analysis__cold_after(b, addr);

	return i && addr < b->cold[i - 1].hi ? &b->cold[i - 1] : NULL;
}

/*
 * Indexes f's cold parts found from the unwind tables (its ranges past
 * those the symbols and DWARF gave), so that binary__func_at finds f there
 * and no other function takes them for its own. add_cold_parts took only
 * ranges that overlap no known one: the index stays disjoint.
 */
static int cold_index(struct binary *b, struct fn_entry *f, const struct func_info *fi)
{
	for (size_t r = 1 + f->nextra; r < fi->nranges; r++) {
		size_t i = bin_analysis__cold_after(b, fi->ranges[r].lo);
		struct cold_part *p = realloc(b->cold, (b->ncold + 1) * sizeof(*p));

		if (!p)
			return -ENOMEM;
		b->cold = p;
		memmove(&p[i + 1], &p[i], (b->ncold - i) * sizeof(*p));
		p[i] = (struct cold_part){ fi->ranges[r].lo, fi->ranges[r].hi, f };
		b->ncold++;
	}
	return 0;
}

/*
 * A function's analysis, in one allocation: inspect '*' of a big Go binary
 * makes 165,000 of them. A Go function has one range (no cold parts are
 * looked for), native code room for DWARF_MAX_RANGES.
 */
struct analysis {
	struct func_info fi;
	struct disasm_result dis;
	struct addr_range ranges[];
};

/* Frees what analyze made for f (f->info holds it all); NULL-tolerant. */
void bin_analysis__free(struct fn_entry *f)
{
	disasm_result__clear(f->dis);
	if (f->info) {
		free((void *)f->info->tail_returns);
		free(f->info->params);
	}
	free(f->info);
	f->info = NULL;
	f->dis = NULL;
}

static int analyze(struct binary *b, struct fn_entry *f)
{
	bool go = f->source == FUNC_SOURCE_PCLNTAB || bin_index__pcln_has_entry(b, f->addr);
	size_t nranges = go ? 1 + f->nextra : DWARF_MAX_RANGES;
	struct analysis *a = calloc(1, sizeof(*a) + nranges * sizeof(a->ranges[0]));
	struct func_info *fi;
	int ret;

	if (!a)
		return -ENOMEM;
	fi = &a->fi;
	f->dis = &a->dis;
	fi->ranges = a->ranges;
	fi->name = f->name;
	fi->demangled = f->demangled;
	fi->address = f->addr;
	fi->size = f->size;
	fi->source = f->source;
	fi->go = go;
	fi->ranges[0] = (struct addr_range){ f->addr, f->addr + f->size };
	for (size_t i = 0; i < f->nextra; i++)
		fi->ranges[1 + i] = f->extra[i];
	fi->nranges = 1 + f->nextra;
	fi->mode = FUNC_MODE_ENTRY_ONLY;
	f->info = fi;

	if (elfbin__addr_to_offset(b->eb, f->addr, &fi->file_offset)) {
		fi->reason = "the entry address is not in a loaded segment of the file";
		return 0;
	}
	ret = sweep(b, f, fi);
	/* Go keeps its code in one range: no cold parts to look for */
	while (!ret && !fi->go && !f->dis->undecodable && !f->dis->over_budget &&
	       add_cold_parts(b, f, fi)) {
		disasm_result__clear(f->dis);
		ret = sweep(b, f, fi);
	}
	if (ret == -ECANCELED) {
		bin_analysis__free(f); /* not half an analysis for a later match to trust */
		return ret;
	}
	if (ret)
		return ret < 0 ? ret : 0;
	/* functions without a symbol stay out of binary__func_at (frames print
	 * as file+offset) */
	if (f->name != anon_name && cold_index(b, f, fi))
		return -ENOMEM;
	/* pclntab ends a function where the next begins: drop the int3 padding */
	if (f->source == FUNC_SOURCE_PCLNTAB && !f->dis->undecodable &&
	    f->dis->code_end > f->addr) {
		fi->size = f->dis->code_end - f->addr;
		fi->ranges[0].hi = f->dis->code_end;
	}
	fi->returns = f->dis->returns;
	fi->nreturns = f->dis->nreturns;
	fi->tail_calls = f->dis->tail_calls;
	fi->tail_targets = f->dis->tail_targets;
	fi->ntail_calls = f->dis->ntail_calls;
	fi->nindirect_jumps = f->dis->nindirect_jumps;
	fi->ncalls = f->dis->ncalls;
	fi->nstack_switches = f->dis->nstack_switches;
	fi->return_slot_used = f->dis->return_slot_used;
	/* Go's jumps through registers are the runtime's and its wrappers' */
	fi->hooks = fi->go ? NULL : f->dis->hooks;
	fi->nhooks = fi->go ? 0 : f->dis->nhooks;
	fi->exits_known = !f->dis->undecodable && !f->dis->over_budget;
	if (f->dis->reason)
		fi->reason = f->dis->reason;
	else
		fi->mode = fi->ntail_calls ? FUNC_MODE_ENTRY_RET_TAILCALL : FUNC_MODE_ENTRY_RET;
	return 0;
}

const char *binary__trampoline_refusal(const struct binary *b, const struct func_info *fi)
{
	if (binary__arch(b) != DISASM_X86_64)
		return "arm64 code: the return trampoline is used on x86-64 alone";
	if (fi->go || binary__is_go(b))
		return "Go code: the runtime walks goroutine stacks at any time";
	if (fi->mode == FUNC_MODE_ENTRY_ONLY || !fi->exits_known || !fi->nreturns)
		return "its returns are not all known";
	if (fi->ncalls)
		return "it calls other code, which may unwind through its frame";
	if (fi->nstack_switches)
		return "it switches stacks (its RET may return on another one)";
	if (fi->return_slot_used)
		return "it reads or moves its own return address";
	if (fi->ntail_calls || fi->nindirect_jumps || fi->nhooks)
		return "it jumps out of itself (a tail call or a jump through a register)";
	return NULL;
}

int bin_analysis__analyzed(struct binary *b, struct fn_entry *f)
{
	return f->info ? 0 : analyze(b, f);
}

/* ---- tail calls ---- */

static int cmp_offset(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

struct tail_walk {
	const struct func_info *funcs[BINARY_TAIL_MAX_FUNCS];
	unsigned int depth[BINARY_TAIL_MAX_FUNCS];
	size_t nfuncs;
	int64_t *returns;
	size_t nreturns;
	size_t untimed, indirect;
};

static bool tail_walk__seen(const struct tail_walk *w, const struct func_info *g)
{
	for (size_t i = 0; i < w->nfuncs; i++)
		if (w->funcs[i] == g)
			return true;
	return false;
}

/*
 * The function at addr that has no symbol, from the unwind tables: an FDE
 * starts there in a function's entry state (add_cold_parts), inside no
 * known function. Analysed once; NULL when there is none.
 */
static const struct func_info *anon_func_at(struct binary *b, uint64_t addr)
{
	struct fn_entry *f, **p;
	uint64_t lo, hi;

	for (size_t i = 0; i < b->nanon; i++)
		if (b->anon[i]->addr == addr)
			return b->anon[i]->info;
	if (bin_index__addr_known(b, addr) || elfbin__in_plt(b->eb, addr) ||
	    elfbin__fde_at(b->eb, addr, &lo, &hi) || hi - lo > MAX_FUNC_SIZE ||
	    bin_index__range_known(b, lo, hi) || elfbin__entry_state_at(b->eb, addr) != 1)
		return NULL;
	p = realloc(b->anon, (b->nanon + 1) * sizeof(*p));
	if (!p)
		return NULL;
	b->anon = p;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->name = anon_name;
	f->addr = lo;
	f->size = hi - lo;
	f->source = FUNC_SOURCE_SYMTAB;
	b->anon[b->nanon++] = f;
	if (analyze(b, f))
		return NULL;
	return f->info;
}

const struct func_info *binary__entry_at(struct binary *b, uint64_t vaddr)
{
	const struct func_info *g = binary__func_at(b, vaddr);

	if (!g || g->address != vaddr)
		g = anon_func_at(b, vaddr);
	if (!g || g->address != vaddr || g->go || !g->exits_known || !g->nreturns)
		return NULL;
	return g;
}

/*
 * Follows the tail call of w->funcs[from] to target: a function whose RETs
 * end the call, or one more jump that cannot be followed. false on -ENOMEM.
 */
static bool tail_walk__follow(struct binary *b, struct tail_walk *w, size_t from, uint64_t target)
{
	const struct func_info *f = w->funcs[0], *g;

	g = target ? binary__func_at(b, target) : NULL;
	if (!g && target)
		g = anon_func_at(b, target);
	if (!g || g->address != target || g->go || !g->exits_known) {
		w->untimed++; /* through memory, no function's entry, or exits unknown */
		return true;
	}
	if (tail_walk__seen(w, g))
		return true;
	if (w->depth[from] + 1 > BINARY_TAIL_MAX_DEPTH || w->nfuncs == BINARY_TAIL_MAX_FUNCS ||
	    w->nreturns + g->nreturns > BINARY_TAIL_MAX_RETURNS) {
		w->untimed++;
		return true;
	}
	if (g->nreturns) {
		void *p = realloc(w->returns, (w->nreturns + g->nreturns) * sizeof(*w->returns));

		if (!p)
			return false;
		w->returns = p;
	}
	/* file offsets, not addresses: the two functions may lie in different segments */
	for (size_t k = 0; k < g->nreturns; k++)
		w->returns[w->nreturns++] = (int64_t)(g->file_offset - f->file_offset) +
					    g->returns[k];
	w->depth[w->nfuncs] = w->depth[from] + 1;
	w->funcs[w->nfuncs++] = g;
	return true;
}

/*
 * Fills f's tail_returns and counts (struct func_info): a breadth-first walk
 * from f over direct jumps to other functions' entries, in native code only
 * (Go's jumps out of a function are ABI wrappers' and the runtime's).
 */
int bin_analysis__follow_tails(struct binary *b, struct fn_entry *f)
{
	struct func_info *fi = f->info;
	struct tail_walk w = { .funcs = { fi }, .nfuncs = 1 };

	if (f->tails_followed || fi->go || !fi->exits_known)
		return 0;
	for (size_t i = 0; i < w.nfuncs; i++) {
		const struct func_info *x = w.funcs[i];

		w.indirect += x->nindirect_jumps;
		for (size_t k = 0; k < x->ntail_calls; k++) {
			size_t untimed = w.untimed;

			if (!tail_walk__follow(b, &w, i, x->tail_targets[k])) {
				free(w.returns);
				return -ENOMEM;
			}
			if (i == 0 && w.untimed == untimed)
				fi->ntail_followed++;
		}
	}
	if (w.nreturns)
		qsort(w.returns, w.nreturns, sizeof(*w.returns), cmp_offset);
	fi->tail_returns = w.returns; /* freed with the analysis */
	fi->ntail_returns = w.nreturns;
	fi->ntail_untimed = w.untimed;
	fi->nindirect_jumps = w.indirect;
	f->tails_followed = true;
	/* no RET of its own, but the functions it jumps to return for it
	 * (`return other(x);` its only exit): timed at their RETs */
	if (fi->mode == FUNC_MODE_ENTRY_ONLY && !fi->nreturns && fi->ntail_calls &&
	    fi->ntail_returns) {
		fi->mode = FUNC_MODE_ENTRY_RET_TAILCALL;
		fi->reason = NULL;
	}
	return 0;
}

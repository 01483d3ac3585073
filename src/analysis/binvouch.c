// SPDX-License-Identifier: MIT
/*
 * Which addresses a probe may go on. A uprobe writes a breakpoint byte at its
 * address; inside an instruction it changes that instruction (a displacement,
 * an immediate) and the traced program computes something else, silently.
 * Every address the analysis derives (an entry, a moved entry site, a RET, a
 * tail-called function's RET, an inlined copy's entry or exit) comes from
 * tables that may be wrong: a debug file found in one container's root, a
 * DWARF range, an inline tree. So before any probe is attached its address
 * is checked against the file alone: it must lie in the file's code and
 * begin an instruction of the linear decoding from a function start the
 * file itself names (an FDE of its unwind table, Go's function table, its
 * own symbol tables; never a debug file's), the nearest one before it.
 */
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/binary.h"
#include "analysis/binary_impl.h"
#include "analysis/disasm.h"
#include "analysis/elfbin.h"
#include "analysis/gopclntab.h"

/* An address and the function start it is decoded from. */
struct vouch_site {
	uint64_t addr, anchor;
	size_t idx;	  /* in the caller's array */
	const char *from; /* what names the anchor, for a message */
};

static int site_cmp(const void *a, const void *b)
{
	const struct vouch_site *x = a, *y = b;

	if (x->anchor != y->anchor)
		return x->anchor < y->anchor ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The last of the file's own function symbols at or before addr, or 0. */
static uint64_t sym_before(const struct binary *b, uint64_t addr)
{
	size_t n, lo = 0, hi;
	const struct elfbin_sym *syms = elfbin__syms(b->eb, &n);

	hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? syms[lo - 1].addr : 0;
}

/* Go's function table's function holding addr (entry <= addr < end), or NULL. */
static const struct gofunc *pcln_at(const struct binary *b, uint64_t addr)
{
	size_t lo = 0, hi;

	if (!b->pcln)
		return NULL;
	hi = b->pcln->nfuncs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->pcln->funcs[mid].entry <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || addr >= b->pcln->funcs[lo - 1].end)
		return NULL;
	return &b->pcln->funcs[lo - 1];
}

/*
 * The function start addr is decoded from: the unwind table's entry that
 * covers it, else Go's function that holds it, else the nearest start of
 * either or of the file's own symbols before it. 0: none. -ENOMEM.
 */
static int anchor_of(struct binary *b, uint64_t addr, struct vouch_site *ret)
{
	uint64_t lo = 0, hi = 0, sym;
	const struct gofunc *g = pcln_at(b, addr);
	int e = elfbin__fde_start_before(b->eb, addr, &lo);

	if (e == -ENOMEM)
		return e;
	if (!e && !elfbin__fde_at(b->eb, lo, &lo, &hi) && addr < hi) {
		ret->anchor = lo;
		ret->from = "unwind table";
		return 0;
	}
	if (e)
		lo = 0;
	if (g) {
		ret->anchor = g->entry;
		ret->from = "Go function table";
		return 0;
	}
	sym = sym_before(b, addr);
	ret->anchor = sym > lo ? sym : lo;
	ret->from = sym > lo ? "symbol table" : "unwind table";
	/* a section's first byte begins an instruction: padding between
	 * sections is not decoded through */
	if (!elfbin__code_section_before(b->eb, addr, &lo) && lo > ret->anchor) {
		ret->anchor = lo;
		ret->from = "section headers";
	}
	return 0;
}

/*
 * Checks sites[0..n), which share one anchor, ascending. known_only: an
 * address that cannot be decided (no anchor, too far from it, outside the
 * code) passes; only one the decoding steps over fails.
 */
static int vouch_run(struct binary *b, const struct vouch_site *sites, size_t n, bool known_only,
		     size_t *ret_bad, struct rw_error *err)
{
	uint64_t start = sites[0].anchor, last = sites[n - 1].addr, *addrs = NULL;
	uint8_t *code = NULL;
	size_t len, bad = 0;
	int e;

	len = (size_t)(last - start) + 1;
	if (known_only &&
	    (!start || last - start >= DISASM_MAX_BYTES || !elfbin__is_code(b->eb, start, len)))
		return 0;
	if (!start) {
		*ret_bad = sites[0].idx;
		return rw_error_set(
			err, EILSEQ,
			"0x%" PRIx64 " follows no function start that the file names "
			"itself (its symbol tables, unwind table or Go's function table)",
			sites[0].addr);
	}
	*ret_bad = sites[n - 1].idx;
	if (last - start >= DISASM_MAX_BYTES)
		return rw_error_set(
			err, EILSEQ,
			"0x%" PRIx64 " is %" PRIu64 " bytes past 0x%" PRIx64
			", the nearest function start the file's %s names, more than %u MiB",
			last, last - start, start, sites[n - 1].from, DISASM_MAX_BYTES >> 20);
	if (!elfbin__is_code(b->eb, start, len))
		return rw_error_set(err, EILSEQ,
				    "0x%" PRIx64 " is not in the file's code (from 0x%" PRIx64
				    ", a function start the file's %s names)",
				    last, start, sites[n - 1].from);
	code = malloc(len);
	addrs = malloc(n * sizeof(*addrs));
	if (!code || !addrs) {
		e = rw_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		addrs[i] = sites[i].addr;
	e = elfbin__read(b->eb, start, code, len);
	if (e) {
		*ret_bad = sites[0].idx;
		e = rw_error_set(err, -e, "failed to read the file at 0x%" PRIx64 ": %s", start,
				 strerror(-e));
		goto out;
	}
	e = disasm__boundaries(binary__arch(b), code, len, start, addrs, n, &bad);
	if (e == -EILSEQ) {
		*ret_bad = sites[bad].idx;
		e = rw_error_set(err, EILSEQ,
				 "0x%" PRIx64
				 " is not an instruction boundary (decoding from 0x%" PRIx64
				 ", a function start in the file's %s)",
				 sites[bad].addr, start, sites[bad].from);
	} else if (e) {
		*ret_bad = sites[0].idx;
		e = rw_error_set(err, -e, "failed to decode the file at 0x%" PRIx64 ": %s", start,
				 strerror(-e));
	}
out:
	free(code);
	free(addrs);
	return e;
}

static int vouch(struct binary *b, const uint64_t *addrs, size_t n, bool known_only,
		 size_t *ret_bad, struct rw_error *err)
{
	struct vouch_site *sites;
	size_t run = 0;
	int e = 0;

	*ret_bad = 0;
	if (!n)
		return 0;
	sites = calloc(n, sizeof(*sites));
	if (!sites)
		return rw_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n && !e; i++) {
		sites[i].addr = addrs[i];
		sites[i].idx = i;
		e = anchor_of(b, addrs[i], &sites[i]);
	}
	if (e) {
		free(sites);
		return rw_error_set(err, ENOMEM, "out of memory");
	}
	qsort(sites, n, sizeof(*sites), site_cmp);
	for (size_t i = 1; i <= n && !e; i++) {
		if (i < n && sites[i].anchor == sites[run].anchor)
			continue;
		e = vouch_run(b, sites + run, i - run, known_only, ret_bad, err);
		run = i;
	}
	free(sites);
	return e;
}

int binary__vouch(struct binary *b, const uint64_t *addrs, size_t n, size_t *ret_bad,
		  struct rw_error *err)
{
	return vouch(b, addrs, n, false, ret_bad, err);
}

int binary__disagrees(struct binary *b, const uint64_t *addrs, size_t n, size_t *ret_bad,
		      struct rw_error *err)
{
	return vouch(b, addrs, n, true, ret_bad, err);
}

int binary__vouch_offsets(struct binary *b, const uint64_t *offs, size_t n, size_t *ret_bad,
			  struct rw_error *err)
{
	uint64_t *addrs = calloc(n ? n : 1, sizeof(*addrs));
	int e = 0;

	*ret_bad = 0;
	if (!addrs)
		return rw_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n && !e; i++) {
		if (elfbin__offset_to_addr(b->eb, offs[i], &addrs[i])) {
			*ret_bad = i;
			e = rw_error_set(err, EILSEQ,
					 "file offset 0x%" PRIx64
					 " is in no loaded segment of the file",
					 offs[i]);
		}
	}
	if (!e)
		e = binary__vouch(b, addrs, n, ret_bad, err);
	free(addrs);
	return e;
}

// SPDX-License-Identifier: MIT
/*
 * Go's inline tree: where the compiler put the calls it inlined.
 *
 * Layout (Go 1.20 to 1.26, amd64 and arm64; runtime/symtab.go, runtime/symtabinl.go,
 * internal/abi/symtab.go, written by cmd/link/internal/ld/pcln.go):
 *
 *   _func      the fixed 44 bytes (gopclntab.c), npcdata u32 at +28,
 *              nfuncdata u8 at +43, then pcdata[npcdata] u32 (offsets into
 *              pctab, 0: no table) and funcdata[nfuncdata] u32 (offsets from
 *              moduledata.gofunc, the go:func.* symbol; ~0: none).
 *   PCDATA_InlTreeIndex (2)  a pc-value table: for each pc of the function,
 *              the index of the innermost inlined call it belongs to, or -1
 *              for the function's own code.
 *   FUNCDATA_InlTree (3)     the inlined calls, 16 bytes each: funcID u8,
 *              3 pad bytes, nameOff i32 (into funcnametab), parentPc i32 (a
 *              pc, from the entry, whose inline index is the call's parent:
 *              the copy or function whose code held the call), startLine i32.
 *              The tree has no length: it is as long as the indexes used.
 *   pc-value   pairs of uvarints from value -1 at the entry: a zigzag value
 *              delta, then a pc delta (times minLC: 1 on amd64, 4 on arm64) that the
 *              value holds for; a value delta of 0 after the first pair ends
 *              the table.
 *
 * An inlined copy's code is every pc whose index is the call's or one of
 * its descendants' (a call inlined into the copy). Hostile input: a tree
 * entry whose name is past the name table, whose parent pc is outside the
 * function, a parent chain that loops, a pc table that runs past the
 * function or the section are errors; the work of one reading is bounded by
 * GOINL_MAX_STEPS.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/goinline.h"
#include "analysis/gopclntab_impl.h"
#include "base/cancel.h"

#define F_NAMEOFF 4
#define F_NPCDATA 28
#define F_NFUNCDATA 43
#define F_FIXED 44
#define PCDATA_INLTREEINDEX 2
#define FUNCDATA_INLTREE 3
#define INLCALL_SIZE 16
#define INLCALL_NAMEOFF 4
#define INLCALL_PARENTPC 8
#define PCTAB_WORD 6 /* pctabOffset among the go1.18+ header words */
#define NAME_MAX_LEN (64u << 10)

/* A run of pcs [lo, hi) (offsets from the entry) of one inline index. */
struct inl_run {
	uint32_t lo, hi;
	int32_t idx;
};

struct inl_ctx {
	const uint8_t *data;
	struct pcln_hdr h;
	uint32_t quantum; /* minLC: bytes per unit of a pc delta */
	uint64_t pctab_off;
	const uint8_t *gofunc;
	size_t gofunc_size;
	inl_match_fn match;
	void *arg;
	size_t steps;
	struct inl_run *runs;
	size_t nruns, runs_cap;
	/* per tree entry of the function at hand, tree_cap of each */
	int32_t *parent;
	uint32_t *depth;
	uint8_t *state;
	size_t *copy_of;
	int32_t *path;
	size_t tree_cap;
	size_t copies_cap;
	struct inl_list *out;
};

static int spend(struct inl_ctx *c, size_t n, struct rw_error *err)
{
	c->steps += n;
	if (c->steps > GOINL_MAX_STEPS)
		return rw_error_set(
			err, EFBIG,
			"the inline tables of .gopclntab take more than %u steps to read (the limit)",
			GOINL_MAX_STEPS);
	if (cancel__every(c->steps))
		return rw_error_set(err, ECANCELED, "reading the inline tree was cancelled");
	return 0;
}

/* A uvarint of at most 5 bytes at data[*pos], before end. */
static bool read_uvarint(const uint8_t *data, size_t end, size_t *pos, uint32_t *ret)
{
	uint32_t v = 0;

	for (unsigned int shift = 0; shift < 35; shift += 7) {
		uint8_t b;

		if (*pos >= end)
			return false;
		b = data[(*pos)++];
		v |= (uint32_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*ret = v;
			return true;
		}
	}
	return false;
}

/* A name of funcnametab, NUL-terminated inside it, or NULL with err set. */
static const char *table_name(struct inl_ctx *c, int32_t off, const char *what,
			      struct rw_error *err)
{
	const uint8_t *names = c->data + c->h.name_off, *nul;
	size_t avail;

	if (off < 0 || (uint64_t)off >= c->h.names_len) {
		rw_error_set(
			err, EINVAL,
			"corrupted inline tree: %s's name offset 0x%x is outside the name table (size 0x%llx)",
			what, (uint32_t)off, (unsigned long long)c->h.names_len);
		return NULL;
	}
	avail = (size_t)(c->h.names_len - (uint64_t)off);
	if (avail > NAME_MAX_LEN)
		avail = NAME_MAX_LEN;
	nul = memchr(names + off, 0, avail);
	if (!nul) {
		rw_error_set(
			err, EINVAL,
			"corrupted inline tree: %s's name at offset 0x%x runs past the end of the name table or %u bytes",
			what, (uint32_t)off, NAME_MAX_LEN);
		return NULL;
	}
	if (spend(c, (size_t)(nul - (names + off)) / 64 + 1, err))
		return NULL;
	return (const char *)(names + off);
}

static int add_run(struct inl_ctx *c, uint32_t lo, uint32_t hi, int32_t idx, struct rw_error *err)
{
	struct inl_run *last = c->nruns ? &c->runs[c->nruns - 1] : NULL;

	if (last && last->idx == idx && last->hi == lo) {
		last->hi = hi;
		return 0;
	}
	if (c->nruns == GOINL_MAX_RUNS)
		return rw_error_set(
			err, EFBIG,
			"corrupted .gopclntab: a function's inline index changes more than %u times",
			GOINL_MAX_RUNS);
	if (c->nruns == c->runs_cap) {
		size_t ncap = c->runs_cap ? 2 * c->runs_cap : 256;
		void *p = reallocarray(c->runs, ncap, sizeof(*c->runs));

		if (!p)
			return rw_error_set(err, ENOMEM, "out of memory for the inline tree");
		c->runs = p;
		c->runs_cap = ncap;
	}
	c->runs[c->nruns++] = (struct inl_run){ lo, hi, idx };
	return 0;
}

/*
 * Decodes function name's PCDATA_InlTreeIndex table at tab (from pctab)
 * into c->runs, for a function of fsize bytes; *ret_ntree: the largest index
 * plus one.
 */
static int decode_runs(struct inl_ctx *c, const char *name, uint32_t tab, uint32_t fsize,
		       size_t *ret_ntree, struct rw_error *err)
{
	size_t pos, end = c->h.size;
	uint32_t pc = 0, uv, pcd;
	int32_t val = -1;
	bool first = true;
	int ret;

	c->nruns = 0;
	*ret_ntree = 0;
	if (!in_bounds(c->pctab_off, (uint64_t)tab + 1, end))
		return rw_error_set(
			err, EINVAL,
			"corrupted .gopclntab: %s's inline index table at pctab+0x%x is past the end of the section",
			name, tab);
	pos = (size_t)(c->pctab_off + tab);
	while (pc < fsize) {
		if (!read_uvarint(c->data, end, &pos, &uv))
			goto past_end;
		if (!uv && !first)
			break;
		first = false;
		if (!read_uvarint(c->data, end, &pos, &pcd))
			goto past_end;
		if (pcd > UINT32_MAX / c->quantum)
			pcd = UINT32_MAX; /* past any function's end: refused below */
		else
			pcd *= c->quantum;
		val = (int32_t)((uint32_t)val + (-(uv & 1) ^ (uv >> 1)));
		if (pcd > fsize - pc)
			return rw_error_set(
				err, EINVAL,
				"corrupted .gopclntab: %s's inline index table runs past the function's end (0x%x bytes)",
				name, fsize);
		if (val >= (int32_t)GOINL_MAX_TREE)
			return rw_error_set(
				err, EINVAL,
				"corrupted .gopclntab: %s's inline index %d is past the runtime's bound of %u",
				name, val, GOINL_MAX_TREE);
		ret = spend(c, 1, err);
		if (!ret && val >= 0 && pcd)
			ret = add_run(c, pc, pc + pcd, val, err);
		if (ret)
			return ret;
		if (val >= 0 && (size_t)val + 1 > *ret_ntree)
			*ret_ntree = (size_t)val + 1;
		pc += pcd;
	}
	return 0;
past_end:
	return rw_error_set(
		err, EINVAL,
		"corrupted .gopclntab: %s's inline index table runs past the end of the section or holds a malformed number",
		name);
}

/* The inline index at pc (an offset from the entry): -1 for the function's own code. */
static int32_t index_at(const struct inl_ctx *c, uint32_t pc)
{
	size_t lo = 0, hi = c->nruns;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->runs[mid].hi <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < c->nruns && c->runs[lo].lo <= pc ? c->runs[lo].idx : -1;
}

static int grow_tree(struct inl_ctx *c, size_t n, struct rw_error *err)
{
	void *p[5];

	if (n <= c->tree_cap)
		return 0;
	p[0] = reallocarray(c->parent, n, sizeof(*c->parent));
	if (p[0])
		c->parent = p[0];
	p[1] = reallocarray(c->depth, n, sizeof(*c->depth));
	if (p[1])
		c->depth = p[1];
	p[2] = reallocarray(c->state, n, sizeof(*c->state));
	if (p[2])
		c->state = p[2];
	p[3] = reallocarray(c->copy_of, n, sizeof(*c->copy_of));
	if (p[3])
		c->copy_of = p[3];
	p[4] = reallocarray(c->path, n, sizeof(*c->path));
	if (p[4])
		c->path = p[4];
	for (int i = 0; i < 5; i++)
		if (!p[i])
			return rw_error_set(err, ENOMEM, "out of memory for the inline tree");
	c->tree_cap = n;
	return 0;
}

/*
 * Each entry's parent, from its parent pc, and its depth; an entry whose
 * chain of parents comes back to itself is an error. O(ntree): each entry
 * is walked once (state 1: on the path being walked, 2: depth known).
 */
static int tree_parents(struct inl_ctx *c, const char *name, const uint8_t *tree, size_t ntree,
			uint32_t fsize, struct rw_error *err)
{
	int ret;

	for (size_t k = 0; k < ntree; k++) {
		int32_t ppc = (int32_t)rd32(tree + k * INLCALL_SIZE + INLCALL_PARENTPC);

		if (ppc < 0 || (uint32_t)ppc >= fsize)
			return rw_error_set(
				err, EINVAL,
				"corrupted inline tree: %s's inlined call %zu has its call site at +0x%x, outside the function (0x%x bytes)",
				name, k, (uint32_t)ppc, fsize);
		c->parent[k] = index_at(c, (uint32_t)ppc);
		c->state[k] = 0;
	}
	for (size_t k = 0; k < ntree; k++) {
		size_t len = 0;
		int32_t j = (int32_t)k;
		uint32_t d;

		while (j >= 0 && c->state[j] == 0) {
			c->state[j] = 1;
			c->path[len++] = j;
			j = c->parent[j];
		}
		if (j >= 0 && c->state[j] == 1)
			return rw_error_set(
				err, EINVAL,
				"corrupted inline tree: %s's inlined call %d is its own ancestor (the parent chain loops)",
				name, j);
		d = j < 0 ? 0 : c->depth[j] + 1;
		while (len--) {
			c->depth[c->path[len]] = d++;
			c->state[c->path[len]] = 2;
		}
		ret = spend(c, 1, err);
		if (ret)
			return ret;
	}
	return 0;
}

/* The matched entries of one function's tree become copies, with their ranges. */
static int list_copies(struct inl_ctx *c, const char *outer, uint64_t entry, const uint8_t *tree,
		       size_t ntree, struct rw_error *err)
{
	int ret;

	for (size_t k = 0; k < ntree; k++) {
		const char *name, *caller;

		if (c->copy_of[k] != SIZE_MAX - 1)
			continue; /* not matched */
		name = table_name(c, (int32_t)rd32(tree + k * INLCALL_SIZE + INLCALL_NAMEOFF),
				  "an inlined call", err);
		caller = c->parent[k] < 0
				 ? outer
				 : table_name(c,
					      (int32_t)rd32(tree + c->parent[k] * INLCALL_SIZE +
							    INLCALL_NAMEOFF),
					      "an inlined call", err);
		if (!name || !caller)
			return -EINVAL;
		ret = inl_list__add(c->out, &c->copies_cap, name, caller, outer, entry, c->depth[k],
				    &c->copy_of[k]);
		if (ret)
			return rw_error_set(err, -ret, "out of memory for the inlined copies");
	}
	/* each run belongs to its index's copy and to every ancestor's */
	for (size_t r = 0; r < c->nruns; r++) {
		for (int32_t j = c->runs[r].idx; j >= 0; j = c->parent[j]) {
			size_t ci = c->copy_of[j];

			ret = spend(c, 1, err);
			if (ret)
				return ret;
			if (ci >= SIZE_MAX - 1)
				continue;
			ret = inl_copy__add_range(c->out, &c->out->copies[ci],
						  entry + c->runs[r].lo, entry + c->runs[r].hi);
			if (ret)
				return rw_error_set(
					err, -ret,
					ret == -E2BIG
						? "the inlined copies have more than %u ranges (the limit)"
						: "out of memory for the inlined copies (%u ranges at most)",
					INL_MAX_RANGES);
		}
	}
	return 0;
}

/* Function i's inlined copies that match. */
static int func_copies(struct inl_ctx *c, size_t i, struct rw_error *err)
{
	const uint8_t *d = c->data, *ft = d + c->h.pcln_off + 8 * i, *tree;
	uint32_t e = rd32(ft), funcoff = rd32(ft + 4), next = rd32(ft + 8), npc, tab, fdoff, fsize;
	uint64_t rec = c->h.pcln_off + funcoff, entry;
	size_t ntree = 0, nmatch = 0;
	const char *outer;
	uint8_t nfd;
	int ret;

	if (next <= e)
		return 0; /* no code (gopclntab__parse refuses a table out of order) */
	if (!in_bounds(rec, F_FIXED, c->h.size))
		return rw_error_set(
			err, EINVAL,
			"corrupted .gopclntab: function %zu's record at offset 0x%llx runs past the end of the section",
			i, (unsigned long long)rec);
	npc = rd32(d + rec + F_NPCDATA);
	nfd = d[rec + F_NFUNCDATA];
	if (npc <= PCDATA_INLTREEINDEX || nfd <= FUNCDATA_INLTREE)
		return 0;
	if (!in_bounds(rec + F_FIXED, 4 * ((uint64_t)npc + nfd), c->h.size))
		return rw_error_set(
			err, EINVAL,
			"corrupted .gopclntab: function %zu's %u pcdata and %u funcdata offsets run past the end of the section",
			i, npc, nfd);
	tab = rd32(d + rec + F_FIXED + 4 * PCDATA_INLTREEINDEX);
	fdoff = rd32(d + rec + F_FIXED + 4 * (uint64_t)npc + 4 * FUNCDATA_INLTREE);
	if (!tab || fdoff == UINT32_MAX)
		return 0;
	outer = table_name(c, (int32_t)rd32(d + rec + F_NAMEOFF), "a function", err);
	if (!outer)
		return -EINVAL;
	fsize = next - e;
	ret = decode_runs(c, outer, tab, fsize, &ntree, err);
	if (ret || !ntree)
		return ret;
	if (!c->gofunc || !in_bounds(fdoff, (uint64_t)ntree * INLCALL_SIZE, c->gofunc_size))
		return rw_error_set(
			err, EINVAL,
			"corrupted .gopclntab: %s's inline tree at go:func.*+0x%x (%zu entries) is past the end of go:func.* (0x%zx bytes)",
			outer, fdoff, ntree, c->gofunc_size);
	tree = c->gofunc + fdoff;
	c->out->nfuncs++;
	c->out->ntree += ntree;
	ret = grow_tree(c, ntree, err);
	if (ret)
		return ret;
	for (size_t k = 0; k < ntree; k++) {
		const char *name = table_name(
			c, (int32_t)rd32(tree + k * INLCALL_SIZE + INLCALL_NAMEOFF),
			"an inlined call", err);

		if (!name)
			return -EINVAL;
		/* SIZE_MAX - 1: matched, no copy yet; SIZE_MAX: not listed */
		c->copy_of[k] = c->match(name, c->arg) ? SIZE_MAX - 1 : SIZE_MAX;
		nmatch += c->copy_of[k] == SIZE_MAX - 1;
	}
	if (!nmatch)
		return 0;
	ret = tree_parents(c, outer, tree, ntree, fsize, err);
	if (ret)
		return ret;
	if (__builtin_add_overflow(c->h.text_start, e, &entry))
		return rw_error_set(err, EINVAL, "corrupted .gopclntab: %s's address overflows",
				    outer);
	return list_copies(c, outer, entry, tree, ntree, err);
}

int goinline__parse(const uint8_t *data, size_t size, uint64_t text_start, const uint8_t *gofunc,
		    size_t gofunc_size, inl_match_fn match, void *arg, struct inl_list **ret_list,
		    struct rw_error *err)
{
	struct inl_ctx c = { .data = data,
			     .gofunc = gofunc,
			     .gofunc_size = gofunc_size,
			     .match = match,
			     .arg = arg };
	int ret;

	if (ret_list)
		*ret_list = NULL;
	if (!ret_list || !match || (!data && size))
		return rw_error_set(err, EINVAL, "cannot read the inline tree: no data");
	if (size > GOPCLNTAB_MAX_SIZE)
		return pcln_too_big(size, err);
	ret = pcln_read_header(data, size, text_start, &c.h, err);
	if (!ret)
		ret = pcln_locate_tables(&c.h, err);
	if (ret)
		return ret;
	if (c.h.l->magic != GO120_MAGIC)
		return rw_error_set(
			err, EOPNOTSUPP,
			"inlined copies are read from Go 1.20 and later tables only, and this one is %s",
			c.h.l->go);
	c.quantum = data[6]; /* 1 or 4: pcln_read_header checked it */
	c.pctab_off = c.h.w[PCTAB_WORD];
	c.out = calloc(1, sizeof(*c.out));
	if (!c.out)
		return rw_error_set(err, ENOMEM, "out of memory for the inline tree");
	for (size_t i = 0; i < c.h.nfunc && !ret; i++)
		ret = func_copies(&c, i, err);
	if (!ret) {
		c.out->steps = c.steps;
		*ret_list = c.out;
		c.out = NULL;
	}
	inl_list__free(c.out);
	free(c.runs);
	free(c.parent);
	free(c.depth);
	free(c.state);
	free(c.copy_of);
	free(c.path);
	return ret;
}

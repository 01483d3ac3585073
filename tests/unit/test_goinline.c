// SPDX-License-Identifier: MIT
/*
 * Go's inline tree (goinline.h): a synthetic go1.20 table with one function
 * holding a copy of main.validate that holds a copy of main.clamp, the same
 * table damaged (a loop, a call site outside the function, a name past the
 * name table, a tree past go:func.*, a pc table past the function, a malformed number), and the
 * inline fixture (tests/fixtures/inline), stripped and PIE.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <unistd.h>

#include "analysis/binary.h"
#include "analysis/goinline.h"
#include "analysis/gopclntab.h"
#include "test.h"

#define TEXT 0x401000ULL

static const char names[] = "main.total\0main.validate\0main.clamp";
#define NAME_TOTAL 0
#define NAME_VALIDATE 11
#define NAME_CLAMP 25

/*
 * The inline index of main.total's 0x40 bytes: [0, 0x10) its own, [0x10,
 * 0x20) call 0 (validate), [0x20, 0x28) call 1 (clamp, inside validate),
 * [0x28, 0x40) its own: zigzag value deltas and pc deltas from -1.
 */
static const uint8_t inl_index[] = { 0x00, 0x10, 0x02, 0x10, 0x02, 0x08, 0x03, 0x18, 0x00 };

struct itab {
	uint8_t buf[512];
	size_t size;
	size_t pctab;	  /* where inl_index is */
	uint8_t tree[32]; /* go:func.*: two inlined calls */
};

/* A go1.20 table of one function, main.total, with the tree above. */
static void itab_build(struct itab *t)
{
	size_t hdr = 72, nm = hdr, pct = nm + sizeof(names) + 8, ftab, rec;

	memset(t, 0, sizeof(*t));
	put32(t->buf, 0xfffffff1U);
	t->buf[6] = 1;
	t->buf[7] = 8;
	memcpy(t->buf + nm, names, sizeof(names));
	t->pctab = pct + 1; /* pctab offset 0 means "no table" */
	memcpy(t->buf + t->pctab, inl_index, sizeof(inl_index));
	ftab = (t->pctab + sizeof(inl_index) + 7) & ~(size_t)7;
	rec = ftab + 12;
	t->size = rec + 44 + 3 * 4 + 4 * 4;
	put64(t->buf + 8, 1);				  /* nfunc */
	put64(t->buf + 16, 1);				  /* nfiles */
	put64(t->buf + 24, TEXT);			  /* textStart */
	put64(t->buf + 32, nm);				  /* funcnameOffset */
	put64(t->buf + 40, pct - 8);			  /* cuOffset */
	put64(t->buf + 48, pct - 4);			  /* filetabOffset */
	put64(t->buf + 56, pct);			  /* pctabOffset */
	put64(t->buf + 64, ftab);			  /* pclnOffset */
	put32(t->buf + ftab, 0);			  /* entry */
	put32(t->buf + ftab + 4, (uint32_t)(rec - ftab)); /* funcoff */
	put32(t->buf + ftab + 8, 0x40);			  /* end */
	put32(t->buf + rec, 0);
	put32(t->buf + rec + 4, NAME_TOTAL);
	put32(t->buf + rec + 28, 3);	 /* npcdata */
	t->buf[rec + 43] = 4;		 /* nfuncdata */
	put32(t->buf + rec + 44 + 8, 1); /* pcdata[InlTreeIndex]: pctab + 1 */
	for (int i = 0; i < 3; i++)
		put32(t->buf + rec + 56 + 4 * i, UINT32_MAX);
	put32(t->buf + rec + 56 + 12, 0); /* funcdata[InlTree]: go:func.* + 0 */
	/* call 0: validate, called from total's own code; 1: clamp, from validate */
	put32(t->tree + 4, NAME_VALIDATE);
	put32(t->tree + 8, 0x00);
	put32(t->tree + 16 + 4, NAME_CLAMP);
	put32(t->tree + 16 + 8, 0x10);
}

static bool match_main(const char *name, void *arg)
{
	return !strcmp(name, arg ? (const char *)arg : "main.validate") ||
	       (!arg && !strcmp(name, "main.clamp"));
}

static int itab_parse(const struct itab *t, size_t size, size_t tree_size, struct inl_list **l,
		      struct rw_error *err)
{
	return goinline__parse(t->buf, size, 0, t->tree, tree_size, match_main, NULL, l, err);
}

TEST(goinline_synthetic)
{
	struct inl_list *l = NULL;
	struct rw_error err = { 0 };
	const struct inl_copy *v, *c;
	struct itab t;
	bool ok;

	itab_build(&t);
	if (!ASSERT_OK(itab_parse(&t, t.size, sizeof(t.tree), &l, &err)))
		return fprintf(stderr, "  %s\n", err.msg), false;
	ok = ASSERT_EQ(l->ncopies, 2) && ASSERT_EQ(l->nmatched, 2) && ASSERT_EQ(l->nfuncs, 1) &&
	     ASSERT_EQ(l->ntree, 2);
	if (!ok)
		goto out;
	v = &l->copies[0];
	c = &l->copies[1];
	/* validate's code is its own pcs and those of the clamp inlined into it */
	ok = ASSERT_STREQ(v->name, "main.validate") && ASSERT_STREQ(v->caller, "main.total") &&
	     ASSERT_STREQ(v->outer, "main.total") && ASSERT_EQ(v->outer_entry, TEXT) &&
	     ASSERT_EQ(v->depth, 0) && ASSERT_EQ(v->nranges, 1) &&
	     ASSERT_EQ(v->ranges[0].lo, TEXT + 0x10) && ASSERT_EQ(v->ranges[0].hi, TEXT + 0x28) &&
	     ASSERT_STREQ(c->name, "main.clamp") && ASSERT_STREQ(c->caller, "main.validate") &&
	     ASSERT_STREQ(c->outer, "main.total") && ASSERT_EQ(c->depth, 1) &&
	     ASSERT_EQ(c->nranges, 1) && ASSERT_EQ(c->ranges[0].lo, TEXT + 0x20) &&
	     ASSERT_EQ(c->ranges[0].hi, TEXT + 0x28) && ASSERT_EQ(inl_list__ncallers(l), 2);
	inl_list__free(l);
	l = NULL;
	/* a name that matches nothing: an empty list, not an error */
	ok = ok &&
	     ASSERT_OK(goinline__parse(t.buf, t.size, 0, t.tree, sizeof(t.tree), match_main,
				       (void *)"main.nothing", &l, &err)) &&
	     ASSERT_EQ(l->ncopies, 0) && ASSERT_EQ(l->nmatched, 0) && ASSERT_EQ(l->ntree, 2);
out:
	inl_list__free(l);
	return ok;
}

static bool expect_error(const struct itab *t, size_t tree_size, int want, const char *msg)
{
	struct inl_list *l = NULL;
	struct rw_error err = { 0 };
	int ret = itab_parse(t, t->size, tree_size, &l, &err);

	return ASSERT_EQ(ret, -want) && ASSERT_TRUE(l == NULL) && ASSERT_STRCONTAINS(err.msg, msg);
}

TEST(goinline_hostile)
{
	struct itab t;
	bool ok = true;

	/* validate's call site inside clamp, clamp's inside validate */
	itab_build(&t);
	put32(t.tree + 8, 0x20);
	ok &= expect_error(&t, sizeof(t.tree), EINVAL, "the parent chain loops");
	/* a call site past the function's 0x40 bytes, and a negative one */
	itab_build(&t);
	put32(t.tree + 16 + 8, 0x40);
	ok &= expect_error(&t, sizeof(t.tree), EINVAL, "outside the function");
	put32(t.tree + 16 + 8, 0xffffffffU);
	ok &= expect_error(&t, sizeof(t.tree), EINVAL, "outside the function");
	/* a name past the name table, and a negative one */
	itab_build(&t);
	put32(t.tree + 4, 0x10000);
	ok &= expect_error(&t, sizeof(t.tree), EINVAL, "outside the name table");
	put32(t.tree + 4, 0x80000000U);
	ok &= expect_error(&t, sizeof(t.tree), EINVAL, "outside the name table");
	/* a tree whose second entry is past go:func.*, and no go:func.* at all */
	itab_build(&t);
	ok &= expect_error(&t, 20, EINVAL, "past the end of go:func.*");
	ok &= expect_error(&t, 0, EINVAL, "past the end of go:func.*");
	/* a pc table that runs past the function, and a number of more than 5 bytes */
	itab_build(&t);
	t.buf[t.pctab + 7] = 0x30;
	ok &= expect_error(&t, sizeof(t.tree), EINVAL, "past the function's end");
	itab_build(&t);
	memset(t.buf + t.pctab, 0x80, sizeof(inl_index));
	ok &= expect_error(&t, sizeof(t.tree), EINVAL, "malformed");
	/* an index past the runtime's bound: +2^21, zigzag 2^22 */
	itab_build(&t);
	memcpy(t.buf + t.pctab + 2, (const uint8_t[]){ 0x80, 0x80, 0x80, 0x02 }, 4);
	ok &= expect_error(&t, sizeof(t.tree), EINVAL, "past the runtime's bound");
	/* a go1.18/1.19 table: its tree is another layout */
	itab_build(&t);
	put32(t.buf, 0xfffffff0U);
	ok &= expect_error(&t, sizeof(t.tree), EOPNOTSUPP, "Go 1.20 and later");
	return ok;
}

/* Every truncation of the table and of the tree: errors or lists, never a bad read. */
TEST(goinline_every_truncation)
{
	struct itab t;
	bool ok = true;

	itab_build(&t);
	for (size_t n = 0; n <= t.size; n++) {
		for (size_t g = 0; g <= sizeof(t.tree); g += 4) {
			struct inl_list *l = NULL;
			struct rw_error err = { 0 };
			uint8_t *copy = malloc(n ? n : 1), *tree = malloc(g ? g : 1);
			int ret;

			memcpy(copy, t.buf, n);
			memcpy(tree, t.tree, g);
			ret = goinline__parse(copy, n, 0, tree, g, match_main, NULL, &l, &err);
			ok &= CHECK(ret || (n == t.size && g == sizeof(t.tree)) || l->ncopies == 0,
				    "size %zu tree %zu: %d", n, g, ret);
			inl_list__free(l);
			free(copy);
			free(tree);
		}
	}
	return ok;
}

/* ---- the inline fixture ---------------------------------------------------- */

static bool exact(const char *name, void *arg)
{
	return !strcmp(name, (const char *)arg);
}

/* The function of t at addr's [entry, end), or NULL. */
static const struct gofunc *func_at(const struct gopclntab *t, uint64_t addr)
{
	for (size_t i = 0; i < t->nfuncs; i++)
		if (t->funcs[i].entry <= addr && addr < t->funcs[i].end)
			return &t->funcs[i];
	return NULL;
}

static bool check_fixture(const char *path)
{
	struct inl_list *l = NULL, *c = NULL;
	struct gopclntab *tab = NULL;
	struct rw_error err = { 0 };
	size_t ntotal = 0, ncheck = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	bool ok = ASSERT_TRUE(elf);

	ok = ok && ASSERT_OK(gopclntab__load(elf, fd, &tab, &err)) &&
	     ASSERT_OK(goinline__load(elf, fd, exact, (void *)"main.validate", &l, &err)) &&
	     ASSERT_OK(goinline__load(elf, fd, exact, (void *)"main.clamp", &c, &err));
	if (!ok) {
		fprintf(stderr, "  %s: %s\n", path, err.msg);
		goto out;
	}
	/* validate: twice in total (the loop, the sum), once in check */
	ok = ASSERT_EQ(l->ncopies, 3) && ASSERT_EQ(inl_list__ncallers(l), 2);
	for (size_t i = 0; ok && i < l->ncopies; i++) {
		const struct inl_copy *v = &l->copies[i];
		const struct gofunc *f = func_at(tab, v->outer_entry);

		ntotal += !strcmp(v->caller, "main.total");
		ncheck += !strcmp(v->caller, "main.check");
		ok = ASSERT_STREQ(v->name, "main.validate") && ASSERT_STREQ(v->caller, v->outer) &&
		     ASSERT_EQ(v->depth, 0) && ASSERT_TRUE(f) &&
		     ASSERT_EQ(f->entry, v->outer_entry) && ASSERT_STREQ(f->name, v->outer) &&
		     ASSERT_TRUE(v->nranges > 0);
		for (size_t r = 0; ok && r < v->nranges; r++)
			ok = ASSERT_TRUE(v->ranges[r].lo < v->ranges[r].hi) &&
			     ASSERT_TRUE(v->ranges[r].lo > f->entry) &&
			     ASSERT_TRUE(v->ranges[r].hi <= f->end) &&
			     ASSERT_TRUE(!r || v->ranges[r - 1].hi < v->ranges[r].lo);
	}
	ok = ok && ASSERT_EQ(ntotal, 2) && ASSERT_EQ(ncheck, 1);
	/* clamp: inside each copy of validate, within its ranges */
	ok = ok && ASSERT_EQ(c->ncopies, 3);
	for (size_t i = 0; ok && i < c->ncopies; i++) {
		const struct inl_copy *k = &c->copies[i], *v = &l->copies[i];
		bool inside = true;

		for (size_t r = 0; r < k->nranges; r++) {
			bool in = false;

			for (size_t s = 0; s < v->nranges; s++)
				in |= v->ranges[s].lo <= k->ranges[r].lo &&
				      k->ranges[r].hi <= v->ranges[s].hi;
			inside &= in;
		}
		ok = ASSERT_STREQ(k->caller, "main.validate") && ASSERT_EQ(k->depth, 1) &&
		     ASSERT_EQ(k->outer_entry, v->outer_entry) && ASSERT_TRUE(inside);
	}
out:
	inl_list__free(l);
	inl_list__free(c);
	gopclntab__free(tab);
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
	return ok;
}

TEST(goinline_fixtures)
{
	static const char *const variants[] = { "default", "stripped", "pie", "pie-stripped" };
	char rel[128];
	bool ok = true;
	int seen = 0;

	elf_version(EV_CURRENT);
	for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
		const char *path;

		snprintf(rel, sizeof(rel), "inline/native/%s/inlinefix", variants[i]);
		path = test__fixture(rel);
		if (!path)
			continue;
		seen++;
		ok &= check_fixture(path);
	}
	if (!seen)
		test__skip("no inline fixtures: run make fixtures");
	return ok;
}

/* ---- DWARF: the C inline fixture ------------------------------------------ */

TEST(dwarf_inlined_fixtures)
{
	const char *path = test__fixture("c/inline/inlfix"),
		   *bad = test__fixture("c/inline-bad/inlfix");
	const char *pats[] = { "mix_step", "sum_*", "fold" };
	struct binary_match m = { 0 };
	struct inl_list *l = NULL;
	struct rw_error err = { 0 };
	struct binary *b = NULL;
	size_t nall = 0, none = 0;
	bool ok;

	if (!path || !bad) {
		test__skip("no C inline fixtures: run make fixtures");
		return true;
	}
	b = binary__open(NULL, path, &err);
	ok = ASSERT_TRUE(b) && ASSERT_OK(binary__match(b, pats + 1, 1, 16, &m, &err)) &&
	     ASSERT_EQ(m.nfuncs, 2) && ASSERT_OK(binary__inlined(b, pats, 1, &l, &err)) &&
	     ASSERT_TRUE(l) && ASSERT_EQ(l->ncopies, 2) && ASSERT_EQ(inl_list__ncallers(l), 2);
	for (size_t i = 0; ok && i < l->ncopies; i++) {
		const struct inl_copy *c = &l->copies[i];
		const struct func_info *f = NULL;

		for (size_t k = 0; k < m.nfuncs; k++)
			if (!strcmp(m.funcs[k]->name, c->outer))
				f = m.funcs[k];
		nall += !strcmp(c->caller, "sum_all");
		none += !strcmp(c->caller, "sum_one");
		ok = ASSERT_STREQ(c->name, "mix_step") && ASSERT_STREQ(c->caller, c->outer) &&
		     ASSERT_TRUE(f) && ASSERT_EQ(c->outer_entry, f->address) &&
		     ASSERT_TRUE(c->nranges > 0);
		for (size_t r = 0; ok && r < c->nranges; r++)
			ok = ASSERT_TRUE(c->ranges[r].lo >= f->address) &&
			     ASSERT_TRUE(c->ranges[r].hi <= f->address + f->size) &&
			     ASSERT_TRUE(!r || c->ranges[r - 1].hi < c->ranges[r].lo);
	}
	ok = ok && ASSERT_EQ(nall, 1) && ASSERT_EQ(none, 1);
	inl_list__free(l);
	l = NULL;
	binary_match__clear(&m);
	binary__put(b);
	/* fold's ranges past their function (mix_step's, a range list, are sound) */
	b = binary__open(NULL, bad, &err);
	ok = ok && ASSERT_TRUE(b) &&
	     ASSERT_EQ(binary__inlined(b, pats + 2, 1, &l, &err), -EINVAL) &&
	     ASSERT_TRUE(l == NULL) &&
	     ASSERT_STRCONTAINS(err.msg, "corrupted DWARF: the inlined copy of fold in") &&
	     ASSERT_STRCONTAINS(err.msg, "outside");
	inl_list__free(l);
	binary__put(b);
	return ok;
}

/*
 * The bounds: 1,100 functions of 64 KiB that share one pc table whose index
 * changes at every byte (65,536 steps each): 72 million steps, past
 * GOINL_MAX_STEPS, refused with -EFBIG instead of read to the end; and as
 * many ranges of validate's copies, past INL_MAX_RANGES (-E2BIG).
 */
TEST(goinline_step_budget)
{
	const size_t nfunc = 1100, fsize = 0x10000, hdr = 72;
	size_t pct = hdr + sizeof(names) + 8, pctab = pct + 1, ftab, recs, size;
	uint8_t tree[16] = { 0 }, *buf;
	struct inl_list *l = NULL;
	struct rw_error err = { 0 };
	bool ok;
	int ret;

	ftab = (pctab + 2 * fsize + 1 + 7) & ~(size_t)7;
	recs = ftab + (2 * nfunc + 1) * 4;
	size = recs + nfunc * 72;
	buf = calloc(1, size);
	if (!ASSERT_TRUE(buf))
		return false;
	put32(buf, 0xfffffff1U);
	buf[6] = 1;
	buf[7] = 8;
	memcpy(buf + hdr, names, sizeof(names));
	/* +1 then -1 (zigzag 2, 1), one byte each: index 0, -1, 0, -1... */
	for (size_t i = 0; i < fsize; i++) {
		buf[pctab + 2 * i] = i % 2 ? 1 : 2;
		buf[pctab + 2 * i + 1] = 1;
	}
	put64(buf + 8, nfunc);
	put64(buf + 16, 1);
	put64(buf + 24, TEXT);
	put64(buf + 32, hdr);
	put64(buf + 40, pct - 8);
	put64(buf + 48, pct - 4);
	put64(buf + 56, pct);
	put64(buf + 64, ftab);
	for (size_t i = 0; i <= nfunc; i++)
		put32(buf + ftab + 8 * i, (uint32_t)(i * fsize));
	for (size_t i = 0; i < nfunc; i++) {
		size_t rec = recs + 72 * i;

		put32(buf + ftab + 8 * i + 4, (uint32_t)(rec - ftab));
		put32(buf + rec, (uint32_t)(i * fsize));
		put32(buf + rec + 4, NAME_TOTAL);
		put32(buf + rec + 28, 3);
		buf[rec + 43] = 4;
		put32(buf + rec + 44 + 8, 1);
		for (int k = 0; k < 3; k++)
			put32(buf + rec + 56 + 4 * k, UINT32_MAX);
		put32(buf + rec + 56 + 12, 0);
	}
	/* called from +1, the function's own code */
	put32(tree + 4, NAME_VALIDATE);
	put32(tree + 8, 1);
	/* listing nothing: the decoding alone goes past the steps */
	ret = goinline__parse(buf, size, 0, tree, sizeof(tree), match_main, (void *)"main.nothing",
			      &l, &err);
	ok = ASSERT_EQ(ret, -EFBIG) && ASSERT_TRUE(l == NULL) &&
	     ASSERT_STRCONTAINS(err.msg, "steps to read (the limit)");
	/* listing validate: its 32,768 ranges a function fill the memory bound first */
	ret = goinline__parse(buf, size, 0, tree, sizeof(tree), match_main, NULL, &l, &err);
	ok = ok && ASSERT_EQ(ret, -E2BIG) && ASSERT_TRUE(l == NULL) &&
	     ASSERT_STRCONTAINS(err.msg, "more than 1048576 ranges (the limit)");
	free(buf);
	inl_list__free(l);
	return ok;
}

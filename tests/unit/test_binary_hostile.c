// SPDX-License-Identifier: MIT
/*
 * Symbol tables crafted to hit the paths that were quadratic (issue 16):
 * each must give the right answer, and in a time that only a linear or
 * n log n path reaches (the quadratic ones took 7 to 167 s on these inputs).
 */
#include <stdlib.h>
#include <time.h>

#include "analysis/binary.h"
#include "test.h"

/* Far above what the linear paths take under ASan, far below what the
 * quadratic ones took without it. */
#define MAX_SECONDS 5.0

/* This thread's CPU time: other work on a loaded machine does not count
 * (the wall clock did, and a full test run beside this one took the
 * suggestions test past 5 s). */
static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The crafted file, or NULL: *ret_skip tells a missing fixture from a failure. */
static struct binary *open_crafted(const char *kind, bool *ret_skip)
{
	char rel[64];
	const char *path;
	struct rw_error err = {};
	struct binary *b;

	*ret_skip = false;
	snprintf(rel, sizeof(rel), "crafted/%s", kind);
	path = test__fixture(rel);
	if (!path) {
		test__skip("crafted fixtures not built (tests/fixtures/build.sh)");
		*ret_skip = true;
		return NULL;
	}
	b = binary__open(NULL, path, &err);
	CHECK(b, "failed to open %s: %s", path, err.msg);
	return b;
}

/* 40,000 "hot" and 40,000 "hot.cold": every "hot" gets as many cold ranges
 * as a function holds, "lone" its own, and a cold part without a body is no
 * function. */
TEST(binary_hostile_cold_pairing)
{
	const char *hot[] = { "hot" }, *lone[] = { "lone" }, *ghost[] = { "ghost*" };
	struct binary_match m = {};
	struct rw_error err = {};
	struct binary *b;
	bool skip;
	double t0 = now();
	bool ok;

	b = open_crafted("cold", &skip);
	if (!b)
		return skip;
	ok = CHECK(now() - t0 < MAX_SECONDS, "indexing took %.1f s of CPU", now() - t0) &&
	     ASSERT_EQ(binary__nfuncs(b), 40001) &&
	     ASSERT_OK(binary__match(b, lone, 1, 16, &m, &err)) && ASSERT_EQ(m.nfuncs, 1) &&
	     ASSERT_EQ(m.funcs[0]->nranges, 2) &&
	     ASSERT_EQ(m.funcs[0]->ranges[1].lo, m.funcs[0]->address + 2) &&
	     ASSERT_EQ(m.funcs[0]->nreturns, 2);
	binary_match__clear(&m);
	ok = ok && ASSERT_OK(binary__match(b, ghost, 1, 16, &m, &err)) && ASSERT_EQ(m.nfuncs, 0) &&
	     ASSERT_EQ(m.nunmatched, 1);
	binary_match__clear(&m);
	ok = ok && ASSERT_OK(binary__match(b, hot, 1, 100000, &m, &err)) &&
	     ASSERT_EQ(m.nfuncs, 40000);
	for (size_t i = 0; ok && i < m.nfuncs; i += 997)
		ok = ASSERT_EQ(m.funcs[i]->nranges, DWARF_MAX_RANGES);
	binary_match__clear(&m);
	binary__put(b);
	return ok;
}

/* 4,000 "main.dup" in a Go binary: the 2,000 wrappers that call the body
 * before them are dropped, the 2,000 bodies listed. */
TEST(binary_hostile_abi_wrappers)
{
	const char *dup[] = { "main.dup" };
	struct binary_match m = {};
	struct rw_error err = {};
	struct binary *b;
	bool skip;
	double t0;
	bool ok;

	b = open_crafted("abi", &skip);
	if (!b)
		return skip;
	t0 = now();
	ok = ASSERT_TRUE(binary__is_go(b)) &&
	     ASSERT_OK(binary__match(b, dup, 1, 100000, &m, &err)) &&
	     CHECK(now() - t0 < MAX_SECONDS, "matching took %.1f s of CPU", now() - t0) &&
	     ASSERT_EQ(m.nfuncs, 2000);
	for (size_t i = 0; ok && i < m.nfuncs; i++) {
		/* bodies are 16 bytes of nops and a ret; wrappers a call */
		uint8_t first;

		ok = ASSERT_OK(binary__read(b, m.funcs[i]->address, &first, 1)) &&
		     ASSERT_EQ(first, 0x90) && ASSERT_EQ(m.funcs[i]->nreturns, 1);
	}
	binary_match__clear(&m);
	binary__put(b);
	return ok;
}

/* 8,000 names of 250 characters with a dot every other one, against 63
 * patterns of the same shape and one typo of a real name: all 64 answered,
 * the typo with the name it misses. */
TEST(binary_hostile_suggestions)
{
	static char pats[64][256];
	const char *p[64];
	struct binary_match m = {};
	struct rw_error err = {};
	struct binary *b;
	bool skip;
	double t0;
	bool ok;

	b = open_crafted("suggest", &skip);
	if (!b)
		return skip;
	srandom(7);
	for (size_t i = 0; i < 63; i++) {
		for (size_t k = 0; k < 250; k += 2) {
			pats[i][k] = 'a' + random() % 10;
			pats[i][k + 1] = '.';
		}
		pats[i][250] = 0;
		p[i] = pats[i];
	}
	p[63] = "main.ProcessPaymnt";
	t0 = now();
	ok = ASSERT_OK(binary__match(b, p, 64, 16, &m, &err)) &&
	     CHECK(now() - t0 < MAX_SECONDS, "suggestions took %.1f s of CPU", now() - t0) &&
	     ASSERT_EQ(m.nfuncs, 0) && ASSERT_EQ(m.nunmatched, 64) &&
	     ASSERT_TRUE(m.unmatched[63].nsuggestions >= 1) &&
	     ASSERT_STREQ(m.unmatched[63].suggestions[0], "main.ProcessPayment");
	for (size_t i = 0; ok && i < 63; i++)
		ok = ASSERT_TRUE(m.unmatched[i].nsuggestions <= BINARY_MAX_SUGGESTIONS);
	binary_match__clear(&m);
	binary__put(b);
	return ok;
}

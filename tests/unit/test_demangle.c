// SPDX-License-Identifier: MIT
/* The demangler's answers and bounds; expected names as c++filt prints them. */
#include <stdlib.h>
#include <time.h>

#include "analysis/binary.h"
#include "base/demangle.h"
#include "test.h"

static bool demangles_to(const char *name, bool params, const char *want)
{
	char buf[DEMANGLE_MAX_OUT + 1];

	if (!CHECK(demangle(name, params, buf, sizeof(buf)), "%s: not demangled", name))
		return false;
	return ASSERT_STREQ(buf, want);
}

TEST(demangle_cpp_and_rust)
{
	char buf[64];

	return demangles_to("_ZNK4shop4Cart5totalEi", true, "shop::Cart::total(int) const") &&
	       demangles_to("_ZNK4shop4Cart5totalEi", false, "shop::Cart::total") &&
	       demangles_to("_ZN4main7compute17hed27fce75b12393aE", true, "main::compute") &&
	       demangles_to("_RNvCs32gj3y4fnmh_4main7compute", true, "main::compute") &&
	       demangles_to("_RNvMNtCs32gj3y4fnmh_4main4shopNtB2_4Cart5total", false,
			    "<main::shop::Cart>::total") &&
	       /* not mangled, or not validly: left alone */
	       ASSERT_FALSE(demangle("main.main", true, buf, sizeof(buf))) &&
	       ASSERT_FALSE(demangle("_Zx", true, buf, sizeof(buf))) &&
	       ASSERT_FALSE(demangle("_RNvC", true, buf, sizeof(buf))) &&
	       /* too small a buffer: refused, not truncated */
	       ASSERT_FALSE(demangle("_ZNK4shop4Cart5totalEi", true, buf, 8));
}

/* A 621-byte name whose substitutions expand to 8,041 bytes, past the
 * output bound, and a name past the input bound: refused, quickly. */
TEST(demangle_bounds)
{
	static const char head[] = "_Z1fSt6vectorIiSaIiEE";
	size_t n = sizeof(head) - 1 + 3 * 200;
	char *name = malloc(DEMANGLE_MAX_IN + 2), buf[DEMANGLE_MAX_OUT + 1];
	struct timespec t0, t1;
	bool ok;

	if (!ASSERT_TRUE(name))
		return false;
	memcpy(name, head, sizeof(head) - 1);
	for (size_t i = sizeof(head) - 1; i < n; i += 3)
		memcpy(name + i, "S1_", 3);
	name[n] = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ok = ASSERT_FALSE(demangle(name, true, buf, sizeof(buf)));
	/* without parameters the same name is short: the bound is on the output */
	ok = ok && demangles_to(name, false, "f");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ok = ok && CHECK(t1.tv_sec - t0.tv_sec < 2, "took %ld s", (long)(t1.tv_sec - t0.tv_sec));
	memset(name, 'x', DEMANGLE_MAX_IN + 1);
	memcpy(name, "_ZN", 3);
	name[DEMANGLE_MAX_IN + 1] = 0;
	ok = ok && ASSERT_FALSE(demangle(name, true, buf, sizeof(buf)));
	free(name);
	return ok;
}

/*
 * A Rust v0 binder's count is a loop in libiberty, run even where it prints
 * nothing (an impl's own path, "M"): a name binding 62^9 lifetimes there
 * would run for hours. Refused at once; a real binder demangles.
 */
TEST(demangle_rust_binders)
{
	char buf[DEMANGLE_MAX_OUT + 1];
	struct timespec t0, t1;
	bool ok;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ok = ASSERT_FALSE(demangle("_RMIC3fooFGzzzzzzzzz_EuEu", true, buf, sizeof(buf))) &&
	     ASSERT_FALSE(demangle("_RMIC3fooDGzzzzzzzzz_EuEu", true, buf, sizeof(buf))) &&
	     demangles_to("_RINvC3foo3barFG0_RL1_hRL0_hEuE", true,
			  "foo::bar::<for<'a, 'b> fn(&'a u8, &'b u8)>") &&
	     demangles_to("_RMIC3fooFG_RL0_hEuEu", true, "<()>");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return ok && CHECK(t1.tv_sec - t0.tv_sec < 2, "took %ld s", (long)(t1.tv_sec - t0.tv_sec));
}

/* libc's malloc and __libc_malloc share an entry: one function, its name
 * the one without underscores, whichever name asked. */
TEST(binary_one_function_per_address)
{
	const char *pats[] = { "__libc_malloc", "malloc" };
	const char *path = "/lib/x86_64-linux-gnu/libc.so.6";
	struct binary_match m = {};
	struct rw_error err = {};
	struct binary *b = binary__open(NULL, path, &err);
	bool ok;

	if (!CHECK(b, "failed to open %s: %s", path, err.msg))
		return false;
	ok = ASSERT_OK(binary__match(b, pats, 2, 16, &m, &err)) && ASSERT_EQ(m.nfuncs, 1) &&
	     ASSERT_EQ(m.nunmatched, 0) && ASSERT_STREQ(m.funcs[0]->name, "malloc");
	binary_match__clear(&m);
	binary__put(b);
	return ok;
}

/* The Rust fixture: symbol table and DWARF name the same functions. */
TEST(binary_rust_once_per_address_and_demangled)
{
	const char *path = test__fixture("rust/legacy/main"), *all[] = { "*" },
		   *pats[] = { "main::compute", "main::compte" };
	struct binary_match m = {};
	struct rw_error err = {};
	struct binary *b;
	bool ok;

	if (!path) {
		test__skip("rust fixture not built (tests/fixtures/build.sh)");
		return true;
	}
	b = binary__open(NULL, path, &err);
	if (!CHECK(b, "failed to open %s: %s", path, err.msg))
		return false;
	ok = ASSERT_OK(binary__match(b, all, 1, 100000, &m, &err)) &&
	     ASSERT_EQ(m.nfuncs, binary__nfuncs(b));
	for (size_t i = 0; ok && i < m.nfuncs; i++) {
		ok = ASSERT_NEQ(m.funcs[i]->address, 0);
		for (size_t j = i + 1; ok && j < m.nfuncs; j++)
			ok = ASSERT_NEQ(m.funcs[i]->address, m.funcs[j]->address);
	}
	binary_match__clear(&m);
	ok = ok && ASSERT_OK(binary__match(b, pats, 2, 16, &m, &err)) && ASSERT_EQ(m.nfuncs, 1) &&
	     ASSERT_STREQ(m.funcs[0]->demangled, "main::compute") &&
	     ASSERT_TRUE(!strncmp(m.funcs[0]->name, "_ZN4main7compute17h", 19)) &&
	     ASSERT_EQ(m.nunmatched, 1) && ASSERT_TRUE(m.unmatched[0].nsuggestions >= 1) &&
	     ASSERT_STREQ(m.unmatched[0].suggestions[0], "main::compute");
	binary_match__clear(&m);
	binary__put(b);
	return ok;
}

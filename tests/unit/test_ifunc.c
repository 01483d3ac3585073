// SPDX-License-Identifier: MIT
/* IFUNC symbols and versioned duplicates: a library built by gcc at test
 * time, and the system's own libc. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/binary.h"
#include "test.h"

static const char ifunc_source[] =
	"static int pick;\n"
	/* static, as a library's implementations are: the resolver loads their
	 * addresses with a LEA, not through the GOT */
	"static __attribute__((noinline, used)) int sum_fast(int a, int b) { return a + b + pick; }\n"
	"static __attribute__((noinline, used)) int sum_slow(int a, int b) { int s = a; while (b--) s++; return s + pick; }\n"
	"static void *resolve_sum(void) {\n"
	"	__builtin_cpu_init();\n"
	"	return __builtin_cpu_supports(\"avx2\") ? (void *)sum_fast : (void *)sum_slow;\n"
	"}\n"
	"int sum(int, int) __attribute__((ifunc(\"resolve_sum\")));\n"
	"int plain(int a) { return a * 2; }\n";

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

/* Builds ifunc_source as a shared library in dir; strip: with --strip-all. */
static bool build_lib(const char *dir, bool strip, char *path, size_t len)
{
	char src[128], cmd[512];

	snprintf(src, sizeof(src), "%s/ifunc.c", dir);
	snprintf(path, len, "%s/libifunc%s.so", dir, strip ? "-stripped" : "");
	if (!test__write_file(dir, "ifunc.c", ifunc_source, strlen(ifunc_source)))
		return false;
	snprintf(cmd, sizeof(cmd), "gcc -O2 -shared -fPIC -o %s %s%s%s", path, src,
		 strip ? " && strip --strip-all " : "", strip ? path : "");
	return ASSERT_OK(system(cmd));
}

static bool match_refused(struct binary *b, const char *pat, struct rw_error *err)
{
	struct binary_match m;
	int ret = binary__match(b, &pat, 1, 100, &m, err);

	binary_match__clear(&m);
	return ASSERT_EQ(ret, -EINVAL) && ASSERT_TRUE(strstr(err->msg, "is an IFUNC"));
}

TEST(ifunc_refused_with_implementations)
{
	char dir[] = "/tmp/retwatch-ifunc-XXXXXX", path[160];
	const char *pats[] = { "plain", "sum*" };
	struct binary_match m = {};
	struct rw_error err = {};
	struct binary *b = NULL;
	bool ok = false;

	if (!ASSERT_TRUE(mkdtemp(dir)) || !build_lib(dir, false, path, sizeof(path)))
		goto cleanup;
	b = binary__open(NULL, path, &err);
	if (!ASSERT_TRUE(b) || !match_refused(b, "sum", &err))
		goto cleanup;
	/* the resolver's candidates, by name */
	if (!ASSERT_TRUE(strstr(err.msg, "sum_fast")) || !ASSERT_TRUE(strstr(err.msg, "sum_slow")))
		goto cleanup;
	/* a glob leaves the resolver out and keeps the implementations */
	if (!ASSERT_OK(binary__match(b, pats, 2, 100, &m, &err)) || !ASSERT_EQ(m.nunmatched, 0))
		goto cleanup;
	for (size_t i = 0; i < m.nfuncs; i++)
		if (!ASSERT_TRUE(strcmp(m.funcs[i]->name, "sum")))
			goto cleanup;
	if (!ASSERT_EQ(m.nfuncs, 3)) /* plain, sum_fast, sum_slow */
		goto cleanup;
	binary_match__clear(&m);
	binary__put(b);
	/* stripped: the implementations have no names, their addresses are said */
	b = NULL;
	if (!build_lib(dir, true, path, sizeof(path)))
		goto cleanup;
	b = binary__open(NULL, path, &err);
	if (!ASSERT_TRUE(b) || !match_refused(b, "sum", &err))
		goto cleanup;
	ok = ASSERT_TRUE(strstr(err.msg, "no symbols in this file")) &&
	     ASSERT_TRUE(strstr(err.msg, "0x"));
cleanup:
	binary_match__clear(&m);
	binary__put(b);
	test__rm_tree(dir);
	return ok;
}

TEST(ifunc_libc)
{
	const char *all = "*", *names[] = { "strlen", "memcpy" };
	struct binary_match m = {};
	struct rw_error err = {};
	struct binary *b;
	bool ok = false;

	if (access(LIBC, R_OK)) {
		test__skip(LIBC " is not there");
		return true;
	}
	b = binary__open(NULL, LIBC, &err);
	if (!ASSERT_TRUE(b))
		return false;
	for (size_t i = 0; i < 2; i++) {
		if (!match_refused(b, names[i], &err))
			goto cleanup;
		/* strlen's resolver picks among several implementations */
		if (!ASSERT_TRUE(strstr(err.msg, "0x") || strstr(err.msg, "__")))
			goto cleanup;
	}
	/* every function once per address, none of them a resolver */
	if (!ASSERT_OK(binary__match(b, &all, 1, 100000, &m, &err)) ||
	    !ASSERT_TRUE(m.nfuncs > 1000))
		goto cleanup;
	for (size_t i = 0; i < m.nfuncs; i++) {
		if (!ASSERT_TRUE(strcmp(m.funcs[i]->name, "strlen")))
			goto cleanup;
		for (size_t j = i + 1; j < m.nfuncs; j++)
			if (!CHECK(m.funcs[i]->address != m.funcs[j]->address,
				   "%s and %s both at 0x%" PRIx64, m.funcs[i]->name,
				   m.funcs[j]->name, m.funcs[i]->address))
				goto cleanup;
	}
	ok = true;
cleanup:
	binary_match__clear(&m);
	binary__put(b);
	return ok;
}

// SPDX-License-Identifier: MIT
/* Binary analysis over real binaries compiled by gcc at test time. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/binary.h"
#include "test.h"

static const char c_source[] =
	"#include <stdio.h>\n"
	"#include <stdlib.h>\n"
	"__attribute__((noinline, cold)) void report(const char *m) { fprintf(stderr, \"%s\\n\", m); }\n"
	"__attribute__((noinline)) int other(int x) { return x * 3 + 1; }\n"
	"__attribute__((noinline)) int tail(int x) { if (x > 5) return other(x - 1); return x; }\n"
	"__attribute__((noinline)) int checked(int *p, int n) {\n"
	"	int s = 0;\n"
	"	for (int i = 0; i < n; i++) {\n"
	"		if (__builtin_expect(p[i] < 0, 0)) { report(\"negative\"); abort(); }\n"
	"		s += p[i];\n"
	"	}\n"
	"	return s;\n"
	"}\n"
	"__attribute__((noinline)) int parse_a(const char *s) { return s[0]; }\n"
	"__attribute__((noinline)) int parse_b(const char *s) { return s[1]; }\n"
	"__attribute__((noinline)) int parse_c(const char *s) { return s[2]; }\n"
	"__attribute__((noinline)) void spin(void) { for (;;) __asm__ volatile(\"pause\"); }\n"
	"int main(int c, char **v) {\n"
	"	int a[3] = { c, 2, 3 };\n"
	"	if (c > 9) spin();\n"
	"	printf(\"%d %d %d\\n\", tail(c + 7), checked(a, 3), parse_a(v[0]) + parse_b(v[0]) + parse_c(v[0]));\n"
	"	return 0;\n"
	"}\n";

static char dir[64];

static void remove_dir(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s /tmp/retwatch-unit-bad", dir);
	if (system(cmd))
		fprintf(stderr, "failed to remove %s\n", dir);
}

/* Builds the C fixture as variant in this run's directory, then runs post on
 * it ({} names the output). The path, or NULL. */
static const char *build_c(const char *variant, const char *post)
{
	static char paths[4][128];
	static int n;
	char cmd[1024];
	char *path;

	if (!dir[0]) {
		strcpy(dir, "/tmp/retwatch-unit-XXXXXX");
		if (!mkdtemp(dir))
			return NULL;
		atexit(remove_dir);
		snprintf(cmd, sizeof(cmd), "%s/c.c", dir);
		FILE *f = fopen(cmd, "w");

		if (!f)
			return NULL;
		fputs(c_source, f);
		fclose(f);
	}
	path = paths[n++ % 4];
	snprintf(path, sizeof(paths[0]), "%s/%s", dir, variant);
	snprintf(cmd, sizeof(cmd), "gcc -O2 -g -o %s %s/c.c%s%s", path, dir, post ? " && " : "",
		 post ? post : "");
	while (strstr(cmd, "{}")) {
		char tmp[1024];
		char *p = strstr(cmd, "{}");

		*p = 0;
		snprintf(tmp, sizeof(tmp), "%s%s%s", cmd, path, p + 2);
		strcpy(cmd, tmp);
	}
	if (system(cmd))
		return NULL;
	return path;
}

/* The C fixture built as variant and opened without a cache, or NULL. */
static struct binary *open_c(const char *variant, const char *post)
{
	const char *path = build_c(variant, post);
	struct rw_error err = {};
	struct binary *b;

	if (!ASSERT_TRUE(path))
		return NULL;
	b = binary__open(NULL, path, &err);
	if (!CHECK(b, "failed to open %s: %s", path, err.msg))
		return NULL;
	return b;
}

static const struct func_info *find1(struct binary *b, const char *pat, struct binary_match *m)
{
	struct rw_error err;
	const char *pats[] = { pat };

	if (binary__match(b, pats, 1, 16, m, &err) || m->nfuncs != 1)
		return NULL;
	return m->funcs[0];
}

TEST(binary_c_functions)
{
	struct binary_match m1 = {}, m2 = {}, m3 = {};
	const struct func_info *tail, *checked, *spin;
	struct binary *b = open_c("plain", NULL);
	bool ok = false;

	if (!b)
		return false;
	ok = ASSERT_FALSE(binary__stripped(b)) && ASSERT_FALSE(binary__is_go(b)) &&
	     ASSERT_TRUE(binary__build_id(b)) && ASSERT_EQ(binary__go_version(b), NULL);
	tail = find1(b, "tail", &m1);
	checked = find1(b, "checked", &m2);
	spin = find1(b, "spin", &m3);
	ok = ok && ASSERT_TRUE(tail) && ASSERT_TRUE(checked) && ASSERT_TRUE(spin);
	if (!ok)
		goto cleanup;
	/* tail(): `return other(x - 1)` is a jmp out of the function */
	ok = ASSERT_EQ(tail->mode, FUNC_MODE_ENTRY_RET_TAILCALL) &&
	     ASSERT_EQ(tail->ntail_calls, 1) && ASSERT_TRUE(tail->nreturns >= 1) &&
	     ASSERT_EQ(tail->source, FUNC_SOURCE_SYMTAB) &&
	     ASSERT_EQ(tail->file_offset, tail->address); /* PIE: first segment at 0 */
	/* the tail call is followed: other()'s RETs end tail()'s calls */
	const struct func_info *other = binary__func_at(b, tail->tail_targets[0]);

	ok = ok && ASSERT_TRUE(other) && ASSERT_STREQ(other->name, "other") &&
	     ASSERT_EQ(tail->ntail_followed, 1) && ASSERT_EQ(tail->ntail_untimed, 0) &&
	     ASSERT_EQ(tail->ntail_returns, other->nreturns);
	for (size_t k = 0; ok && other && k < other->nreturns; k++)
		ok = ASSERT_EQ(tail->tail_returns[k],
			       (int64_t)(other->file_offset - tail->file_offset) +
				       other->returns[k]);
	/* checked(): a hot range and a .cold range, from DWARF */
	ok = ok && ASSERT_EQ(checked->nranges, 2) &&
	     ASSERT_EQ(checked->mode, FUNC_MODE_ENTRY_RET) &&
	     ASSERT_EQ(checked->ranges[0].lo, checked->address);
	ok = ok && ASSERT_EQ(spin->mode, FUNC_MODE_ENTRY_ONLY) &&
	     ASSERT_STRCONTAINS(spin->reason, "no return instruction");
cleanup:
	binary_match__clear(&m1);
	binary_match__clear(&m2);
	binary_match__clear(&m3);
	binary__put(b);
	return ok;
}

TEST(binary_dwarf_only)
{
	/* no .symtab, DWARF kept: functions come from DWARF */
	struct binary *b = open_c("dwarfonly", "strip --keep-section='.debug_*' {}");
	struct binary_match m = {};
	const struct func_info *f;
	bool ok;

	if (!b)
		return false;
	f = find1(b, "checked", &m);
	ok = ASSERT_TRUE(binary__stripped(b)) && ASSERT_TRUE(f) &&
	     ASSERT_EQ(f->source, FUNC_SOURCE_DWARF) && ASSERT_EQ(f->nranges, 2) &&
	     ASSERT_EQ(f->mode, FUNC_MODE_ENTRY_RET);
	binary_match__clear(&m);
	binary__put(b);
	return ok;
}

TEST(binary_stripped_unnamed_tail_target)
{
	/* stripped, functions exported (.dynsym): "checked.cold" has no symbol
	 * left, and starts (a push first) in a function's entry state, as an
	 * unnamed static function would: the jump into it is a tail call,
	 * followed through its FDE */
	struct binary *plain = open_c("plain", NULL);
	struct binary *b = open_c("stripped-rdynamic",
				  "gcc -O2 -g -rdynamic -o {} $(dirname {})/c.c && strip {}");
	struct binary_match m1 = {}, m2 = {};
	const struct func_info *want, *f;
	bool ok = false;

	if (!plain || !b)
		goto cleanup;
	want = find1(plain, "checked", &m1);
	f = find1(b, "checked", &m2);
	ok = ASSERT_TRUE(binary__stripped(b)) && ASSERT_TRUE(want) && ASSERT_TRUE(f) &&
	     ASSERT_EQ(want->nranges, 2) && ASSERT_EQ(f->source, FUNC_SOURCE_SYMTAB);
	if (!ok)
		goto cleanup;
	ok = ASSERT_EQ(f->nranges, 1) && ASSERT_EQ(f->ntail_calls, 1) &&
	     ASSERT_EQ(f->tail_targets[0], want->ranges[1].lo) && ASSERT_EQ(f->ntail_followed, 1) &&
	     ASSERT_EQ(f->ntail_untimed, 0) && ASSERT_EQ(f->nreturns, want->nreturns);
cleanup:
	binary_match__clear(&m1);
	binary_match__clear(&m2);
	binary__put(plain);
	binary__put(b);
	return ok;
}

TEST(binary_globs_limit_and_suggestions)
{
	const char *pats[] = { "parse_*", "chekced", "nothing_like_this_at_all" };
	struct binary *b = open_c("plain", NULL);
	struct binary_match m = {};
	struct rw_error err = {};
	bool ok;

	if (!b)
		return false;
	ok = ASSERT_OK(binary__match(b, pats, 3, 16, &m, &err)) && ASSERT_EQ(m.nfuncs, 3) &&
	     ASSERT_EQ(m.nunmatched, 2) && ASSERT_STREQ(m.unmatched[0].pattern, "chekced") &&
	     ASSERT_TRUE(m.unmatched[0].nsuggestions >= 1) &&
	     ASSERT_STREQ(m.unmatched[0].suggestions[0], "checked") &&
	     ASSERT_EQ(m.unmatched[1].nsuggestions, 0);
	binary_match__clear(&m);
	ok = ok && ASSERT_EQ(binary__match(b, pats, 1, 2, &m, &err), -E2BIG) &&
	     ASSERT_STRCONTAINS(err.msg, "matches 3 functions, more than the limit of 2");
	binary_match__clear(&m);
	binary__put(b);
	return ok;
}

/* Listing names functions without analysing them: bounded, the rest counted,
 * a function two patterns match listed once, suggestions for no match. */
TEST(binary_list_bounded)
{
	const char *pats[] = { "parse_*", "parse_b", "chekced" }, *all = NULL;
	struct binary *b = open_c("plain", NULL);
	struct binary_list l = {}, every = {};
	struct rw_error err = {};
	bool ok;

	if (!b)
		return false;
	ok = ASSERT_OK(binary__list(b, pats, 3, 2, &l, &err)) && ASSERT_EQ(l.nfuncs, 2) &&
	     ASSERT_EQ(l.total, 3) && ASSERT_STREQ(l.funcs[0].name, "parse_a") &&
	     ASSERT_STREQ(l.funcs[1].name, "parse_b") && ASSERT_TRUE(l.funcs[0].size > 0) &&
	     ASSERT_FALSE(l.funcs[0].go) && ASSERT_EQ(l.nunmatched, 1) &&
	     ASSERT_STREQ(l.unmatched[0].pattern, "chekced") &&
	     ASSERT_STREQ(l.unmatched[0].suggestions[0], "checked");
	/* no pattern: every function, as many as binary__nfuncs counts at most */
	ok = ok && ASSERT_OK(binary__list(b, &all, 0, 4096, &every, &err)) &&
	     ASSERT_TRUE(every.total >= 8) && ASSERT_EQ(every.nfuncs, every.total) &&
	     ASSERT_TRUE(every.total <= binary__nfuncs(b)) && ASSERT_EQ(every.nunmatched, 0);
	binary_list__clear(&l);
	binary_list__clear(&every);
	ok = ok && ASSERT_EQ(binary__list(b, pats, 0, 0, &l, &err), 0) && ASSERT_EQ(l.nfuncs, 0);
	binary_list__clear(&l);
	binary__put(b);
	return ok;
}

/*
 * The same patterns again (other strings, as the attach after the
 * analyzer's match passes them): the same answer, naming the caller's
 * strings; other patterns or another limit are matched afresh.
 */
TEST(binary_match_again)
{
	char a[3][32] = { "parse_*", "chekced", "nothing_like_this_at_all" };
	char c[3][32] = { "parse_*", "chekced", "nothing_like_this_at_all" };
	const char *first[] = { a[0], a[1], a[2] }, *again[] = { c[0], c[1], c[2] };
	const char *fewer[] = { c[0] };
	struct binary_match m1 = {}, m2 = {}, m3 = {}, m4 = {};
	struct binary *b = open_c("plain", NULL);
	struct rw_error err = {};
	bool ok;

	if (!b)
		return false;
	ok = ASSERT_OK(binary__match(b, first, 3, 16, &m1, &err)) &&
	     ASSERT_OK(binary__match(b, again, 3, 16, &m2, &err)) &&
	     ASSERT_EQ(m2.nfuncs, m1.nfuncs) && ASSERT_EQ(m2.nunmatched, 2) &&
	     ASSERT_TRUE(m2.funcs != m1.funcs) && ASSERT_TRUE(m2.unmatched[0].pattern == c[1]) &&
	     ASSERT_TRUE(m2.unmatched[1].pattern == c[2]) &&
	     ASSERT_EQ(m2.unmatched[0].nsuggestions, m1.unmatched[0].nsuggestions) &&
	     ASSERT_STREQ(m2.unmatched[0].suggestions[0], "checked");
	for (size_t i = 0; ok && i < m1.nfuncs; i++)
		ok = ASSERT_TRUE(m2.funcs[i] == m1.funcs[i]);
	/* the first answer's arrays are the caller's own: freed, the second stands */
	binary_match__clear(&m1);
	ok = ok && ASSERT_TRUE(m2.funcs[0]->name) &&
	     ASSERT_OK(binary__match(b, fewer, 1, 16, &m3, &err)) && ASSERT_EQ(m3.nfuncs, 3) &&
	     ASSERT_EQ(m3.nunmatched, 0) &&
	     ASSERT_EQ(binary__match(b, again, 3, 2, &m4, &err), -E2BIG);
	binary_match__clear(&m2);
	binary_match__clear(&m3);
	binary_match__clear(&m4);
	binary__put(b);
	return ok;
}

/* A name shared by several functions (C++ overloads) is bounded by the limit as a glob is. */
TEST(binary_exact_name_limit)
{
	const char *path = test__fixture("cpp/shop"), *pat[] = { "shop::Cart::total" };
	struct binary_match m = {};
	struct rw_error err = {};
	struct binary *b;
	bool ok;

	b = binary__open(NULL, path, &err);
	if (!CHECK(b, "failed to open %s: %s", path, err.msg))
		return false;
	ok = ASSERT_EQ(binary__match(b, pat, 1, 1, &m, &err), -E2BIG) &&
	     ASSERT_STRCONTAINS(err.msg, "name 'shop::Cart::total' matches 2 functions, more than "
					 "the limit of 1");
	binary_match__clear(&m);
	ok = ok && ASSERT_OK(binary__match(b, pat, 1, 2, &m, &err)) && ASSERT_EQ(m.nfuncs, 2);
	binary_match__clear(&m);
	binary__put(b);
	return ok;
}

static bool open_fails(const char *path, const char *want)
{
	struct rw_error err = {};
	struct binary *b = binary__open(NULL, path, &err);

	if (!ASSERT_FALSE(b)) {
		binary__put(b);
		return false;
	}
	return ASSERT_STRCONTAINS(err.msg, want);
}

static bool write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	bool ok = fd >= 0 && write(fd, data, len) == (ssize_t)len;

	if (fd >= 0)
		close(fd);
	return ok;
}

static bool corrupt_copy(const char *src, const char *dst, size_t keep, size_t patch_off,
			 const void *patch, size_t patch_len)
{
	char buf[1 << 16];
	int fd = open(src, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;

	if (fd >= 0)
		close(fd);
	if (n < (ssize_t)keep || patch_off + patch_len > keep)
		return false;
	memcpy(buf + patch_off, patch, patch_len);
	return write_file(dst, buf, keep);
}

TEST(binary_bad_files)
{
	const char *path = build_c("plain", NULL);
	const char *dir = "/tmp/retwatch-unit-bad";
	static const char garbage[] = "this is not a program, only some text\n";
	uint16_t riscv = 243;
	uint8_t class32 = 1;
	bool ok;

	if (!ASSERT_TRUE(path))
		return false;
	mkdir(dir, 0755);
	ok = ASSERT_TRUE(write_file("/tmp/retwatch-unit-bad/garbage", garbage, sizeof(garbage))) &&
	     ASSERT_TRUE(write_file("/tmp/retwatch-unit-bad/empty", "", 0)) &&
	     ASSERT_TRUE(corrupt_copy(path, "/tmp/retwatch-unit-bad/trunc40", 40, 0, "", 0)) &&
	     ASSERT_TRUE(corrupt_copy(path, "/tmp/retwatch-unit-bad/trunc4k", 4096, 0, "", 0)) &&
	     ASSERT_TRUE(
		     corrupt_copy(path, "/tmp/retwatch-unit-bad/riscv", 16384, 18, &riscv, 2)) &&
	     ASSERT_TRUE(corrupt_copy(path, "/tmp/retwatch-unit-bad/elf32", 16384, 4, &class32, 1));
	ok = ok && open_fails("/tmp/retwatch-unit-bad/garbage", "is not an ELF file") &&
	     open_fails("/tmp/retwatch-unit-bad/empty", "is not an ELF file") &&
	     open_fails("/tmp/retwatch-unit-bad/trunc40", "truncated") &&
	     open_fails("/tmp/retwatch-unit-bad/trunc4k", "truncated") &&
	     open_fails("/tmp/retwatch-unit-bad/riscv", "riscv") &&
	     open_fails("/tmp/retwatch-unit-bad/riscv", "wrong architecture") &&
	     open_fails("/tmp/retwatch-unit-bad/elf32", "32-bit") &&
	     open_fails("/tmp/retwatch-unit-bad/missing", "No such file") &&
	     open_fails("/tmp", "not a regular file");
	return ok;
}

TEST(binary_cache_keys_on_inode_and_times)
{
	const char *path = build_c("cached", NULL);
	struct binary_cache *cache = binary_cache__new(4);
	struct binary *a = NULL, *b = NULL, *c = NULL, *d = NULL;
	char hardlink[256];
	struct rw_error err;
	size_t hits, misses;
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { 1000000000, 0 } };
	bool ok;

	if (!ASSERT_TRUE(path) || !ASSERT_TRUE(cache))
		goto fail;
	snprintf(hardlink, sizeof(hardlink), "%s.hardlink", path);
	unlink(hardlink);
	/* another path to the same inode hits the cache (linking first: a new
	 * link changes the inode's ctime) */
	ok = ASSERT_OK(link(path, hardlink));
	a = ok ? binary__open(cache, path, &err) : NULL;
	b = a ? binary__open(cache, hardlink, &err) : NULL;
	binary_cache__stats(cache, &hits, &misses);
	ok = ok && ASSERT_TRUE(a == b) && ASSERT_EQ(hits, 1) && ASSERT_EQ(misses, 1);
	/* the same path after the file changed (new mtime) does not */
	ok = ok && ASSERT_OK(utimensat(AT_FDCWD, path, ts, 0));
	c = ok ? binary__open(cache, path, &err) : NULL;
	binary_cache__stats(cache, &hits, &misses);
	ok = ok && ASSERT_TRUE(c && c != a) && ASSERT_EQ(misses, 2);
	/* a new file at the same path (new inode) does not either */
	ok = ok && ASSERT_OK(rename(hardlink, path));
	ok = ok && ASSERT_TRUE(build_c("cached", NULL) != NULL);
	d = ok ? binary__open(cache, path, &err) : NULL;
	binary_cache__stats(cache, &hits, &misses);
	ok = ok && ASSERT_TRUE(d && d != a && d != c) && ASSERT_EQ(misses, 3);
	binary__put(a);
	binary__put(b);
	binary__put(c);
	binary__put(d);
	binary_cache__free(cache);
	return ok;
fail:
	binary_cache__free(cache);
	return false;
}

TEST(binary_cache_sees_rewrite_with_forged_mtime)
{
	const char *path = build_c("rewritten", NULL);
	struct binary_cache *cache = binary_cache__new(4);
	struct binary *a = NULL, *b = NULL;
	struct rw_error err;
	struct timespec times[2];
	size_t hits, misses;
	struct stat st;
	bool ok = false;
	int fd;

	if (!ASSERT_TRUE(path) || !ASSERT_TRUE(cache) || !ASSERT_OK(stat(path, &st)))
		goto out;
	a = binary__open(cache, path, &err);
	/* same inode, same size, one byte changed, the old mtime put back */
	fd = open(path, O_WRONLY);
	ok = ASSERT_TRUE(a) && ASSERT_TRUE(fd >= 0) &&
	     ASSERT_EQ(pwrite(fd, "\x90", 1, st.st_size - 1), 1);
	if (fd >= 0)
		close(fd);
	times[0] = st.st_atim;
	times[1] = st.st_mtim;
	ok = ok && ASSERT_OK(utimensat(AT_FDCWD, path, times, 0));
	b = ok ? binary__open(cache, path, &err) : NULL;
	binary_cache__stats(cache, &hits, &misses);
	ok = ok && ASSERT_TRUE(b && b != a) && ASSERT_EQ(hits, 0) && ASSERT_EQ(misses, 2);
out:
	binary__put(a);
	binary__put(b);
	binary_cache__free(cache);
	return ok;
}

TEST(binary_func_at)
{
	struct binary_match m1 = {}, m2 = {};
	const struct func_info *tail, *checked, *f;
	struct binary *b = open_c("plain", NULL);
	uint64_t addr;
	bool ok;

	if (!b)
		return false;
	tail = find1(b, "tail", &m1);
	checked = find1(b, "checked", &m2);
	ok = ASSERT_TRUE(tail) && ASSERT_TRUE(checked) && ASSERT_EQ(checked->nranges, 2);
	if (!ok)
		goto cleanup;
	/* the analysis binary__match hands out, for any byte of any range */
	ok = ASSERT_EQ(binary__func_at(b, tail->address), tail) &&
	     ASSERT_EQ(binary__func_at(b, tail->address + tail->size - 1), tail) &&
	     ASSERT_EQ(binary__func_at(b, checked->address + 1), checked) &&
	     ASSERT_EQ(binary__func_at(b, checked->ranges[1].lo), checked) &&
	     ASSERT_EQ(binary__func_at(b, checked->ranges[1].hi - 1), checked) &&
	     ASSERT_EQ(binary__func_at(b, 0), NULL) &&
	     ASSERT_EQ(binary__func_at(b, UINT64_MAX), NULL);
	f = binary__func_at(b, tail->address + tail->size);
	ok = ok && (!f || ASSERT_NEQ(f, tail));
	f = binary__func_at(b, checked->ranges[0].hi - 1);
	ok = ok && ASSERT_TRUE(f) && ASSERT_STREQ(f->name, "checked");
	/* file offsets back to addresses */
	ok = ok && ASSERT_OK(binary__offset_to_addr(b, tail->file_offset, &addr)) &&
	     ASSERT_EQ(addr, tail->address) &&
	     ASSERT_EQ(binary__offset_to_addr(b, 1ULL << 40, &addr), -ERANGE);
cleanup:
	binary_match__clear(&m1);
	binary_match__clear(&m2);
	binary__put(b);
	return ok;
}

/* Stripped, hot.cold has no symbol: once hot is analysed, the cold part its
 * FDE gave is hot's for binary__func_at too (a stack frame there is named
 * hot), and no other function can take it. */
TEST(binary_func_at_cold_part_from_fde)
{
	const char *path = test__fixture("c/tail-stripped/tailfix");
	const struct func_info *hot;
	struct binary_match m = {};
	struct rw_error err = {};
	struct binary *b;
	bool ok;

	if (!path) {
		test__skip("no c/tail-stripped fixture");
		return true;
	}
	b = binary__open(NULL, path, &err);
	if (!CHECK(b, "%s", err.msg))
		return false;
	hot = find1(b, "hot", &m);
	ok = ASSERT_TRUE(binary__stripped(b)) && ASSERT_TRUE(hot) && ASSERT_EQ(hot->nranges, 2);
	if (ok) {
		uint64_t lo = hot->ranges[1].lo, hi = hot->ranges[1].hi;

		ok = ASSERT_TRUE(lo >= hot->address + hot->size || hi <= hot->address) &&
		     ASSERT_EQ(binary__func_at(b, lo), hot) &&
		     ASSERT_EQ(binary__func_at(b, hi - 1), hot) &&
		     ASSERT_EQ(binary__func_at(b, hot->address), hot);
	}
	binary_match__clear(&m);
	binary__put(b);
	return ok;
}

TEST(binary_func_at_nopie)
{
	/* addresses and file offsets differ in a non-PIE executable */
	const char *path = test__fixture("c/nopie/cfix");
	const struct func_info *f, *g;
	struct binary_match m = {};
	struct rw_error err = {};
	struct binary *b;
	uint64_t addr;
	bool ok;

	if (!path) {
		test__skip("no c/nopie fixture");
		return true;
	}
	b = binary__open(NULL, path, &err);
	if (!CHECK(b, "%s", err.msg))
		return false;
	f = find1(b, "main", &m);
	ok = ASSERT_TRUE(f) && ASSERT_NEQ(f->address, f->file_offset);
	if (ok) {
		g = binary__func_at(b, f->address + 1);
		ok = ASSERT_EQ(g, f) &&
		     ASSERT_OK(binary__offset_to_addr(b, f->file_offset, &addr)) &&
		     ASSERT_EQ(addr, f->address);
	}
	binary_match__clear(&m);
	binary__put(b);
	return ok;
}

/* The analyses no one uses are bounded in bytes, the least recently used
 * dropped first; one in use is never dropped, nor counted against it. */
TEST(binary_cache_bounded_in_bytes)
{
	const char *go = test__fixture("go/native/demo"), *c = test__fixture("c/nopie/cfix");
	struct binary_cache *cache = binary_cache__new(64);
	struct rw_error err = { "" };
	struct binary_cache_use use;
	struct binary *g, *x;
	size_t go_bytes, c_bytes, hits, misses;
	bool ok;

	if (!go || !c)
		return true;
	if (!ASSERT_TRUE(cache) || !ASSERT_TRUE((g = binary__open(cache, go, &err))))
		return false;
	x = binary__open(cache, c, &err);
	go_bytes = binary__bytes(g);
	c_bytes = x ? binary__bytes(x) : 0;
	/* a Go program's function table and symbols, more than a small C one's */
	ok = ASSERT_TRUE(x) && ASSERT_TRUE(c_bytes > 0 && go_bytes > c_bytes);
	binary_cache__set_max_bytes(cache, go_bytes + c_bytes);
	binary__put(g);
	binary__put(x);
	binary_cache__use(cache, &use);
	ok = ok && ASSERT_EQ(use.count, 2) && ASSERT_EQ(use.unused, 2) &&
	     ASSERT_EQ(use.unused_bytes, go_bytes + c_bytes) && ASSERT_EQ(use.evicted, 0);
	/* room for the C one alone: the Go one, used longer ago, goes */
	binary_cache__set_max_bytes(cache, c_bytes);
	binary_cache__use(cache, &use);
	ok = ok && ASSERT_EQ(use.count, 1) && ASSERT_EQ(use.unused_bytes, c_bytes) &&
	     ASSERT_EQ(use.evicted, 1);
	/* in use: held whatever the bound, then dropped once put */
	binary_cache__set_max_bytes(cache, 1);
	g = binary__open(cache, go, &err);
	binary_cache__use(cache, &use);
	ok = ok && ASSERT_TRUE(g) && ASSERT_EQ(use.count, 1) && ASSERT_EQ(use.unused, 0) &&
	     ASSERT_EQ(use.evicted, 2);
	binary_cache__stats(cache, &hits, &misses);
	ok = ok && ASSERT_EQ(misses, 3) && ASSERT_EQ(hits, 0);
	binary__put(g);
	binary_cache__use(cache, &use);
	ok = ok && ASSERT_EQ(use.count, 0) && ASSERT_EQ(use.evicted, 3);
	/* read off the cache (the analyzer's thread) and adopted: kept for its
	 * caller's open, not read again there; dropped once that one is done */
	g = binary__open(NULL, go, &err);
	if (g)
		binary_cache__adopt(cache, g);
	binary_cache__use(cache, &use);
	ok = ok && ASSERT_TRUE(g) && ASSERT_EQ(use.count, 1) && ASSERT_EQ(use.unused, 0);
	g = binary__open(cache, go, &err);
	binary_cache__stats(cache, &hits, &misses);
	ok = ok && ASSERT_TRUE(g) && ASSERT_EQ(hits, 1);
	binary__put(g);
	binary_cache__use(cache, &use);
	ok = ok && ASSERT_EQ(use.count, 0) && ASSERT_EQ(use.evicted, 4);
	binary_cache__free(cache);
	return ok;
}

/*
 * All analyses together within binary_cache__set_max_total: the unused
 * ones make room; a file whose analysis would take those in use over it is
 * refused with ENOSPC and a message naming the bound, and one is not read
 * at all while those in use fill it.
 */
TEST(binary_cache_bounded_in_total)
{
	const char *go = test__fixture("go/native/demo"), *c = test__fixture("c/nopie/cfix");
	struct binary_cache *cache = binary_cache__new(64);
	struct rw_error err = { "" };
	struct binary_cache_use use;
	size_t go_bytes, c_bytes, hits, misses, misses0;
	struct binary *g, *x;
	struct stat st;
	bool ok;

	if (!go || !c)
		return true;
	if (!ASSERT_TRUE(cache) || !ASSERT_TRUE((x = binary__open(cache, c, &err))))
		return false;
	binary_cache__use(cache, &use);
	c_bytes = use.bytes;
	g = binary__open(cache, go, &err);
	binary_cache__use(cache, &use);
	go_bytes = use.bytes - c_bytes;
	ok = ASSERT_TRUE(g) && ASSERT_TRUE(go_bytes > c_bytes);
	/* the unused C one makes room for the Go one in use */
	binary__put(x);
	binary_cache__set_max_total(cache, go_bytes + c_bytes - 1, "the test's bound");
	binary_cache__use(cache, &use);
	ok = ok && ASSERT_EQ(use.count, 1) && ASSERT_EQ(use.evicted, 1);
	/* read, and refused: both in use would be over the bound */
	errno = 0;
	x = binary__open(cache, c, &err);
	ok = ok && ASSERT_TRUE(!x) && ASSERT_EQ(errno, ENOSPC) &&
	     ASSERT_TRUE(strstr(err.msg, "the test's bound") && !strstr(err.msg, c));
	binary_cache__use(cache, &use);
	ok = ok && ASSERT_EQ(use.refused, 1) && ASSERT_EQ(use.count, 1);
	/* asked again: refused without reading it, for the bytes it held */
	binary_cache__stats(cache, &hits, &misses);
	ok = ok && ASSERT_TRUE(!stat(c, &st)) &&
	     ASSERT_EQ(binary_cache__full(cache, &st, &err), -ENOSPC) &&
	     ASSERT_TRUE(!binary__open(cache, c, &err)) && ASSERT_EQ(errno, ENOSPC);
	misses0 = misses;
	binary_cache__stats(cache, &hits, &misses);
	ok = ok && ASSERT_EQ(misses, misses0);
	/* with the Go one put, there is room */
	binary__put(g);
	x = binary__open(cache, c, &err);
	ok = ok && ASSERT_TRUE(x);
	/* those in use fill the bound: the Go one is not even read */
	binary_cache__set_max_total(cache, c_bytes, "the test's bound");
	binary_cache__stats(cache, &hits, &misses);
	err.msg[0] = '\0';
	g = binary__open(cache, go, &err);
	binary_cache__use(cache, &use);
	ok = ok && ASSERT_TRUE(!g) && ASSERT_EQ(use.refused, 4) &&
	     ASSERT_TRUE(strstr(err.msg, "not analysed: ") != NULL) &&
	     ASSERT_EQ(binary_cache__full(cache, NULL, &err), -ENOSPC);
	binary_cache__stats(cache, &hits, &misses);
	ok = ok && ASSERT_EQ(misses, 4);
	/* read off the cache (the analyzer) and adopted: refused at its open, then dropped */
	g = binary__open(NULL, go, &err);
	if (g)
		binary_cache__adopt(cache, g);
	binary_cache__use(cache, &use);
	ok = ok && ASSERT_TRUE(g) && ASSERT_EQ(use.count, 2);
	errno = 0;
	g = binary__open(cache, go, &err);
	binary_cache__use(cache, &use);
	ok = ok && ASSERT_TRUE(!g) && ASSERT_EQ(errno, ENOSPC) && ASSERT_EQ(use.refused, 6) &&
	     ASSERT_EQ(use.count, 1);
	binary__put(x);
	binary_cache__free(cache);
	return ok;
}

/*
 * The kernel's return trampoline hijacks the return address while a call
 * runs: only for native functions that call nothing and leave by their own
 * RETs. Each refusal is the rule's: a caller, a jump out, Go.
 */
TEST(trampoline_only_where_nothing_unwinds)
{
	const char *c = test__fixture("c/nopie/cfix"), *go = test__fixture("go/native/demo");
	struct binary_match m = {};
	struct rw_error err = {};
	const struct func_info *f;
	struct binary *b, *g;
	bool ok;

	if (!c || !go)
		return true;
	b = binary__open(NULL, c, &err);
	g = binary__open(NULL, go, &err);
	if (!ASSERT_TRUE(b && g))
		return false;
	f = find1(b, "parse_int", &m); /* a leaf */
	ok = ASSERT_TRUE(f) && ASSERT_EQ(f->ncalls, 0) &&
	     ASSERT_TRUE(binary__trampoline_refusal(b, f) == NULL);
	binary_match__clear(&m);
	f = find1(b, "main", &m);
	ok = ok && ASSERT_TRUE(f) && ASSERT_TRUE(f->ncalls > 0) &&
	     ASSERT_STRCONTAINS(binary__trampoline_refusal(b, f), "calls other code");
	binary_match__clear(&m);
	f = find1(b, "dispatch", &m); /* a tail call */
	ok = ok && ASSERT_TRUE(f) &&
	     ASSERT_STRCONTAINS(binary__trampoline_refusal(b, f), "jumps out of itself");
	binary_match__clear(&m);
	f = find1(g, "main.main", &m);
	ok = ok && ASSERT_TRUE(f) && ASSERT_STRCONTAINS(binary__trampoline_refusal(g, f), "Go");
	binary_match__clear(&m);
	binary__put(b);
	binary__put(g);
	return ok;
}

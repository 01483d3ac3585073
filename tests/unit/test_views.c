// SPDX-License-Identifier: MIT
/*
 * One file, two views (binary.h): a stripped executable hard-linked into two
 * directories, its debug file beside it in one of them only, as two
 * containers of one image layer, one with a debug file of its own. The
 * cache gives each the analysis of what it sees: the static functions are
 * named in the first and not in the second, whichever is opened first, and
 * the analyzer reads the second's view of its own after the first's.
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/analyzer.h"
#include "analysis/binary.h"
#include "test.h"

static bool copy_to(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	ssize_t n;
	bool ok = in >= 0 && out >= 0;

	while (ok && (n = read(in, buf, sizeof(buf))) > 0)
		ok = write(out, buf, (size_t)n) == n;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return ok;
}

/* dir/A/debugfix and dir/B/debugfix, one inode; dir/A/debugfix.debug. */
static bool two_roots(char *dir, char *a, char *b, size_t len)
{
	const char *exe = test__fixture("c/debug/debugfix");
	const char *dbg = test__fixture("c/debug/debugfix.debug");
	char p[PATH_MAX];

	if (!exe || !dbg || !mkdtemp(dir))
		return false;
	snprintf(a, len, "%s/A/debugfix", dir);
	snprintf(b, len, "%s/B/debugfix", dir);
	snprintf(p, sizeof(p), "%s/A", dir);
	if (mkdir(p, 0755))
		return false;
	snprintf(p, sizeof(p), "%s/B", dir);
	if (mkdir(p, 0755) || !copy_to(exe, a) || link(a, b))
		return false;
	snprintf(p, sizeof(p), "%s/A/debugfix.debug", dir);
	return copy_to(dbg, p);
}

static bool names(struct binary *b, const char *name)
{
	struct binary_match m = { 0 };
	bool found = !binary__match(b, &name, 1, 16, &m, NULL) && m.nfuncs == 1;

	binary_match__clear(&m);
	return found;
}

TEST(views_cache_each_its_own)
{
	char dir[] = "/tmp/rw-views-XXXXXX", a[PATH_MAX], b[PATH_MAX];
	struct binary_cache *c = binary_cache__new(8);
	struct binary *ba = NULL, *bb = NULL, *again = NULL;
	struct rw_error err = { "" };
	bool ok = ASSERT_TRUE(c);

	if (!test__fixture("c/debug/debugfix")) {
		binary_cache__free(c);
		return true;
	}
	ok = ok && ASSERT_TRUE(two_roots(dir, a, b, sizeof(a)));
	/* the one without first: the other's debug file is not found for it */
	ok = ok && ASSERT_TRUE((bb = binary__open(c, b, &err))) &&
	     ASSERT_FALSE(names(bb, "parse_record")) && ASSERT_EQ(binary__debug_file(bb), NULL);
	ok = ok && ASSERT_TRUE((ba = binary__open(c, a, &err))) && ASSERT_TRUE(ba != bb) &&
	     ASSERT_TRUE(names(ba, "parse_record")) && ASSERT_TRUE(binary__debug_file(ba));
	/* each again: the same analysis */
	ok = ok && ASSERT_TRUE((again = binary__open(c, b, &err))) && ASSERT_TRUE(again == bb);
	binary__put(again);
	binary__put(ba);
	binary__put(bb);
	binary_cache__free(c);
	test__rm_tree(dir);
	return ok;
}

/* Asks until the answer is not PENDING, waiting on the notification between. */
static enum analysis_state settle(struct analyzer *an, struct binary_cache *c, int efd,
				  const char *path, const char *pat)
{
	enum analysis_state s = ANALYSIS_PENDING;
	struct pollfd p = { .fd = efd, .events = POLLIN };
	struct rw_error err = { "" };
	uint64_t v;

	for (int i = 0; i < 200 && s == ANALYSIS_PENDING; i++) {
		s = analyzer__check(an, c, path, &pat, 1, &err);
		if (s == ANALYSIS_PENDING && poll(&p, 1, 50) > 0 && read(efd, &v, sizeof(v)) < 0)
			break;
	}
	return s;
}

static bool cache_has(struct binary_cache *c, const char *path)
{
	int fd = open(path, O_RDONLY);
	bool has = fd >= 0 && binary_cache__has(c, fd, path);

	if (fd >= 0)
		close(fd);
	return has;
}

TEST(views_analyzer_reads_each)
{
	char dir[] = "/tmp/rw-views-XXXXXX", a[PATH_MAX], b[PATH_MAX];
	struct binary_cache *c = binary_cache__new(8);
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct analyzer *an = analyzer__new(efd, 0);
	struct rw_error err = { "" };
	struct binary *bb = NULL;
	bool ok = ASSERT_TRUE(c && an && efd >= 0);

	if (!test__fixture("c/debug/debugfix"))
		goto cleanup;
	ok = ok && ASSERT_TRUE(two_roots(dir, a, b, sizeof(a))) &&
	     ASSERT_EQ(settle(an, c, efd, a, "parse_record"), ANALYSIS_READY) &&
	     ASSERT_TRUE(cache_has(c, a)) && ASSERT_FALSE(cache_has(c, b)) &&
	     ASSERT_EQ(settle(an, c, efd, b, "parse_record"), ANALYSIS_READY) &&
	     ASSERT_TRUE(cache_has(c, b));
	/* the tracer finds B's view read: nothing of A's names it */
	ok = ok && ASSERT_TRUE((bb = binary__open(c, b, &err))) &&
	     ASSERT_FALSE(names(bb, "parse_record"));
	binary__put(bb);
	test__rm_tree(dir);
cleanup:
	analyzer__free(an);
	binary_cache__free(c);
	if (efd >= 0)
		close(efd);
	return ok;
}

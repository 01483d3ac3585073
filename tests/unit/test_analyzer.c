// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/analyzer.h"
#include "analysis/binary.h"
#include "analysis/inlined.h"
#include "analysis/inlsites.h"
#include "test.h"

/* Asks until the answer is not PENDING, waiting on the notification between. */
static enum analysis_state settle(struct analyzer *a, struct binary_cache *c, int efd,
				  const char *path, const char *const *pats, size_t n,
				  struct rw_error *err)
{
	enum analysis_state s = ANALYSIS_PENDING;
	struct pollfd p = { .fd = efd, .events = POLLIN };
	uint64_t v;

	for (int i = 0; i < 200 && s == ANALYSIS_PENDING; i++) {
		s = analyzer__check(a, c, path, pats, n, err);
		if (s == ANALYSIS_PENDING && poll(&p, 1, 50) > 0 && read(efd, &v, sizeof(v)) < 0)
			break;
	}
	return s;
}

TEST(analyzer_reads_off_the_caller_and_fills_the_cache)
{
	const char *path = test__fixture("go/native/demo"), *pats[] = { "main.main" };
	struct binary_cache *c = binary_cache__new(4);
	struct rw_error err = { "" };
	struct analyzer *a = NULL;
	struct analyzer_counters n;
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	bool ok = false;

	if (!path)
		return true;
	a = analyzer__new(efd, 0);
	if (!ASSERT_TRUE(a && c && efd >= 0))
		goto cleanup;
	/* the first answer never waits for the reading */
	if (!ASSERT_EQ(analyzer__check(a, c, path, pats, 1, &err), ANALYSIS_PENDING))
		goto cleanup;
	if (!ASSERT_EQ(settle(a, c, efd, path, pats, 1, &err), ANALYSIS_READY))
		goto cleanup;
	/* the tracer's binary__open now finds it */
	int fd = open(path, O_RDONLY);
	bool has = binary_cache__has(c, fd, path);

	close(fd);
	if (!ASSERT_TRUE(has))
		goto cleanup;
	if (!ASSERT_EQ(analyzer__check(a, c, path, pats, 1, &err), ANALYSIS_READY))
		goto cleanup;
	analyzer__counters(a, &n);
	ok = ASSERT_EQ(n.analyses, 1) && ASSERT_EQ(n.timeouts, 0);
cleanup:
	analyzer__free(a);
	binary_cache__free(c);
	if (efd >= 0)
		close(efd);
	return ok;
}

/* Same answer, by function and suggestion (each binary's own strings). */
static bool same_match(const struct binary_match *x, const struct binary_match *y)
{
	bool ok = ASSERT_EQ(x->nfuncs, y->nfuncs) && ASSERT_EQ(x->nunmatched, y->nunmatched);

	for (size_t i = 0; ok && i < x->nfuncs; i++)
		ok = ASSERT_STREQ(x->funcs[i]->name, y->funcs[i]->name) &&
		     ASSERT_EQ(x->funcs[i]->address, y->funcs[i]->address) &&
		     ASSERT_EQ(x->funcs[i]->nreturns, y->funcs[i]->nreturns);
	for (size_t k = 0; ok && k < x->nunmatched; k++) {
		ok = ASSERT_STREQ(x->unmatched[k].pattern, y->unmatched[k].pattern) &&
		     ASSERT_EQ(x->unmatched[k].nsuggestions, y->unmatched[k].nsuggestions);
		for (size_t s = 0; ok && s < x->unmatched[k].nsuggestions; s++)
			ok = ASSERT_STREQ(x->unmatched[k].suggestions[s],
					  y->unmatched[k].suggestions[s]);
	}
	return ok;
}

/*
 * A file read already, asked with other patterns: matched on the worker
 * again (not on the caller's thread), and the cached binary then answers
 * them as a reading of its own would.
 */
TEST(analyzer_matches_new_patterns_of_a_cached_file)
{
	const char *path = test__fixture("go/native/demo"), *pats[] = { "main.main" };
	const char *other[] = { "main.*", "main.ProcessPaymnt" };
	struct binary_match mine = {}, fresh = {};
	struct binary_cache *c = binary_cache__new(4);
	struct binary *cached = NULL, *alone = NULL;
	struct rw_error err = { "" };
	struct analyzer *a = NULL;
	struct analyzer_counters n;
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), fd = -1;
	bool ok = false;

	if (!path)
		return true;
	a = analyzer__new(efd, 0);
	if (!ASSERT_TRUE(a && c && efd >= 0) ||
	    !ASSERT_EQ(settle(a, c, efd, path, pats, 1, &err), ANALYSIS_READY))
		goto cleanup;
	fd = open(path, O_RDONLY);
	if (!ASSERT_TRUE(binary_cache__answers(c, fd, path, pats, 1, BINARY_DEFAULT_LIMIT)) ||
	    !ASSERT_FALSE(binary_cache__answers(c, fd, path, other, 2, BINARY_DEFAULT_LIMIT)) ||
	    !ASSERT_EQ(analyzer__check(a, c, path, other, 2, &err), ANALYSIS_PENDING) ||
	    !ASSERT_EQ(settle(a, c, efd, path, other, 2, &err), ANALYSIS_READY) ||
	    !ASSERT_TRUE(binary_cache__answers(c, fd, path, other, 2, BINARY_DEFAULT_LIMIT)) ||
	    !ASSERT_TRUE(binary_cache__answers(c, fd, path, pats, 1, BINARY_DEFAULT_LIMIT)))
		goto cleanup;
	analyzer__counters(a, &n);
	if (!ASSERT_EQ(n.analyses, 2))
		goto cleanup;
	cached = binary__open(c, path, &err);
	alone = binary__open(NULL, path, &err);
	ok = ASSERT_TRUE(cached && alone) &&
	     ASSERT_OK(binary__match(cached, other, 2, BINARY_DEFAULT_LIMIT, &mine, &err)) &&
	     ASSERT_OK(binary__match(alone, other, 2, BINARY_DEFAULT_LIMIT, &fresh, &err)) &&
	     ASSERT_TRUE(mine.nfuncs > 1) && ASSERT_EQ(mine.nunmatched, 1) &&
	     ASSERT_TRUE(mine.unmatched[0].nsuggestions >= 1) && same_match(&mine, &fresh);
cleanup:
	binary_match__clear(&mine);
	binary_match__clear(&fresh);
	binary__put(cached);
	binary__put(alone);
	if (fd >= 0)
		close(fd);
	analyzer__free(a);
	binary_cache__free(c);
	if (efd >= 0)
		close(efd);
	return ok;
}

/* Copies of name in l, and how many of them are timed. */
static size_t copies_of(const struct inl_list *l, const char *name, size_t *ret_timed)
{
	size_t n = 0;

	*ret_timed = 0;
	for (size_t i = 0; l && i < l->ncopies; i++) {
		if (strcmp(l->copies[i].name, name))
			continue;
		n++;
		*ret_timed += l->copies[i].sites && l->copies[i].sites->mode == INLSITES_TIMED;
	}
	return n;
}

/*
 * The inlined copies of the patterns' functions are read on the worker too,
 * with their sites, and kept with the match: for the file's first reading
 * and for new patterns of a file the cache holds (taken into it), where the
 * attach on the main loop finds them without reading the tree.
 */
TEST(analyzer_keeps_the_inlined_copies_it_read)
{
	const char *path = test__fixture("inline/native/default/inlinefix");
	const char *first[] = { "main.main" }, *pats[] = { "main.validate", "main.total" };
	struct binary_cache *c = binary_cache__new(4);
	struct binary *cached = NULL;
	struct rw_error err = { "" };
	struct analyzer *a = NULL;
	size_t timed = 0;
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	bool ok = false;

	if (!path)
		return true;
	a = analyzer__new(efd, 0);
	if (!ASSERT_TRUE(a && c && efd >= 0) ||
	    !ASSERT_EQ(settle(a, c, efd, path, first, 1, &err), ANALYSIS_READY))
		goto cleanup;
	cached = binary__open(c, path, &err);
	/* main.main is inlined nowhere: read, none kept */
	if (!ASSERT_TRUE(cached) || !ASSERT_TRUE(!binary__inlined_kept(cached, first, 1)) ||
	    !ASSERT_TRUE(!binary__inlined_kept(cached, pats, 2)) ||
	    !ASSERT_EQ(settle(a, c, efd, path, pats, 2, &err), ANALYSIS_READY))
		goto cleanup;
	/* validate, inlined into total (twice) and check: every copy, timed */
	ok = ASSERT_EQ(copies_of(binary__inlined_kept(cached, pats, 2), "main.validate", &timed),
		       3) &&
	     ASSERT_EQ(timed, 3) && ASSERT_TRUE(!binary__inlined_kept(cached, pats, 1)) &&
	     /* kept once: asked again, nothing is read */
	     ASSERT_OK(binary__inlined_keep(cached, pats, 2)) &&
	     ASSERT_EQ(binary__inlined_keep(cached, (const char *[]){ "main.nope" }, 1), -ENOENT);
cleanup:
	binary__put(cached);
	analyzer__free(a);
	binary_cache__free(c);
	if (efd >= 0)
		close(efd);
	return ok;
}

TEST(analyzer_refuses_what_is_not_a_regular_file)
{
	char dir[] = "/tmp/rw-analyzer-XXXXXX", fifo[64];
	const char *pats[] = { "main" };
	struct binary_cache *c = binary_cache__new(4);
	struct analyzer *a = analyzer__new(-1, 0);
	struct rw_error err = { "" };
	bool ok = false;

	if (!ASSERT_TRUE(a && c && mkdtemp(dir)))
		goto cleanup;
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	if (!ASSERT_OK(mkfifo(fifo, 0600)))
		goto cleanup;
	/* a FIFO with no writer: an open that blocked would hang here */
	ok = ASSERT_EQ(analyzer__check(a, c, fifo, pats, 1, &err), ANALYSIS_FAILED) &&
	     CHECK(strstr(err.msg, "is not a regular file"), "%s", err.msg) &&
	     ASSERT_EQ(analyzer__check(a, c, dir, pats, 1, &err), ANALYSIS_FAILED);
cleanup:
	test__rm_tree(dir);
	analyzer__free(a);
	binary_cache__free(c);
	return ok;
}

TEST(analyzer_past_the_limit_is_an_error_remembered)
{
	const char *path = test__fixture("go/native/demo"), *pats[] = { "main.main" };
	struct binary_cache *c = binary_cache__new(4);
	struct rw_error err = { "" };
	struct analyzer *a = NULL;
	struct analyzer_counters n;
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	bool ok = false;

	if (!path)
		return true;
	a = analyzer__new(efd, 1); /* 1 ns: every reading takes longer */
	if (!ASSERT_TRUE(a && c && efd >= 0))
		goto cleanup;
	if (!ASSERT_EQ(settle(a, c, efd, path, pats, 1, &err), ANALYSIS_FAILED))
		goto cleanup;
	if (!CHECK(strstr(err.msg, "took more than 1e-09 s") &&
			   strstr(err.msg, "--analysis-timeout") && strstr(err.msg, path),
		   "%s", err.msg))
		goto cleanup;
	/* the answer stays, without another reading, and nothing joined the cache */
	memset(&err, 0, sizeof(err));
	if (!ASSERT_EQ(analyzer__check(a, c, path, pats, 1, &err), ANALYSIS_FAILED) ||
	    !CHECK(strstr(err.msg, "--analysis-timeout"), "%s", err.msg))
		goto cleanup;
	int fd = open(path, O_RDONLY);
	bool has = binary_cache__has(c, fd, path);

	close(fd);
	analyzer__counters(a, &n);
	ok = ASSERT_FALSE(has) && ASSERT_EQ(n.analyses, 1) && ASSERT_EQ(n.timeouts, 1);
cleanup:
	analyzer__free(a);
	binary_cache__free(c);
	if (efd >= 0)
		close(efd);
	return ok;
}

// SPDX-License-Identifier: MIT
/* The slowest calls kept (src/trace/slowest.c) against a list of every call. */
#include <stdlib.h>
#include <string.h>

#include "trace/slowest.h"
#include "test.h"

#define WINDOW 1000
#define CALLS 20000

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int by_duration_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* Calls end at increasing times; each read is the keep slowest of the
 * current window and the one before, as a sort of every call says. */
static bool check_against_every_call(size_t keep, uint64_t seed)
{
	static uint64_t dur[CALLS], at[CALLS], want[CALLS];
	struct slowest *s = slowest__new(keep, WINDOW, 0);
	const struct slow_call *got[SLOWEST_MAX_KEEP];
	uint64_t now = 0, begun = 0;
	bool ok = true;

	if (!ASSERT_TRUE(s))
		return false;
	for (size_t i = 0; i < CALLS && ok; i++) {
		struct slow_call c = { .pid = 1 };
		size_t nwant = 0, n;

		now += xorshift(&seed) % 40; /* some windows get no call */
		if (slowest__roll(s, now))
			begun = now - (now - begun) % WINDOW;
		dur[i] = 1 + xorshift(&seed) % 5000;
		at[i] = now;
		c.duration_ns = dur[i];
		c.stack[c.nstack++] = strdup("f+0x1 (/bin/x)");
		/* below the floor it may be dropped, never would it be read */
		if (dur[i] < slowest__floor(s))
			slow_call__clear(&c);
		else
			slowest__add(s, &c, 0);
		ok &= ASSERT_TRUE(c.nstack == 0);
		for (size_t k = i + 1;
		     k-- > 0 && at[k] >= begun - (begun >= WINDOW ? WINDOW : begun);)
			want[nwant++] = dur[k];
		qsort(want, nwant, sizeof(*want), by_duration_desc);
		n = slowest__read(s, got, SLOWEST_MAX_KEEP);
		ok &= ASSERT_EQ(n, nwant < keep ? nwant : keep);
		for (size_t k = 0; k < n && ok; k++)
			ok &= CHECK(got[k]->duration_ns == want[k],
				    "call %zu at %" PRIu64 ": read %zu is %" PRIu64
				    ", want %" PRIu64,
				    i, now, k, got[k]->duration_ns, want[k]);
	}
	slowest__free(s);
	return ok;
}

TEST(slowest_are_the_slowest_of_two_windows)
{
	return check_against_every_call(1, 7) && check_against_every_call(5, 11) &&
	       check_against_every_call(SLOWEST_MAX_KEEP, 13);
}

/* Idle windows change nothing; two windows with calls push a call out. */
TEST(slowest_stay_while_idle)
{
	struct slowest *s = slowest__new(3, 100, 0);
	const struct slow_call *got[3];
	struct slow_call c = { .duration_ns = 50 }, d = { .duration_ns = 7 };
	bool ok;

	if (!ASSERT_TRUE(s))
		return false;
	ok = ASSERT_TRUE(slowest__add(s, &c, 0));
	ok &= ASSERT_EQ(slowest__floor(s), 1);
	ok &= ASSERT_TRUE(slowest__roll(s, 150));
	ok &= ASSERT_EQ(slowest__read(s, got, 3), 1);
	/* windows without a call: it stays */
	ok &= ASSERT_TRUE(slowest__roll(s, 1099));
	ok &= ASSERT_EQ(slowest__read(s, got, 3), 1);
	ok &= ASSERT_FALSE(slowest__roll(s, 1099));
	/* a window with a call, then the next: the first call is gone */
	ok &= ASSERT_TRUE(slowest__add(s, &d, 0));
	ok &= ASSERT_TRUE(slowest__roll(s, 1150)) && ASSERT_EQ(slowest__read(s, got, 3), 1) &&
	      ASSERT_EQ(got[0]->duration_ns, 7);
	slowest__free(s);
	return ok;
}

TEST(slowest_window_zero_never_ends)
{
	struct slowest *s = slowest__new(2, 0, 0);
	const struct slow_call *got[2];
	bool ok = true;

	if (!ASSERT_TRUE(s))
		return false;
	for (uint64_t d = 1; d <= 10; d++) {
		struct slow_call c = { .duration_ns = d * 10 };

		slowest__add(s, &c, 0);
	}
	ok &= ASSERT_FALSE(slowest__roll(s, UINT64_MAX));
	ok &= ASSERT_EQ(slowest__read(s, got, 2), 2);
	ok &= ASSERT_EQ(got[0]->duration_ns, 100) && ASSERT_EQ(got[1]->duration_ns, 90);
	ok &= ASSERT_EQ(slowest__floor(s), 91);
	slowest__free(s);
	return ok;
}

TEST(slowest_refuses_a_keep_out_of_range)
{
	return ASSERT_TRUE(!slowest__new(0, 0, 0)) &&
	       ASSERT_TRUE(!slowest__new(SLOWEST_MAX_KEEP + 1, 0, 0));
}

/* A call of duration d with one frame of len bytes. */
static struct slow_call call_of(uint64_t d, size_t len)
{
	struct slow_call c = { .duration_ns = d, .pid = 1 };

	c.stack[0] = malloc(len + 1);
	if (c.stack[0]) {
		memset(c.stack[0], 'f', len);
		c.stack[0][len] = 0;
		c.nstack = 1;
	}
	return c;
}

TEST(slowest_budget_shared_and_bounded)
{
	/* a namespace's 3 KiB within a node's 4 KiB; each call ~1 KiB */
	struct slowest_budget *node = slowest_budget__new(4096, NULL);
	struct slowest_budget *ns = slowest_budget__new(3072, node);
	struct slowest *a = slowest__new(4, 0, 0), *b = slowest__new(4, 0, 0);
	struct slowest *other = slowest__new(4, 0, 0);
	struct slow_call c;
	size_t one;
	bool ok = ASSERT_TRUE(node && ns && a && b && other);

	if (!ok)
		goto cleanup;
	slowest__set_budget(a, ns);
	slowest__set_budget(b, ns);
	slowest__set_budget(other, node);
	c = call_of(10, 700);
	ok = ASSERT_TRUE(slowest__add(a, &c, 5)) && ASSERT_TRUE(ns->used > 700) &&
	     ASSERT_EQ(node->used, ns->used);
	one = ns->used;
	c = call_of(20, 700);
	ok = ok && ASSERT_TRUE(slowest__add(b, &c, 6)) && ASSERT_EQ(ns->used, 2 * one);
	/* the third passes the namespace's bound: refused, counted, nothing held */
	c = call_of(30, 1500);
	ok = ok && ASSERT_FALSE(slowest__add(a, &c, 7)) && ASSERT_EQ(c.nstack, 0) &&
	     ASSERT_EQ(ns->refused, 1) && ASSERT_EQ(ns->last_refused_ns, 7) &&
	     ASSERT_EQ(node->refused, 1) && ASSERT_EQ(ns->used, 2 * one);
	/* another namespace within the node's bound still keeps its own */
	c = call_of(40, 700);
	ok = ok && ASSERT_TRUE(slowest__add(other, &c, 8)) && ASSERT_EQ(node->used, 3 * one);
	/* the node's bound holds for it too */
	c = call_of(50, 1500);
	ok = ok && ASSERT_FALSE(slowest__add(other, &c, 9)) && ASSERT_EQ(node->refused, 2) &&
	     ASSERT_EQ(ns->refused, 1);
	/* a table freed gives its bytes back */
	slowest__free(b);
	b = NULL;
	ok = ok && ASSERT_EQ(ns->used, one) && ASSERT_EQ(node->used, 2 * one);
cleanup:
	slowest__free(a);
	slowest__free(b);
	slowest__free(other);
	ok = ok && ASSERT_EQ(node->used, 0) && ASSERT_EQ(ns->used, 0) && ASSERT_EQ(ns->refs, 1);
	slowest_budget__put(ns);
	slowest_budget__put(node);
	return ok;
}

TEST(slowest_budget_full_window_makes_room)
{
	/* keep 1: a slower call replaces the kept one, the bytes it frees counted first */
	struct slowest_budget *ns = slowest_budget__new(1200, NULL);
	struct slowest *s = slowest__new(1, 0, 0);
	struct slow_call c = call_of(10, 800);
	bool ok = ASSERT_TRUE(ns && s);

	if (ok) {
		slowest__set_budget(s, ns);
		ok = ASSERT_TRUE(slowest__add(s, &c, 1));
		c = call_of(20, 800);
		ok = ok && ASSERT_TRUE(slowest__add(s, &c, 2)) && ASSERT_EQ(ns->refused, 0);
		c = call_of(30, 2000);
		ok = ok && ASSERT_FALSE(slowest__add(s, &c, 3)) && ASSERT_EQ(ns->refused, 1);
	} else {
		slow_call__clear(&c);
	}
	slowest__free(s);
	ok = ok && ASSERT_EQ(ns->used, 0);
	slowest_budget__put(ns);
	return ok;
}

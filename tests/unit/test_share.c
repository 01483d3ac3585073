// SPDX-License-Identifier: MIT
/*
 * The node's probe slots (--max-probes) shared between namespaces
 * (fprobes__share): each namespace first its share, its oldest probes, the
 * rest to the oldest; one tenant's many old probes never keep another's new
 * one waiting.
 */
#include <stdlib.h>

#include "agent/fprobe.h"
#include "agent/keepshare.h"
#include "test.h"

static size_t count(const bool *v, size_t from, size_t to)
{
	size_t n = 0;

	for (size_t i = from; i < to; i++)
		n += v[i];
	return n;
}

TEST(share_greedy_namespace_leaves_room)
{
	/* 150 old probes of one namespace, then one new of another: 100 slots */
	const char *ns[151];
	bool limited[151];
	bool ok;

	for (size_t i = 0; i < 150; i++)
		ns[i] = "greedy";
	ns[150] = "other";
	ok = ASSERT_OK(fprobes__share(ns, 151, 100, limited)) && ASSERT_FALSE(limited[150]) &&
	     ASSERT_EQ(count(limited, 0, 150), 51);
	/* the greedy one keeps its oldest: its newest wait */
	ok = ok && ASSERT_EQ(count(limited, 0, 99), 0) && ASSERT_EQ(count(limited, 99, 150), 51);
	return ok;
}

TEST(share_rest_first_come)
{
	/* 3 namespaces, 9 slots: shares of 3 (b uses 2), the one left to the oldest waiting */
	const char *ns[] = { "a", "a", "a", "a", "a", "b", "b", "c", "c", "c", "c", "c" };
	bool limited[12];
	bool ok = ASSERT_OK(fprobes__share(ns, 12, 9, limited));

	/* a: 3 by share, its 4th (index 3) the oldest waiting: the last slot */
	ok = ok && ASSERT_EQ(count(limited, 0, 5), 1) && ASSERT_TRUE(limited[4]) &&
	     ASSERT_EQ(count(limited, 5, 7), 0) && ASSERT_EQ(count(limited, 7, 12), 2) &&
	     ASSERT_TRUE(limited[10] && limited[11]) && ASSERT_EQ(count(limited, 0, 12), 3);
	return ok;
}

TEST(share_no_limit_and_few_slots)
{
	const char *ns[] = { "a", "b", "c" };
	bool limited[3];

	return ASSERT_OK(fprobes__share(ns, 3, 0, limited)) && ASSERT_EQ(count(limited, 0, 3), 0) &&
	       /* fewer slots than namespaces: the oldest first */
	       ASSERT_OK(fprobes__share(ns, 3, 2, limited)) && ASSERT_FALSE(limited[0]) &&
	       ASSERT_FALSE(limited[1]) && ASSERT_TRUE(limited[2]) &&
	       ASSERT_OK(fprobes__share(ns, 0, 5, limited));
}

TEST(share_kept_calls_budgets)
{
	struct keepshare *k = keepshare__new(100, 150);
	struct slowest_budget *a, *b, *held;
	bool ok = ASSERT_TRUE(k);

	if (!ok)
		return false;
	a = keepshare__budget(k, "a");
	b = keepshare__budget(k, "b");
	ok = ASSERT_TRUE(a && b && a != b) && ASSERT_TRUE(keepshare__budget(k, "a") == a) &&
	     ASSERT_EQ(a->max, 100) && ASSERT_TRUE(a->parent == keepshare__node(k)) &&
	     ASSERT_EQ(keepshare__node(k)->max, 150);
	/* a held by a table stays; b, held by none, is forgotten */
	held = slowest_budget__get(a);
	keepshare__sweep(k);
	ok = ok && ASSERT_TRUE(keepshare__budget(k, "a") == held);
	slowest_budget__put(held);
	keepshare__sweep(k);
	keepshare__free(k);
	return ok;
}

TEST(share_reports_written_in_turns)
{
	/* greedy's 4 due reports and one each of a and z: a turn writes them
	 * one namespace at a time, from the one after the last turn's */
	const char *ns[] = { "greedy", "greedy", "z", "greedy", "a", "greedy" };
	const size_t first[] = { 4, 0, 2, 1, 3, 5 }, after_greedy[] = { 2, 4, 0, 1, 3, 5 };
	size_t order[6];
	bool ok = ASSERT_OK(fprobes__write_order(ns, 6, NULL, order));

	for (size_t i = 0; ok && i < 6; i++)
		ok = ASSERT_EQ(order[i], first[i]);
	ok = ok && ASSERT_OK(fprobes__write_order(ns, 6, "greedy", order));
	for (size_t i = 0; ok && i < 6; i++)
		ok = ASSERT_EQ(order[i], after_greedy[i]);
	/* past the last name: from the first again */
	ok = ok && ASSERT_OK(fprobes__write_order(ns, 6, "zz", order));
	for (size_t i = 0; ok && i < 6; i++)
		ok = ASSERT_EQ(order[i], first[i]);
	return ok && ASSERT_OK(fprobes__write_order(ns, 0, NULL, order));
}

// SPDX-License-Identifier: MIT
/* Latency over the last window (src/base/recent.c) against the calls themselves. */
#include <stdlib.h>
#include <string.h>

#include "base/recent.h"
#include "test.h"

#define S 1000000000ULL

/* Readings every 2 s of a function called once a second, each call i
 * taking i us: the recent one is exactly the calls since the newest
 * reading at least a window (5 s) old. */
TEST(recent_is_the_calls_since_a_window_ago)
{
	struct latency *cum = calloc(3, sizeof(*cum)), *got = cum + 1, *want = cum + 2;
	struct recent *r = recent__new(5 * S);
	uint64_t span;
	bool ok = ASSERT_TRUE(cum && r);

	for (uint64_t t = 1; ok && t <= 40; t++) {
		latency__record(cum, t * 1000);
		if (t % 2)
			continue;
		ok &= ASSERT_OK(recent__take(r, t * S, cum, got, &span));
		/* readings at t-2, t-4, t-6: the newest at least 5 s old is t-6 */
		memset(want, 0, sizeof(*want));
		for (uint64_t c = t > 6 ? t - 5 : (t >= 4 ? 3 : 1); c <= t; c++)
			latency__record(want, c * 1000);
		if (t == 2) {
			/* no reading before: since the start */
			ok &= ASSERT_EQ(span, 0) && ASSERT_EQ(got->calls, 2);
			continue;
		}
		ok &= ASSERT_EQ(span, t > 6 ? 6 * S : (t - 2) * S);
		ok &= ASSERT_EQ(got->calls, want->calls) && ASSERT_EQ(got->sum_ns, want->sum_ns) &&
		      ASSERT_TRUE(!memcmp(got->buckets, want->buckets, sizeof(got->buckets)));
		ok &= ASSERT_EQ(latency__percentile(got, 0.99), latency__percentile(want, 0.99));
		/* its bounds are its buckets', not the lifetime's */
		ok &= ASSERT_TRUE(got->min_ns > 1000 && got->max_ns >= want->max_ns);
	}
	recent__free(r);
	free(cum);
	return ok;
}

TEST(recent_refuses_a_zero_window)
{
	return ASSERT_TRUE(!recent__new(0));
}

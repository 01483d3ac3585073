// SPDX-License-Identifier: MIT
#include "kube/kube.h"
#include "test.h"

TEST(backoff_doubles_up_to_the_cap)
{
	return ASSERT_EQ(kube__backoff_next(0, 200, 5000), 200) &&
	       ASSERT_EQ(kube__backoff_next(200, 200, 5000), 400) &&
	       ASSERT_EQ(kube__backoff_next(3200, 200, 5000), 5000) &&
	       ASSERT_EQ(kube__backoff_next(5000, 200, 5000), 5000) &&
	       ASSERT_EQ(kube__backoff_next(2000000000, 200, 5000), 5000) &&
	       ASSERT_EQ(kube__backoff_next(50, 200, 5000), 200);
}

TEST(backoff_jitter_spreads_within_half_to_whole)
{
	unsigned int seed = 1;
	int lo = 1 << 30, hi = 0;

	for (int i = 0; i < 10000; i++) {
		int ms = kube__backoff_jitter(5000, &seed);

		if (!ASSERT_TRUE(ms >= 2500 && ms <= 5000))
			return false;
		lo = ms < lo ? ms : lo;
		hi = ms > hi ? ms : hi;
	}
	/* not one fixed pause: the waits cover most of the range */
	return ASSERT_TRUE(lo < 2600) && ASSERT_TRUE(hi > 4900) &&
	       ASSERT_EQ(kube__backoff_jitter(0, &seed), 0) &&
	       ASSERT_EQ(kube__backoff_jitter(-5, &seed), 0) &&
	       ASSERT_TRUE(kube__backoff_jitter(1, &seed) <= 1);
}

TEST(conflict_on_uid_is_told_from_a_resource_version_one)
{
	static const char uid[] =
		"{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Conflict\",\"code\":409,"
		"\"message\":\"Operation cannot be fulfilled on functionprobes.retwatch.io \\\"p\\\": "
		"Precondition failed: UID in precondition: 1, UID in object meta: 2\"}";
	static const char rv[] =
		"{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Conflict\",\"code\":409,"
		"\"message\":\"Operation cannot be fulfilled on functionprobes.retwatch.io \\\"p\\\": "
		"the object has been modified; please apply your changes to the latest version "
		"and try again\"}";

	return ASSERT_TRUE(kube__uid_conflict(uid)) && ASSERT_TRUE(!kube__uid_conflict(rv)) &&
	       ASSERT_TRUE(!kube__uid_conflict(NULL)) &&
	       ASSERT_TRUE(!kube__uid_conflict("<html>")) && ASSERT_EQ(kube__retry_after(), 0);
}

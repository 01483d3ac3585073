// SPDX-License-Identifier: MIT
/* Histogram bucketing (bpf/hist.h) and the latency math over it. */
#include <errno.h>
#include <stdlib.h>

#include "base/latency.h"
#include "test.h"

#define LAST (RW_HIST_BUCKETS - 1)

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* bucket_lo(bucket(v)) <= v < bucket_lo(bucket(v) + 1), the last bucket open-ended. */
static bool in_its_bucket(uint64_t v)
{
	unsigned int b = rw_hist_bucket(v);

	if (b > LAST || rw_hist_bucket_lo(b) > v)
		return CHECK(false, "%" PRIu64 " not above the start of bucket %u", v, b);
	if (b < LAST && v >= rw_hist_bucket_lo(b + 1))
		return CHECK(false, "%" PRIu64 " past the end of bucket %u", v, b);
	return true;
}

TEST(hist_bucket_boundaries)
{
	uint64_t seed = 0x9e3779b97f4a7c15ULL;

	for (unsigned int b = 0; b < LAST; b++) {
		uint64_t lo = rw_hist_bucket_lo(b), next = rw_hist_bucket_lo(b + 1);

		if (!ASSERT_TRUE(next > lo) || !ASSERT_EQ(rw_hist_bucket(lo), b) ||
		    !ASSERT_EQ(rw_hist_bucket(next - 1), b))
			return false;
		/* a bucket is at most 1/16 of its lower bound wide */
		if (lo >= RW_HIST_SUB && !ASSERT_TRUE((next - lo) * 16 <= lo))
			return false;
	}
	for (uint64_t v = 0; v < 100000; v++)
		if (!in_its_bucket(v) ||
		    (v && !ASSERT_TRUE(rw_hist_bucket(v) >= rw_hist_bucket(v - 1))))
			return false;
	for (unsigned int e = 0; e < 64; e++) {
		uint64_t p = 1ULL << e;

		if (!in_its_bucket(p) || !in_its_bucket(p - 1) || !in_its_bucket(p + 1))
			return false;
	}
	for (int i = 0; i < 200000; i++) {
		uint64_t v = xorshift(&seed) >> (xorshift(&seed) % 64), w = v + (v >> 3);

		if (!in_its_bucket(v) ||
		    (w > v && !ASSERT_TRUE(rw_hist_bucket(w) >= rw_hist_bucket(v))))
			return false;
	}
	return ASSERT_EQ(rw_hist_bucket(0), 0) && ASSERT_EQ(rw_hist_bucket(15), 15) &&
	       ASSERT_EQ(rw_hist_bucket(16), 16) &&
	       ASSERT_EQ(rw_hist_bucket((1ULL << 36) - 1), LAST) &&
	       ASSERT_EQ(rw_hist_bucket(1ULL << 36), LAST) &&
	       ASSERT_EQ(rw_hist_bucket(1ULL << 40), LAST) &&
	       ASSERT_EQ(rw_hist_bucket(UINT64_MAX), LAST) &&
	       ASSERT_EQ(rw_hist_bucket_lo(LAST), 31ULL << 31);
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The estimate of quantile q against the exact one of sorted values. */
static bool close_to_exact(const struct latency *l, const uint64_t *sorted, size_t n, double q)
{
	size_t rank = (size_t)(q * n);
	uint64_t exact, est = latency__percentile(l, q);

	if ((double)rank < q * n)
		rank++;
	exact = sorted[(rank ? rank : 1) - 1];
	return CHECK(est * 16 >= exact * 15 && est * 16 <= exact * 17,
		     "q %.2f of %zu values: %" PRIu64 " estimated, %" PRIu64 " exact", q, n, est,
		     exact);
}

TEST(latency_percentile_accuracy)
{
	static const double qs[] = { 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0 };
	uint64_t seed = 42, *v = calloc(50000, sizeof(*v));
	struct latency l = {};
	bool ok = ASSERT_TRUE(v);

	/* a long tail: 20 us to a few s, spread over many powers of two */
	for (size_t i = 0; ok && i < 50000; i++) {
		v[i] = 20000 + (xorshift(&seed) % 1000000) * (1ULL << (xorshift(&seed) % 12));
		latency__record(&l, v[i]);
	}
	if (ok)
		qsort(v, 50000, sizeof(*v), u64_cmp);
	for (size_t i = 0; ok && i < sizeof(qs) / sizeof(qs[0]); i++)
		ok = close_to_exact(&l, v, 50000, qs[i]);
	ok = ok && ASSERT_EQ(latency__percentile(&l, 0), v[0]) &&
	     ASSERT_TRUE(latency__percentile(&l, 1) <= v[49999]);
	/* 1..1000 us, evenly */
	memset(&l, 0, sizeof(l));
	for (size_t i = 0; ok && i < 1000; i++) {
		v[i] = (i + 1) * 1000;
		latency__record(&l, v[i]);
	}
	for (size_t i = 0; ok && i < sizeof(qs) / sizeof(qs[0]); i++)
		ok = close_to_exact(&l, v, 1000, qs[i]);
	free(v);
	return ok;
}

TEST(latency_percentile_exact_cases)
{
	struct latency l = {}, big = {};

	if (!ASSERT_EQ(latency__percentile(&l, 0.5), 0))
		return false;
	/* an entry-only function counts calls without durations */
	l.calls = 7;
	if (!ASSERT_EQ(latency__percentile(&l, 0.99), 0) || !ASSERT_EQ(latency__mean_ns(&l), 0))
		return false;
	memset(&l, 0, sizeof(l));
	for (int i = 0; i < 1000; i++)
		latency__record(&l, 123457);
	if (!ASSERT_EQ(latency__percentile(&l, 0.5), 123457) ||
	    !ASSERT_EQ(latency__percentile(&l, 0.99), 123457) ||
	    !ASSERT_EQ(latency__percentile(&l, 0), 123457) ||
	    !ASSERT_EQ(latency__percentile(&l, 1), 123457) ||
	    !ASSERT_EQ(latency__percentile(&l, 7.0), 123457) ||
	    !ASSERT_EQ(latency__percentile(&l, -1.0), 123457) ||
	    !ASSERT_EQ(latency__mean_ns(&l), 123457))
		return false;
	/* small values have a bucket each */
	memset(&l, 0, sizeof(l));
	for (uint64_t i = 1; i <= 10; i++)
		latency__record(&l, i);
	if (!ASSERT_EQ(latency__percentile(&l, 0.5), 5) ||
	    !ASSERT_EQ(latency__percentile(&l, 0.9), 9) ||
	    !ASSERT_EQ(latency__percentile(&l, 1), 10))
		return false;
	/* the open-ended last bucket ends at the slowest call */
	latency__record(&big, 100ULL * 1000000000);
	latency__record(&big, 200ULL * 1000000000);
	return ASSERT_EQ(latency__percentile(&big, 1), 200ULL * 1000000000) &&
	       ASSERT_TRUE(latency__percentile(&big, 0.5) >= 100ULL * 1000000000) &&
	       ASSERT_TRUE(latency__percentile(&big, 0.5) <= 200ULL * 1000000000);
}

TEST(latency_merge)
{
	struct latency a = {}, b = {}, all = {}, empty = {};
	uint64_t seed = 7;

	for (int i = 0; i < 3000; i++) {
		uint64_t v = xorshift(&seed) % 10000000;

		latency__record(i % 3 ? &a : &b, v);
		latency__record(&all, v);
	}
	a.orphans = 2;
	b.orphans = 3;
	a.lost = 4;
	b.lost = 6;
	latency__merge(&a, &b);
	latency__merge(&a, &empty); /* min 0 of an empty one means none */
	latency__merge(&empty, &a);
	return ASSERT_EQ(a.calls, 3000) && ASSERT_EQ(a.orphans, 5) && ASSERT_EQ(a.lost, 10) &&
	       ASSERT_EQ(a.sum_ns, all.sum_ns) && ASSERT_EQ(a.min_ns, all.min_ns) &&
	       ASSERT_EQ(a.max_ns, all.max_ns) &&
	       ASSERT_OK(memcmp(a.buckets, all.buckets, sizeof(a.buckets))) &&
	       ASSERT_EQ(latency__count(&a), 3000) && ASSERT_EQ(empty.min_ns, all.min_ns) &&
	       ASSERT_OK(memcmp(&empty, &a, sizeof(a)));
}

TEST(latency_subtract_takes_out_counts)
{
	struct latency l = { .calls = 10, .orphans = 3, .lost = 5, .sum_ns = 100 };
	struct latency base = { .calls = 4, .orphans = 5, .lost = 2, .sum_ns = 40 };

	latency__subtract(&l, &base);
	/* never below zero: a count the base had more of is taken out down to 0 */
	return ASSERT_EQ(l.calls, 6) && ASSERT_EQ(l.orphans, 0) && ASSERT_EQ(l.lost, 3) &&
	       ASSERT_EQ(l.sum_ns, 60);
}

TEST(latency_format_ns)
{
	static const struct {
		uint64_t ns;
		const char *text;
	} cases[] = {
		{ 0, "0ns" },
		{ 812, "812ns" },
		{ 999, "999ns" },
		{ 1000, "1.000us" },
		{ 1234, "1.234us" },
		{ 10200, "10.20us" },
		{ 123456, "123.5us" },
		{ 999499, "999.5us" },
		{ 999950, "1.000ms" },
		{ 1234000, "1.234ms" },
		{ 1234567, "1.235ms" },
		{ 99996000, "100.0ms" },
		{ 2500000000ULL, "2.500s" },
		{ 61000000000ULL, "61.00s" },
		{ 999960000000ULL, "1000s" },
		{ 3600000000000ULL, "3600s" },
		{ UINT64_MAX, "18446744074s" },
	};
	char buf[LATENCY_FMT_LEN], tiny[4];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!ASSERT_STREQ(latency__format_ns(cases[i].ns, buf, sizeof(buf)), cases[i].text))
			return false;
	return ASSERT_STREQ(latency__format_ns(1234000, tiny, sizeof(tiny)), "1.2");
}

TEST(latency_parse_duration)
{
	static const struct {
		const char *text;
		uint64_t ns;
	} good[] = {
		{ "0", 0 },
		{ "0s", 0 },
		{ "500ns", 500 },
		{ "250us", 250000 },
		{ "250\xc2\xb5s", 250000 },
		{ "100ms", 100000000 },
		{ "1.5ms", 1500000 },
		{ ".5ms", 500000 },
		{ "2s", 2000000000 },
		{ "0.000000001s", 1 },
		{ "1.9ns", 1 },
		{ "1m", 60000000000ULL },
		{ "1m30s", 90000000000ULL },
		{ "1h", 3600000000000ULL },
		{ "18446744073709551615ns", UINT64_MAX },
	};
	static const char *const bad[] = {
		"",
		"ms",
		"-1ms",
		"+1ms",
		"1",
		"10",
		"1.5",
		"abc",
		"1 ms",
		" 1ms",
		"1ms ",
		"1msx",
		"1.2.3ms",
		".",
		"1..2s",
		"0x10ms",
		"1e3ms",
		"5d",
		"1s-1ms",
		"00",
		"18446744073709551616ns",
		"99999999999999999999999ns",
		"18446744074s",
		"1000000000000000h",
	};
	uint64_t ns;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ns = 12345;
		if (!CHECK(!latency__parse_duration(good[i].text, &ns) && ns == good[i].ns,
			   "\"%s\": %" PRIu64 ", want %" PRIu64, good[i].text, ns, good[i].ns))
			return false;
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (!CHECK(latency__parse_duration(bad[i], &ns) == -EINVAL, "\"%s\" accepted",
			   bad[i]))
			return false;
	return ASSERT_EQ(latency__parse_duration(NULL, &ns), -EINVAL);
}

/* What latency__print_log2 prints for l. Caller frees. */
static char *print_log2(const struct latency *l)
{
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);

	if (!f)
		return NULL;
	latency__print_log2(f, l);
	fclose(f);
	return text;
}

TEST(latency_print_log2)
{
	struct latency l = {}, big = {};
	char *text, *text2 = NULL;
	bool ok;

	text = print_log2(&l);
	ok = ASSERT_STREQ(text, "");
	free(text);
	for (int i = 0; i < 3; i++)
		latency__record(&l, 1500); /* 1024 -> 2047 */
	latency__record(&l, 5000);	   /* 4096 -> 8191 */
	text = print_log2(&l);
	ok = ok &&
	     ASSERT_STREQ(
		     text,
		     "     nsecs               : count     distribution\n"
		     "      1024 -> 2047       : 3        |****************************************|\n"
		     "      2048 -> 4095       : 0        |                                        |\n"
		     "      4096 -> 8191       : 1        |*************                           |\n");
	/* small values; the bucket of 2^36 ns and up sits at max_ns's row */
	latency__record(&big, 1);
	latency__record(&big, 3);
	latency__record(&big, 100ULL * 1000000000);
	text2 = print_log2(&big);
	ok = ok &&
	     ASSERT_STRCONTAINS(text2, "      nsecs                  : count     distribution\n"
				       "           0 -> 1            : 1        |") &&
	     ASSERT_STRCONTAINS(text2, "\n           2 -> 3            : 1        |") &&
	     ASSERT_STRCONTAINS(text2, "\n 68719476736 -> 137438953471 : 1        |") &&
	     ASSERT_FALSE(strstr(text2, "137438953472"));
	free(text);
	free(text2);
	return ok;
}

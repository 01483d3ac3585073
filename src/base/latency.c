// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "base/latency.h"

#define LAST_BUCKET (RW_HIST_BUCKETS - 1)
#define LOG2_ROWS 64
#define STARS 40

void latency__record(struct latency *l, uint64_t ns)
{
	l->calls++;
	l->sum_ns += ns;
	if (!l->min_ns || ns < l->min_ns)
		l->min_ns = ns;
	if (ns > l->max_ns)
		l->max_ns = ns;
	l->buckets[rw_hist_bucket(ns)]++;
}

void latency__merge(struct latency *dst, const struct latency *src)
{
	dst->calls += src->calls;
	dst->orphans += src->orphans;
	dst->lost += src->lost;
	dst->slow_dropped += src->slow_dropped;
	dst->tail_closed += src->tail_closed;
	dst->tail_exits += src->tail_exits;
	dst->inlined += src->inlined;
	dst->inlined_untimed += src->inlined_untimed;
	dst->sum_ns += src->sum_ns;
	/* min_ns 0 means "none yet", as in the kernel's per-CPU histograms */
	if (src->min_ns && (!dst->min_ns || src->min_ns < dst->min_ns))
		dst->min_ns = src->min_ns;
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
	for (size_t i = 0; i < RW_HIST_BUCKETS; i++)
		dst->buckets[i] += src->buckets[i];
}

uint64_t latency__count(const struct latency *l)
{
	uint64_t n = 0;

	for (size_t i = 0; i < RW_HIST_BUCKETS; i++)
		n += l->buckets[i];
	return n;
}

uint64_t latency__mean_ns(const struct latency *l)
{
	uint64_t n = latency__count(l);

	return n ? l->sum_ns / n : 0;
}

/* [lo, hi) of bucket b; the last bucket ends after max_ns. */
static void bucket_bounds(const struct latency *l, unsigned int b, uint64_t *ret_lo,
			  uint64_t *ret_hi)
{
	uint64_t lo = rw_hist_bucket_lo(b), hi;

	if (b < LAST_BUCKET)
		hi = rw_hist_bucket_lo(b + 1);
	else if (l->max_ns >= lo && l->max_ns < UINT64_MAX)
		hi = l->max_ns + 1;
	else
		hi = l->max_ns == UINT64_MAX ? UINT64_MAX : lo + 1;
	*ret_lo = lo;
	*ret_hi = hi;
}

uint64_t latency__percentile(const struct latency *l, double q)
{
	/* rank among the bucketed calls, not l->calls: entry-only functions
	 * count calls without durations, and per-CPU copies of calls and
	 * buckets are not read atomically */
	uint64_t n = latency__count(l), rank, seen = 0, lo, hi, v;
	unsigned int b;

	if (!n)
		return 0;
	if (!(q > 0)) /* also NaN */
		q = 0;
	if (q > 1)
		q = 1;
	/* ceil(q * n) without libm */
	rank = (uint64_t)(q * (double)n);
	if ((double)rank < q * (double)n)
		rank++;
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	/* the extremes are known exactly */
	if (rank == n && l->max_ns)
		return l->max_ns;
	if (rank == 1 && l->min_ns)
		return l->min_ns;
	for (b = 0; b < LAST_BUCKET; b++) {
		if (seen + l->buckets[b] >= rank)
			break;
		seen += l->buckets[b];
	}
	bucket_bounds(l, b, &lo, &hi);
	/* the k-th of c calls in [lo, hi) sits at the middle of its share */
	v = lo +
	    (uint64_t)((double)(hi - lo) * ((double)(rank - seen) - 0.5) / (double)l->buckets[b]);
	if (v >= hi)
		v = hi - 1;
	if (v < l->min_ns)
		v = l->min_ns;
	if (l->max_ns && v > l->max_ns)
		v = l->max_ns;
	return v;
}

const char *latency__format_ns(uint64_t ns, char *buf, size_t len)
{
	static const struct {
		const char *name;
		uint64_t ns;
	} units[] = { { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 } };

	if (ns < 1000) {
		snprintf(buf, len, "%" PRIu64 "ns", ns);
		return buf;
	}
	for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
		uint64_t pow = 1000;

		/* 3 decimals below 10 units, 2 below 100, 1 below 1000, rounded;
		 * a value that rounds up to 1000 moves to the next unit */
		for (int d = 3; d >= 1; d--, pow /= 10) {
			uint64_t div = units[u].ns / pow;
			uint64_t r = ns / div + ((ns % div) * 2 >= div);

			if (r >= 10000)
				continue;
			snprintf(buf, len, "%" PRIu64 ".%0*" PRIu64 "%s", r / pow, d, r % pow,
				 units[u].name);
			return buf;
		}
	}
	snprintf(buf, len, "%" PRIu64 "s",
		 ns / 1000000000 + (ns % 1000000000 >= 500000000 ? 1 : 0));
	return buf;
}

/* Nanoseconds per unit at s (advanced past it), or 0. */
static uint64_t parse_unit(const char **s)
{
	static const struct {
		const char *name;
		uint64_t ns;
	} units[] = {
		/* longer names first: "ms" before "m" */
		{ "ns", 1 },
		{ "us", 1000ULL },
		{ "\xc2\xb5s", 1000ULL }, /* µs, U+00B5 */
		{ "\xce\xbcs", 1000ULL }, /* μs, U+03BC */
		{ "ms", 1000000ULL },
		{ "s", 1000000000ULL },
		{ "m", 60000000000ULL },
		{ "h", 3600000000000ULL },
	};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		size_t n = strlen(units[i].name);

		if (!strncmp(*s, units[i].name, n)) {
			*s += n;
			return units[i].ns;
		}
	}
	return 0;
}

/* One "<number><unit>" at *s, added to *total. 0 or -EINVAL. */
static int parse_component(const char **s, uint64_t *total)
{
	const char *p = *s;
	uint64_t whole = 0, frac = 0, scale = 1, unit;
	unsigned __int128 v;
	bool digits = false;

	for (; *p >= '0' && *p <= '9'; p++, digits = true) {
		if (whole > (UINT64_MAX - (*p - '0')) / 10)
			return -EINVAL;
		whole = whole * 10 + (*p - '0');
	}
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++, digits = true) {
			/* 18 digits are finer than 1 ns of an hour: ignore the rest */
			if (scale < 1000000000000000000ULL) {
				frac = frac * 10 + (*p - '0');
				scale *= 10;
			}
		}
	}
	if (!digits)
		return -EINVAL;
	unit = parse_unit(&p);
	if (!unit)
		return -EINVAL;
	v = (unsigned __int128)whole * unit + (unsigned __int128)frac * unit / scale;
	if (v > UINT64_MAX - *total)
		return -EINVAL;
	*total += (uint64_t)v;
	*s = p;
	return 0;
}

int latency__parse_duration(const char *s, uint64_t *ret_ns)
{
	uint64_t total = 0;
	int ret;

	if (!s || !*s)
		return -EINVAL;
	if (!strcmp(s, "0")) {
		*ret_ns = 0;
		return 0;
	}
	while (*s) {
		ret = parse_component(&s, &total);
		if (ret)
			return ret;
	}
	*ret_ns = total;
	return 0;
}

static uint64_t row_high(unsigned int row)
{
	return row >= 63 ? UINT64_MAX : (1ULL << (row + 1)) - 1;
}

static void print_stars(FILE *f, uint64_t val, uint64_t max)
{
	unsigned int n = max ? (unsigned int)((unsigned __int128)val * STARS / max) : 0;

	for (unsigned int i = 0; i < STARS; i++)
		fputc(i < n ? '*' : ' ', f);
}

void latency__print_log2(FILE *f, const struct latency *l)
{
	uint64_t rows[LOG2_ROWS] = { 0 }, max = 0;
	int first = -1, last = -1, width = 10;
	char num[24];

	for (unsigned int b = 0; b < RW_HIST_BUCKETS; b++) {
		uint64_t lo = rw_hist_bucket_lo(b);

		if (!l->buckets[b])
			continue;
		/* the open-ended last bucket: as far as the slowest call */
		if (b == LAST_BUCKET && l->max_ns > lo)
			lo = l->max_ns;
		/* every bucket lies inside one power of two */
		rows[lo ? rw_log2(lo) : 0] += l->buckets[b];
	}
	for (int i = 0; i < LOG2_ROWS; i++) {
		if (!rows[i])
			continue;
		if (first < 0)
			first = i;
		last = i;
		if (rows[i] > max)
			max = rows[i];
	}
	if (last < 0)
		return;
	snprintf(num, sizeof(num), "%" PRIu64, row_high(last));
	if ((int)strlen(num) > width)
		width = (int)strlen(num);
	fprintf(f, "%*s%-*s : count     distribution\n", width / 2, "",
		width + 4 + width - width / 2, "nsecs");
	for (int i = first; i <= last; i++) {
		uint64_t low = i ? 1ULL << i : 0;

		fprintf(f, "%*" PRIu64 " -> %-*" PRIu64 " : %-8" PRIu64 " |", width, low, width,
			row_high(i), rows[i]);
		print_stars(f, rows[i], max);
		fputs("|\n", f);
	}
}

void latency__subtract(struct latency *l, const struct latency *base)
{
	l->calls -= base->calls < l->calls ? base->calls : l->calls;
	l->orphans -= base->orphans < l->orphans ? base->orphans : l->orphans;
	l->lost -= base->lost < l->lost ? base->lost : l->lost;
	l->slow_dropped -= base->slow_dropped < l->slow_dropped ? base->slow_dropped
								: l->slow_dropped;
	l->tail_closed -= base->tail_closed < l->tail_closed ? base->tail_closed : l->tail_closed;
	l->tail_exits -= base->tail_exits < l->tail_exits ? base->tail_exits : l->tail_exits;
	l->inlined -= base->inlined < l->inlined ? base->inlined : l->inlined;
	l->inlined_untimed -= base->inlined_untimed < l->inlined_untimed ? base->inlined_untimed
									 : l->inlined_untimed;
	l->sum_ns -= base->sum_ns < l->sum_ns ? base->sum_ns : l->sum_ns;
	for (size_t i = 0; i < RW_HIST_BUCKETS; i++)
		l->buckets[i] -= base->buckets[i] < l->buckets[i] ? base->buckets[i]
								  : l->buckets[i];
}

void latency__bound_to_buckets(struct latency *l)
{
	size_t lo = RW_HIST_BUCKETS, hi = 0;
	uint64_t min, max;

	for (size_t b = 0; b < RW_HIST_BUCKETS; b++) {
		if (!l->buckets[b])
			continue;
		lo = lo < b ? lo : b;
		hi = b;
	}
	if (lo == RW_HIST_BUCKETS) {
		l->min_ns = l->max_ns = 0;
		return;
	}
	min = rw_hist_bucket_lo((unsigned int)lo);
	max = hi + 1 < RW_HIST_BUCKETS ? rw_hist_bucket_lo((unsigned int)hi + 1) - 1 : l->max_ns;
	/* within what the kernel saw over all time */
	l->min_ns = l->min_ns > min ? l->min_ns : min;
	l->max_ns = l->max_ns && l->max_ns < max ? l->max_ns : max;
}

// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "calibrate.h"
#include "clock.h"
#include "latency.h"

#define ROUNDS 24
#define ROUND_CALLS 400
/* Rounds are spread out in time, so that a burst of load on the machine
 * (another process, an interrupt storm) slows a few of them, not all. */
#define ROUND_GAP_NS (20 * 1000 * 1000)

/* What is probed: kept out of line and alive by `used`. */
__attribute__((noinline, used)) int retwatch_calibrate_target(int x)
{
	/* the compiler may not fold the calls away */
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The median of the lower half: load only ever makes a round slower, so the
 * rounds a burst slowed are left out, while the statistic stays a middle
 * one of the calm rounds rather than their luckiest.
 */
static uint64_t lower_median(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[n / 4];
}

static void gap(void)
{
	struct timespec ts = { 0, ROUND_GAP_NS };

	nanosleep(&ts, NULL);
}

/* ns per call of a round of calls. */
static uint64_t time_round(int *sum)
{
	uint64_t t0 = clock__mono_ns();

	for (int i = 0; i < ROUND_CALLS; i++)
		*sum += retwatch_calibrate_target(i);
	return (clock__mono_ns() - t0) / ROUND_CALLS;
}

int calibrate__run(struct tracer *t, struct calibration *ret, struct rw_error *err)
{
	static const char *const patterns[] = { "retwatch_calibrate_target" };
	uint64_t untraced[ROUNDS], traced[ROUNDS], p50[ROUNDS];
	struct latency prev = { 0 }, now;
	struct tracer_target *tt;
	char exe[64];
	int sum = 0, e = 0;

	memset(ret, 0, sizeof(*ret));
	for (int r = 0; r < ROUNDS; r++)
		untraced[r] = time_round(&sum);
	snprintf(exe, sizeof(exe), "/proc/%d/exe", getpid());
	tt = tracer__add(t, getpid(), exe, patterns, 1, 0, err);
	if (!tt)
		return -errno;
	for (int r = 0; r < ROUNDS; r++) {
		if (r)
			gap();
		traced[r] = time_round(&sum);
		e = tracer_target__read(t, tt, 0, &now);
		if (e) {
			rw_error_set(err, -e, "failed to read the calibration histogram: %s",
				     strerror(-e));
			goto out;
		}
		ret->calls += latency__count(&now) - latency__count(&prev);
		/* this round's calls alone */
		{
			struct latency round = now;

			latency__subtract(&round, &prev);
			round.min_ns = round.max_ns = 0; /* the cumulative ones would clamp */
			p50[r] = latency__percentile(&round, 0.5);
		}
		prev = now;
	}
	if (ret->calls < ROUNDS * ROUND_CALLS / 2) {
		/* the kernel knows processes by their pid in the host's namespace */
		e = rw_error_set(err, ENODATA,
				 "%ju of %d calls measured (in a PID namespace of its own, "
				 "the probes cannot see this process)",
				 (uintmax_t)ret->calls, ROUNDS * ROUND_CALLS);
		goto out;
	}
	ret->bias_ns = lower_median(p50, ROUNDS);
	ret->bias_lo_ns = p50[0];
	ret->bias_hi_ns = p50[ROUNDS - 1];
	ret->call_cost_ns = calibrate__less(lower_median(traced, ROUNDS),
					    lower_median(untraced, ROUNDS));
out:
	tracer__remove(t, tt);
	if (e || !sum) {
		memset(ret, 0, sizeof(*ret));
		return e ? e : -EINVAL;
	}
	return 0;
}

int calibrate__parse_overhead(const char *s, double *ret)
{
	char *end;
	double v;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !(v >= 0))
		return -EINVAL;
	if (*end == '%') {
		v /= 100;
		end++;
	}
	if (*end || v > 1)
		return -EINVAL;
	*ret = v;
	return 0;
}

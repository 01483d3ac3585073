/* SPDX-License-Identifier: MIT */
/*
 * Latency statistics over the log-linear buckets of bpf/hist.h: merging,
 * percentiles, printing, and the duration syntax users type. The fields
 * mirror struct rw_hist (bpf/retwatch.h), so a
 * histogram read from the kernel copies over field by field.
 */
#ifndef RETWATCH_LATENCY_H
#define RETWATCH_LATENCY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <linux/types.h>

#include "../bpf/hist.h"

struct latency {
	/* with a duration, entries of an entry-only function, and tail exits */
	uint64_t calls;
	uint64_t orphans; /* calls that never returned */
	uint64_t sum_ns;
	uint64_t min_ns; /* 0: none, as in the kernel's struct rw_hist */
	uint64_t max_ns;
	/* calls not measured: entered deeper than the tracer's bound on nested
	 * traced calls (RW_MAX_DEPTH), as in the kernel's struct rw_hist */
	uint64_t lost;
	/* slow calls not sent to the ring buffer: over the function's rate
	 * limit, or the buffer was full (rw_hist.slow_dropped) */
	uint64_t slow_dropped;
	/* calls (in calls too) whose duration ended at a RET of a function they
	 * tail-called (rw_hist.tail_closed) */
	uint64_t tail_closed;
	/* calls (in calls too, not in orphans) left by a tail call that cannot
	 * be timed: no duration (rw_hist.tail_exits) */
	uint64_t tail_exits;
	/* calls (in calls too) of the function's inlined copies (rw_hist.inlined) */
	uint64_t inlined;
	/* of them, counted at a copy's entry, without a duration: its exits are
	 * not known (rw_hist.inlined_untimed) */
	uint64_t inlined_untimed;
	uint64_t buckets[RW_HIST_BUCKETS]; /* rw_hist_bucket() of each duration */
};

/* Counts one call of ns nanoseconds, as the BPF programs do. */
void latency__record(struct latency *l, uint64_t ns);
/* Adds src into dst: counts add up, min and max combine (exact). */
void latency__merge(struct latency *dst, const struct latency *src);
/* Takes the counts of an earlier reading base out of l (min and max stay). */
void latency__subtract(struct latency *l, const struct latency *base);
/* l's min_ns and max_ns narrowed to the bounds of its non-empty buckets
 * (after latency__subtract, whose min and max are the earlier reading's). */
void latency__bound_to_buckets(struct latency *l);
/* Calls that have a duration (the sum of the buckets). */
uint64_t latency__count(const struct latency *l);
/* Mean duration of the calls that have one; 0 when none. */
uint64_t latency__mean_ns(const struct latency *l);

/*
 * The q-quantile (0 <= q <= 1) in ns: the bucket holding rank ceil(q * n)
 * of the n calls with a duration, linearly interpolated inside the bucket by
 * rank, then clamped to [min_ns, max_ns] (so identical calls give their exact
 * duration; the first and last ranks are min_ns and max_ns). Within 1/16
 * (6.25%) of the true value below 2^36 ns. 0 when no call has a duration.
 * The last bucket has no upper bound: max_ns is taken as its top.
 */
uint64_t latency__percentile(const struct latency *l, double q);

/* ns less a bias (the probes' own time), never below zero. */
static inline uint64_t latency__less(uint64_t ns, uint64_t bias_ns)
{
	return ns > bias_ns ? ns - bias_ns : 0;
}

/*
 * ns as "812ns", "10.20us", "1.234ms", "2.500s": the largest of the units
 * ns, us, ms, s that keeps the value at least 1, with 4 significant digits
 * (durations of 1000 s and more print as whole seconds). Returns buf;
 * truncated to len like snprintf.
 */
const char *latency__format_ns(uint64_t ns, char *buf, size_t len);
#define LATENCY_FMT_LEN 32

/*
 * Parses a duration: a decimal number (with an optional fraction) and a
 * unit of ns, us (or µs), ms, s, m or h; several may follow each other as
 * in "1m30s". "0" needs no unit. Fractions below 1 ns are truncated.
 * 0, or -EINVAL for anything else (no unit, a sign, overflow of 2^64 ns).
 */
int latency__parse_duration(const char *s, uint64_t *ret_ns);

/*
 * Prints the distribution like bcc's funclatency: one row per power of two
 * of nanoseconds (always ns: the buckets' edges are exact there, not in
 * microseconds) from the first non-empty row to the last, with a bar of up
 * to 40 stars. Calls from the last bucket (66.6 s and up) are shown in the
 * row of max_ns. Prints nothing when no call has a duration.
 */
void latency__print_log2(FILE *f, const struct latency *l);

#endif

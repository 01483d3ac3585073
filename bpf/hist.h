/* SPDX-License-Identifier: MIT */
/*
 * Log-linear latency buckets, shared by the BPF programs and userspace (and
 * unit-tested there). Values below 16 ns have a bucket each; above, every
 * power of two [2^e, 2^(e+1)) is split into 16 equal buckets, so a bucket is
 * at most 1/16 (6.25%) of its lower bound wide. Durations from 2^36 ns
 * (about 69 s) up share the last bucket.
 */
#ifndef RETWATCH_BPF_HIST_H
#define RETWATCH_BPF_HIST_H

#define RW_HIST_SUB_BITS 4
#define RW_HIST_SUB (1U << RW_HIST_SUB_BITS)
#define RW_HIST_MAX_EXP 36
#define RW_HIST_BUCKETS (RW_HIST_SUB + (RW_HIST_MAX_EXP - RW_HIST_SUB_BITS) * RW_HIST_SUB)

/* floor(log2(v)) for v > 0, branch-free so the verifier sees no loop. */
static inline __attribute__((always_inline)) unsigned int rw_log2(__u64 v)
{
	unsigned int r, shift;

	r = (v > 0xffffffffULL) << 5;
	v >>= r;
	shift = (v > 0xffff) << 4;
	v >>= shift;
	r |= shift;
	shift = (v > 0xff) << 3;
	v >>= shift;
	r |= shift;
	shift = (v > 0xf) << 2;
	v >>= shift;
	r |= shift;
	shift = (v > 0x3) << 1;
	v >>= shift;
	r |= shift;
	r |= (v >> 1);
	return r;
}

static inline __attribute__((always_inline)) unsigned int rw_hist_bucket(__u64 ns)
{
	unsigned int e;

	if (ns < RW_HIST_SUB)
		return (unsigned int)ns;
	e = rw_log2(ns);
	if (e >= RW_HIST_MAX_EXP)
		return RW_HIST_BUCKETS - 1;
	return RW_HIST_SUB + (e - RW_HIST_SUB_BITS) * RW_HIST_SUB +
	       (unsigned int)((ns >> (e - RW_HIST_SUB_BITS)) & (RW_HIST_SUB - 1));
}

/* Smallest value of bucket b; the bucket ends where b + 1 begins. */
static inline __u64 rw_hist_bucket_lo(unsigned int b)
{
	unsigned int e, sub;

	if (b < RW_HIST_SUB)
		return b;
	e = (b - RW_HIST_SUB) / RW_HIST_SUB + RW_HIST_SUB_BITS;
	sub = (b - RW_HIST_SUB) % RW_HIST_SUB;
	return (__u64)(RW_HIST_SUB + sub) << (e - RW_HIST_SUB_BITS);
}

#endif

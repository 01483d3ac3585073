/* SPDX-License-Identifier: MIT */
/*
 * How much of the probes' own cost a measured duration holds, and what one
 * traced call costs its thread, measured on this machine at start: the
 * tracer probes an empty function of our own binary at its entry and RET,
 * which is called many times in rounds. A measured duration starts inside
 * the entry trap (after the BPF program read the clock) and ends inside the
 * RET trap, so it holds the return to user space from the first trap and
 * the entry into the kernel of the second: the empty function's measured
 * duration is that bias, nearly alone.
 */
#ifndef RETWATCH_CALIBRATE_H
#define RETWATCH_CALIBRATE_H

#include <stdint.h>

#include "rwerr.h"
#include "tracer.h"

struct calibration {
	/* over the rounds (spread over half a second), the median of the lower
	 * half of each round's median measured duration of the empty function:
	 * what reported durations have taken out */
	uint64_t bias_ns;
	uint64_t bias_lo_ns, bias_hi_ns; /* the lowest and highest round's median */
	/* what one traced call adds to its thread's time (both traps and the
	 * BPF programs): the traced rounds' time per call less the untraced
	 * rounds' (each the median of the lower half); the overhead guard's
	 * unit of cost */
	uint64_t call_cost_ns;
	uint64_t calls; /* traced calls measured */
};

/*
 * Calibrates with tracer t (probes attached for the run, removed after).
 * 0, or -errno with a message (then ret is all zeros: nothing is taken out).
 */
int calibrate__run(struct tracer *t, struct calibration *ret, struct rw_error *err);

/*
 * Reads an overhead budget: a percentage of one CPU ("2%", "0.5%") or a
 * fraction of one ("0.02"); "0" disables. 0, or -EINVAL (negative, over
 * 100%, not a number).
 */
int calibrate__parse_overhead(const char *s, double *ret);
#define CALIBRATE_DEFAULT_MAX_OVERHEAD 0.02

/* ns less the bias, never below zero. */
static inline uint64_t calibrate__less(uint64_t ns, uint64_t bias_ns)
{
	return ns > bias_ns ? ns - bias_ns : 0;
}

#endif

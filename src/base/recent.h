/* SPDX-License-Identifier: MIT */
/*
 * A function's latency over the last window, exact from the kernel's
 * buckets: the difference between its counts now and a reading taken a
 * window ago. Readings are kept (their non-empty buckets only) while one
 * may still be a window's start: with a reading each report interval, at
 * most window / interval + 1 of them.
 */
#ifndef RETWATCH_RECENT_H
#define RETWATCH_RECENT_H

#include <stdint.h>

#include "base/latency.h"

struct recent;

/* Windows of window_ns (> 0). NULL on ENOMEM. */
struct recent *recent__new(uint64_t window_ns);
void recent__free(struct recent *r);

/*
 * Takes the reading cur (cumulative counts, never decreasing) at now_ns, and
 * returns in ret what was counted since the newest reading at least a
 * window old (7/8 of one: readings come at jittered intervals) (else since the oldest kept; with none, all of cur), and how
 * long that is in *ret_span_ns (0: since the start). ret's min_ns and max_ns
 * are its buckets' bounds, within cur's. -ENOMEM: ret is right, but the
 * reading is not kept.
 */
int recent__take(struct recent *r, uint64_t now_ns, const struct latency *cur, struct latency *ret,
		 uint64_t *ret_span_ns);

#endif

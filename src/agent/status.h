/* SPDX-License-Identifier: MIT */
/*
 * A node's report built from the tracer's results: each node's results in
 * a FunctionProbeReport of its own (one per probe and node), with the
 * probes' calibrated bias and the overhead guard's view added, and a
 * restarted agent's results seeded from what it wrote. The keys, names,
 * latency and apply bodies of what agents write are statuswire.h's; the
 * summary and conditions the Lease holder merges from the reports are
 * summary.h's.
 */
#ifndef RETWATCH_STATUS_H
#define RETWATCH_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "trace/calibrate.h"
#include "base/errlist.h"
#include "kube/kobj.h"
#include "trace/results.h"
#include "report/reportfit.h"
#include "report/statuswire.h"
#include "agent/traceset.h"

/*
 * This node's entry, without lastUpdate: the processes traced (with their
 * pods' revisions, looked up in pods), the errors (sorted), each function's
 * mode and latency, its latency in each pod's container, its "recent"
 * latency over the last window_ns (0: none; each entry made takes a
 * reading, results__recent) and its slowest calls: the same number for
 * every function, as many as take about calls_bytes (0: every one), *ret_cut
 * (NULL: not asked) saying what that left out. NULL when the node has
 * nothing to say (nothing traced, no error, no results) and never wrote.
 */
cJSON *status__node_entry(const char *node, int64_t generation, const struct traceset *ts,
			  struct errlist *errs, struct results *r, const struct pod *pods,
			  size_t npods, bool wrote, uint64_t window_ns, size_t calls_bytes,
			  struct reportfit_cut *ret_cut);
/*
 * Takes the probes' calibrated bias out of the p50, p95, p99 and max of
 * each function of entry and of each of its pods (never below zero), the
 * measured ones kept under "raw"; adds probeBias, probeBiasNs and
 * callCostNs to entry. minNs, maxNs, sumNs and buckets stay as the kernel
 * counted them: the summary merges those.
 */
void status__add_bias(cJSON *entry, const struct calibration *cal);
/*
 * Adds the overhead guard's view of r to entry's functions (made by
 * status__node_entry, in r's row order): overhead (a share of one CPU) and
 * callsPerSecond of the costliest process, and when the guard detached the
 * function from a process, "detached": what it saw and what to change.
 * The entry's "detached" lists those messages (for the Attached condition).
 */
void status__add_overhead(cJSON *entry, struct results *r);

/* Seeds r with what a report holds for generation (a restarted agent
 * carries on from it). Whether it held any. */
bool status__seed_report(const cJSON *report, int64_t generation, struct results *r);
/* Seeds r from node's entry of generation in a probe's status (as above). */
bool status__seed(const cJSON *status, const char *node, int64_t generation, struct results *r);

#endif

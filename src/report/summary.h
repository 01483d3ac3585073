/* SPDX-License-Identifier: MIT */
/*
 * A FunctionProbe's summary and conditions, written by the holder of the
 * Lease: every node's report merged exactly from its buckets, per function
 * the slowest pods by p99 (with their node) and a row per revision of the
 * pods (so that a rollout's regression shows beside the revision before
 * it), and the interval nodes write at, stretched so that a probe's reports
 * stay within a cluster-wide write rate. Its size does not grow with the
 * number of nodes or pods.
 */
#ifndef RETWATCH_SUMMARY_H
#define RETWATCH_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "report/statuswire.h"

/* Per function: the slowest pods listed, and revision rows (the rest: "other"). */
#define SUMMARY_SLOWEST 3
#define SUMMARY_REVISIONS 6
#define SUMMARY_OTHER "other"
/* Per function: the slowest calls merged, of which spec.slowCalls.keep are written */
#define SUMMARY_MAX_CALLS 20

/* What the conditions say of the probe. */
struct status_state {
	bool valid, expired;
	const char *spec_err; /* why not valid */
	time_t expires;	      /* creation + spec.lifetime */
	unsigned int keep;    /* spec.slowCalls.keep */
	bool args_asked;      /* spec.captureArguments */
	bool args_denied;     /* the agents' --argument-capture deny */
	bool list;	      /* spec.mode List: nothing is attached */
};

struct summary;

/* A summary of the reports of generation. NULL on ENOMEM. */
struct summary *summary__new(int64_t generation);
void summary__free(struct summary *s);
/* Merges a FunctionProbeReport (another agent wrote it: what is out of range
 * is left out). A node merged before is not merged again. -ENOMEM. */
int summary__add_report(struct summary *s, const cJSON *report);
/* The same, merged once per key rather than per node: a ClusterFunctionProbe's
 * node writes one report per namespace. -ENOMEM. */
int summary__add_report_as(struct summary *s, const cJSON *report, const char *key);
/* Namespace ns's row of a ClusterFunctionProbe's status, of s: its counts
 * and per function the latency a table shows (no pods, revisions or calls). */
cJSON *summary__row(struct summary *s, const char *ns);
/* Merges the entries of a probe's status.nodes[] (agents before reports) of
 * nodes no report came from. -ENOMEM. */
int summary__add_legacy(struct summary *s, const cJSON *status);
/* The nodes merged, of any generation: those writing reports. */
size_t summary__writers(const struct summary *s);
/* The interval nodes write at: the spec's, or longer (whole seconds) so that
 * writers reports take at most writes_per_s writes a second (0: no limit). */
uint64_t summary__interval(size_t writers, uint64_t spec_ns, double writes_per_s);

/*
 * The summary writer's status from the probe object's current one (old):
 * observedGeneration, conditions Ready, Attached and Expired (keeping each
 * one's lastTransitionTime while its status holds) and, for a valid spec,
 * reportInterval and the summary of s (NULL: no report yet), without
 * lastUpdate.
 */
cJSON *summary__doc(const struct status_probe *p, const struct status_state *st, const cJSON *old,
		    struct summary *s, uint64_t interval_ns);
/* Stamps the summary of a document summary__doc made with lastUpdate now. */
void summary__stamp(cJSON *status);

#endif

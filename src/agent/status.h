/* SPDX-License-Identifier: MIT */
/*
 * What agents write, built in one place: each node's results in a
 * FunctionProbeReport of its own (one per probe and node), the latency of a
 * function as reports and the summary hold it, the server-side apply
 * bodies, and the names the writes go under. The summary and conditions
 * that the Lease holder merges from the reports are summary.h's.
 */
#ifndef RETWATCH_STATUS_H
#define RETWATCH_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "trace/calibrate.h"
#include "base/errlist.h"
#include "agent/kobj.h"
#include "base/latency.h"
#include "trace/results.h"
#include "agent/traceset.h"

/* The Lease whose holder writes every probe's summary, and its field manager. */
#define STATUS_LEASE_NAME "retwatch-summary"
#define STATUS_SUMMARY_MANAGER "retwatch-summary"
#define STATUS_KEY_LEN 128
/* A report's name fits in this (with its NUL). */
#define STATUS_NAME_LEN 254
/* The label that names a report's probe by uid (the summary writer lists by it). */
#define STATUS_LABEL_PROBE_UID "retwatch.io/probe-uid"
/* and the node (when its name fits in a label value, as most do) */
#define STATUS_LABEL_NODE "retwatch.io/node"
#define STATUS_LABEL_VALUE_MAX 63
#define STATUS_REPORTS_ALL "/apis/retwatch.io/v1alpha1/functionprobereports"

/* The probe a document is about. */
struct status_probe {
	const char *uid, *ns, *name;
	int64_t generation;
};

/* Publisher keys of this node's report, of this node's entry in a probe's
 * status as agents before reports wrote it, and of the summary of probe uid. */
void status__report_key(const char *uid, char *buf, size_t len);
void status__legacy_key(const char *uid, char *buf, size_t len);
void status__summary_key(const char *uid, char *buf, size_t len);
/* The probe's status subresource; malloc'd. */
char *status__path(const char *ns, const char *name);
/* This node's field manager ("retwatch-agent-<node>"); malloc'd. */
char *status__node_manager(const char *node);

/*
 * The FunctionProbeReport of probe p's results on node: one object per
 * probe and node, in the probe's namespace, named "<probe>.<node>.<hash>"
 * (parts cut to fit), labelled with the probe's uid and owned by the probe.
 */
void status__report_name(const struct status_probe *p, const char *node, char *buf, size_t len);
/* The path of report in namespace ns, or of the collection when report is NULL; malloc'd. */
char *status__report_path(const char *ns, const char *report);
/* The label selector of every report of probe uid. */
void status__reports_selector(const char *uid, char *buf, size_t len);

/*
 * Latency in a status: calls, orphans, p50/p95/p99/max as durations,
 * minNs/maxNs/sumNs exact, and "bucketCounts": the non-empty buckets of
 * bpf/hist.h as "index:count" pairs, one space apart, in ascending index
 * order ("96:5 97:12 113:1").
 */
int status_latency__to_json(const struct latency *l, cJSON *obj);
/* The longest bucketCounts, with its NUL: each bucket's "index:count " at most. */
#define STATUS_BUCKETS_TEXT_LEN (RW_HIST_BUCKETS * (3 + 1 + 20 + 1) + 1)
/*
 * Reads what status_latency__to_json wrote, or the "buckets" of [index,
 * count] pairs agents wrote before; -EINVAL on anything out of range.
 */
int status_latency__from_json(const cJSON *obj, struct latency *ret);

/* A function's name, mode, reason, returnSites and latency, as a report and
 * the summary hold them (mode and reason may be NULL). */
cJSON *status__function(const char *name, const char *mode, const char *reason, double returns,
			const struct latency *l);

/*
 * This node's entry, without lastUpdate: the processes traced (with their
 * pods' revisions, looked up in pods), the errors (sorted), each function's
 * mode and latency, and its latency in each pod's container. NULL when the
 * node has nothing to say (nothing traced, no error, no results) and never
 * wrote.
 */
cJSON *status__node_entry(const char *node, int64_t generation, const struct traceset *ts,
			  struct errlist *errs, struct results *r, const struct pod *pods,
			  size_t npods, bool wrote);
/*
 * Takes the probes' calibrated bias out of the p50, p95, p99 and max of
 * each function of entry and of each of its pods (never below zero), the
 * measured ones kept under "raw"; adds probeBias, probeBiasNs and
 * callCostNs to entry. minNs, maxNs, sumNs and buckets stay as the kernel
 * counted them: the summary merges those.
 */
void status__add_bias(cJSON *entry, const struct calibration *cal);
/* obj's p50, p95, p99 and max (of its buckets, minNs and maxNs) less bias;
 * the measured ones under "raw". */
void status__take_bias(cJSON *obj, uint64_t bias);
/*
 * Adds the overhead guard's view of r to entry's functions (made by
 * status__node_entry, in r's row order): overhead (a share of one CPU) and
 * callsPerSecond of the costliest process, and when the guard detached the
 * function from a process, "detached": what it saw and what to change.
 * The entry's "detached" lists those messages (for the Attached condition).
 */
void status__add_overhead(cJSON *entry, struct results *r);

/* The apply body of node's report of probe p holding entry (taken), stamped
 * with lastUpdate now and the interval the node writes at; malloc'd. */
char *status__report_body(const struct status_probe *p, const char *node, cJSON *entry,
			  uint64_t interval_ns);
/* Seeds r with what a report holds for generation (a restarted agent
 * carries on from it). Whether it held any. */
bool status__seed_report(const cJSON *report, int64_t generation, struct results *r);
/* The entry of node in a probe's status, as agents before reports wrote it, or NULL. */
const cJSON *status__legacy_entry(const cJSON *status, const char *node);
/* Seeds r from node's entry of generation in a probe's status (as above). */
bool status__seed(const cJSON *status, const char *node, int64_t generation, struct results *r);

/* The server-side apply body of status for probe p (takes status); malloc'd. */
char *status__apply_body(const struct status_probe *p, cJSON *status);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The wire format of what agents write, with no part of the tracer: the
 * publisher keys and the names and paths the writes go under, the latency
 * of a function as reports and the summary hold it (written and read
 * back), the probes' bias taken out of it, and the server-side apply
 * bodies of a node's report and of a probe's status. Building a node's
 * entry from the tracer's results is status.h's; the summary the Lease
 * holder merges from the reports is summary.h's.
 */
#ifndef RETWATCH_STATUSWIRE_H
#define RETWATCH_STATUSWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/latency.h"

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
/* A ClusterFunctionProbe's reports carry this label too (value "true"). */
#define STATUS_LABEL_CLUSTER "retwatch.io/cluster-probe"

/* The probe a document is about. A ClusterFunctionProbe's reports are in
 * each namespace it covers (ns); its own status has no namespace. */
struct status_probe {
	const char *uid, *ns, *name;
	int64_t generation;
	bool cluster; /* a ClusterFunctionProbe */
};

/* Publisher keys of this node's report, of this node's entry in a probe's
 * status as agents before reports wrote it, and of the summary of probe uid. */
void status__report_key(const char *uid, char *buf, size_t len);
void status__legacy_key(const char *uid, char *buf, size_t len);
void status__summary_key(const char *uid, char *buf, size_t len);
/* The probe's status subresource; malloc'd. */
char *status__path(const char *ns, const char *name);
/* A ClusterFunctionProbe's status subresource; malloc'd. */
char *status__cluster_path(const char *name);
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
/* The most sites a function's inlined copies are probed at (tracer_inline.c's cap). */
#define STATUS_MAX_INLINED_SITES 1024
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

/* A slowest call's duration and durationNs, as ns. */
void status__set_call_duration(cJSON *call, uint64_t ns);
/* Adds ns to obj as a duration ("1.5ms"). -ENOMEM. */
int status__add_duration(cJSON *obj, const char *name, uint64_t ns);
/* Adds the time now to obj, RFC 3339 with digits of a second. */
void status__add_now(cJSON *obj, const char *name, unsigned int digits);
/* obj's p50, p95, p99 and max (of its buckets, minNs and maxNs) less bias;
 * the measured ones under "raw". */
void status__take_bias(cJSON *obj, uint64_t bias);

/* The apply body of node's report of probe p holding entry (taken), stamped
 * with lastUpdate now and the interval the node writes at; malloc'd. */
char *status__report_body(const struct status_probe *p, const char *node, cJSON *entry,
			  uint64_t interval_ns);
/* The entry of node in a probe's status, as agents before reports wrote it, or NULL. */
const cJSON *status__legacy_entry(const cJSON *status, const char *node);
/* The server-side apply body of status for probe p (takes status); malloc'd. */
char *status__apply_body(const struct status_probe *p, cJSON *status);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * A FunctionProbe's status document, built in one place: this node's entry
 * (status.nodes[], written by each node's agent as its own field manager),
 * the summary and conditions (written by the holder of the Lease, merged
 * exactly from every node's buckets), the latency of a function as both
 * hold it, the server-side apply body, and the names the writes go under.
 */
#ifndef RETWATCH_STATUS_H
#define RETWATCH_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "errlist.h"
#include "latency.h"
#include "results.h"
#include "traceset.h"

/* The Lease whose holder writes every probe's summary, and its field manager. */
#define STATUS_LEASE_NAME "retwatch-summary"
#define STATUS_SUMMARY_MANAGER "retwatch-summary"
#define STATUS_KEY_LEN 128

/* The probe a document is about. */
struct status_probe {
	const char *uid, *ns, *name;
	int64_t generation;
};

/* What the conditions say of the probe. */
struct status_state {
	bool valid, expired;
	const char *spec_err; /* why not valid */
	time_t expires;	      /* creation + spec.lifetime */
};

/* Publisher keys of this node's entry and of the summary of probe uid. */
void status__node_key(const char *uid, char *buf, size_t len);
void status__summary_key(const char *uid, char *buf, size_t len);
/* The probe's status subresource; malloc'd. */
char *status__path(const char *ns, const char *name);
/* This node's field manager ("retwatch-agent-<node>"); malloc'd. */
char *status__node_manager(const char *node);

/*
 * Latency in a status: calls, orphans, p50/p95/p99/max as durations,
 * minNs/maxNs/sumNs exact, and "buckets": the non-empty buckets of bpf/hist.h
 * as [index, count] pairs in ascending index order.
 */
int status_latency__to_json(const struct latency *l, cJSON *obj);
/* Reads what status_latency__to_json wrote; -EINVAL on anything out of range. */
int status_latency__from_json(const cJSON *obj, struct latency *ret);

/*
 * This node's entry, without lastUpdate: the processes traced, the errors
 * (sorted), each function's mode and latency. NULL when the node has
 * nothing to say (nothing traced, no error, no results) and never wrote.
 */
cJSON *status__node_entry(const char *node, int64_t generation, const struct traceset *ts,
			  struct errlist *errs, struct results *r, bool wrote);
/* The status holding only entry, stamped with lastUpdate now (takes entry). */
cJSON *status__node_doc(cJSON *entry);
/* Seeds r with the results node wrote at generation into status (a restarted
 * agent carries on from them). Whether there were any. */
bool status__seed(const cJSON *status, const char *node, int64_t generation, struct results *r);

/*
 * The summary writer's status from the probe object's current one (old):
 * observedGeneration, conditions Ready, Attached and Expired (keeping each
 * one's lastTransitionTime while its status holds) and, for a valid spec,
 * the summary of every node's entry of this generation, without lastUpdate.
 */
cJSON *status__summary_doc(const struct status_probe *p, const struct status_state *st,
			   const cJSON *old);
/* Stamps the summary of a document status__summary_doc made with lastUpdate now. */
void status__stamp_summary(cJSON *status);

/* The server-side apply body of status for probe p (takes status); malloc'd. */
char *status__apply_body(const struct status_probe *p, cJSON *status);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The agent's /metrics page in the Prometheus text format: each probe's
 * per-pod, per-container, per-function families from its results table,
 * and the agent's own counters.
 */
#ifndef RETWATCH_METRICSPAGE_H
#define RETWATCH_METRICSPAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/analyzer.h"
#include "analysis/binary.h"
#include "trace/calibrate.h"
#include "agent/fprobe.h"
#include "kube/informer.h"
#include "base/openfiles.h"
#include "agent/publisher.h"
#include "agent/summarizer.h"
#include "trace/tracer.h"

/* What both the stats log line and /metrics report. */
struct agent_counters {
	struct informer_counters probes, pods;
	struct publisher_counters pub;
	struct summarizer_counters sum;
	struct tracer_counters tracer;
	int64_t inflight;
	uint64_t api_requests, attach_failures;
	size_t nprobes, nlimited, ntraces;
	/* processes found, not attached yet; not wanted, not detached yet (traceset_env) */
	size_t attach_pending, detach_pending;
	size_t ns_refused; /* processes over their namespace's --max-functions-per-namespace */
	struct analyzer_counters analyzer;
	struct binary_cache_use analyses; /* the analysis cache (--analysis-cache-bytes) */
	bool leader;
	size_t bpf_links; /* uprobe link and perf-event descriptors open */
	struct open_files files;
};

struct metrics_page {
	const char *version, *attach_mode;
	size_t max_series;	       /* per-function series; 0: no limit */
	size_t nseries, dropped;       /* of the last rendering */
	const struct calibration *cal; /* the probes' bias and cost; may be NULL */
	uint64_t calibrations;	       /* completed, the one at start included */
};

/* Renders the page (malloc'd, *ret_len bytes), or NULL. */
char *metrics_page__render(struct metrics_page *mp, const struct fprobe *probes,
			   const struct agent_counters *c, size_t *ret_len);

#endif

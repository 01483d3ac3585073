/* SPDX-License-Identifier: MIT */
/*
 * The node agent: reconciles the FunctionProbes of the cluster against the
 * pods of this node and what the tracer has attached, and writes each
 * probe's results for this node (and, holding the Lease, every probe's
 * summary) into the probe's status.
 */
#ifndef RETWATCH_AGENT_H
#define RETWATCH_AGENT_H

#include <signal.h>

#include "kube/kube.h"
#include "base/rwerr.h"
#include "trace/tracer.h"

struct agent_opts {
	const char *node;     /* this node's name */
	const char *lease_ns; /* namespace of the summary writer's Lease */
	int lease_s;	      /* its duration */
	enum tracer_attach_mode attach_mode;
	/* --returns trampoline: calls of functions that may end at the kernel's
	 * return trampoline (tracer_opts.trampoline) do */
	bool trampoline;
	const char *version;		/* for retwatch_build_info */
	struct metrics_server *metrics; /* NULL: none */
	size_t max_probes;		/* probes traced at once; 0: no limit */
	size_t max_series;		/* per-function metrics series; 0: no limit */
	double report_writes;		/* a probe's report writes a second; 0: no limit */
	size_t report_budget;		/* bytes of a report, of a summary (reportfit.h) */
	size_t list_page;		/* objects per list request */
	/* slow calls the kernel sends a second per function, process and CPU,
	 * and the agent logs a second per probe; 0: no limit */
	uint32_t slow_calls_per_sec;
	/* (process, function) pairs a namespace's probes trace at once; 0: no limit */
	size_t max_ns_funcs;
	/* bytes the slowest calls kept may hold, a namespace's and every
	 * namespace's together (keepshare.h); 0: no limit */
	size_t max_ns_kept, max_kept;
	/* a namespace's share of the node's in-flight map (goroutines and
	 * threads with traced calls in flight) and of its slow-call events a
	 * second (tracer_opts); 0: no limit */
	uint32_t ns_inflight, ns_slow_calls_per_sec;
	/* the time limit of one binary's analysis (analyzer.h) */
	uint64_t analysis_timeout_ns;
	size_t analysis_cache_bytes; /* binary_cache__set_max_bytes; 0: by count alone */
	size_t analysis_max_bytes;   /* binary_cache__set_max_total; 0: none */
	/* the probes' bias and cost are calibrated at start and again this
	 * often (calibrate.h); 0: at start only */
	uint64_t calibrate_every_ns;
	/* --argument-capture deny: no probe's calls carry their arguments */
	bool deny_args;
};

struct agent;
struct metrics_server;

/* Loads the BPF programs and starts watching. NULL on error (err says why). */
struct agent *agent__new(struct kube *k, const struct agent_opts *opts, struct rw_error *err);
/* Runs until *exiting or *pause is set. 0, or -errno when it cannot go on. */
int agent__run(struct agent *a, const volatile sig_atomic_t *exiting,
	       const volatile sig_atomic_t *pause);
/* Logs the agent's counters (API requests, watch events, patches, probes). */
void agent__log_stats(struct agent *a);
/* Detaches every probe and stops; NULL is fine. */
void agent__free(struct agent *a);

#endif

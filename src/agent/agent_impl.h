/* SPDX-License-Identifier: MIT */
/*
 * The node agent's insides, shared by agent.c (lifecycle, main loop,
 * reconcile) and the pieces beside it: agent_seeds.c, agent_slow.c,
 * agent_health.c, agent_calib.c, agent_kernel.c. No other module includes it.
 */
#ifndef RETWATCH_AGENT_IMPL_H
#define RETWATCH_AGENT_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "agent/agent.h"
#include "agent/cfprobe.h"
#include "agent/fprobe.h"
#include "agent/http/metricspage.h"
#include "agent/traceset.h"

struct agent {
	struct agent_opts o;
	struct kube *k;
	struct tracer *tracer; /* NULL: the kernel lacks what it needs (no_tracer says) */
	char *no_tracer;
	struct binary_cache *cache;
	struct traceset_env env;
	struct informer *probes_inf, *pods_inf;
	/* ClusterFunctionProbes and the namespaces their selectors select by (agent_cluster.c) */
	struct informer *cprobes_inf, *ns_inf;
	struct informer_view cprobes_snap, ns_snap;
	struct cfprobe *cprobes;
	struct publisher *pub;
	struct summarizer *sum;
	struct metrics_page page;
	int notify_fd;
	char *manager;
	struct fprobe *probes;
	/* the namespace of the last report a turn wrote: the next turn begins after it */
	char last_write_ns[256];
	struct informer_view probes_snap, pods_snap; /* the informers' caches, copied */
	cJSON *seeds;	  /* this node's reports when the agent started, until probes take them */
	struct pod *pods; /* views of pods_snap */
	size_t npods, nlimited;
	uint64_t next_scan;
	size_t rotation; /* the probe placed first: another each turn, so each has its go */
	/* attaching over several turns: since when, the attaches made by then */
	uint64_t backlog_since_ns, backlog_tries;
	size_t backlog_turns;
	/* readiness: the first reconcile ran, and the attaches it found (waiting then)
	 * left to make */
	bool reconciled;
	size_t start_left;
	bool was_ready; /* readiness as last said in the log */
	bool series_warned;
	/* calibrating again: a round a turn of the loop (agent_calib__tick) */
	struct calibrator *calibrator;
	uint64_t next_calibration;
};

/*
 * agent_kernel.c: a->tracer made from topts; where the kernel lacks what
 * the programs need, none (a->no_tracer says why) and 0 all the same; -1
 * with err set when it cannot be made otherwise.
 */
int agent_kernel__tracer(struct agent *a, struct tracer_opts *topts, struct rw_error *err);

/* agent_cluster.c: ClusterFunctionProbes, each a probe per namespace it selects */
int agent_cluster__start(struct agent *a);
/* The FunctionProbe-shaped objects of the ClusterFunctionProbes (cfprobe.h), or
 * NULL while their lists are not in (the probes made of them stay as they are). */
cJSON *agent_cluster__probes(struct agent *a);
/* The summary writer's requests for their statuses. */
void agent_cluster__summaries(struct agent *a, uint64_t now);
void agent_cluster__stop(struct agent *a);

/* agent_seeds.c */
void agent_seeds__load(struct agent *a);
/* This node's report of probe p, as listed when the agent started. */
const cJSON *agent_seeds__for(struct agent *a, const struct fprobe *p);

/* agent_slow.c: the tracer's slow-call events (tracer__set_event_fn) */
void agent_slow__on_call(const struct tracer_event *ev, void *ctx);

/* agent_health.c */
void agent_health__counters(struct agent *a, struct agent_counters *ret);
/* Beats the health endpoint; renders /metrics when it is wanted. */
void agent_health__serve(struct agent *a);

/* agent_calib.c */
void agent_calib__run(struct agent *a);
void agent_calib__tick(struct agent *a, uint64_t now);

#endif

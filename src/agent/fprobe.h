/* SPDX-License-Identifier: MIT */
/*
 * A FunctionProbe as this node's agent tracks it: the spec of its current
 * generation, its lifetime, the processes it traces here and their results
 * table, this turn's errors, and when its status was last written.
 */
#ifndef RETWATCH_FPROBE_H
#define RETWATCH_FPROBE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "base/errlist.h"
#include "agent/funclist.h"
#include "kube/kobj.h"
#include "agent/nodeprocs.h"
#include "agent/probe.h"
#include "agent/publisher.h"
#include "trace/results.h"
#include "agent/summarizer.h"
#include "agent/traceset.h"

struct fprobe {
	char *uid, *ns, *name;
	/* a ClusterFunctionProbe's in namespace ns (cfprobe.h): its uid, which its
	 * reports name; NULL for a FunctionProbe */
	char *cluster_uid;
	int64_t generation; /* of the spec below */
	time_t created;
	struct probe_spec spec;
	bool valid;   /* the spec parsed; else spec_err says why */
	bool expired; /* its lifetime ended: detached, results kept */
	bool limited; /* over the node's --max-probes: not traced */
	bool seen;    /* in the API server's list this turn */
	char spec_err[512];
	struct traceset_env *env;
	struct results *results;
	struct traceset *traces;
	struct funclist *list; /* spec.mode List: the names, nothing traced */
	struct errlist errors;
	/* writes: this node's report, and the summary when this agent writes it */
	char *status_path, *report_path;
	uint64_t interval_ns; /* the spec's, or longer when the summary writer asks */
	uint64_t next_write, next_summary;
	bool write_attached; /* processes waited a turn to be attached: written once they all are */
	char *last_entry;    /* the report last sent, before stamping */
	/* the report's byte budget (reportfit.h): the agent's, cut when the
	 * server refused one as too large; the last report's size */
	size_t budget, last_bytes;
	size_t folded_kept; /* pods per function the last fit kept (SIZE_MAX: none folded) */
	bool wrote;
	bool legacy; /* its entry in the probe's status (agents before reports) is to go */
	/* slow calls logged in the window begun at slow_window_ns, and those
	 * not logged since the probe was seen (fprobe__may_log_slow_call) */
	uint64_t slow_window_ns, slow_logged, slow_unlogged;
	struct fprobe *next;
};

/* A probe first seen in obj (a FunctionProbe, or of the ClusterFunctionProbe
 * cluster_uid in obj's namespace) by node's agent. NULL on ENOMEM or without uid. */
struct fprobe *fprobe__new(const cJSON *obj, struct traceset_env *env, const char *node,
			   const char *cluster_uid);
/* Frees p; its processes are detached over the next turns (traceset__leave: why goes to the
 * log). NULL is fine. */
void fprobe__free(struct fprobe *p, const char *why);
/* Takes obj's spec when its generation changed, the interval the summary
 * writer asks for, and ends the lifetime. A fresh probe carries on from
 * node's results written before: report (this node's, or NULL), or node's
 * entry in obj's status (agents before reports). */
void fprobe__sync(struct fprobe *p, const cJSON *obj, const char *node, const cJSON *report,
		  bool fresh);
/* Whether p wants any of the pods (valid, not expired, selected). */
bool fprobe__selects_any(const struct fprobe *p, const struct pod *pods, size_t npods);
/* Places p on the pods it selects: attaches new processes, retires gone ones. */
void fprobe__place(struct fprobe *p, const struct pod *pods, size_t npods, struct nodeprocs *np,
		   size_t max_probes);
/*
 * Marks the probes over max (0: none) among those with pods here: each
 * namespace first its share (max divided by the namespaces with probes
 * here), its oldest probes; the slots left to the oldest of the rest. One
 * tenant with many probes cannot keep another's new probe waiting.
 * Returns how many are limited.
 */
size_t fprobes__limit(struct fprobe *list, const struct pod *pods, size_t npods, size_t max);
/*
 * fprobes__limit's choice over n probes, oldest first, of namespaces ns:
 * ret_limited[i] when probe i waits. 0 or -ENOMEM. Exposed for tests.
 */
int fprobes__share(const char *const *ns, size_t n, size_t max, bool *ret_limited);
/*
 * The order a turn writes n due reports in (ns: each one's namespace, in
 * the agent's order): one of each namespace in turn, the namespaces by
 * name from the first after `after` (the last one a turn wrote; NULL: the
 * first), then the next of each. A turn stops at its time budget: the
 * namespaces take turns, whatever their count of probes. Indexes into
 * ret_order (n of them). 0 or -ENOMEM. Exposed for tests.
 */
int fprobes__write_order(const char *const *ns, size_t n, const char *after, size_t *ret_order);
/* Whether p's report is due now (fprobe__write_report would write it). */
bool fprobe__report_due(const struct fprobe *p, uint64_t now);

/* Whether a slow call of p may be logged at now (clock__mono_ns()): at most
 * per_sec a second (0: no limit); the others are counted in slow_unlogged. */
bool fprobe__may_log_slow_call(struct fprobe *p, uint64_t now, uint32_t per_sec);
/* Whether the probe's calls carry their arguments: it asks, and the agent allows it. */
bool fprobe__captures(const struct fprobe *p);

/* Writes this node's report when its interval passed and it changed (now:
 * clock__mono_ns()); pods: this node's, for their revisions. */
void fprobe__write_report(struct fprobe *p, struct publisher *pub, const char *node,
			  const char *manager, const struct pod *pods, size_t npods, uint64_t now);
/* Asks sum for the summary and conditions when their interval passed (obj:
 * the probe as the server has it). */
void fprobe__request_summary(struct fprobe *p, struct summarizer *sum, const cJSON *obj,
			     uint64_t now);
/* A last report: detached, with every call counted until now. */
void fprobe__final_report(struct fprobe *p, struct publisher *pub, const char *node,
			  const char *manager);
/* The probe was deleted: deletes this node's report, forgets what the
 * publisher and sum (NULL is fine) keep for it. */
void fprobe__unpublish(struct fprobe *p, struct publisher *pub, struct summarizer *sum);

#endif

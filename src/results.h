/* SPDX-License-Identifier: MIT */
/*
 * The per-function results of a set of traced processes, used by the agent
 * (one table per FunctionProbe) and by `retwatch trace` alike: one row per
 * function name, merged over every process that has it. A process that
 * stops being traced leaves what it counted in its rows and in its group
 * (a pod's container, for the agent's metrics; the CLI has no groups).
 */
#ifndef RETWATCH_RESULTS_H
#define RETWATCH_RESULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "binary.h"
#include "latency.h"
#include "tracer.h"

struct results_row {
	char *name;
	enum func_mode mode; /* of the last process traced */
	char *reason;	     /* why entry-only, else NULL */
	size_t nreturns;     /* RET instructions probed */
	struct latency done; /* from processes no longer traced */
};

/* Whose call a slow-call event is. */
struct results_call {
	const char *function;
	const char *pod, *container; /* NULL without groups */
};

struct results;

struct results *results__new(struct tracer *t);
/* Stops tracing every process left (as results__retire, not exited); NULL is fine. */
void results__free(struct results *r);

/*
 * Takes target (added to r's tracer) over: its functions get rows by name.
 * pod and container name its group, or are NULL. -ENOMEM, and the target is
 * not taken.
 */
int results__add(struct results *r, struct tracer_target *target, const char *pod,
		 const char *container);
/* Stops tracing target, keeping what it counted. exited: its process is gone,
 * so its calls still in flight are orphans now. */
void results__retire(struct results *r, struct tracer_target *target, bool exited);
/* The row of fi's function (made when new), described as fi's binary has it:
 * mode, reason, return sites. SIZE_MAX on ENOMEM. */
size_t results__describe(struct results *r, const struct func_info *fi);
/* Carries on from counts written before (a restarted agent): row name's retired counts. */
int results__seed(struct results *r, const char *name, const struct latency *l);

size_t results__nrows(const struct results *r);
const struct results_row *results__row(const struct results *r, size_t i);
size_t results__ntargets(const struct results *r);
/* Row i now: what retired processes and the live ones counted, over every
 * group (pod NULL) or the group of pod's container. */
void results__read(struct results *r, size_t i, const char *pod, const char *container,
		   struct latency *ret);

/* The call of a slow-call event, when one of r's processes made it. */
bool results__find_call(const struct results *r, const struct tracer_event *ev,
			struct results_call *ret);

typedef void (*results_group_fn)(const char *pod, const char *container, void *ctx);
/* Each group with counts (retired or live), once. */
void results__foreach_group(const struct results *r, results_group_fn fn, void *ctx);
/* Forgets the retired counts of the groups of pods keep() refuses (the rows keep them). */
void results__prune_groups(struct results *r, bool (*keep)(const char *pod, void *ctx), void *ctx);

#endif

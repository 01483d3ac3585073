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
#include <sys/types.h>

#include "analysis/binary.h"
#include "trace/calibrate.h"
#include "base/latency.h"
#include "trace/slowest.h"
#include "trace/tracer.h"

struct results_row {
	char *name;
	enum func_mode mode; /* of the last process traced */
	char *reason;	     /* why entry-only, else NULL */
	size_t nreturns;     /* RET instructions probed */
	/* the kind of its first instruction: what part of the probes' cost
	 * falls inside its durations, and what a call costs (calibrate.h) */
	enum probe_entry entry;
	bool trampoline; /* its calls end at the kernel's return trampoline, not its RETs */
	const char *trampoline_why; /* else why not (static text), NULL: not asked */
	struct latency done;	    /* from processes no longer traced */
	/* processes no longer traced that the overhead guard had detached the
	 * function on; the first's pid and pod (NULL without groups), and rate
	 * and cost when detached: said until results__prune_groups drops the pod */
	size_t detached_retired;
	pid_t detached_pid;
	char *detached_pod;
	double detached_rate, detached_overhead, detached_max;
	struct slowest *slowest; /* its slowest calls kept; NULL: none */
	struct recent *recent;	 /* its readings for results__recent */
	bool seeded;		 /* done holds counts written before (results__seed) */
	char *args_error;	 /* why its arguments are not captured (results__capture_args) */
	/* its inlined copies traced with it (tracer_target__inlined), as the
	 * last process traced has them */
	struct tracer_inlined inlined;
	char *inlined_reason; /* why a copy is not timed, or NULL */
};

/* Whose call a slow-call event is. */
struct results_call {
	const char *function;
	const char *pod, *container; /* NULL without groups */
};

struct recent;
struct results;
struct symbolizer;

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

/*
 * Reads row i in every live process once: results__read and
 * results__read_process answer from that reading of the row until
 * results__release (or the next hold), so its total and its groups' add up
 * though the kernel counts on between reads. -ENOMEM, and nothing is held.
 */
int results__hold(struct results *r, size_t i);
void results__release(struct results *r);

/* The call of a slow-call event, when one of r's processes made it. */
bool results__find_call(const struct results *r, const struct tracer_event *ev,
			struct results_call *ret);

/*
 * Keeps each row's keep (at most SLOWEST_MAX_KEEP; 0: none, the default)
 * slowest calls of the current window of window_ns and the last one before
 * it that had calls
 * (0: one window, never ending), with their stacks through sym: the kernel
 * sends every traced process's calls that could be among them
 * (tracer_target__keep_slowest), and results__offer keeps them. Forgets
 * the calls kept before. -EINVAL, -ENOMEM.
 */
int results__keep_slowest(struct results *r, size_t keep, uint64_t window_ns,
			  struct symbolizer *sym);
/*
 * Counts the calls r keeps against b (slowest.h; NULL: no bound), which a
 * reference is taken of: a call over it is not kept, and b says so.
 */
void results__keep_budget(struct results *r, struct slowest_budget *b);
/*
 * An event (tracer__poll's) of one of r's processes: kept when it is among
 * its row's slowest now (now_ns: clock__mono_ns()). Whether it was.
 */
bool results__offer(struct results *r, const struct tracer_event *ev, uint64_t now_ns);
/*
 * Captures the arguments of every function of r's targets, now and as they
 * are added (tracer_target__capture_args): the slowest calls kept carry
 * them (struct slow_call.args); a row whose function cannot have them says
 * why (args_error). Only this r's own targets' calls carry them.
 */
void results__capture_args(struct results *r);
/* Begins the windows of slowest calls due by now_ns. Call it each interval. */
void results__tick(struct results *r, uint64_t now_ns);
/*
 * Row k over the last window_ns (recent.h): cur, row k as results__read
 * gave it now_ns, less the reading of it taken a window before; each call
 * takes a reading. -ENOMEM (ret still right).
 */
int results__recent(struct results *r, size_t k, uint64_t window_ns, uint64_t now_ns,
		    const struct latency *cur, struct latency *ret, uint64_t *ret_span_ns);
/* Row k's slowest calls kept, slowest first (slowest.h); how many. */
size_t results__slowest(const struct results *r, size_t k, const struct slow_call **ret,
			size_t max);

/*
 * The overhead guard. The cost probes put on a process: calls per second
 * times the calibrated cost of one traced call (both traps and the BPF
 * programs), as a fraction of one CPU, per function and process.
 */
struct results_guard {
	pid_t pid;
	const char *function;
	const char *pod, *container; /* NULL without groups */
	double rate;		     /* calls per second over the last interval */
	double overhead;	     /* rate x cost, in CPUs */
	double max;		     /* the budget it was held to (0: none) */
	bool detached;		     /* now detached (else attached again) */
	const char *error;	     /* set when detaching or attaching failed */
};

typedef void (*results_guard_fn)(const struct results_guard *g, void *ctx);

/*
 * One check, every report interval (now_ns: clock__mono_ns()): each live
 * process's functions' call rates since the last check times the
 * calibrated cost of a call of the function (by its entry's kind). A
 * function over max (a fraction of one CPU; 0: no guard) at two checks in a
 * row is detached on its process; a detached one whose cost when detached
 * is within max (raised since) is attached again. fn hears of each change.
 */
void results__guard(struct results *r, uint64_t now_ns, const struct calibration *cal, double max,
		    results_guard_fn fn, void *ctx);

/* Row i in the live process pid alone: what it counted, and whether the
 * guard detached the function there. -ENOENT when pid does not trace it. */
int results__read_process(struct results *r, size_t i, pid_t pid, struct latency *ret,
			  bool *ret_detached);

/* The guard's view of row i now, over its live processes. */
struct results_overhead {
	double overhead, rate; /* the costliest attached process's, last check */
	/* processes the function is detached on (or was, until retired) */
	size_t ndetached;
	/* the first of those: pid, and rate and cost when detached */
	pid_t detached_pid;
	const char *pod, *container;
	double detached_rate, detached_overhead, max;
};
void results__overhead(const struct results *r, size_t i, struct results_overhead *ret);

typedef void (*results_group_fn)(const char *pod, const char *container, void *ctx);
/* Each group with counts (retired or live), once. */
void results__foreach_group(const struct results *r, results_group_fn fn, void *ctx);
/* Forgets the retired counts of the groups of pods keep() refuses (the rows
 * keep them), and the overhead guard's detach of a process of such a pod. */
void results__prune_groups(struct results *r, bool (*keep)(const char *pod, void *ctx), void *ctx);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The processes one probe traces on this node: each process placement finds
 * is attached once (through its image layer's file when the container's
 * root is an overlay, so every container of the image shares the uprobes),
 * its functions go to the probe's results table, and it is retired when a
 * turn no longer finds it. A failed attach is reported as it stands and
 * tried again after a while.
 */
#ifndef RETWATCH_TRACESET_H
#define RETWATCH_TRACESET_H

#include <stdint.h>
#include <sys/types.h>

#include "analysis/analyzer.h"
#include "trace/calibrate.h"
#include "base/errlist.h"
#include "agent/nodeprocs.h"
#include "agent/placement.h"
#include "agent/probe.h"
#include "trace/results.h"
#include "trace/symbolize.h"
#include "trace/tracer.h"

struct traceset;

/*
 * The path to open pp's executable by into path: the image layer's file,
 * shared by every container of the image, when it is found (its descriptor
 * is returned, for the caller to close), else the container's path or
 * /proc/PID/exe (-1).
 */
int traceset__exe_path(const struct placement_proc *pp, char *path, size_t len);
/* "no function matches 'PATTERN' in FILE (did you mean: ...)" into buf. */
void traceset__no_match(const struct binary_unmatched *u, const char *file, char *buf, size_t len);

/* What every probe's set shares. */

struct keepshare;

struct traceset_env {
	/* NULL where the kernel lacks what the programs need (no_tracer says
	 * what): every attach fails with that, and the agent stays up to say it */
	struct tracer *tracer;
	const char *no_tracer;
	struct nodeprocs *procs;
	struct symbolizer *sym;
	/* reads executables off the main loop; NULL: the tracer reads them */
	struct analyzer *analyzer;
	uint64_t attach_failures; /* over every probe */
	/*
	 * The fair share of the node's BPF resources: the (process, function)
	 * pairs the probes of one namespace trace at once, each a histogram
	 * slot and at most a function slot; 0: no limit. A process whose
	 * functions would pass it is not traced, with an error.
	 */
	size_t max_ns_funcs;
	bool deny_args;	      /* --argument-capture deny */
	size_t ns_refused;    /* processes refused so, over every probe */
	struct traceset *all; /* every probe's set, for the namespaces' counts */
	/* the probes' bias and a traced call's cost, calibrated at start (all
	 * 0 when calibrating failed: nothing taken out, no overhead guard) */
	struct calibration cal;
	/* the bounds of what the probes' kept slowest calls hold (keepshare.h) */
	struct keepshare *keep;
	uint64_t trimmed_ns; /* when a report's writing last gave free pages back */
	/*
	 * This turn's attaching and detaching (traceset__turn): processes are
	 * attached and detached until spent_ns reaches budget_ns (0: no
	 * limit); the others wait for a later turn, neither an error nor
	 * forgotten.
	 */
	uint64_t budget_ns, spent_ns;
	size_t attach_waiting; /* processes left for a later turn to attach, this turn */
	size_t attach_reading; /* processes whose executable is being read, this turn */
	size_t detach_waiting; /* processes left attached for a later turn to detach, this turn */
	uint64_t attach_tries; /* attaches made or failed, since the start */
};

/* A traced process, as the status lists it. */
struct traced {
	const char *pod, *container, *cid, *exe;
	pid_t pid;
};

/* ns and name: the probe's, for the log. NULL on ENOMEM. */
struct traceset *traceset__new(struct traceset_env *env, struct results *r, const char *ns,
			       const char *name);
/* Retires every process now (why goes to the log); NULL is fine. */
void traceset__free(struct traceset *ts, const char *why);
/*
 * Hands ts and its results table over to its env: its processes are
 * retired over the next turns (why goes to the log), then both are freed.
 * NULL is fine.
 */
void traceset__leave(struct traceset *ts, const char *why);
/* Retires the processes of the sets left now, and frees them. */
void traceset__finish(struct traceset_env *env);

/* Starts a turn over env's sets: budget_ns for attaching and detaching (0: no limit), the
 * sets left first. */
void traceset__turn(struct traceset_env *env, uint64_t budget_ns);
/* A turn: begin, want each process placement finds, end retires the rest (as the turn's time
 * allows: a later turn the others). */
void traceset__begin(struct traceset *ts);
void traceset__want(struct traceset *ts, const struct placement_proc *pp,
		    const struct probe_spec *spec, struct errlist *errs);
void traceset__end(struct traceset *ts, const char *why);
/* Retires every process now, and forgets failed attaches. */
void traceset__retire_all(struct traceset *ts, const char *why);

size_t traceset__count(const struct traceset *ts);
/* The processes of this turn left for a later turn's time to attach. */
size_t traceset__waiting(const struct traceset *ts);
/* The (process, function) pairs the sets of namespace ns trace now. */
size_t traceset__ns_funcs(const struct traceset_env *env, const char *ns);
/* Says in errs when the namespace's share of the in-flight map or of slow-call events ran out. */
void traceset__share_errors(const struct traceset *ts, struct errlist *errs);
/* Says in errs how many processes the traced ones forked ended before they could be probed. */
void traceset__fork_errors(const struct traceset *ts, struct errlist *errs);
void traceset__foreach(const struct traceset *ts, void (*fn)(const struct traced *t, void *ctx),
		       void *ctx);

/* A hook jump followed, or not (tracer_opts.hook_fn): in the log, once per process and target. */
void traceset__hook_said(const char *fn, const char *target, const char *file, size_t nrets,
			 const char *error, void *ctx);

#endif

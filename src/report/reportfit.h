/* SPDX-License-Identifier: MIT */
/*
 * A node's report and a probe's summary kept within a byte budget: etcd
 * refuses an object past its --max-request-bytes (1.5 MiB by default; a
 * write of 1,676 KiB was refused here), and a node of 100 pods traced for 64
 * functions makes a 2.6 MB report.
 *
 * Over the budget, each function of a report first lists fewer of its
 * slowest calls (the same number for every function, none if need be).
 * Then each function keeps its slowest pods whole
 * (as many as fit, the same number for every function) and folds the rest
 * into one row per revision, {"folded": pods, "revision": ..., latency}: the
 * function's totals are untouched, its revisions still add up exactly, and
 * the slowest pods stay named. What was folded is said in the report's
 * errors, with what to change. Only when folding every pod is not enough do
 * the rows go (pods counted, not listed), then the report's list of pods,
 * then its least-called functions; each of those is said as well.
 */
#ifndef RETWATCH_REPORTFIT_H
#define RETWATCH_REPORTFIT_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#define REPORTFIT_DEFAULT_BUDGET (1024 * 1024)
/* The smallest budget: a refused write halves it, down to this. */
#define REPORTFIT_MIN_BUDGET (32 * 1024)
/* What a report's object holds besides its entry (metadata, labels, owner,
 * probe, lastUpdate) and the fold's own error message, at most. */
#define REPORTFIT_ENVELOPE 4096

struct reportfit {
	size_t whole;	  /* the entry's bytes before */
	size_t bytes;	  /* and after */
	size_t pods;	  /* pod rows of the widest function */
	size_t kept;	  /* pods each function keeps whole (== pods: nothing folded) */
	size_t unlisted;  /* pods no longer listed at all (rows dropped) */
	size_t fns_left;  /* functions left out */
	size_t pods_left; /* pods left out of the entry's "pods" */
	/* slowest calls of the function with the most, and each function's kept */
	size_t calls, calls_kept;
};

/*
 * What the entry's maker left out before (status__node_entry): the most
 * slowest calls a function had, when the entry lists fewer, and about how
 * many bytes the ones left out would have taken. Zero: nothing.
 */
struct reportfit_cut {
	size_t calls, bytes;
};

/*
 * Fits entry (status__node_entry's, with bias and overhead added) within
 * budget bytes less REPORTFIT_ENVELOPE, as above; adds the error that says
 * what was done, counting in what cut (NULL: nothing) says was left out
 * before. 0 (ret says what it did), or -ENOMEM.
 */
int reportfit__entry(cJSON *entry, size_t budget, const struct reportfit_cut *cut,
		     struct reportfit *ret);

/*
 * Fits a probe's status (summary__doc's) within budget bytes less
 * REPORTFIT_ENVELOPE: the summary's functions lose their buckets, then
 * slowest calls (summary.slowestCallsKept), then the least-called functions
 * go (summary.functionsOmitted). Whether it fits.
 */
bool reportfit__summary(cJSON *status, size_t budget);

#endif

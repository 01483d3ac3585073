/* SPDX-License-Identifier: MIT */
/*
 * The slowest calls of one function: the K slowest that ended in the current
 * window and in the last one before it that had calls, so that what was
 * just seen stays seen while a new window begins, and an idle function's
 * stay as they were (their end times say when). Each call is kept with who made it and its
 * symbolized stack. The kernel sends a function's calls at least
 * slowest__floor() slow (tracer_target__keep_slowest): a faster one could not
 * be among them.
 */
#ifndef RETWATCH_SLOWEST_H
#define RETWATCH_SLOWEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "trace/callargs.h"

/* The most calls kept per function, and frames per call. */
#define SLOWEST_MAX_KEEP 20
#define SLOWEST_MAX_FRAMES 16

struct slow_call {
	uint64_t duration_ns; /* as measured (the probes' bias inside) */
	uint64_t end_ns;      /* when it returned, CLOCK_REALTIME */
	uint64_t end_mono_ns; /* the same, CLOCK_MONOTONIC */
	pid_t pid, tid;
	uint64_t goid;			 /* 0: not Go, or unknown */
	char *pod, *container;		 /* NULL without groups */
	char *stack[SLOWEST_MAX_FRAMES]; /* innermost first */
	size_t nstack;
	struct call_args args; /* n 0: not captured */
	size_t bytes;	       /* what its strings hold (slowest__add counts them) */
};

/*
 * What the calls kept in several tables (a namespace's probes') may hold
 * together: their strings' bytes, at most max (0: no bound), and within
 * parent's too when there is one (the node's). A call that would pass a
 * bound is not kept, and counted. Reference-counted: each table holding it
 * has a reference.
 */
struct slowest;

struct slowest_budget {
	size_t used, max;
	uint64_t refused;	  /* calls not kept for a bound */
	uint64_t last_refused_ns; /* CLOCK_MONOTONIC, of the last */
	struct slowest_budget *parent;
	unsigned int refs;
};

/* A budget of max bytes within parent (NULL: none; referenced), with one reference. */
struct slowest_budget *slowest_budget__new(size_t max, struct slowest_budget *parent);
struct slowest_budget *slowest_budget__get(struct slowest_budget *b);
/* Drops a reference; NULL is fine. */
void slowest_budget__put(struct slowest_budget *b);
/*
 * Counts s's calls against b (NULL: none) from now on, moved from the
 * budget counted before; a reference is taken.
 */
void slowest__set_budget(struct slowest *s, struct slowest_budget *b);

/* Frees what c holds (not c). */
void slow_call__clear(struct slow_call *c);

struct slowest;

/*
 * Keeps the keep (1 to SLOWEST_MAX_KEEP) slowest calls of windows of
 * window_ns each, the first beginning at now_ns (CLOCK_MONOTONIC); window_ns
 * 0: one window, never ending. NULL on ENOMEM or a keep out of range.
 */
struct slowest *slowest__new(size_t keep, uint64_t window_ns, uint64_t now_ns);
void slowest__free(struct slowest *s);

/* Begins the windows due by now_ns; whether one began (the floor may be lower). */
bool slowest__roll(struct slowest *s, uint64_t now_ns);
/*
 * The least duration a call must have to be kept now: 1 while the current
 * window has fewer than keep, else one more than its keep-th slowest.
 */
uint64_t slowest__floor(const struct slowest *s);
/* Keeps *c (taking what it holds, *c is cleared) when it is slow enough
 * for the current window and its strings fit the budget; else clears it.
 * Whether it was kept. now_ns: CLOCK_MONOTONIC. */
bool slowest__add(struct slowest *s, struct slow_call *c, uint64_t now_ns);
/* The calls kept, slowest first, at most keep: pointers valid until the next
 * roll or add. Returns how many. */
size_t slowest__read(const struct slowest *s, const struct slow_call **ret, size_t max);

#endif

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
};

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
 * for the current window; else clears it. Whether it was kept. */
bool slowest__add(struct slowest *s, struct slow_call *c);
/* The calls kept, slowest first, at most keep: pointers valid until the next
 * roll or add. Returns how many. */
size_t slowest__read(const struct slowest *s, const struct slow_call **ret, size_t max);

#endif

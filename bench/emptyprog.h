/* SPDX-License-Identifier: MIT */
/*
 * What the benchmarks attach to measure the floor: a BPF program that does
 * nothing, at the offsets retwatch's tracer attaches
 * (src/trace/tracer_slots.c, batch__attach: every function's entry, and every
 * RET of the functions that are not entry-only; runtime.morestack's entry in
 * Go binaries).
 */
#ifndef RETWATCH_BENCH_EMPTYPROG_H
#define RETWATCH_BENCH_EMPTYPROG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/binary.h"

#define EMPTY_PROG_NAME "rwbench_empty"

/* Loads `r0 = 0; exit` as a uprobe program, for uprobe_multi links when multi. Fd or -errno. */
int empty_prog__load(bool multi);
/*
 * The least any program that times calls must do at a hit: read its cookie
 * (which function), the current pid and tid (whose call) and the clock
 * (when), and nothing else: `cookie(); pid_tgid(); ktime_get_ns(); r0 = 0`.
 * What retwatch's programs cost above it is their own logic and state.
 */
#define CLOCK_PROG_NAME "rwbench_clock"
int clock_prog__load(bool multi);
/* The kernel's id of a loaded program; 0 if it cannot say. */
uint32_t prog__id(int prog_fd);

struct offsets {
	uint64_t *entries;
	size_t nentries;
	uint64_t *rets;
	size_t nrets;
	uint64_t *cookies; /* zeros, nentries + nrets of them */
};

/* Entry and RET file offsets of funcs, as the tracer computes them. 0 or -ENOMEM. */
int offsets__collect(const struct func_info *const *funcs, size_t n, struct offsets *ret);
void offsets__free(struct offsets *o);

/* CLOCK_MONOTONIC in seconds. */
double now_s(void);

#endif

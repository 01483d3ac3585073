/* SPDX-License-Identifier: MIT */
/*
 * Cancelling long work on this thread. The analyzer binds a worker thread to
 * a flag it sets when it gives up on the worker's analysis (past the time
 * limit, or at shutdown); the long loops of reading a binary (symbols, Go's
 * function table, DWARF, demangling, globs, suggestions, disassembly) ask
 * cancel__requested() every few iterations and return -ECANCELED. Threads
 * bound to nothing (the main loop, the CLI) are never cancelled.
 *
 * A thread-local binding, not a parameter: the loops lie several calls deep
 * under binary__open and binary__match, whose callers know nothing of it.
 */
#ifndef RETWATCH_CANCEL_H
#define RETWATCH_CANCEL_H

#include <stdatomic.h>
#include <stdbool.h>

/* How many iterations of a cheap loop pass between two checks. */
#define CANCEL_EVERY 1024

extern _Thread_local const atomic_bool *cancel_flag;

/* Binds this thread to flag (NULL: to nothing). */
static inline void cancel__bind(const atomic_bool *flag)
{
	cancel_flag = flag;
}

static inline bool cancel__requested(void)
{
	return cancel_flag && atomic_load_explicit(cancel_flag, memory_order_relaxed);
}

/* cancel__requested() every CANCEL_EVERY values of i. */
static inline bool cancel__every(unsigned long i)
{
	return i % CANCEL_EVERY == 0 && cancel__requested();
}

#endif

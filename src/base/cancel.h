/* SPDX-License-Identifier: MIT */
/*
 * Cancelling long work on this thread. The analyzer binds a worker thread to
 * a flag it sets when it gives up on the worker's analysis (at shutdown, or
 * past the time limit when the worker was not stopped by its own deadline)
 * and to the deadline of the analysis: the long loops of reading a binary
 * (symbols, Go's function table, DWARF, demangling, globs, suggestions,
 * disassembly) ask cancel__requested() every few iterations and return
 * -ECANCELED once the flag is set or the deadline passed. The deadline needs
 * no one to look: a reading stops at its limit even while the loop that
 * would abandon it is busy. Threads bound to nothing (the main loop, the
 * CLI) are never cancelled.
 *
 * A thread-local binding, not a parameter: the loops lie several calls deep
 * under binary__open and binary__match, whose callers know nothing of it.
 */
#ifndef RETWATCH_CANCEL_H
#define RETWATCH_CANCEL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* How many iterations of a cheap loop pass between two checks. */
#define CANCEL_EVERY 1024
/* How many checks pass between two readings of the clock. */
#define CANCEL_CLOCK_EVERY 16

struct cancel_binding {
	const atomic_bool *flag;
	uint64_t deadline_ns; /* CLOCK_MONOTONIC (clock__mono_ns); 0: none */
	unsigned int checks;
	bool expired;
};

extern _Thread_local struct cancel_binding cancel_binding;

/*
 * Binds this thread to flag and to deadline_ns (each may be NULL or 0);
 * cancel__bind(NULL, 0) unbinds it.
 */
void cancel__bind(const atomic_bool *flag, uint64_t deadline_ns);
/* Whether the deadline passed (reads the clock); remembered once it has. */
bool cancel__expired(void);

/*
 * Not checked by UBSan: its null check of the thread-local's address made gcc
 * branch on the flags of an `add x@gottpoff(%rip)` that the linker relaxes
 * into a `lea`, which sets none, so a stale flag sent a DWARF walk to the
 * "null pointer" report (gcc -O2 -fsanitize=undefined, binutils 2.40).
 */
__attribute__((no_sanitize("undefined"))) static inline bool cancel__requested(void)
{
	struct cancel_binding *c = &cancel_binding;

	if (c->flag && atomic_load_explicit(c->flag, memory_order_relaxed))
		return true;
	return c->deadline_ns &&
	       (c->expired || (++c->checks % CANCEL_CLOCK_EVERY == 0 && cancel__expired()));
}

/* cancel__requested() every CANCEL_EVERY values of i. */
static inline bool cancel__every(unsigned long i)
{
	return i % CANCEL_EVERY == 0 && cancel__requested();
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Binary analysis off the agent's main loop. Reading a container's
 * executable (symbols, Go's function table, DWARF) and disassembling the
 * functions its patterns match runs on a worker thread, on a binary of the
 * worker's own, under a time limit: a huge or hostile file costs its probe an
 * error in its status, never a stall of the loop that serves /healthz, the
 * other probes and the reports. A finished analysis joins the tracer's binary
 * cache, where the attach then finds it.
 *
 * A reading stops at the limit by itself (cancel.h: its long loops watch
 * the deadline) and its worker takes the next job. A worker still running
 * when the limit is seen past is cancelled and abandoned: its result is
 * thrown away and a new one takes the queue. Whatever the cancel cannot stop
 * (a read blocked on a slow file system) holds its thread; at most
 * ANALYZER_MAX_ABANDONED such workers live at once, after which the queue
 * waits for one to end, and a tenant (the owner named by analyzer__owner, a
 * namespace) with ANALYZER_MAX_ABANDONED_PER_OWNER of them gets no new
 * analysis until one ends, while other tenants' analyses go on.
 */
#ifndef RETWATCH_ANALYZER_H
#define RETWATCH_ANALYZER_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/binary.h"
#include "base/rwerr.h"

#define ANALYZER_DEFAULT_TIMEOUT_NS (5ull * 1000000000ull)
#define ANALYZER_MAX_ABANDONED 4
#define ANALYZER_MAX_ABANDONED_PER_OWNER 1

enum analysis_state {
	ANALYSIS_PENDING, /* queued or running: ask again after the notification */
	ANALYSIS_READY,	  /* in the cache: attaching with these patterns is quick */
	ANALYSIS_FAILED,  /* err says why; asked again later, it is tried again */
};

struct analyzer;

struct analyzer_counters {
	uint64_t analyses;  /* finished, failed ones included */
	uint64_t timeouts;  /* given up past the time limit */
	uint64_t abandoned; /* workers past the limit still running now */
};

/*
 * notify_fd: an eventfd written when an analysis ends; timeout_ns: the time
 * limit of one analysis (0: ANALYZER_DEFAULT_TIMEOUT_NS). NULL on ENOMEM.
 */
struct analyzer *analyzer__new(int notify_fd, uint64_t timeout_ns);
/* Stops the workers (a running analysis ends on its own); NULL is fine. */
void analyzer__free(struct analyzer *a);

/*
 * Where the analysis of the file at path, for patterns, stands; cache is the
 * tracer's. READY at once when cache holds the file already. A file that is
 * not a regular file fails at once.
 */
enum analysis_state analyzer__check(struct analyzer *a, struct binary_cache *cache,
				    const char *path, const char *const *patterns, size_t npatterns,
				    struct rw_error *err);
/*
 * The same for a file opened as path but seen by its process as origin
 * (/proc/PID/exe for a container's executable reached through its image
 * layer): its separate debug file is looked for inside that process's root.
 */
enum analysis_state analyzer__check_as(struct analyzer *a, struct binary_cache *cache,
				       const char *path, const char *origin,
				       const char *const *patterns, size_t npatterns,
				       struct rw_error *err);

/*
 * Names the tenant (a namespace) whose checks follow, until named again: a
 * new analysis is counted against it. NULL names no one (one shared tenant).
 */
void analyzer__owner(struct analyzer *a, const char *owner);

void analyzer__counters(const struct analyzer *a, struct analyzer_counters *ret);

/*
 * Exposed for tests: what a worker runs for a job instead of reading the
 * file (NULL: reading it), to stand for a reading the cancel cannot stop.
 */
typedef struct binary *(*analyzer_read_fn)(int fd, char **patterns, size_t npatterns,
					   struct rw_error *err);
void analyzer__set_read(struct analyzer *a, analyzer_read_fn fn);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Functions in the shared libraries a process has mapped. A pattern names a
 * library with "LIB:FUNC" (binary_pattern__library()); LIB is matched against
 * the file names of the process's file-backed executable mappings
 * (/proc/PID/maps), each file is opened through the process (its mapping in
 * /proc/PID/map_files, its image layer's file, or its path inside
 * /proc/PID/root: never a path of the host) and attached as one more tracer
 * target of the process, so the tracer attaches once per library file and
 * counts only the processes it was given. Libraries mapped later (dlopen)
 * are attached by the next shlib_procs__update().
 */
#ifndef RETWATCH_SHLIB_H
#define RETWATCH_SHLIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "analysis/analyzer.h"
#include "analysis/binary.h"
#include "base/procmaps.h"
#include "base/rwerr.h"
#include "trace/tracer.h"

/* Longest library part of a pattern. */
#define SHLIB_MAX_NAME 256

/* One mapped file of a process. */
struct shlib {
	const char *name; /* the file name: "libssl.so.3" */
	const char *path; /* as the process sees it */
	const struct procmap *map;
};

struct shlib_list {
	struct procmaps *maps;
	struct shlib *libs;
	size_t n;
};

/* The file-backed executable mappings of pid, once per file (device and
 * inode), in address order. 0 or -errno with err set. */
int shlib_list__load(pid_t pid, struct shlib_list *ret, struct rw_error *err);
/* The same from maps text (tests, fuzzing). */
int shlib_list__parse(const char *text, size_t len, struct shlib_list *ret, struct rw_error *err);
void shlib_list__clear(struct shlib_list *l);

/* Whether library glob lib names l ("libssl*": its file name; with a '/': its path). */
bool shlib__matches(const struct shlib *l, const char *lib);

/*
 * Opens lib, a mapping of process pid, read-only: under an overlay the image
 * layer's file (host_root: the host's root as the caller sees it; NULL to
 * skip this), else the mapping itself (/proc/PID/map_files, which needs
 * CAP_SYS_ADMIN), else lib->path inside /proc/PID/root (rootpath.h); only a
 * regular file that is the mapped one (its inode). An fd, or -errno with err
 * set.
 */
int shlib__open(pid_t pid, const struct shlib *lib, const char *host_root, struct rw_error *err);
/*
 * shlib__open of the file mapped at map in process pid (its path as the
 * process sees it). An fd, or -errno (-ENOENT: no file there).
 */
int shlib__open_map(pid_t pid, const struct procmap *map, const char *host_root,
		    struct rw_error *err);

/*
 * A library of pid where pattern (a function name or glob, no library part)
 * matches a function: its file name into buf. For the hint of a name the
 * executable does not have. False when none (or on any error). With an
 * analyzer, only libraries read already are looked in; the others are
 * queued for reading, so that a later call finds them, and *ret_pending
 * (may be NULL) is set.
 */
bool shlib__find(pid_t pid, struct binary_cache *cache, struct analyzer *an, const char *host_root,
		 const char *pattern, char *buf, size_t len, bool *ret_pending);

/* A new library target: the callback takes it over (0), or refuses it (-errno: removed). */
typedef int (*shlib_target_fn)(struct tracer_target *tt, const char *lib, void *ctx);

/* One process's library targets. */
struct shlib_procs;

/* patterns: the probe's, with or without library parts (only the ones with
 * are used; copied). NULL on ENOMEM. */
struct shlib_procs *shlib_procs__new(pid_t pid, const char *const *patterns, size_t npatterns,
				     uint64_t threshold_ns);
/* Forgets the targets (the caller owns and removes them); NULL is fine. */
void shlib_procs__free(struct shlib_procs *sp);
/* Whether any pattern names a library. */
bool shlib_procs__wanted(const struct shlib_procs *sp);

/*
 * Attaches the library patterns to the libraries pid mapped since the last
 * call (the first call: all of them), each new target going to fn. Patterns
 * that match nothing so far, and libraries that could not be opened, are
 * described in *ret_unmatched (malloc'd; NULL when none). The new targets
 * take at most room functions in all (SIZE_MAX: no limit); a library whose
 * functions would pass it is described there too, and not tried again.
 * With an analyzer (NULL: files are read here), a library is read off the
 * caller's thread and attached by a later call once read.
 * Returns how many targets it added, or -errno with err set (the process
 * is gone, ENOMEM).
 */
int shlib_procs__update(struct shlib_procs *sp, struct tracer *t, struct binary_cache *cache,
			struct analyzer *an, const char *host_root, size_t room, shlib_target_fn fn,
			void *ctx, char **ret_unmatched, struct rw_error *err);

/* The targets added so far (none for NULL). */
size_t shlib_procs__ntargets(const struct shlib_procs *sp);
struct tracer_target *shlib_procs__target(const struct shlib_procs *sp, size_t i);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The executable mappings of a process, from /proc/PID/maps. The text is
 * treated as untrusted (a fuzz target feeds it): every field is bounds
 * checked, and a line that does not parse is skipped. A path is what the
 * process sees (inside its container); never open it on the host: open
 * procmap__file_path(), the kernel's handle on the mapped file itself.
 */
#ifndef RETWATCH_PROCMAPS_H
#define RETWATCH_PROCMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/rwerr.h"

struct procmap {
	uint64_t start, end; /* [start, end) */
	uint64_t offset;     /* file offset mapped at start */
	unsigned int dev_major, dev_minor;
	uint64_t inode;	  /* 0: not file-backed */
	const char *path; /* "" when absent; "[vdso]", "[anon:name]" as the kernel writes them */
	bool deleted;	  /* the kernel's " (deleted)" suffix, removed from path */
};

struct procmaps;

/* Executable mappings of pid. NULL on error, with errno and a message set. */
struct procmaps *procmaps__load(pid_t pid, struct rw_error *err);
/* The same from maps text (not NUL-terminated; may hold anything). */
struct procmaps *procmaps__parse(const char *text, size_t len, struct rw_error *err);
void procmaps__free(struct procmaps *m);

/* Sorted by start, not overlapping. */
const struct procmap *procmaps__maps(const struct procmaps *m, size_t *ret_n);
/* The mapping holding addr, or NULL. */
const struct procmap *procmaps__find(const struct procmaps *m, uint64_t addr);

/*
 * "/proc/PID/map_files/START-END": opening it opens the mapped file itself
 * (even a deleted one) without resolving a path in our mount namespace.
 * Needs CAP_SYS_ADMIN (or CAP_CHECKPOINT_RESTORE). 0, or -ENAMETOOLONG.
 */
int procmap__file_path(const struct procmap *map, pid_t pid, char *buf, size_t len);

#endif

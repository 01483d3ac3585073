/* SPDX-License-Identifier: MIT */
/*
 * The host's processes as /proc lists them, for choosing which to trace:
 * each process's parent, start time and name (/proc/PID/stat) and its
 * cgroup (/proc/PID/cgroup, the unified hierarchy's line). The kernel
 * writes these files, but a process names itself: its name may hold any
 * byte, ") " among them, so the stat line is read from its last ')'.
 */
#ifndef RETWATCH_PROCTREE_H
#define RETWATCH_PROCTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Generations walked up from a process to find an ancestor. */
#define PROCTREE_MAX_DEPTH 64
#define PROCTREE_COMM_LEN 16

struct proc_stat {
	pid_t ppid;
	uint64_t start; /* clock ticks since boot: with the PID, the process's identity */
	char comm[PROCTREE_COMM_LEN];
};

/* Parses a /proc/PID/stat line of len bytes. 0, or -EINVAL. */
int proc_stat__parse(const char *line, size_t len, struct proc_stat *ret);
/* Reads pid's. 0, or -errno (-ENOENT: gone). */
int proc_stat__read(pid_t pid, struct proc_stat *ret);

/* Whether pid descends from one of roots (a child, a grandchild...), not one itself. */
bool proctree__descends(pid_t pid, const pid_t *roots, size_t nroots);

/* pid's cgroup in the unified hierarchy ("/kubepods/..."), into buf. 0, or -errno. */
int proctree__cgroup(pid_t pid, char *buf, size_t len);

/* Calls fn with every process's PID while it returns 0. 0, or -errno. */
int proctree__each(int (*fn)(pid_t pid, void *ctx), void *ctx);

#endif

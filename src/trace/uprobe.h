/* SPDX-License-Identifier: MIT */
/*
 * Attaching one BPF program at many offsets of one file: a uprobe_multi link
 * (Linux 6.6+, one syscall for all offsets, a cookie each) or one perf-event
 * uprobe per offset. Raw syscalls: Debian's libbpf 1.1 predates uprobe_multi.
 */
#ifndef RETWATCH_UPROBE_H
#define RETWATCH_UPROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/rwerr.h"

/* BPF_TRACE_UPROBE_MULTI in the kernel's enum bpf_attach_type (6.6+). */
#define UPROBE_MULTI_ATTACH_TYPE 48

struct uprobe_links {
	int multi_fd; /* the uprobe_multi link, or -1 */
	int *perf_fds;
	int *link_fds;
	size_t n; /* offsets attached */
};

void uprobe_links__init(struct uprobe_links *l);
/*
 * Detaches; an initialized, empty or closed set is fine. The links close on
 * the reaper's threads, after the call returns: closing one waits for the
 * kernel's grace period (about 90 ms here), and hundreds closed one after
 * another took tens of seconds; many at once, their waits overlap.
 */
void uprobe_links__close(struct uprobe_links *l);
/* Whether links handed to the reaper are still open. */
bool uprobe_links__closing(void);
/* Waits until every link handed to the reaper is closed. */
void uprobe_links__wait_closed(void);
/*
 * Descriptors the process holds for uprobes now: uprobe_multi links, and
 * perf-event uprobes with their links; handed to the reaper, one counts
 * until it is closed.
 */
size_t uprobe_links__open(void);

/*
 * Attaches prog_fd (loaded for uprobe_multi when multi) at each offset of
 * path, with the matching cookie. All or nothing: on error nothing stays
 * attached and the message names the offset that failed.
 */
int uprobe_attach(struct uprobe_links *l, int prog_fd, bool multi, const char *path,
		  const uint64_t *offsets, const uint64_t *cookies, size_t n, struct rw_error *err);

/*
 * The same, in process pid only (-1: every process mapping path). The
 * kernel places the breakpoints in that process's memory alone, so no
 * other process running the file traps on them.
 */
int uprobe_attach_pid(struct uprobe_links *l, int prog_fd, bool multi, const char *path,
		      const uint64_t *offsets, const uint64_t *cookies, size_t n, pid_t pid,
		      struct rw_error *err);

/*
 * The same as uretprobes: prog_fd runs as each function whose entry is at
 * an offset returns, through the kernel's return trampoline (the return
 * address on the stack is the trampoline's while the call runs).
 */
int uretprobe_attach_pid(struct uprobe_links *l, int prog_fd, bool multi, const char *path,
			 const uint64_t *offsets, const uint64_t *cookies, size_t n, pid_t pid,
			 struct rw_error *err);

/* Whether the kernel takes uprobe_multi links for a program loaded for them. */
bool uprobe_multi_supported(int prog_fd);

#endif

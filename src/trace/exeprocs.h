/* SPDX-License-Identifier: MIT */
/*
 * Which processes run which executable: each process's /proc/PID/exe as a
 * (device, inode), the identity a uprobe attaches to. The tracer asks it
 * whether every process running a file is traced, the condition for probing
 * the file once for all of them.
 */
#ifndef RETWATCH_EXEPROCS_H
#define RETWATCH_EXEPROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

struct exeproc {
	pid_t pid;
	uint64_t starttime; /* with pid, names the process across pid reuse (/proc/PID/stat) */
	dev_t dev;
	ino_t ino;
	uint64_t first_ns; /* when a scan first listed the process (clock__mono_ns) */
};

struct exeprocs {
	struct exeproc *procs; /* by pid */
	size_t n;
	uint64_t scanned_ns; /* the last scan's time; 0: never */
};

/*
 * "/proc/PID/exe" in buf (len bytes) when the file st describes is process
 * pid's executable (opened through its image layer: the overlay's device,
 * major 0, shows the layer file's inode number), else NULL: the name its
 * analysis is opened as (binary__open_as's origin), so that its debug file
 * is looked for where the process sees it, by the tracer and the
 * symbolizer alike.
 */
const char *exeprocs__origin(pid_t pid, const struct stat *st, char *buf, size_t len);

/*
 * Lists the processes under proc ("/proc") again; a process listed before
 * (the same pid and start time, running the same file) keeps its first_ns: a
 * pid another process took over is new. Kernel threads and processes whose
 * executable or start time cannot be read (gone meanwhile) are left out.
 * 0 or -errno (the old list stays).
 */
int exeprocs__scan(struct exeprocs *ep, const char *proc, uint64_t now_ns);
/* The entry of pid, or NULL when the last scan did not list it. */
const struct exeproc *exeprocs__find(const struct exeprocs *ep, pid_t pid);
/* The same, unless pid's process now (its start time under proc, read now) is another one. */
const struct exeproc *exeprocs__current(const struct exeprocs *ep, const char *proc, pid_t pid);
void exeprocs__clear(struct exeprocs *ep);
/* Whether process pid runs the file (dev, ino) now (its /proc/PID/exe, read now). */
bool exeprocs__runs(const char *proc, pid_t pid, dev_t dev, ino_t ino);
/*
 * Whether process pid runs no file now: it exited, or is exiting (its
 * memory released; a zombie). A scan listed it a moment ago, perhaps; a
 * probe of its file can no longer trap in it.
 */
bool exeprocs__gone(const char *proc, pid_t pid);

#endif

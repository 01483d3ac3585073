/* SPDX-License-Identifier: MIT */
/*
 * The processes of this node and the container each runs in (/proc, seen
 * from the host's PID namespace): which processes belong to a pod's
 * container, and which of them the container started first.
 */
#ifndef RETWATCH_NODEPROCS_H
#define RETWATCH_NODEPROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct nodeproc {
	pid_t pid;
	uint64_t starttime; /* with pid, names the process across pid reuse */
};

struct nodeprocs;

/* proc: where /proc is ("/proc"). NULL on ENOMEM. */
struct nodeprocs *nodeprocs__new(const char *proc);
void nodeprocs__free(struct nodeprocs *np);
/*
 * Lists the processes again, each by pid and start time (PROC/PID/stat).
 * Only new ones have their cgroup read (and young ones in no container,
 * which a runtime may be moving, and those nodeprocs__still_in() found
 * moved): a pid whose start time changed is a new process, its old entry
 * (pod, container) dropped.
 */
void nodeprocs__scan(struct nodeprocs *np);
/* Adds a process known to run in container cid of pod pod_uid (a fixture: tests). */
int nodeprocs__add(struct nodeprocs *np, pid_t pid, uint64_t starttime, const char *cid,
		   const char *pod_uid);
/*
 * The processes whose cgroup path places them in container cid of pod
 * pod_uid (read at the kubelet's positions: see cgroup__parse_pod()),
 * the container's first process (pid 1 of its PID namespace) first, else in
 * pid order. Returns how many (ret_procs malloc'd, NULL when none).
 */
size_t nodeprocs__container(struct nodeprocs *np, const char *cid, const char *pod_uid,
			    struct nodeproc **ret_procs);
/* The uid of the pod whose container process pid runs in, as the last scan
 * read it: "" when in none, NULL when the scan did not list it. */
const char *nodeprocs__pod_of(const struct nodeprocs *np, pid_t pid);
/* Whether the process still runs, as the same process (its start time, read now). */
bool nodeprocs__alive(const struct nodeprocs *np, const struct nodeproc *p);
/* Whether the last scan listed the process (the same pid with the same start time). */
bool nodeprocs__listed(const struct nodeprocs *np, const struct nodeproc *p);
/*
 * Whether the process still runs, as the same process, in container cid of
 * pod pod_uid: its cgroup and start time read now, through one directory.
 * When not, the next scan reads it afresh. Called around each attach: a
 * pid taken over, or a process moved, between a scan and an attach.
 */
bool nodeprocs__still_in(struct nodeprocs *np, const struct nodeproc *p, const char *cid,
			 const char *pod_uid);

/*
 * The root that pid's container runtime sees, where the paths of its
 * overlay's layers are valid (/proc/1/root in a pod), into buf.
 */
void nodeprocs__host_root(pid_t pid, char *buf, size_t len);
/*
 * pid's executable in its image layer (an open descriptor), when the
 * container's root is an overlay (as containerd, CRI-O and Docker make it);
 * -1 otherwise.
 */
int nodeprocs__layer_exe(pid_t pid);

#endif

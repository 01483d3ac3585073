/* SPDX-License-Identifier: MIT */
/*
 * Placement: pod -> container -> process. Which processes of a pod a probe
 * traces: those of the wanted running containers (by the container id in
 * the pod's status and the cgroups of the node's processes) that run the
 * probe's executable (spec.executable opened inside the container's root,
 * else the container's main process's). It attaches nothing: each process
 * found goes to a callback; what cannot be placed becomes an error.
 */
#ifndef RETWATCH_PLACEMENT_H
#define RETWATCH_PLACEMENT_H

#include <stdbool.h>
#include <sys/types.h>

#include "base/errlist.h"
#include "kube/kobj.h"
#include "agent/nodeprocs.h"
#include "agent/probe.h"

struct placement_proc {
	const char *pod, *container, *cid;
	const char *pod_uid;
	const char *exe;  /* the executable as the container sees it */
	const char *path; /* where to open it (valid during the callback); NULL: /proc/PID/exe */
	/* pid and start time, and cid and pod_uid: what to re-check (nodeprocs__still_in) */
	struct nodeproc proc;
	dev_t dev; /* the executable's identity */
	ino_t ino;
};

typedef void (*placement_fn)(const struct placement_proc *pp, void *ctx);

/* Whether a probe of namespace ns with spec selects pod (of this node). */
bool placement__selects(const struct probe_spec *spec, const char *ns, const struct pod *pod);
/* Calls fn for every process of pod the probe traces; errors go to errs. */
void placement__pod(const struct probe_spec *spec, const struct pod *pod, struct nodeprocs *np,
		    struct errlist *errs, placement_fn fn, void *ctx);

#endif

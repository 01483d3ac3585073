/* SPDX-License-Identifier: MIT */
/*
 * Kubernetes API objects as the informers cache them (cJSON): field access,
 * and a typed view of a Pod holding what the agent reads of it. Views borrow
 * the object's strings: they are valid while the object is.
 */
#ifndef RETWATCH_KOBJ_H
#define RETWATCH_KOBJ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/labels.h"

/* obj.name, or NULL (obj may be NULL). */
const cJSON *kobj_get(const cJSON *obj, const char *name);
/* obj.name when it is a string, else NULL. */
const char *kobj_str(const cJSON *obj, const char *name);
/* obj.name when it is a number within int64_t's range (truncated), else dflt. */
int64_t kobj_int(const cJSON *obj, const char *name, int64_t dflt);
/* metadata.uid, metadata.namespace, metadata.name, metadata.generation (-1: none). */
const char *kobj_uid(const cJSON *obj);
const char *kobj_namespace(const cJSON *obj);
const char *kobj_name(const cJSON *obj);
int64_t kobj_generation(const cJSON *obj);
/* Deletes the members of obj not named in keep (NULL-terminated); obj may be no object. */
void kobj_keep_only(cJSON *obj, const char *const *keep);

struct pod_container {
	const char *name;
	const char *id; /* status.containerStatuses[].containerID, or NULL */
	bool running;
	const char *why_not; /* the waiting or terminated reason, else "not started" */
};

/* A pod's revision as the results group it: its ReplicaSet's name, its
 * controller-revision-hash, or the digest of its first container's image. */
#define POD_REVISION_LEN 80

struct pod {
	const char *name, *uid, *ns;
	struct labels labels;		  /* metadata.labels, indexed */
	char revision[POD_REVISION_LEN];  /* "" when nothing tells */
	bool done;			  /* phase Succeeded or Failed: it runs nothing any more */
	struct pod_container *containers; /* of status.containerStatuses */
	size_t ncontainers;
};

/* Reads a Pod. -EINVAL when it has no name or namespace, -ENOMEM. */
int pod__parse(const cJSON *obj, struct pod *ret);
void pod__clear(struct pod *p);

#endif

// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kobj.h"

const cJSON *kobj_get(const cJSON *obj, const char *name)
{
	return cJSON_GetObjectItemCaseSensitive(obj, name);
}

const char *kobj_str(const cJSON *obj, const char *name)
{
	return cJSON_GetStringValue(kobj_get(obj, name));
}

int64_t kobj_int(const cJSON *obj, const char *name, int64_t dflt)
{
	const cJSON *v = kobj_get(obj, name);

	/* what the cast can hold (NaN fails both): the object may come from anyone */
	if (!cJSON_IsNumber(v) || !(v->valuedouble >= -9.2e18 && v->valuedouble <= 9.2e18))
		return dflt;
	return (int64_t)v->valuedouble;
}

const char *kobj_uid(const cJSON *obj)
{
	return kobj_str(kobj_get(obj, "metadata"), "uid");
}

const char *kobj_namespace(const cJSON *obj)
{
	return kobj_str(kobj_get(obj, "metadata"), "namespace");
}

const char *kobj_name(const cJSON *obj)
{
	return kobj_str(kobj_get(obj, "metadata"), "name");
}

int64_t kobj_generation(const cJSON *obj)
{
	return kobj_int(kobj_get(obj, "metadata"), "generation", -1);
}

void kobj_keep_only(cJSON *obj, const char *const *keep)
{
	cJSON *v = cJSON_IsObject(obj) ? obj->child : NULL, *next;

	for (; v; v = next) {
		const char *const *k = keep;

		next = v->next;
		while (*k && (!v->string || strcmp(*k, v->string)))
			k++;
		if (!*k)
			cJSON_Delete(cJSON_DetachItemViaPointer(obj, v));
	}
}

static const char *why_not_running(const cJSON *state)
{
	const char *r = kobj_str(kobj_get(state, "waiting"), "reason");

	if (r)
		return r;
	r = kobj_str(kobj_get(state, "terminated"), "reason");
	return r ? r : "not started";
}

/*
 * The pods of one rollout share a revision: the owner ReplicaSet's name
 * (a Deployment's template hash is its suffix), the controller-revision-hash
 * label (StatefulSets, DaemonSets), or for pods without either the image
 * digest their first container runs (as "sha256:" and 12 hex digits).
 */
static void pod_revision(const cJSON *md, const cJSON *statuses, char *buf, size_t len)
{
	const char *rev = kobj_str(kobj_get(md, "labels"), "controller-revision-hash");
	const char *image = kobj_str(cJSON_GetArrayItem(statuses, 0), "imageID"), *at;
	const cJSON *owner;

	cJSON_ArrayForEach(owner, kobj_get(md, "ownerReferences"))
	{
		const char *kind = kobj_str(owner, "kind");

		if (kind && !strcmp(kind, "ReplicaSet") && kobj_str(owner, "name"))
			rev = kobj_str(owner, "name");
	}
	buf[0] = '\0';
	if (rev) {
		snprintf(buf, len, "%s", rev);
		return;
	}
	if (!image)
		return;
	at = strchr(image, '@');
	image = at ? at + 1 : image;
	if (!strncmp(image, "sha256:", 7))
		snprintf(buf, len, "%.19s", image);
	else
		snprintf(buf, len, "%s", image);
}

int pod__parse(const cJSON *obj, struct pod *ret)
{
	const cJSON *md = kobj_get(obj, "metadata"), *status = kobj_get(obj, "status");
	const cJSON *statuses = kobj_get(status, "containerStatuses"), *cs;
	const char *phase = kobj_str(status, "phase");

	memset(ret, 0, sizeof(*ret));
	ret->name = kobj_str(md, "name");
	ret->ns = kobj_str(md, "namespace");
	ret->uid = kobj_str(md, "uid") ? kobj_str(md, "uid") : "";
	ret->done = phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"));
	if (!ret->name || !ret->ns)
		return -EINVAL;
	pod_revision(md, statuses, ret->revision, sizeof(ret->revision));
	if (labels__build(kobj_get(md, "labels"), &ret->labels))
		return -ENOMEM;
	ret->containers = calloc(cJSON_GetArraySize(statuses) + 1, sizeof(*ret->containers));
	if (!ret->containers) {
		labels__clear(&ret->labels);
		return -ENOMEM;
	}
	cJSON_ArrayForEach(cs, statuses)
	{
		struct pod_container *c = &ret->containers[ret->ncontainers];
		const cJSON *state = kobj_get(cs, "state");

		c->name = kobj_str(cs, "name");
		if (!c->name)
			continue;
		c->id = kobj_str(cs, "containerID");
		c->running = kobj_get(state, "running") != NULL;
		c->why_not = why_not_running(state);
		ret->ncontainers++;
	}
	return 0;
}

void pod__clear(struct pod *p)
{
	labels__clear(&p->labels);
	free(p->containers);
	memset(p, 0, sizeof(*p));
}

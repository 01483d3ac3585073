// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kobj.h"
#include "kube/kube.h"
#include "agent/nodeset.h"
#include "base/log.h"

/* The nodes' metadata alone: a Node's status (its images) can weigh tens of KiB. */
#define META_LIST \
	"application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
#define LIST_TIMEOUT_MS 15000

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void nodeset__clear(struct nodeset *ns)
{
	for (size_t i = 0; i < ns->n; i++)
		free(ns->names[i]);
	free(ns->names);
	ns->names = NULL;
	ns->n = ns->cap = 0;
	ns->usable = false;
}

int nodeset__add_page(struct nodeset *ns, const cJSON *doc)
{
	const cJSON *item;

	cJSON_ArrayForEach(item, kobj_get(doc, "items"))
	{
		const char *name = kobj_name(item);

		if (!name)
			continue;
		if (ns->n == NODESET_MAX)
			return -E2BIG;
		if (ns->n == ns->cap) {
			size_t cap = ns->cap ? ns->cap * 2 : 64;
			char **v = realloc(ns->names, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			ns->names = v;
			ns->cap = cap;
		}
		if (!(ns->names[ns->n] = strdup(name)))
			return -ENOMEM;
		ns->n++;
	}
	return 0;
}

void nodeset__done(struct nodeset *ns)
{
	if (ns->n)
		qsort(ns->names, ns->n, sizeof(*ns->names), name_cmp);
	ns->usable = ns->n > 0;
}

/* One page of the list into ns; its continue token into cont. 0 or -errno. */
static int list_page(struct nodeset *ns, struct kube *k, char *cont, size_t len)
{
	char path[1536], tok[1024];
	struct rw_error err = { "" };
	char *body = NULL;
	cJSON *doc = NULL;
	int status, e = -EIO;

	snprintf(path, sizeof(path), "/api/v1/nodes?limit=500%s%s", *cont ? "&continue=" : "",
		 *cont ? kube__escape(cont, tok, sizeof(tok)) : "");
	status = kube__get_as(k, path, META_LIST, LIST_TIMEOUT_MS, &body, &err);
	if (status == 200 && (doc = cJSON_Parse(body)) && cJSON_IsArray(kobj_get(doc, "items"))) {
		e = nodeset__add_page(ns, doc);
		snprintf(cont, len, "%s", kobj_str(kobj_get(doc, "metadata"), "continue") ?: "");
	}
	cJSON_Delete(doc);
	free(body);
	return e;
}

void nodeset__refresh(struct nodeset *ns, struct kube *k, uint64_t now_ns)
{
	bool was = ns->usable;
	char cont[1024] = "";
	int e;

	if (ns->listed_ns && now_ns - ns->listed_ns < NODESET_EVERY_NS)
		return;
	ns->listed_ns = now_ns;
	nodeset__clear(ns);
	do
		e = list_page(ns, k, cont, sizeof(cont));
	while (!e && *cont);
	if (e)
		nodeset__clear(ns);
	else
		nodeset__done(ns);
	if (was && !ns->usable && e)
		log_warn("the cluster's nodes cannot be listed (%s): reports are summed "
			 "without checking that their node is one",
			 strerror(-e));
}

bool nodeset__has(const struct nodeset *ns, const char *name)
{
	if (!ns->usable)
		return true;
	return name && bsearch(&name, ns->names, ns->n, sizeof(*ns->names), name_cmp);
}

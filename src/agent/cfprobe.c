// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/cfprobe.h"
#include "kube/kobj.h"
#include "report/statuswire.h"
#include "base/clock.h"
#include "base/labels.h"
#include "base/log.h"

#define NS_SELECTOR "namespaceSelector"
/* Until a new probe's summary shows calls, it is asked for this often (fprobe.c's). */
#define SUMMARY_EARLY_S 10
#define SUMMARY_EARLY_RETRY_NS (NS_PER_S / 4)

/* A selector's message from the parser of spec.selector, about namespaceSelector. */
static void rename_field(const char *msg, char *buf, size_t len)
{
	static const char from[] = "spec.selector", pods_hint[] = ": select the pods by";
	const char *at = strstr(msg, from);
	char *hint;

	if (!at) {
		snprintf(buf, len, "spec.namespaceSelector: %s", msg);
		return;
	}
	snprintf(buf, len, "%.*sspec." NS_SELECTOR "%s", (int)(at - msg), msg,
		 at + sizeof(from) - 1);
	/* the bound's hint is about pods' labels */
	hint = strstr(buf, pods_hint);
	if (hint)
		snprintf(hint, len - (size_t)(hint - buf),
			 ": select the namespaces by fewer labels, or give {} for every one");
}

/* A spec holding sel as its selector: the pods' selector parser reads it. */
static cJSON *as_pod_spec(const cJSON *sel)
{
	cJSON *spec = cJSON_CreateObject(),
	      *fns = cJSON_CreateStringArray((const char *[]){ "x" }, 1);

	if (!spec || !fns || !cJSON_AddItemToObject(spec, "functions", fns) ||
	    !cJSON_AddItemToObject(spec, "selector", cJSON_Duplicate(sel, true))) {
		if (!cJSON_GetObjectItemCaseSensitive(spec, "functions"))
			cJSON_Delete(fns);
		cJSON_Delete(spec);
		return NULL;
	}
	return spec;
}

static int parse_ns_selector(const cJSON *sel, struct probe_spec *ret, struct rw_error *err)
{
	const cJSON *refused = kobj_get(sel, PROBE_REFUSED);
	struct rw_error inner = { "" };
	cJSON *spec;
	int e;

	memset(ret, 0, sizeof(*ret));
	if (!cJSON_IsObject(sel))
		return rw_error_set(err, EINVAL,
				    "spec.namespaceSelector is required: a label selector of the "
				    "namespaces to probe ({} selects every namespace)");
	if (cJSON_IsString(refused))
		return rw_error_set(err, E2BIG, "%s", refused->valuestring);
	spec = as_pod_spec(sel);
	if (!spec)
		return rw_error_set(err, ENOMEM, "out of memory");
	e = probe_spec__parse(spec, ret, &inner);
	cJSON_Delete(spec);
	if (e)
		rename_field(inner.msg, err->msg, sizeof(err->msg));
	return e;
}

void cfprobe__trim(cJSON *obj)
{
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec"), *sel, *tmp;
	struct rw_error err = { "" };

	if (!cJSON_IsObject(spec))
		return;
	sel = cJSON_DetachItemFromObjectCaseSensitive(spec, NS_SELECTOR);
	probe_spec__trim(spec);
	if (!cJSON_IsObject(sel) || cJSON_IsString(kobj_get(sel, PROBE_REFUSED))) {
		/* not a selector (the parser says so), or trimmed already */
		if (sel)
			cJSON_AddItemToObject(spec, NS_SELECTOR, sel);
		return;
	}
	/* the pods' selector's trim and bounds, on a spec holding this one */
	tmp = cJSON_CreateObject();
	if (!tmp || !cJSON_AddItemToObject(tmp, "selector", sel)) {
		cJSON_Delete(tmp);
		cJSON_Delete(sel);
		return;
	}
	probe_spec__trim(tmp);
	sel = cJSON_DetachItemFromObjectCaseSensitive(tmp, "selector");
	if (!sel && cJSON_IsString(kobj_get(tmp, PROBE_REFUSED))) {
		rename_field(kobj_str(tmp, PROBE_REFUSED), err.msg, sizeof(err.msg));
		sel = cJSON_CreateObject();
		if (sel)
			cJSON_AddStringToObject(sel, PROBE_REFUSED, err.msg);
	}
	cJSON_Delete(tmp);
	if (sel)
		cJSON_AddItemToObject(spec, NS_SELECTOR, sel);
}

static void parse(struct cfprobe *c, const cJSON *obj)
{
	const cJSON *spec = kobj_get(obj, "spec");
	struct rw_error err = { "" };

	probe_spec__free(&c->spec);
	probe_spec__free(&c->nssel);
	c->generation = kobj_generation(obj) < 0 ? 0 : kobj_generation(obj);
	c->valid = !parse_ns_selector(kobj_get(spec, NS_SELECTOR), &c->nssel, &err) &&
		   !probe_spec__parse(spec, &c->spec, &err);
	snprintf(c->spec_err, sizeof(c->spec_err), "%s", c->valid ? "" : err.msg);
	if (!c->valid)
		log_warn("cluster probe %s is not valid: %s", c->name, err.msg);
}

static struct cfprobe *cfprobe_new(const cJSON *obj)
{
	const char *uid = kobj_uid(obj), *name = kobj_name(obj);
	struct cfprobe *c;

	/* an object with a uid too long for a label is no API server's */
	if (!uid || !name || strlen(uid) > STATUS_LABEL_VALUE_MAX)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->uid = strdup(uid);
	c->name = strdup(name);
	c->generation = -1;
	c->created = clock__parse_rfc3339(kobj_str(kobj_get(obj, "metadata"), "creationTimestamp"));
	if (!c->uid || !c->name) {
		free(c->uid);
		free(c->name);
		free(c);
		return NULL;
	}
	return c;
}

static void cfprobe_free(struct cfprobe *c)
{
	probe_spec__free(&c->spec);
	probe_spec__free(&c->nssel);
	free(c->uid);
	free(c->name);
	free(c);
}

void cfprobes__free(struct cfprobe *list)
{
	while (list) {
		struct cfprobe *c = list;

		list = c->next;
		cfprobe_free(c);
	}
}

static struct cfprobe *find(struct cfprobe *list, const char *uid)
{
	for (; list && uid; list = list->next)
		if (!strcmp(list->uid, uid))
			return list;
	return NULL;
}

void cfprobes__sync(struct cfprobe **list, const cJSON *objs,
		    void (*gone)(const char *uid, void *ctx), void *ctx)
{
	struct cfprobe *c, **pp;
	const cJSON *obj;

	for (c = *list; c; c = c->next)
		c->seen = false;
	cJSON_ArrayForEach(obj, objs)
	{
		c = find(*list, kobj_uid(obj));
		if (!c && (c = cfprobe_new(obj))) {
			c->next = *list;
			*list = c;
		}
		if (!c)
			continue;
		c->seen = true;
		if (kobj_generation(obj) < 0 || kobj_generation(obj) != c->generation)
			parse(c, obj);
	}
	for (pp = list; *pp;) {
		c = *pp;
		if (c->seen) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		if (gone)
			gone(c->uid, ctx);
		cfprobe_free(c);
	}
}

/* The FunctionProbe-shaped object of c (its object obj) in namespace ns. */
static cJSON *expanded(const struct cfprobe *c, const cJSON *obj, const char *ns)
{
	const cJSON *md = kobj_get(obj, "metadata");
	const char *created = kobj_str(md, "creationTimestamp");
	const char *interval = kobj_str(kobj_get(obj, "status"), "reportInterval");
	cJSON *o = cJSON_CreateObject(), *m, *spec;
	char uid[STATUS_LABEL_VALUE_MAX + 1 + 64];

	snprintf(uid, sizeof(uid), "%s/%s", c->uid, ns);
	m = cJSON_AddObjectToObject(o, "metadata");
	spec = cJSON_Duplicate(kobj_get(obj, "spec"), true);
	if (!m || !spec || !cJSON_AddItemToObject(o, "spec", spec)) {
		cJSON_Delete(spec);
		cJSON_Delete(o);
		return NULL;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(spec, NS_SELECTOR);
	if (!cJSON_AddStringToObject(m, "uid", uid) ||
	    !cJSON_AddStringToObject(m, "namespace", ns) ||
	    !cJSON_AddStringToObject(m, "name", c->name) ||
	    !cJSON_AddNumberToObject(m, "generation", (double)c->generation) ||
	    (created && !cJSON_AddStringToObject(m, "creationTimestamp", created)) ||
	    (interval && !cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "status"),
						  "reportInterval", interval)) ||
	    !cJSON_AddStringToObject(o, CFPROBE_UID_FIELD, c->uid)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* Adds c's object in namespace ns (labels: its labels) to out when c selects it. */
static int expand_one(const struct cfprobe *c, const cJSON *objs, const char *ns,
		      const struct labels *labels, cJSON *out)
{
	const cJSON *obj;
	cJSON *o;

	if (!c->valid || !probe_spec__selects(&c->nssel, labels))
		return 0;
	cJSON_ArrayForEach(obj, objs)
	{
		const char *uid = kobj_uid(obj);

		if (!uid || strcmp(uid, c->uid))
			continue;
		o = expanded(c, obj, ns);
		if (!o || !cJSON_AddItemToArray(out, o)) {
			cJSON_Delete(o);
			return -ENOMEM;
		}
		return 0;
	}
	return 0;
}

cJSON *cfprobes__expand(const struct cfprobe *list, const cJSON *objs, const cJSON *namespaces)
{
	cJSON *out = cJSON_CreateArray();
	const cJSON *nsobj;
	int e = out ? 0 : -ENOMEM;

	cJSON_ArrayForEach(nsobj, namespaces)
	{
		const char *ns = kobj_name(nsobj);
		struct labels labels;

		if (e || !list)
			break;
		/* a name no namespace of Kubernetes' has: nothing of it is made */
		if (!ns || !*ns || strlen(ns) > 63 || strchr(ns, '/'))
			continue;
		if (labels__build(kobj_get(kobj_get(nsobj, "metadata"), "labels"), &labels)) {
			e = -ENOMEM;
			break;
		}
		for (const struct cfprobe *c = list; c && !e; c = c->next)
			e = expand_one(c, objs, ns, &labels, out);
		labels__clear(&labels);
	}
	if (e) {
		cJSON_Delete(out);
		return NULL;
	}
	return out;
}

void cfprobe__request_summary(struct cfprobe *c, struct summarizer *sum, const cJSON *obj,
			      bool args_denied, uint64_t now)
{
	struct status_state st = {
		.valid = c->valid,
		.expired = c->valid &&
			   time(NULL) >= c->created + (time_t)(c->spec.lifetime_ns / NS_PER_S),
		.spec_err = c->spec_err,
		.expires = c->created + (time_t)(c->spec.lifetime_ns / NS_PER_S),
		.keep = c->valid ? c->spec.keep : 0,
		.args_asked = c->valid && c->spec.capture_args,
		.args_denied = args_denied,
		.list = c->valid && c->spec.list,
	};
	struct status_probe sp = { c->uid, "", c->name, c->generation, true };
	uint64_t interval = c->valid ? c->spec.interval_ns : PROBE_DEFAULT_INTERVAL_NS;
	bool early = time(NULL) - c->created < SUMMARY_EARLY_S && !summarizer__counted(sum, c->uid);

	if (now < c->next_summary)
		return;
	/* spread over the interval as the nodes' reports are */
	c->next_summary = now + (early ? SUMMARY_EARLY_RETRY_NS
				       : interval - interval / 10 +
						 (uint64_t)rand() % (interval / 5 + 1));
	summarizer__request(sum, &sp, &st, kobj_get(obj, "status"), interval);
}

// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/latency.h"
#include "base/log.h"
#include "kube/kobj.h"
#include "report/statuswire.h"

#define PROBE_PATH "/apis/retwatch.io/v1alpha1/namespaces/%s/functionprobes/%s/status"
#define CLUSTER_PROBE_PATH "/apis/retwatch.io/v1alpha1/clusterfunctionprobes/%s/status"
#define REPORTS_PATH "/apis/retwatch.io/v1alpha1/namespaces/%s/functionprobereports"
/* Of a report's name: at most this much of the probe's name and of the node's. */
#define STATUS_NAME_PART 110

void status__report_key(const char *uid, char *buf, size_t len)
{
	snprintf(buf, len, "report/%s", uid);
}

void status__legacy_key(const char *uid, char *buf, size_t len)
{
	snprintf(buf, len, "node/%s", uid);
}

void status__summary_key(const char *uid, char *buf, size_t len)
{
	snprintf(buf, len, "summary/%s", uid);
}

char *status__path(const char *ns, const char *name)
{
	char *path;

	return asprintf(&path, PROBE_PATH, ns, name) < 0 ? NULL : path;
}

char *status__cluster_path(const char *name)
{
	char *path;

	return asprintf(&path, CLUSTER_PROBE_PATH, name) < 0 ? NULL : path;
}

char *status__node_manager(const char *node)
{
	char *m;

	return asprintf(&m, "retwatch-agent-%s", node) < 0 ? NULL : m;
}

/* Takes trailing '-' and '.' off a name cut short (a name part ends alphanumeric). */
static int trimmed(const char *s, int len)
{
	while (len > 0 && (s[len - 1] == '-' || s[len - 1] == '.'))
		len--;
	return len;
}

void status__report_name(const struct status_probe *p, const char *node, char *buf, size_t len)
{
	uint32_t h = 2166136261u; /* FNV-1a of "uid/node": names made alike stay apart */
	int np = trimmed(p->name, (int)strnlen(p->name, STATUS_NAME_PART));
	int nn = trimmed(node, (int)strnlen(node, STATUS_NAME_PART));

	for (const char *c = p->uid; *c; c++)
		h = (h ^ (uint8_t)*c) * 16777619u;
	h = (h ^ '/') * 16777619u;
	for (const char *c = node; *c; c++)
		h = (h ^ (uint8_t)*c) * 16777619u;
	snprintf(buf, len, "%.*s.%.*s.%08x", np, p->name, nn, node, h);
}

char *status__report_path(const char *ns, const char *report)
{
	char *path;

	if (report)
		return asprintf(&path, REPORTS_PATH "/%s", ns, report) < 0 ? NULL : path;
	return asprintf(&path, REPORTS_PATH, ns) < 0 ? NULL : path;
}

void status__reports_selector(const char *uid, char *buf, size_t len)
{
	snprintf(buf, len, STATUS_LABEL_PROBE_UID "=%s", uid);
}

/* Now, in seconds (conditions) or milliseconds (the time of a report). */
void status__add_now(cJSON *obj, const char *name, unsigned int digits)
{
	char ts[TIME_RFC3339_LEN];

	time_rfc3339(ts, sizeof(ts), digits);
	cJSON_AddStringToObject(obj, name, ts);
}

/* ---- latency ---- */

int status__add_duration(cJSON *obj, const char *name, uint64_t ns)
{
	char buf[LATENCY_FMT_LEN];

	return cJSON_AddStringToObject(obj, name, latency__format_ns(ns, buf, sizeof(buf)))
		       ? 0
		       : -ENOMEM;
}

/*
 * The non-empty buckets as one string (status.h). As [index, count] arrays
 * the API server decoded, validated and held three values per bucket: a
 * report of 64 functions over 2 pods cost it 3.2 times the CPU to write
 * (measured at 400 nodes: 104 against 32 CPU seconds).
 */
static int add_bucket_counts(cJSON *obj, const struct latency *l)
{
	char text[STATUS_BUCKETS_TEXT_LEN];
	size_t n = 0;

	text[0] = '\0';
	/* sized for every bucket at the largest count: never cut short */
	for (unsigned int i = 0; i < RW_HIST_BUCKETS && n < sizeof(text); i++)
		if (l->buckets[i])
			n += (size_t)snprintf(text + n, sizeof(text) - n, "%s%u:%" PRIu64,
					      n ? " " : "", i, l->buckets[i]);
	return cJSON_AddStringToObject(obj, "bucketCounts", text) ? 0 : -ENOMEM;
}

int status_latency__to_json(const struct latency *l, cJSON *obj)
{
	if (!cJSON_AddNumberToObject(obj, "calls", (double)l->calls) ||
	    !cJSON_AddNumberToObject(obj, "orphans", (double)l->orphans) ||
	    (l->lost && !cJSON_AddNumberToObject(obj, "lost", (double)l->lost)) ||
	    (l->tail_closed &&
	     !cJSON_AddNumberToObject(obj, "tailClosed", (double)l->tail_closed)) ||
	    (l->tail_exits && !cJSON_AddNumberToObject(obj, "tailExits", (double)l->tail_exits)) ||
	    (l->inlined && !cJSON_AddNumberToObject(obj, "inlinedCalls", (double)l->inlined)) ||
	    (l->inlined_untimed &&
	     !cJSON_AddNumberToObject(obj, "inlinedUntimedCalls", (double)l->inlined_untimed)) ||
	    (l->slow_dropped &&
	     !cJSON_AddNumberToObject(obj, "slowDropped", (double)l->slow_dropped)) ||
	    status__add_duration(obj, "p50", latency__percentile(l, 0.50)) ||
	    status__add_duration(obj, "p95", latency__percentile(l, 0.95)) ||
	    status__add_duration(obj, "p99", latency__percentile(l, 0.99)) ||
	    status__add_duration(obj, "max", l->max_ns) ||
	    !cJSON_AddNumberToObject(obj, "minNs", (double)l->min_ns) ||
	    !cJSON_AddNumberToObject(obj, "maxNs", (double)l->max_ns) ||
	    !cJSON_AddNumberToObject(obj, "sumNs", (double)l->sum_ns))
		return -ENOMEM;
	return add_bucket_counts(obj, l);
}

/* The largest count: what a JSON number holds exactly, 2^53. */
#define COUNT_MAX 9007199254740992ULL

/* A count: a whole number from 0 to COUNT_MAX. */
static int count(const cJSON *v, uint64_t *ret)
{
	if (!v) {
		*ret = 0;
		return 0;
	}
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > (double)COUNT_MAX ||
	    v->valuedouble != (double)(uint64_t)v->valuedouble)
		return -EINVAL;
	*ret = (uint64_t)v->valuedouble;
	return 0;
}

/* Decimal digits at *s (1 to 19 of them: no overflow) into *ret, past them. */
static int digits(const char **s, uint64_t *ret)
{
	const char *p = *s;
	uint64_t v = 0;

	while (*p >= '0' && *p <= '9' && p - *s < 19)
		v = v * 10 + (uint64_t)(*p++ - '0');
	if (p == *s || (*p >= '0' && *p <= '9'))
		return -EINVAL;
	*s = p;
	*ret = v;
	return 0;
}

/* add_bucket_counts' text into ret->buckets: pairs in ascending index order, one space apart. */
static int parse_bucket_counts(const char *s, struct latency *ret)
{
	long prev = -1;

	while (*s) {
		uint64_t idx, n;

		if (prev >= 0 && *s++ != ' ')
			return -EINVAL;
		if (digits(&s, &idx) || *s++ != ':' || digits(&s, &n) || idx >= RW_HIST_BUCKETS ||
		    (long)idx <= prev || n > COUNT_MAX)
			return -EINVAL;
		ret->buckets[idx] = n;
		prev = (long)idx;
	}
	return 0;
}

int status_latency__from_json(const cJSON *obj, struct latency *ret)
{
	const cJSON *pair, *buckets = kobj_get(obj, "buckets"),
			   *text = kobj_get(obj, "bucketCounts");
	long prev = -1;

	memset(ret, 0, sizeof(*ret));
	if (!cJSON_IsObject(obj) || count(kobj_get(obj, "calls"), &ret->calls) ||
	    count(kobj_get(obj, "orphans"), &ret->orphans) ||
	    count(kobj_get(obj, "lost"), &ret->lost) ||
	    count(kobj_get(obj, "tailClosed"), &ret->tail_closed) ||
	    count(kobj_get(obj, "tailExits"), &ret->tail_exits) ||
	    count(kobj_get(obj, "inlinedCalls"), &ret->inlined) ||
	    count(kobj_get(obj, "inlinedUntimedCalls"), &ret->inlined_untimed) ||
	    count(kobj_get(obj, "slowDropped"), &ret->slow_dropped) ||
	    count(kobj_get(obj, "minNs"), &ret->min_ns) ||
	    count(kobj_get(obj, "maxNs"), &ret->max_ns) ||
	    count(kobj_get(obj, "sumNs"), &ret->sum_ns) || (buckets && !cJSON_IsArray(buckets)) ||
	    (text && !cJSON_IsString(text)))
		return -EINVAL;
	if (text)
		return parse_bucket_counts(text->valuestring, ret);
	/* as agents before bucketCounts wrote them: [index, count] pairs */
	cJSON_ArrayForEach(pair, buckets)
	{
		uint64_t idx, n;

		if (cJSON_GetArraySize(pair) != 2 || count(cJSON_GetArrayItem(pair, 0), &idx) ||
		    count(cJSON_GetArrayItem(pair, 1), &n) || idx >= RW_HIST_BUCKETS ||
		    (long)idx <= prev)
			return -EINVAL;
		ret->buckets[idx] = n;
		prev = (long)idx;
	}
	return 0;
}

/* ---- the documents ---- */

cJSON *status__function(const char *name, const char *mode, const char *reason, double returns,
			const struct latency *l)
{
	cJSON *f = cJSON_CreateObject();

	cJSON_AddStringToObject(f, "name", name);
	if (mode)
		cJSON_AddStringToObject(f, "mode", mode);
	if (reason)
		cJSON_AddStringToObject(f, "reason", reason);
	/* unknown (a report without it) is left out, never null */
	if (isfinite(returns) && returns >= 0)
		cJSON_AddNumberToObject(f, "returnSites", returns);
	status_latency__to_json(l, f);
	return f;
}

char *status__report_body(const struct status_probe *p, const char *node, cJSON *entry,
			  uint64_t interval_ns)
{
	cJSON *doc = cJSON_CreateObject(), *md, *labels, *owner, *probe;
	char name[STATUS_NAME_LEN], interval[LATENCY_FMT_LEN];
	char *out;

	status__report_name(p, node, name, sizeof(name));
	status__add_now(entry, "lastUpdate", 3);
	cJSON_AddStringToObject(entry, "reportInterval",
				latency__format_ns(interval_ns, interval, sizeof(interval)));
	cJSON_AddStringToObject(doc, "apiVersion", "retwatch.io/v1alpha1");
	cJSON_AddStringToObject(doc, "kind", "FunctionProbeReport");
	md = cJSON_AddObjectToObject(doc, "metadata");
	cJSON_AddStringToObject(md, "name", name);
	cJSON_AddStringToObject(md, "namespace", p->ns);
	labels = cJSON_AddObjectToObject(md, "labels");
	cJSON_AddStringToObject(labels, STATUS_LABEL_PROBE_UID, p->uid);
	if (p->cluster)
		cJSON_AddStringToObject(labels, STATUS_LABEL_CLUSTER, "true");
	/* a node's name is a label value when short enough (a restarted agent lists by it) */
	if (strlen(node) <= STATUS_LABEL_VALUE_MAX)
		cJSON_AddStringToObject(labels, STATUS_LABEL_NODE, node);
	/* deleting the probe deletes its reports (the garbage collector); a
	 * namespaced report may have a cluster-scoped owner */
	owner = cJSON_CreateObject();
	cJSON_AddItemToArray(cJSON_AddArrayToObject(md, "ownerReferences"), owner);
	cJSON_AddStringToObject(owner, "apiVersion", "retwatch.io/v1alpha1");
	cJSON_AddStringToObject(owner, "kind",
				p->cluster ? "ClusterFunctionProbe" : "FunctionProbe");
	cJSON_AddStringToObject(owner, "name", p->name);
	cJSON_AddStringToObject(owner, "uid", p->uid);
	probe = cJSON_AddObjectToObject(doc, "probe");
	cJSON_AddStringToObject(probe, "name", p->name);
	cJSON_AddStringToObject(probe, "uid", p->uid);
	if (p->cluster)
		cJSON_AddStringToObject(probe, "kind", "ClusterFunctionProbe");
	cJSON_AddStringToObject(doc, "node", node);
	cJSON_AddItemToObject(doc, "status", entry);
	out = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	return out;
}

const cJSON *status__legacy_entry(const cJSON *status, const char *node)
{
	const cJSON *entry;

	cJSON_ArrayForEach(entry, kobj_get(status, "nodes"))
	{
		if (kobj_str(entry, "node") && !strcmp(kobj_str(entry, "node"), node))
			return entry;
	}
	return NULL;
}

char *status__apply_body(const struct status_probe *p, cJSON *status)
{
	cJSON *doc = cJSON_CreateObject(), *md;
	char *out;

	cJSON_AddStringToObject(doc, "apiVersion", "retwatch.io/v1alpha1");
	cJSON_AddStringToObject(doc, "kind", p->cluster ? "ClusterFunctionProbe" : "FunctionProbe");
	md = cJSON_AddObjectToObject(doc, "metadata");
	cJSON_AddStringToObject(md, "name", p->name);
	if (!p->cluster)
		cJSON_AddStringToObject(md, "namespace", p->ns);
	/* a probe deleted and made again under the same name is another probe */
	cJSON_AddStringToObject(md, "uid", p->uid);
	cJSON_AddItemToObject(doc, "status", status);
	out = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	return out;
}

/* ---- the probes' bias ---- */

static void set_duration(cJSON *obj, const char *name, uint64_t ns)
{
	cJSON_DeleteItemFromObjectCaseSensitive(obj, name);
	status__add_duration(obj, name, ns);
}

void status__set_call_duration(cJSON *call, uint64_t ns)
{
	set_duration(call, "duration", ns);
	cJSON_DeleteItemFromObjectCaseSensitive(call, "durationNs");
	cJSON_AddNumberToObject(call, "durationNs", (double)ns);
}

void status__take_bias(cJSON *obj, uint64_t bias)
{
	static const char *const names[] = { "p50", "p95", "p99", "max" };
	struct latency l;
	uint64_t v[4];
	cJSON *raw;

	if (status_latency__from_json(obj, &l) || !latency__count(&l))
		return;
	raw = cJSON_AddObjectToObject(obj, "raw");
	for (size_t i = 0; raw && i < 4; i++) {
		const char *s = kobj_str(obj, names[i]);

		if (s)
			cJSON_AddStringToObject(raw, names[i], s);
	}
	v[0] = latency__percentile(&l, 0.50);
	v[1] = latency__percentile(&l, 0.95);
	v[2] = latency__percentile(&l, 0.99);
	v[3] = l.max_ns;
	for (size_t i = 0; i < 4; i++)
		set_duration(obj, names[i], latency__less(v[i], bias));
}

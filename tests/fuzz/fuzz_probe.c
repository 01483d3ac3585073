// SPDX-License-Identifier: MIT
/*
 * FunctionProbe objects as the agent gets them from the API server: users
 * write the spec, other agents write the reports (and formerly status
 * entries) the summary merges and a restarted agent seeds from. Also Pods,
 * as the agent reads them, and ClusterFunctionProbes with the Namespaces
 * their namespaceSelector selects by.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/cfprobe.h"
#include "kube/kobj.h"
#include "agent/probe.h"
#include "agent/status.h"
#include "report/summary.h"

/* A ClusterFunctionProbe in doc: trimmed as the informer does (twice: the
 * trim changes nothing of what it trimmed), parsed and expanded over the
 * namespaces doc lists. */
static void cluster_probe(const cJSON *doc)
{
	cJSON *objs = cJSON_CreateArray(), *obj = cJSON_Duplicate(doc, true), *out;
	struct cfprobe *list = NULL;
	char *once, *twice;

	if (!objs || !obj || !cJSON_AddItemToArray(objs, obj)) {
		cJSON_Delete(obj);
		cJSON_Delete(objs);
		return;
	}
	cfprobe__trim(obj);
	once = cJSON_PrintUnformatted(obj);
	cfprobe__trim(obj);
	twice = cJSON_PrintUnformatted(obj);
	if (once && twice && strcmp(once, twice))
		__builtin_trap();
	free(once);
	free(twice);
	cfprobes__sync(&list, objs, NULL, NULL);
	out = cfprobes__expand(list, objs, cJSON_GetObjectItem(doc, "namespaces"));
	cJSON_Delete(out);
	cfprobes__free(list);
	cJSON_Delete(objs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *doc = cJSON_ParseWithLength((const char *)data, size), *fn;
	struct status_probe sp = { "uid", "ns", "name", 1, false };
	struct status_state st = { .valid = true };
	struct summary *sum;
	struct results *r;
	struct rw_error err;
	struct probe_spec s;
	struct latency *l;
	struct pod pod;

	if (!doc)
		return 0;
	pod__parse(doc, &pod);
	pod__clear(&pod);
	cluster_probe(doc);
	sum = summary__new(1);
	if (sum) {
		summary__add_report(sum, doc);
		summary__add_report_as(sum, doc, "ns/n1");
		cJSON_Delete(summary__row(sum, "ns"));
		summary__add_legacy(sum, cJSON_GetObjectItem(doc, "status"));
		cJSON_Delete(summary__doc(&sp, &st, cJSON_GetObjectItem(doc, "status"), sum,
					  summary__interval(summary__writers(sum), 1, 50)));
	}
	summary__free(sum);
	r = results__new(NULL);
	if (r) {
		status__seed(cJSON_GetObjectItem(doc, "status"), "n1", 1, r);
		status__seed_report(doc, 1, r);
	}
	results__free(r);
	if (!probe_spec__parse(cJSON_GetObjectItem(doc, "spec"), &s, &err)) {
		const cJSON *labels = cJSON_GetObjectItem(doc, "labels"), *v;
		const cJSON *each = cJSON_IsObject(labels) ? labels : NULL;
		struct labels ls;

		if (!labels__build(labels, &ls)) {
			/* the index finds what a scan of the labels finds */
			cJSON_ArrayForEach(v, each)
			{
				const cJSON *first = cJSON_GetObjectItemCaseSensitive(labels,
										      v->string);

				if (labels__get(&ls, v->string) != cJSON_GetStringValue(first))
					__builtin_trap();
			}
			probe_spec__selects(&s, &ls);
		}
		labels__clear(&ls);
		probe_spec__free(&s);
	}
	l = malloc(sizeof(*l));
	cJSON_ArrayForEach(fn, cJSON_GetObjectItem(doc, "functions"))
	{
		if (l && !status_latency__from_json(fn, l)) {
			cJSON *out = cJSON_CreateObject();
			struct latency *back = malloc(sizeof(*back));

			/* what was read writes back the same */
			if (out && back && !status_latency__to_json(l, out) &&
			    (status_latency__from_json(out, back) ||
			     memcmp(l->buckets, back->buckets, sizeof(l->buckets))))
				__builtin_trap();
			free(back);
			cJSON_Delete(out);
		}
	}
	free(l);
	cJSON_Delete(doc);
	return 0;
}

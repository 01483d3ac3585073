// SPDX-License-Identifier: MIT
/*
 * FunctionProbe objects as the agent gets them from the API server: users
 * write the spec, other agents write the status it merges.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *doc = cJSON_ParseWithLength((const char *)data, size), *fn;
	struct rw_error err;
	struct probe_spec s;
	struct latency *l;

	if (!doc)
		return 0;
	if (!probe_spec__parse(cJSON_GetObjectItem(doc, "spec"), &s, &err)) {
		probe_spec__selects(&s, cJSON_GetObjectItem(doc, "labels"));
		probe_spec__free(&s);
	}
	l = malloc(sizeof(*l));
	cJSON_ArrayForEach(fn, cJSON_GetObjectItem(doc, "functions"))
	{
		if (l && !probe_latency__from_json(fn, l)) {
			cJSON *out = cJSON_CreateObject();
			struct latency *back = malloc(sizeof(*back));

			/* what was read writes back the same */
			if (out && back && !probe_latency__to_json(l, out) &&
			    (probe_latency__from_json(out, back) ||
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

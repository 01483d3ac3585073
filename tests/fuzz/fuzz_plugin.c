// SPDX-License-Identifier: MIT
/*
 * What kubectl-retwatch reads: FunctionProbes and lists of them from the
 * API server (printed as tables, slowest calls and YAML), the agents'
 * function lists (functions), a workload's
 * selector and a pod's labels (made into a probe's selector), and -l text.
 * A selector read from JSON, written in kubectl's syntax and parsed again,
 * must be written the same: the pods listed are the pods probed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kobj.h"
#include "plugin/functions.h"
#include "plugin/selector.h"
#include "plugin/view.h"

static char text[1 << 20], again[1 << 20];

static void round_trip(const cJSON *sel)
{
	struct rw_error err;
	cJSON *parsed = NULL;

	if (selector__format(sel, text, sizeof(text)))
		return;
	if (selector__parse(text, &parsed, &err) ||
	    selector__format(parsed, again, sizeof(again)) || strcmp(text, again)) {
		fprintf(stderr, "selector '%s' read back as '%s' (%s)\n", text, again, err.msg);
		__builtin_trap();
	}
	cJSON_Delete(parsed);
}

static void selectors(const cJSON *doc)
{
	struct rw_error err;
	cJSON *sel = NULL;

	if (!selector__from_json(kobj_get(kobj_get(doc, "spec"), "selector"), &sel, &err))
		round_trip(sel);
	cJSON_Delete(sel);
	if (!selector__from_labels(kobj_get(kobj_get(doc, "metadata"), "labels"), &sel, &err))
		round_trip(sel);
	cJSON_Delete(sel);
}

/* What agents' reports hold, as `functions` reads them: merged and printed. */
static void functions_answer(const cJSON *doc)
{
	static FILE *null;
	cJSON *merged = functions__merge(doc);

	if (!null)
		null = fopen("/dev/null", "w");
	(void)functions__answered(doc, kobj_get(doc, "nodes"));
	functions__print(null, merged);
	functions__print_wide(null, merged);
	cJSON_Delete(merged);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *null;
	static struct view_seen seen;
	cJSON *doc = cJSON_ParseWithLength((const char *)data, size), *sel = NULL;
	char *copy = strndup((const char *)data, size);
	struct rw_error err;

	if (!null)
		null = fopen("/dev/null", "w");
	if (copy && !selector__parse(copy, &sel, &err))
		round_trip(sel);
	cJSON_Delete(sel);
	free(copy);
	if (!doc)
		return 0;
	view__table(null, doc);
	view__table_wide(null, doc);
	view__slow_calls(null, doc, &seen);
	view__list(null, doc);
	view__list_wide(null, doc);
	view__top(null, doc);
	view__top_wide(null, doc);
	view__yaml(null, doc);
	functions_answer(doc);
	selectors(doc);
	cJSON_Delete(doc);
	return 0;
}

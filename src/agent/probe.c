// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/binary.h"
#include "trace/calibrate.h"
#include "base/latency.h"
#include "kube/kobj.h"
#include "agent/probe.h"
#include "trace/shlib.h"

#define MAX_NAME 1024
#define MAX_PATH 4096

static const cJSON *field(const cJSON *obj, const char *name)
{
	return cJSON_GetObjectItemCaseSensitive(obj, name);
}

static bool string_ok(const cJSON *v, size_t max)
{
	return cJSON_IsString(v) && v->valuestring[0] && strlen(v->valuestring) <= max;
}

/* A list of 1..max non-empty strings (or absent when optional). */
static int strings(const cJSON *arr, const char *name, size_t min, size_t max, size_t len,
		   char ***ret, size_t *ret_n, struct rw_error *err)
{
	const cJSON *v;
	size_t n = 0;

	if (!arr && !min)
		return 0;
	if (!arr)
		return rw_error_set(err, EINVAL, "%s is required", name);
	if (!cJSON_IsArray(arr))
		return rw_error_set(err, EINVAL, "%s must be a list of strings", name);
	n = cJSON_GetArraySize(arr);
	if (n < min || n > max)
		return rw_error_set(err, EINVAL, "%s must have %zu to %zu entries (has %zu)", name,
				    min, max, n);
	*ret = calloc(n ? n : 1, sizeof(char *));
	if (!*ret)
		return rw_error_set(err, ENOMEM, "out of memory");
	*ret_n = 0;
	cJSON_ArrayForEach(v, arr)
	{
		if (!string_ok(v, len))
			return rw_error_set(err, EINVAL,
					    "%s[%zu] must be a non-empty string of at most %zu "
					    "characters",
					    name, *ret_n, len);
		(*ret)[*ret_n] = strdup(v->valuestring);
		if (!(*ret)[*ret_n])
			return rw_error_set(err, ENOMEM, "out of memory");
		(*ret_n)++;
	}
	return 0;
}

static int duration(const cJSON *v, const char *name, uint64_t dflt, uint64_t *ret,
		    struct rw_error *err)
{
	if (!v) {
		*ret = dflt;
		return 0;
	}
	if (!cJSON_IsString(v) || latency__parse_duration(v->valuestring, ret))
		return rw_error_set(err, EINVAL,
				    "%s must be a duration such as \"100ms\", \"10s\" or \"1h30m\"",
				    name);
	return 0;
}

/* Kubernetes' label key: [prefix/]name, prefix up to 253 characters, name 1 to 63. */
static bool label_key_ok(const char *k)
{
	const char *slash = k ? strchr(k, '/') : NULL, *name = slash ? slash + 1 : k;

	if (!k || !k[0])
		return false;
	if (slash && (slash == k || slash - k > PROBE_LABEL_PREFIX_MAX || strchr(name, '/')))
		return false;
	return name[0] && strlen(name) <= PROBE_LABEL_NAME_MAX;
}

/* The number of entries of a list or map, counting no further than max + 1. */
static size_t count_to(const cJSON *v, size_t max)
{
	size_t n = 0;

	for (const cJSON *c = v ? v->child : NULL; c && n <= max; c = c->next)
		n++;
	return n;
}

static int check_count(const cJSON *v, const char *name, size_t max, const char *hint,
		       struct rw_error *err)
{
	if (!cJSON_IsArray(v) && !cJSON_IsObject(v))
		return 0; /* the parser says what it should be */
	if (count_to(v, max) <= max)
		return 0;
	return rw_error_set(err, E2BIG, "%s has more than %zu entries: %s", name, max, hint);
}

static int check_selector_bounds(const cJSON *sel, struct rw_error *err)
{
	const cJSON *ml = field(sel, "matchLabels"), *xs = field(sel, "matchExpressions"), *v;
	size_t i = 0;
	int e;

	e = check_count(ml, "spec.selector.matchLabels", PROBE_MAX_MATCH_LABELS,
			"select the pods by fewer labels, such as one their controller sets "
			"(app, or pod-template-hash)",
			err);
	if (!e)
		e = check_count(xs, "spec.selector.matchExpressions", PROBE_MAX_MATCH_EXPRESSIONS,
				"give fewer requirements; one In takes a list of values", err);
	if (e)
		return e;
	if (cJSON_IsObject(ml)) {
		cJSON_ArrayForEach(v, ml)
		{
			if (!label_key_ok(v->string))
				return rw_error_set(
					err, EINVAL,
					"spec.selector.matchLabels: '%.63s' is not a label key: a "
					"name of 1 to 63 characters, with an optional prefix of at "
					"most 253 and a '/' before it",
					v->string ? v->string : "");
		}
	}
	if (!cJSON_IsArray(xs))
		return 0;
	cJSON_ArrayForEach(v, xs)
	{
		char name[80];

		snprintf(name, sizeof(name), "spec.selector.matchExpressions[%zu].values", i++);
		e = check_count(field(v, "values"), name, PROBE_MAX_LABEL_VALUES,
				"split the pods by a label with fewer values", err);
		if (e)
			return e;
	}
	return 0;
}

/* Each string entry of a list is at most max bytes (other types: the parser's to say). */
static int check_lengths(const cJSON *arr, const char *name, size_t max, struct rw_error *err)
{
	size_t i = 0;
	const cJSON *v;

	if (!cJSON_IsArray(arr))
		return 0;
	cJSON_ArrayForEach(v, arr)
	{
		if (cJSON_IsString(v) && strnlen(v->valuestring, max + 1) > max)
			return rw_error_set(err, E2BIG, "%s[%zu] is longer than %zu characters",
					    name, i, max);
		i++;
	}
	return 0;
}

int probe_spec__check_bounds(const cJSON *spec, struct rw_error *err)
{
	static const char *const strs[] = { "executable",  "slowThreshold",
					    "lifetime",	   "reportInterval",
					    "maxOverhead", "window",
					    "mode" };
	int e = check_selector_bounds(field(spec, "selector"), err);

	if (!e)
		e = check_count(field(spec, "functions"), "spec.functions", PROBE_MAX_FUNCTIONS,
				"split them between probes", err);
	if (!e)
		e = check_count(field(spec, "containers"), "spec.containers", PROBE_MAX_CONTAINERS,
				"leave containers out to probe them all", err);
	if (!e)
		e = check_lengths(field(spec, "functions"), "spec.functions", MAX_NAME, err);
	if (!e)
		e = check_lengths(field(spec, "containers"), "spec.containers",
				  PROBE_LABEL_NAME_MAX, err);
	for (size_t i = 0; !e && i < sizeof(strs) / sizeof(strs[0]); i++) {
		const cJSON *v = field(spec, strs[i]);

		if (cJSON_IsString(v) && strnlen(v->valuestring, MAX_PATH + 1) > MAX_PATH)
			e = rw_error_set(err, E2BIG, "spec.%s is longer than %d characters",
					 strs[i], MAX_PATH);
	}
	return e;
}

void probe_spec__trim(cJSON *spec)
{
	static const char *const fields[] = {
		"selector",	    "containers",     "executable",  "functions", "slowThreshold",
		"lifetime",	    "reportInterval", "maxOverhead", "slowCalls", "window",
		"captureArguments", "mode",	      PROBE_REFUSED, NULL
	};
	static const char *const selector[] = { "matchLabels", "matchExpressions", NULL };
	static const char *const slow_calls[] = { "keep", NULL };
	struct rw_error err = { "" };
	cJSON *child;

	if (!cJSON_IsObject(spec) || cJSON_IsString(field(spec, PROBE_REFUSED)))
		return;
	kobj_keep_only(spec, fields);
	kobj_keep_only(cJSON_GetObjectItemCaseSensitive(spec, "selector"), selector);
	kobj_keep_only(cJSON_GetObjectItemCaseSensitive(spec, "slowCalls"), slow_calls);
	if (!probe_spec__check_bounds(spec, &err))
		return;
	/* what is over the bounds is not kept: only why */
	while ((child = spec->child))
		cJSON_Delete(cJSON_DetachItemViaPointer(spec, child));
	cJSON_AddStringToObject(spec, PROBE_REFUSED, err.msg);
}

static struct label_req *add_req(struct probe_spec *s, struct rw_error *err)
{
	struct label_req *r = realloc(s->selector, (s->nselector + 1) * sizeof(*r));

	if (!r) {
		rw_error_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	s->selector = r;
	r = &s->selector[s->nselector++];
	memset(r, 0, sizeof(*r));
	return r;
}

static int match_labels(const cJSON *ml, struct probe_spec *s, struct rw_error *err)
{
	const cJSON *v;

	if (!ml)
		return 0;
	if (!cJSON_IsObject(ml))
		return rw_error_set(err, EINVAL,
				    "spec.selector.matchLabels must map keys to values");
	cJSON_ArrayForEach(v, ml)
	{
		struct label_req *r;

		if (!cJSON_IsString(v) || strlen(v->valuestring) > PROBE_LABEL_VALUE_MAX)
			return rw_error_set(
				err, EINVAL,
				"spec.selector.matchLabels[%.63s] must be a string of at "
				"most %d characters",
				v->string, PROBE_LABEL_VALUE_MAX);
		r = add_req(s, err);
		if (!r)
			return -ENOMEM;
		r->op = LABEL_IN;
		r->key = strdup(v->string);
		r->values = calloc(1, sizeof(char *));
		if (!r->key || !r->values || !(r->values[0] = strdup(v->valuestring)))
			return rw_error_set(err, ENOMEM, "out of memory");
		r->nvalues = 1;
	}
	return 0;
}

static int parse_op(const char *op, enum label_op *ret)
{
	static const char *const ops[] = { "In", "NotIn", "Exists", "DoesNotExist" };

	for (size_t i = 0; op && i < 4; i++) {
		if (!strcmp(op, ops[i])) {
			*ret = (enum label_op)i;
			return 0;
		}
	}
	return -EINVAL;
}

static int match_expressions(const cJSON *exprs, struct probe_spec *s, struct rw_error *err)
{
	const cJSON *x;
	size_t i = 0;

	if (!exprs)
		return 0;
	if (!cJSON_IsArray(exprs))
		return rw_error_set(err, EINVAL, "spec.selector.matchExpressions must be a list");
	cJSON_ArrayForEach(x, exprs)
	{
		char name[64];
		struct label_req *r = add_req(s, err);
		bool need_values;
		int e;

		if (!r)
			return -ENOMEM;
		snprintf(name, sizeof(name), "spec.selector.matchExpressions[%zu]", i++);
		if (!cJSON_IsString(field(x, "key")) || !label_key_ok(field(x, "key")->valuestring))
			return rw_error_set(
				err, EINVAL,
				"%s.key must be a label key: a name of 1 to 63 "
				"characters, with an optional prefix of at most 253 and "
				"a '/' before it",
				name);
		if (parse_op(cJSON_GetStringValue(field(x, "operator")), &r->op))
			return rw_error_set(err, EINVAL,
					    "%s.operator must be In, NotIn, Exists or DoesNotExist",
					    name);
		r->key = strdup(field(x, "key")->valuestring);
		if (!r->key)
			return rw_error_set(err, ENOMEM, "out of memory");
		need_values = r->op == LABEL_IN || r->op == LABEL_NOT_IN;
		if (!need_values && cJSON_GetArraySize(field(x, "values")))
			return rw_error_set(err, EINVAL, "%s.values must be empty with %s", name,
					    field(x, "operator")->valuestring);
		if (!need_values)
			continue;
		strcat(name, ".values");
		e = strings(field(x, "values"), name, 1, PROBE_MAX_LABEL_VALUES,
			    PROBE_LABEL_VALUE_MAX, &r->values, &r->nvalues, err);
		if (e)
			return e;
	}
	return 0;
}

static int parse_durations(const cJSON *spec, struct probe_spec *s, struct rw_error *err)
{
	int e;

	e = duration(field(spec, "slowThreshold"), "spec.slowThreshold", 0, &s->threshold_ns, err);
	if (!e)
		e = duration(field(spec, "lifetime"), "spec.lifetime", PROBE_DEFAULT_LIFETIME_NS,
			     &s->lifetime_ns, err);
	if (!e)
		e = duration(field(spec, "reportInterval"), "spec.reportInterval",
			     PROBE_DEFAULT_INTERVAL_NS, &s->interval_ns, err);
	if (e)
		return e;
	if (!e)
		e = duration(field(spec, "window"), "spec.window", PROBE_DEFAULT_WINDOW_NS,
			     &s->window_ns, err);
	if (e)
		return e;
	if (!s->lifetime_ns)
		return rw_error_set(err, EINVAL, "spec.lifetime must be longer than 0");
	if (s->interval_ns < PROBE_MIN_INTERVAL_NS)
		return rw_error_set(err, EINVAL, "spec.reportInterval must be at least 2s");
	if (s->window_ns < s->interval_ns)
		return rw_error_set(err, EINVAL,
				    "spec.window must be at least spec.reportInterval: a window is "
				    "one report interval or more");
	return 0;
}

/* spec.captureArguments: the slowest and slow calls carry their arguments. */
static int parse_capture(const cJSON *v, struct probe_spec *s, struct rw_error *err)
{
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsBool(v))
		return rw_error_set(err, EINVAL, "spec.captureArguments must be true or false");
	s->capture_args = cJSON_IsTrue(v);
	return 0;
}

/* spec.mode: Trace (the default) or List (nothing attached, names listed). */
static int parse_mode(const cJSON *v, struct probe_spec *s, struct rw_error *err)
{
	if (!v || cJSON_IsNull(v) || (cJSON_IsString(v) && !strcmp(v->valuestring, "Trace")))
		return 0;
	if (cJSON_IsString(v) && !strcmp(v->valuestring, "List")) {
		s->list = true;
		return 0;
	}
	return rw_error_set(err, EINVAL,
			    "spec.mode must be Trace (time the functions' calls) or List (list "
			    "the functions the patterns match, attaching nothing)");
}

/* spec.slowCalls.keep: the slowest calls each function's reports keep. */
static int parse_slow_calls(const cJSON *v, struct probe_spec *s, struct rw_error *err)
{
	const cJSON *keep = field(v, "keep");

	s->keep = PROBE_DEFAULT_KEEP;
	if (!v)
		return 0;
	if (!cJSON_IsObject(v))
		return rw_error_set(err, EINVAL,
				    "spec.slowCalls must be an object, such as {keep: 5}");
	if (!keep)
		return 0;
	if (!cJSON_IsNumber(keep) || keep->valuedouble < 0 || keep->valuedouble > PROBE_MAX_KEEP ||
	    keep->valuedouble != (double)(int)keep->valuedouble)
		return rw_error_set(err, EINVAL,
				    "spec.slowCalls.keep must be a whole number of calls from 0 "
				    "(none) to %d",
				    PROBE_MAX_KEEP);
	s->keep = (unsigned int)keep->valuedouble;
	return 0;
}

/* A LIB:FUNC pattern's library part fits what the agent matches libraries with. */
static int check_libraries(const struct probe_spec *s, struct rw_error *err)
{
	char lib[MAX_NAME + 1];
	const char *func;

	for (size_t i = 0; i < s->nfunctions; i++) {
		if (!binary_pattern__library(s->functions[i], lib, sizeof(lib), &func) ||
		    strlen(lib) < SHLIB_MAX_NAME)
			continue;
		return rw_error_set(err, EINVAL,
				    "spec.functions[%zu]: the library part (before ':') is longer "
				    "than %d bytes: name the library by its file name or a glob, "
				    "such as libssl*:SSL_write",
				    i, SHLIB_MAX_NAME - 1);
	}
	return 0;
}

/* spec.maxOverhead: "2%", "0.5%", "0", or a fraction of one CPU as a number. */
static int parse_max_overhead(const cJSON *v, struct probe_spec *s, struct rw_error *err)
{
	s->max_overhead = CALIBRATE_DEFAULT_MAX_OVERHEAD;
	if (!v)
		return 0;
	if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 1) {
		s->max_overhead = v->valuedouble;
		return 0;
	}
	if (cJSON_IsString(v) && !calibrate__parse_overhead(v->valuestring, &s->max_overhead))
		return 0;
	return rw_error_set(err, EINVAL,
			    "spec.maxOverhead must be a share of one CPU per process, such as "
			    "2%%, 0.5%% or 0 (no limit)");
}

int probe_spec__parse(const cJSON *spec, struct probe_spec *ret, struct rw_error *err)
{
	const cJSON *sel = field(spec, "selector"), *exe = field(spec, "executable");
	int e;

	memset(ret, 0, sizeof(*ret));
	if (!cJSON_IsObject(spec))
		e = rw_error_set(err, EINVAL, "spec is missing");
	else if (cJSON_IsString(field(spec, PROBE_REFUSED)))
		e = rw_error_set(err, E2BIG, "%s", field(spec, PROBE_REFUSED)->valuestring);
	else if (!cJSON_IsObject(sel))
		e = rw_error_set(
			err, EINVAL,
			"spec.selector is required: a label selector of the pods to probe");
	else if (!(e = probe_spec__check_bounds(spec, err)))
		e = match_labels(field(sel, "matchLabels"), ret, err);
	if (!e)
		e = match_expressions(field(sel, "matchExpressions"), ret, err);
	if (!e)
		e = strings(field(spec, "containers"), "spec.containers", 0, PROBE_MAX_CONTAINERS,
			    63, &ret->containers, &ret->ncontainers, err);
	if (!e)
		e = strings(field(spec, "functions"), "spec.functions", 1, PROBE_MAX_FUNCTIONS,
			    MAX_NAME, &ret->functions, &ret->nfunctions, err);
	if (!e)
		e = check_libraries(ret, err);
	if (!e && exe) {
		if (!string_ok(exe, MAX_PATH) || exe->valuestring[0] != '/')
			e = rw_error_set(err, EINVAL,
					 "spec.executable must be an absolute path inside the "
					 "container, such as /app/server");
		else if (!(ret->executable = strdup(exe->valuestring)))
			e = rw_error_set(err, ENOMEM, "out of memory");
	}
	if (!e)
		e = parse_durations(spec, ret, err);
	if (!e)
		e = parse_max_overhead(field(spec, "maxOverhead"), ret, err);
	if (!e)
		e = parse_slow_calls(field(spec, "slowCalls"), ret, err);
	if (!e)
		e = parse_capture(field(spec, "captureArguments"), ret, err);
	if (!e)
		e = parse_mode(field(spec, "mode"), ret, err);
	if (e)
		probe_spec__free(ret);
	return e;
}

static void free_strings(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

void probe_spec__free(struct probe_spec *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nselector; i++) {
		free(s->selector[i].key);
		free_strings(s->selector[i].values, s->selector[i].nvalues);
	}
	free(s->selector);
	free_strings(s->containers, s->ncontainers);
	free_strings(s->functions, s->nfunctions);
	free(s->executable);
	memset(s, 0, sizeof(*s));
}

static bool req_holds(const struct label_req *r, const struct labels *labels)
{
	const char *val = labels__get(labels, r->key);
	bool in = false;

	if (r->op == LABEL_EXISTS)
		return val != NULL;
	if (r->op == LABEL_DOES_NOT_EXIST)
		return val == NULL;
	for (size_t i = 0; val && !in && i < r->nvalues; i++)
		in = !strcmp(val, r->values[i]);
	return r->op == LABEL_IN ? in : !in;
}

bool probe_spec__selects(const struct probe_spec *s, const struct labels *labels)
{
	for (size_t i = 0; i < s->nselector; i++)
		if (!req_holds(&s->selector[i], labels))
			return false;
	return true;
}

bool probe_spec__wants_container(const struct probe_spec *s, const char *name)
{
	if (!s->ncontainers)
		return true;
	for (size_t i = 0; i < s->ncontainers; i++)
		if (!strcmp(s->containers[i], name))
			return true;
	return false;
}

// SPDX-License-Identifier: MIT
/* The FunctionProbe spec as the agent reads it, selectors, and latency in a status. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/probe.h"
#include "test.h"

static int parse(const char *json, struct probe_spec *s, struct rw_error *err)
{
	cJSON *doc = cJSON_Parse(json);
	int e = probe_spec__parse(doc, s, err);

	cJSON_Delete(doc);
	return e;
}

TEST(probe_spec_defaults)
{
	struct rw_error err = { "" };
	struct probe_spec s;
	bool ok;

	if (!ASSERT_OK(parse("{\"selector\":{\"matchLabels\":{\"app\":\"web\"}},"
			     "\"functions\":[\"main.*\"]}",
			     &s, &err)))
		return false;
	ok = ASSERT_EQ(s.nfunctions, 1) && ASSERT_STREQ(s.functions[0], "main.*") &&
	     ASSERT_EQ(s.lifetime_ns, PROBE_DEFAULT_LIFETIME_NS) &&
	     ASSERT_EQ(s.interval_ns, PROBE_DEFAULT_INTERVAL_NS) && ASSERT_EQ(s.threshold_ns, 0) &&
	     ASSERT_TRUE(s.executable == NULL) && ASSERT_EQ(s.ncontainers, 0) &&
	     ASSERT_TRUE(probe_spec__wants_container(&s, "anything"));
	probe_spec__free(&s);
	return ok;
}

TEST(probe_spec_fields)
{
	struct rw_error err = { "" };
	struct probe_spec s;
	bool ok;

	if (!ASSERT_OK(
		    parse("{\"selector\":{},\"functions\":[\"a\",\"b\"],\"containers\":[\"app\"],"
			  "\"executable\":\"/app/server\",\"slowThreshold\":\"100ms\","
			  "\"lifetime\":\"1h30m\",\"reportInterval\":\"2s\","
			  "\"slowCalls\":{\"keep\":12},\"window\":\"30s\"}",
			  &s, &err)))
		return CHECK(false, "%s", err.msg);
	ok = ASSERT_EQ(s.threshold_ns, 100000000ULL) && ASSERT_EQ(s.keep, 12) &&
	     ASSERT_EQ(s.window_ns, 30ULL * 1000000000ULL) &&
	     ASSERT_EQ(s.lifetime_ns, 5400ULL * 1000000000ULL) &&
	     ASSERT_EQ(s.interval_ns, 2000000000ULL) && ASSERT_STREQ(s.executable, "/app/server") &&
	     ASSERT_TRUE(probe_spec__wants_container(&s, "app")) &&
	     ASSERT_FALSE(probe_spec__wants_container(&s, "sidecar"));
	probe_spec__free(&s);
	return ok;
}

/* spec.mode: Trace by default, List asks only for the names; trim keeps it. */
TEST(probe_spec_mode)
{
	cJSON *spec = cJSON_Parse("{\"selector\":{},\"functions\":[\"main.*\"],\"mode\":\"List\"}");
	struct rw_error err = { "" };
	struct probe_spec s, t;
	bool ok;

	if (!ASSERT_TRUE(spec))
		return false;
	probe_spec__trim(spec);
	ok = ASSERT_OK(probe_spec__parse(spec, &s, &err)) && ASSERT_TRUE(s.list);
	probe_spec__free(&s);
	ok = ok &&
	     ASSERT_OK(parse("{\"selector\":{},\"functions\":[\"a\"],\"mode\":\"Trace\"}", &t,
			     &err)) &&
	     ASSERT_FALSE(t.list);
	probe_spec__free(&t);
	cJSON_Delete(spec);
	return ok;
}

TEST(probe_spec_slow_call_defaults)
{
	struct rw_error err = { "" };
	struct probe_spec s;
	bool ok;

	if (!ASSERT_OK(parse("{\"selector\":{},\"functions\":[\"a\"],\"slowCalls\":{}}", &s, &err)))
		return CHECK(false, "%s", err.msg);
	ok = ASSERT_EQ(s.keep, PROBE_DEFAULT_KEEP) &&
	     ASSERT_EQ(s.window_ns, PROBE_DEFAULT_WINDOW_NS);
	probe_spec__free(&s);
	return ok;
}

/* Each bad spec is refused with a message naming the field. */
TEST(probe_spec_errors)
{
	static const struct {
		const char *json, *msg;
	} cases[] = {
		{ "{\"functions\":[\"a\"]}", "spec.selector is required" },
		{ "{\"selector\":{}}", "spec.functions is required" },
		{ "{\"selector\":{},\"functions\":[]}", "spec.functions must have 1 to 64" },
		{ "{\"selector\":{},\"functions\":[\"\"]}",
		  "spec.functions[0] must be a non-empty" },
		{ "{\"selector\":{},\"functions\":[1]}", "spec.functions[0]" },
		{ "{\"selector\":{},\"functions\":[\"a\"],\"reportInterval\":\"1s\"}",
		  "spec.reportInterval must be at least 2s" },
		{ "{\"selector\":{},\"functions\":[\"a\"],\"lifetime\":\"0\"}",
		  "spec.lifetime must be longer than 0" },
		{ "{\"selector\":{},\"functions\":[\"a\"],\"slowThreshold\":\"fast\"}",
		  "spec.slowThreshold must be a duration" },
		{ "{\"selector\":{},\"functions\":[\"a\"],\"slowCalls\":{\"keep\":21}}",
		  "spec.slowCalls.keep must be a whole number of calls from 0 (none) to 20" },
		{ "{\"selector\":{},\"functions\":[\"a\"],\"slowCalls\":{\"keep\":2.5}}",
		  "spec.slowCalls.keep must be a whole number" },
		{ "{\"selector\":{},\"functions\":[\"a\"],\"slowCalls\":5}",
		  "spec.slowCalls must be an object" },
		{ "{\"selector\":{},\"functions\":[\"a\"],\"window\":\"5s\"}",
		  "spec.window must be at least spec.reportInterval" },
		{ "{\"selector\":{},\"functions\":[\"a\"],\"mode\":\"list\"}",
		  "spec.mode must be Trace (time the functions' calls) or List" },
		{ "{\"selector\":{},\"functions\":[\"a\"],\"mode\":true}", "spec.mode must be" },
		{ "{\"selector\":{},\"functions\":[\"a\"],\"executable\":\"app\"}",
		  "spec.executable must be an absolute path" },
		{ "{\"selector\":{\"matchLabels\":{\"a\":1}},\"functions\":[\"a\"]}",
		  "spec.selector.matchLabels[a]" },
		{ "{\"selector\":{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Is\"}]},"
		  "\"functions\":[\"a\"]}",
		  "matchExpressions[0].operator must be In, NotIn" },
		{ "{\"selector\":{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\"}]},"
		  "\"functions\":[\"a\"]}",
		  "matchExpressions[0].values is required" },
		{ "{\"selector\":{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\","
		  "\"values\":[\"x\"]}]},\"functions\":[\"a\"]}",
		  "values must be empty with Exists" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rw_error err = { "" };
		struct probe_spec s;

		if (!ASSERT_NEQ(parse(cases[i].json, &s, &err), 0) ||
		    !ASSERT_STRCONTAINS(err.msg, cases[i].msg))
			return false;
	}
	return true;
}

static bool selects(const struct probe_spec *s, const char *labels)
{
	cJSON *l = cJSON_Parse(labels);
	struct labels ls;
	bool r = !labels__build(l, &ls) && probe_spec__selects(s, &ls);

	labels__clear(&ls);
	cJSON_Delete(l);
	return r;
}

TEST(probe_selector)
{
	struct rw_error err = { "" };
	struct probe_spec s;
	bool ok;

	if (!ASSERT_OK(
		    parse("{\"selector\":{\"matchLabels\":{\"app\":\"web\"},\"matchExpressions\":["
			  "{\"key\":\"tier\",\"operator\":\"In\",\"values\":[\"a\",\"b\"]},"
			  "{\"key\":\"canary\",\"operator\":\"DoesNotExist\"},"
			  "{\"key\":\"zone\",\"operator\":\"NotIn\",\"values\":[\"x\"]},"
			  "{\"key\":\"team\",\"operator\":\"Exists\"}]},\"functions\":[\"f\"]}",
			  &s, &err)))
		return CHECK(false, "%s", err.msg);
	ok = ASSERT_TRUE(selects(&s, "{\"app\":\"web\",\"tier\":\"b\",\"team\":\"t\"}")) &&
	     ASSERT_TRUE(selects(
		     &s, "{\"app\":\"web\",\"tier\":\"a\",\"team\":\"t\",\"zone\":\"y\"}")) &&
	     ASSERT_FALSE(selects(&s, "{\"app\":\"db\",\"tier\":\"a\",\"team\":\"t\"}")) &&
	     ASSERT_FALSE(selects(&s, "{\"app\":\"web\",\"tier\":\"c\",\"team\":\"t\"}")) &&
	     ASSERT_FALSE(selects(
		     &s, "{\"app\":\"web\",\"tier\":\"a\",\"team\":\"t\",\"canary\":\"1\"}")) &&
	     ASSERT_FALSE(selects(
		     &s, "{\"app\":\"web\",\"tier\":\"a\",\"team\":\"t\",\"zone\":\"x\"}")) &&
	     ASSERT_FALSE(selects(&s, "{\"app\":\"web\",\"tier\":\"a\"}")) &&
	     ASSERT_FALSE(selects(&s, "null"));
	probe_spec__free(&s);
	if (!ok)
		return false;
	/* an empty selector selects every pod of the namespace */
	if (!ASSERT_OK(parse("{\"selector\":{},\"functions\":[\"f\"]}", &s, &err)))
		return false;
	ok = ASSERT_TRUE(selects(&s, "{}")) && ASSERT_TRUE(selects(&s, "null"));
	probe_spec__free(&s);
	return ok;
}

TEST(probe_spec_library_patterns)
{
	char json[1024], lib[400];
	struct rw_error err = { "" };
	struct probe_spec s;
	bool ok;

	if (!ASSERT_OK(parse("{\"selector\":{},\"functions\":[\"libssl*:SSL_write\","
			     "\"libc.so.6:malloc\",\"shop::Cart::total\"]}",
			     &s, &err)))
		return false;
	ok = ASSERT_EQ(s.nfunctions, 3) && ASSERT_STREQ(s.functions[0], "libssl*:SSL_write");
	probe_spec__free(&s);
	memset(lib, 'a', 300);
	lib[300] = '\0';
	snprintf(json, sizeof(json), "{\"selector\":{},\"functions\":[\"main.x\",\"%s.so:f\"]}",
		 lib);
	return ok && ASSERT_EQ(parse(json, &s, &err), -EINVAL) &&
	       ASSERT_STRCONTAINS(err.msg, "spec.functions[1]: the library part");
}

/* {"selector":{"matchLabels":{"k0":"v",...}},"functions":["f"]} with n labels. */
static char *many_labels_spec(size_t n)
{
	size_t len = 64 + n * 24, off;
	char *json = malloc(len);

	if (!json)
		return NULL;
	off = (size_t)snprintf(json, len, "{\"selector\":{\"matchLabels\":{");
	for (size_t i = 0; i < n; i++)
		off += (size_t)snprintf(json + off, len - off, "%s\"k%zu\":\"v\"", i ? "," : "", i);
	snprintf(json + off, len - off, "}},\"functions\":[\"f\"]}");
	return json;
}

/* A spec over the bounds the CRD sets is refused before anything of it is
 * copied, with a message saying what to change. */
TEST(probe_spec_bounds)
{
	char json[2048], prefix[300], name[80];
	struct rw_error err = { "" };
	struct probe_spec s;
	char *big = many_labels_spec(80000), *max = many_labels_spec(64);
	bool ok;

	ok = ASSERT_TRUE(big && max) && ASSERT_EQ(parse(big, &s, &err), -E2BIG) &&
	     ASSERT_STRCONTAINS(err.msg, "spec.selector.matchLabels has more than 64 entries: "
					 "select the pods by fewer labels") &&
	     ASSERT_EQ(s.nselector, 0) && ASSERT_OK(parse(max, &s, &err)) &&
	     ASSERT_EQ(s.nselector, 64);
	probe_spec__free(&s);
	free(big);
	free(max);
	if (!ok)
		return false;

	/* Kubernetes' label keys: a prefix of up to 253, a name of up to 63 */
	memset(prefix, 'p', 253);
	prefix[253] = '\0';
	memset(name, 'n', 63);
	name[63] = '\0';
	snprintf(json, sizeof(json),
		 "{\"selector\":{\"matchLabels\":{\"%s/%s\":\"v\"},\"matchExpressions\":[{"
		 "\"key\":\"%s/%s\",\"operator\":\"Exists\"}]},\"functions\":[\"f\"]}",
		 prefix, name, prefix, name);
	if (!ASSERT_OK(parse(json, &s, &err)))
		return CHECK(false, "%s", err.msg);
	probe_spec__free(&s);
	snprintf(json, sizeof(json),
		 "{\"selector\":{\"matchLabels\":{\"%sx/%s\":\"v\"}},\"functions\":[\"f\"]}",
		 prefix, name);
	if (!ASSERT_EQ(parse(json, &s, &err), -EINVAL) ||
	    !ASSERT_STRCONTAINS(err.msg, "is not a label key: a name of 1 to 63 characters"))
		return false;
	snprintf(json, sizeof(json),
		 "{\"selector\":{\"matchExpressions\":[{\"key\":\"a/%sx\",\"operator\":\"Exists\""
		 "}]},\"functions\":[\"f\"]}",
		 name);
	if (!ASSERT_EQ(parse(json, &s, &err), -EINVAL) ||
	    !ASSERT_STRCONTAINS(err.msg, "matchExpressions[0].key must be a label key"))
		return false;
	for (const char *bad = "a/b/c\0/a\0a/\0"; *bad; bad += strlen(bad) + 1) {
		snprintf(json, sizeof(json),
			 "{\"selector\":{\"matchLabels\":{\"%s\":\"v\"}},\"functions\":[\"f\"]}",
			 bad);
		if (!ASSERT_EQ(parse(json, &s, &err), -EINVAL))
			return CHECK(false, "%s", bad);
	}
	return true;
}

/* The other lists of a spec: each bound says what to change. */
TEST(probe_spec_list_bounds)
{
	static const struct {
		const char *head, *item, *tail;
		size_t n;
		const char *msg;
	} cases[] = {
		{ "{\"functions\":[\"f\"],\"selector\":{\"matchExpressions\":[",
		  "{\"key\":\"a\",\"operator\":\"Exists\"}", "]}}", 33,
		  "spec.selector.matchExpressions has more than 32 entries" },
		{ "{\"functions\":[\"f\"],\"selector\":{},\"containers\":[", "\"c\"", "]}", 65,
		  "spec.containers has more than 64 entries" },
		{ "{\"selector\":{},\"functions\":[", "\"f\"", "]}", 65,
		  "spec.functions has more than 64 entries" },
	};
	struct rw_error err = { "" };
	struct probe_spec s;
	char json[8192];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t off = (size_t)snprintf(json, sizeof(json), "%s", cases[i].head);

		for (size_t k = 0; k < cases[i].n; k++)
			off += (size_t)snprintf(json + off, sizeof(json) - off, "%s%s",
						k ? "," : "", cases[i].item);
		snprintf(json + off, sizeof(json) - off, "%s", cases[i].tail);
		if (!ASSERT_EQ(parse(json, &s, &err), -E2BIG) ||
		    !ASSERT_STRCONTAINS(err.msg, cases[i].msg))
			return CHECK(false, "%s", json);
	}
	/* 257 values of one In */
	{
		size_t off = (size_t)snprintf(json, sizeof(json),
					      "{\"selector\":{\"matchExpressions\":[{\"key\":\"a\","
					      "\"operator\":\"In\",\"values\":[");

		for (size_t k = 0; k < 257; k++)
			off += (size_t)snprintf(json + off, sizeof(json) - off, "%s\"v%zu\"",
						k ? "," : "", k);
		snprintf(json + off, sizeof(json) - off, "]}]},\"functions\":[\"f\"]}");
	}
	return ASSERT_EQ(parse(json, &s, &err), -E2BIG) &&
	       ASSERT_STRCONTAINS(err.msg, "spec.selector.matchExpressions[0].values has more "
					   "than 256 entries");
}

/* What the agent's cache keeps of a spec: the fields a spec has, and of one
 * over the bounds only why, which the parser then gives. */
TEST(probe_spec_trim)
{
	char *big = many_labels_spec(80000);
	cJSON *spec = cJSON_Parse(big), *ok_spec;
	struct rw_error err = { "" };
	struct probe_spec s;
	bool ok;

	free(big);
	if (!ASSERT_TRUE(spec))
		return false;
	probe_spec__trim(spec);
	ok = ASSERT_EQ(cJSON_GetArraySize(spec), 1) &&
	     ASSERT_STRCONTAINS(cJSON_GetStringValue(cJSON_GetObjectItem(spec, PROBE_REFUSED)),
				"spec.selector.matchLabels has more than 64 entries") &&
	     ASSERT_EQ(probe_spec__parse(spec, &s, &err), -E2BIG) &&
	     ASSERT_STRCONTAINS(err.msg, "spec.selector.matchLabels has more than 64 entries");
	cJSON_Delete(spec);
	if (!ok)
		return false;
	ok_spec = cJSON_Parse("{\"selector\":{\"matchLabels\":{\"app\":\"web\"},\"junk\":[1,2]},"
			      "\"functions\":[\"f\"],\"junk\":\"xxxx\",\"lifetime\":\"2h\"}");
	probe_spec__trim(ok_spec);
	probe_spec__trim(ok_spec);
	ok = ASSERT_TRUE(ok_spec) && ASSERT_FALSE(cJSON_GetObjectItem(ok_spec, "junk")) &&
	     ASSERT_FALSE(cJSON_GetObjectItem(cJSON_GetObjectItem(ok_spec, "selector"), "junk")) &&
	     ASSERT_OK(probe_spec__parse(ok_spec, &s, &err)) && ASSERT_EQ(s.nselector, 1) &&
	     ASSERT_EQ(s.lifetime_ns, 7200ULL * 1000000000ULL);
	probe_spec__free(&s);
	cJSON_Delete(ok_spec);
	return ok;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* A selector of n requirements against a pod of n labels: one lookup each
 * (a scan of the pod's labels for each took seconds at 80,000). The spec is
 * built by hand: the parser refuses more than 64 labels. */
TEST(probe_selector_by_hash)
{
	enum { N = 80000 };
	cJSON *pod = cJSON_CreateObject();
	struct probe_spec s = { 0 };
	struct labels ls = { 0 };
	char key[32], val[32];
	uint64_t t0, t1;
	bool ok = false;

	s.selector = calloc(N, sizeof(*s.selector));
	if (!ASSERT_TRUE(pod && s.selector))
		goto out;
	for (size_t i = 0; i < N; i++) {
		struct label_req *r = &s.selector[s.nselector++];

		snprintf(key, sizeof(key), "team.example.com/k%zu", i);
		snprintf(val, sizeof(val), "v%zu", i * 7);
		cJSON_AddStringToObject(pod, key, val);
		r->op = LABEL_IN;
		r->key = strdup(key);
		r->values = calloc(1, sizeof(char *));
		if (!r->key || !r->values || !(r->values[0] = strdup(val)))
			goto out;
		r->nvalues = 1;
	}
	if (!ASSERT_OK(labels__build(pod, &ls)) || !ASSERT_EQ(ls.n, N))
		goto out;
	t0 = now_ns();
	ok = ASSERT_TRUE(probe_spec__selects(&s, &ls));
	t1 = now_ns();
	printf("  a selector of %d labels against a pod of %d: %.2f ms\n", N, N,
	       (double)(t1 - t0) / 1e6);
	/* the last value differs; then the last key is missing */
	free(s.selector[N - 1].values[0]);
	s.selector[N - 1].values[0] = strdup("other");
	ok = ok && ASSERT_FALSE(probe_spec__selects(&s, &ls));
	s.selector[N - 1].op = LABEL_DOES_NOT_EXIST;
	ok = ok && ASSERT_FALSE(probe_spec__selects(&s, &ls));
	s.selector[N - 1].key[0] = 'X';
	ok = ok && ASSERT_TRUE(probe_spec__selects(&s, &ls));
	s.selector[N - 1].op = LABEL_EXISTS;
	ok = ok && ASSERT_FALSE(probe_spec__selects(&s, &ls));
out:
	labels__clear(&ls);
	probe_spec__free(&s);
	cJSON_Delete(pod);
	return ok;
}

/* The index finds what cJSON finds: the first of a repeated key, no label
 * for a value that is not a string, nothing in what is not an object. */
TEST(labels_index)
{
	cJSON *l = cJSON_Parse("{\"a\":\"1\",\"b\":2,\"a\":\"3\",\"\":\"e\",\"c\":null}");
	cJSON *arr = cJSON_Parse("[\"a\"]");
	struct labels ls, none;
	bool ok;

	if (!ASSERT_TRUE(l && arr) || !ASSERT_OK(labels__build(l, &ls)))
		return false;
	ok = ASSERT_STREQ(labels__get(&ls, "a"), "1") && ASSERT_TRUE(!labels__get(&ls, "b")) &&
	     ASSERT_STREQ(labels__get(&ls, ""), "e") && ASSERT_TRUE(!labels__get(&ls, "c")) &&
	     ASSERT_TRUE(!labels__get(&ls, "d")) && ASSERT_EQ(ls.n, 4) &&
	     ASSERT_OK(labels__build(arr, &none)) && ASSERT_EQ(none.n, 0) &&
	     ASSERT_TRUE(!labels__get(&none, "a")) && ASSERT_TRUE(!labels__get(NULL, "a"));
	labels__clear(&ls);
	labels__clear(&none);
	cJSON_Delete(l);
	cJSON_Delete(arr);
	return ok;
}

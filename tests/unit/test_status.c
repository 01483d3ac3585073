// SPDX-License-Identifier: MIT
/* The status document: node entry, summary, conditions, from results tables. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "status.h"
#include "test.h"

/* What a node writes, the summary writer reads back exactly. */
TEST(status_latency_round_trip)
{
	struct latency *l = calloc(1, sizeof(*l)), *back = calloc(1, sizeof(*back));
	cJSON *obj = cJSON_CreateObject();
	bool ok = false;

	if (!l || !back || !obj)
		goto out;
	for (uint64_t ns = 1; ns < 5000000000ULL; ns = ns * 3 + 7)
		latency__record(l, ns);
	l->orphans = 3;
	if (!ASSERT_OK(status_latency__to_json(l, obj)) ||
	    !ASSERT_OK(status_latency__from_json(obj, back)))
		goto out;
	ok = ASSERT_TRUE(!memcmp(l, back, sizeof(*l))) &&
	     ASSERT_STREQ(cJSON_GetStringValue(cJSON_GetObjectItem(obj, "max")), "1.743s");
out:
	cJSON_Delete(obj);
	free(l);
	free(back);
	return ok;
}

TEST(status_latency_rejects_bad_buckets)
{
	static const char *const bad[] = {
		"{\"buckets\":[[528,1]]}",     "{\"buckets\":[[3,1],[3,1]]}",
		"{\"buckets\":[[4,1],[3,1]]}", "{\"buckets\":[[-1,1]]}",
		"{\"buckets\":[[1,1.5]]}",     "{\"buckets\":[[1]]}",
		"{\"calls\":\"1\"}",	       "{\"buckets\":{}}",
		"{\"calls\":1e300}",	       "[]",
	};
	struct latency *l = calloc(1, sizeof(*l));
	bool ok = true;

	for (size_t i = 0; l && ok && i < sizeof(bad) / sizeof(bad[0]); i++) {
		cJSON *doc = cJSON_Parse(bad[i]);

		ok = CHECK(status_latency__from_json(doc, l) == -EINVAL, "accepted %s", bad[i]);
		cJSON_Delete(doc);
	}
	free(l);
	return ok && l;
}

/* The item of arr whose key is value. */
static const cJSON *item_where(const cJSON *arr, const char *key, const char *value)
{
	const cJSON *item;

	cJSON_ArrayForEach(item, arr)
	{
		if (kobj_str(item, key) && !strcmp(kobj_str(item, key), value))
			return item;
	}
	return NULL;
}

static const cJSON *fn_named(const cJSON *fns, const char *name)
{
	return item_where(fns, "name", name);
}

static struct latency *latency_of(uint64_t first, uint64_t n, uint64_t step)
{
	struct latency *l = calloc(1, sizeof(*l));

	for (uint64_t i = 0; l && i < n; i++)
		latency__record(l, first + i * step);
	return l;
}

/* The node entry takes each function's mode from the table: a tail-calling
 * C function is entry+ret+tailcall, as `retwatch trace` says. */
TEST(status_node_entry_from_results)
{
	const char *path = test__fixture("c/nopie/cfix");
	const char *pats[] = { "dispatch", "scale" };
	struct traceset_env env = {};
	struct binary_match m = {};
	struct errlist errs = {};
	struct results *r = results__new(NULL);
	struct traceset *ts = traceset__new(&env, r, "shop", "payments");
	struct latency *l = latency_of(1000, 50, 100);
	struct binary *b = NULL;
	struct rw_error err;
	cJSON *e = NULL;
	const cJSON *fns, *f;
	bool ok = false;

	if (!path) {
		test__skip("no C fixture (make fixtures)");
		ok = true;
		goto out;
	}
	if (!ASSERT_TRUE(r && ts && l) ||
	    !ASSERT_TRUE(!status__node_entry("n1", 3, ts, &errs, r, false)))
		goto out;
	b = binary__open(NULL, path, &err);
	if (!ASSERT_TRUE(b) || !ASSERT_OK(binary__match(b, pats, 2, 16, &m, &err)) ||
	    !ASSERT_EQ(m.nfuncs, 2))
		goto out;
	for (size_t i = 0; i < m.nfuncs; i++)
		ASSERT_TRUE(results__describe(r, m.funcs[i]) != SIZE_MAX);
	results__seed(r, "dispatch", l);
	errlist__add(&errs, "pod b: second");
	errlist__add(&errs, "pod a: first");
	e = status__node_entry("n1", 3, ts, &errs, r, false);
	fns = kobj_get(e, "functions");
	f = fn_named(fns, "dispatch");
	ok = ASSERT_TRUE(e) && ASSERT_STREQ(kobj_str(e, "node"), "n1") &&
	     ASSERT_EQ(kobj_int(e, "generation", -1), 3) &&
	     ASSERT_TRUE(cJSON_IsFalse(kobj_get(e, "attached"))) &&
	     ASSERT_EQ(kobj_int(e, "processes", -1), 0) &&
	     ASSERT_STREQ(cJSON_GetArrayItem(kobj_get(e, "errors"), 0)->valuestring,
			  "pod a: first") &&
	     ASSERT_EQ(cJSON_GetArraySize(fns), 2) && ASSERT_TRUE(f) &&
	     ASSERT_STREQ(kobj_str(f, "mode"), "entry+ret+tailcall") &&
	     ASSERT_EQ(kobj_int(f, "calls", -1), 50) &&
	     ASSERT_STREQ(kobj_str(fn_named(fns, "scale"), "mode"), "entry+ret") &&
	     ASSERT_EQ(kobj_int(fn_named(fns, "scale"), "calls", -1), 0);
	for (size_t i = 0; ok && i < m.nfuncs; i++)
		if (!strcmp(m.funcs[i]->name, "dispatch"))
			ok = ASSERT_EQ(kobj_int(f, "returnSites", -1), m.funcs[i]->nreturns) &&
			     ASSERT_TRUE(m.funcs[i]->mode == FUNC_MODE_ENTRY_RET_TAILCALL);
out:
	cJSON_Delete(e);
	binary_match__clear(&m);
	binary__put(b);
	errlist__clear(&errs);
	traceset__free(ts, NULL);
	results__free(r);
	free(l);
	return ok;
}

/* What a node wrote, a restarted agent carries on from, exactly. */
TEST(status_seed_round_trip)
{
	struct traceset_env env = {};
	struct errlist errs = {};
	struct results *r = results__new(NULL), *again = results__new(NULL);
	struct traceset *ts = traceset__new(&env, r, "shop", "payments");
	struct latency *l = latency_of(5000, 300, 977), back;
	cJSON *doc = NULL;
	bool ok = false;

	if (!ASSERT_TRUE(r && again && ts && l) || !ASSERT_OK(results__seed(r, "main.f", l)))
		goto out;
	doc = status__node_doc(status__node_entry("n1", 7, ts, &errs, r, false));
	ok = ASSERT_TRUE(cJSON_IsString(
		     kobj_get(cJSON_GetArrayItem(kobj_get(doc, "nodes"), 0), "lastUpdate"))) &&
	     ASSERT_FALSE(status__seed(doc, "n2", 7, again)) &&
	     ASSERT_FALSE(status__seed(doc, "n1", 6, again)) &&
	     ASSERT_EQ(results__nrows(again), 0) &&
	     ASSERT_TRUE(status__seed(doc, "n1", 7, again)) && ASSERT_EQ(results__nrows(again), 1);
	results__read(again, 0, NULL, NULL, &back);
	ok = ok && ASSERT_TRUE(!memcmp(&back, l, sizeof(back)));
out:
	cJSON_Delete(doc);
	traceset__free(ts, NULL);
	results__free(r);
	results__free(again);
	free(l);
	return ok;
}

/* A node entry of generation gen with one function's latency. */
static cJSON *node_json(const char *node, int gen, bool attached, const char *err, const char *fn,
			const struct latency *l)
{
	cJSON *e = cJSON_CreateObject(), *f = cJSON_CreateObject(), *pods;

	cJSON_AddStringToObject(e, "node", node);
	cJSON_AddNumberToObject(e, "generation", gen);
	cJSON_AddBoolToObject(e, "attached", attached);
	pods = cJSON_AddArrayToObject(e, "pods");
	cJSON_AddItemToArray(pods, cJSON_CreateObject());
	cJSON_AddNumberToObject(e, "processes", 2);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(e, "errors"),
			     err ? cJSON_CreateString(err) : cJSON_CreateNull());
	cJSON_AddStringToObject(f, "name", fn);
	cJSON_AddStringToObject(f, "mode", "entry+ret");
	cJSON_AddNumberToObject(f, "returnSites", 2);
	status_latency__to_json(l, f);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(e, "functions"), f);
	return e;
}

static const cJSON *condition(const cJSON *status, const char *type)
{
	return item_where(kobj_get(status, "conditions"), "type", type);
}

/* Every node of this generation merged exactly; stale generations left out. */
TEST(status_summary_merges_nodes)
{
	struct status_probe p = { "uid-1", "shop", "payments", 4 };
	struct status_state st = { .valid = true, .expires = 2000000000 };
	struct latency *fast = latency_of(1000, 100, 10), *slow = latency_of(900000, 40, 1000);
	struct latency *stale = latency_of(5, 1000, 1), merged = {}, got;
	cJSON *old = cJSON_CreateObject(), *nodes = cJSON_AddArrayToObject(old, "nodes"), *doc;
	const cJSON *sum, *fns;
	bool ok;

	cJSON_AddItemToArray(nodes, node_json("n1", 4, true, NULL, "main.fast", fast));
	cJSON_AddItemToArray(nodes, node_json("n2", 4, false, "pod x: broken", "main.slow", slow));
	cJSON_AddItemToArray(nodes, node_json("n3", 4, true, NULL, "main.fast", fast));
	cJSON_AddItemToArray(nodes, node_json("n4", 3, true, NULL, "main.fast", stale));
	doc = status__summary_doc(&p, &st, old);
	sum = kobj_get(doc, "summary");
	fns = kobj_get(sum, "functions");
	latency__merge(&merged, fast);
	latency__merge(&merged, fast);
	ok = ASSERT_EQ(kobj_int(doc, "observedGeneration", -1), 4) &&
	     ASSERT_EQ(kobj_int(sum, "nodes", -1), 3) && ASSERT_EQ(kobj_int(sum, "pods", -1), 3) &&
	     ASSERT_EQ(kobj_int(sum, "processes", -1), 6) &&
	     ASSERT_EQ(kobj_int(sum, "calls", -1), 240) &&
	     ASSERT_STREQ(kobj_str(sum, "slowest"), "main.slow") &&
	     ASSERT_OK(status_latency__from_json(fn_named(fns, "main.fast"), &got)) &&
	     ASSERT_TRUE(!memcmp(&got, &merged, sizeof(got))) &&
	     ASSERT_STREQ(kobj_str(condition(doc, "Ready"), "status"), "True") &&
	     ASSERT_STREQ(kobj_str(condition(doc, "Expired"), "status"), "False") &&
	     ASSERT_STREQ(kobj_str(condition(doc, "Attached"), "message"),
			  "probes live on 6 processes in 3 pods on 3 nodes") &&
	     ASSERT_FALSE(kobj_get(sum, "lastUpdate"));
	status__stamp_summary(doc);
	ok = ok && ASSERT_TRUE(kobj_str(kobj_get(doc, "summary"), "lastUpdate"));
	cJSON_Delete(doc);
	cJSON_Delete(old);
	free(fast);
	free(slow);
	free(stale);
	return ok;
}

/* Conditions say what is wrong and keep their transition time while they hold. */
TEST(status_conditions)
{
	struct status_probe p = { "uid-1", "shop", "payments", 2 };
	struct status_state invalid = { .spec_err = "spec.functions: give 1 to 64 names" };
	struct status_state expired = { .valid = true, .expired = true, .expires = 0 };
	struct status_state active = { .valid = true, .expires = 2000000000 };
	struct latency *l = latency_of(100, 1, 1);
	cJSON *old = cJSON_Parse("{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
				 "\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"},"
				 "{\"type\":\"Attached\",\"status\":\"True\","
				 "\"lastTransitionTime\":\"2026-01-02T00:00:00Z\"}],\"nodes\":[]}");
	cJSON *doc = status__summary_doc(&p, &invalid, old);
	const cJSON *c = condition(doc, "Ready");
	bool ok = ASSERT_STREQ(kobj_str(c, "status"), "False") &&
		  ASSERT_STREQ(kobj_str(c, "reason"), "InvalidSpec") &&
		  ASSERT_STREQ(kobj_str(c, "message"), invalid.spec_err) &&
		  ASSERT_STRCONTAINS(kobj_str(c, "lastTransitionTime"), "Z") &&
		  ASSERT_TRUE(strcmp(kobj_str(c, "lastTransitionTime"), "2026-01-01T00:00:00Z")) &&
		  ASSERT_FALSE(kobj_get(doc, "summary"));

	cJSON_Delete(doc);
	doc = status__summary_doc(&p, &expired, old);
	ok = ok && ASSERT_STREQ(kobj_str(condition(doc, "Expired"), "reason"), "LifetimeEnded") &&
	     ASSERT_STREQ(kobj_str(condition(doc, "Attached"), "reason"), "Expired") &&
	     ASSERT_STREQ(kobj_str(condition(doc, "Ready"), "lastTransitionTime"),
			  "2026-01-01T00:00:00Z");
	cJSON_Delete(doc);
	doc = status__summary_doc(&p, &active, old);
	ok = ok && ASSERT_STREQ(kobj_str(condition(doc, "Attached"), "reason"), "NoMatchingPods") &&
	     ASSERT_STRCONTAINS(kobj_str(condition(doc, "Attached"), "message"), "namespace shop");
	cJSON_Delete(doc);
	cJSON_AddItemToArray(cJSON_GetObjectItem(old, "nodes"),
			     node_json("n1", 2, false, "pod a: no process", "f", l));
	doc = status__summary_doc(&p, &active, old);
	ok = ok && ASSERT_STREQ(kobj_str(condition(doc, "Attached"), "reason"), "AttachFailed") &&
	     ASSERT_STREQ(kobj_str(condition(doc, "Attached"), "message"),
			  "pod a: no process (all errors: status.nodes[].errors)") &&
	     ASSERT_EQ(kobj_int(condition(doc, "Attached"), "observedGeneration", -1), 2);
	cJSON_Delete(doc);
	cJSON_Delete(old);
	free(l);
	return ok;
}

TEST(status_names_and_body)
{
	struct status_probe p = { "uid-9", "shop", "payments", 1 };
	char key[STATUS_KEY_LEN], *path = status__path("shop", "payments");
	char *manager = status__node_manager("node-a"), *body;
	cJSON *doc;
	bool ok;

	status__node_key("uid-9", key, sizeof(key));
	ok = ASSERT_STREQ(key, "node/uid-9");
	status__summary_key("uid-9", key, sizeof(key));
	body = status__apply_body(&p, cJSON_CreateObject());
	doc = cJSON_Parse(body);
	ok = ok && ASSERT_STREQ(key, "summary/uid-9") &&
	     ASSERT_STREQ(path, "/apis/retwatch.io/v1alpha1/namespaces/shop/functionprobes/"
				"payments/status") &&
	     ASSERT_STREQ(manager, "retwatch-agent-node-a") &&
	     ASSERT_STREQ(kobj_str(doc, "kind"), "FunctionProbe") &&
	     ASSERT_STREQ(kobj_uid(doc), "uid-9") && ASSERT_STREQ(kobj_namespace(doc), "shop");
	cJSON_Delete(doc);
	free(body);
	free(path);
	free(manager);
	return ok;
}

// SPDX-License-Identifier: MIT
/* What agents write: node reports from results tables, and the summary and
 * conditions merged from reports. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "kube/kobj.h"
#include "agent/status.h"
#include "report/summary.h"
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
	l->lost = 2;
	l->slow_dropped = 5;
	l->tail_exits = 4;
	l->inlined = 11;
	l->inlined_untimed = 5;
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

TEST(status_latency_bucket_counts_text)
{
	static const char *const bad[] = {
		"{\"bucketCounts\":\"528:1\"}",
		"{\"bucketCounts\":\"3:1 3:1\"}",
		"{\"bucketCounts\":\"4:1 3:1\"}",
		"{\"bucketCounts\":\"-1:1\"}",
		"{\"bucketCounts\":\"1:1.5\"}",
		"{\"bucketCounts\":\"1\"}",
		"{\"bucketCounts\":\"1:\"}",
		"{\"bucketCounts\":\":1\"}",
		"{\"bucketCounts\":\" 1:1\"}",
		"{\"bucketCounts\":\"1:1 \"}",
		"{\"bucketCounts\":\"1:1  2:1\"}",
		"{\"bucketCounts\":\"1:1,2:1\"}",
		"{\"bucketCounts\":\"1:9007199254740993\"}",
		"{\"bucketCounts\":\"1:99999999999999999999\"}",
		"{\"bucketCounts\":\"00000000000000000001:1\"}",
		"{\"bucketCounts\":5}",
		"{\"bucketCounts\":[[1,1]]}",
	};
	struct latency *l = calloc(1, sizeof(*l)), *back = calloc(1, sizeof(*back));
	cJSON *obj = cJSON_CreateObject(), *doc;
	bool ok = l && back && obj;

	for (size_t i = 0; ok && i < sizeof(bad) / sizeof(bad[0]); i++) {
		doc = cJSON_Parse(bad[i]);
		ok = CHECK(doc && status_latency__from_json(doc, back) == -EINVAL, "accepted %s",
			   bad[i]);
		cJSON_Delete(doc);
	}
	/* every bucket at the largest count fits, and comes back */
	for (unsigned int i = 0; ok && i < RW_HIST_BUCKETS; i++)
		l->buckets[i] = 9007199254740992ULL;
	ok = ok && ASSERT_OK(status_latency__to_json(l, obj)) &&
	     ASSERT_OK(status_latency__from_json(obj, back)) &&
	     ASSERT_OK(memcmp(l->buckets, back->buckets, sizeof(l->buckets)));
	cJSON_Delete(obj);
	/* the text as written; the pairs of agents before it still read */
	memset(l, 0, sizeof(*l));
	latency__record(l, 1);
	latency__record(l, 1);
	latency__record(l, 20);
	obj = cJSON_CreateObject();
	ok = ok && obj && ASSERT_OK(status_latency__to_json(l, obj)) &&
	     ASSERT_STREQ(cJSON_GetStringValue(cJSON_GetObjectItem(obj, "bucketCounts")),
			  "1:2 20:1");
	doc = cJSON_Parse("{\"calls\":3,\"buckets\":[[1,2],[20,1]]}");
	ok = ok && doc && ASSERT_OK(status_latency__from_json(doc, back)) &&
	     ASSERT_EQ(back->buckets[1], 2) && ASSERT_EQ(back->buckets[20], 1) &&
	     ASSERT_EQ(back->calls, 3);
	cJSON_Delete(doc);
	cJSON_Delete(obj);
	free(l);
	free(back);
	return ok;
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
	    !ASSERT_TRUE(!status__node_entry("n1", 3, ts, &errs, r, NULL, 0, false, 0, 0, NULL)))
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
	e = status__node_entry("n1", 3, ts, &errs, r, NULL, 0, false, 0, 0, NULL);
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

/* What a node wrote, a restarted agent carries on from, exactly: from its
 * report, or from its entry in the probe's status (agents before reports). */

/* o with every bucketCounts text turned into the [index, count] pairs of earlier agents. */
static cJSON *as_pairs(cJSON *o)
{
	cJSON *text = cJSON_GetObjectItem(o, "bucketCounts"), *item;

	if (cJSON_IsString(text)) {
		cJSON *pairs = cJSON_CreateArray();
		const char *p = text->valuestring;
		unsigned int i;
		unsigned long long n;
		int len;

		while (sscanf(p, "%u:%llu%n", &i, &n, &len) == 2) {
			cJSON *pair = cJSON_CreateArray();

			cJSON_AddItemToArray(pair, cJSON_CreateNumber(i));
			cJSON_AddItemToArray(pair, cJSON_CreateNumber((double)n));
			cJSON_AddItemToArray(pairs, pair);
			p += len;
		}
		cJSON_DeleteItemFromObject(o, "bucketCounts");
		cJSON_AddItemToObject(o, "buckets", pairs);
	}
	cJSON_ArrayForEach(item, o)
	{
		if (cJSON_IsObject(item) || cJSON_IsArray(item))
			as_pairs(item);
	}
	return o;
}
TEST(status_seed_round_trip)
{
	struct status_probe p = { "uid-1", "shop", "payments", 7, false };
	struct traceset_env env = {};
	struct errlist errs = {};
	struct results *r = results__new(NULL), *again = results__new(NULL);
	struct results *legacy = results__new(NULL);
	struct traceset *ts = traceset__new(&env, r, "shop", "payments");
	struct latency *l = latency_of(5000, 300, 977), back;
	cJSON *doc = NULL, *status = NULL;
	char *body = NULL;
	bool ok = false;

	if (!ASSERT_TRUE(r && again && legacy && ts && l) ||
	    !ASSERT_OK(results__seed(r, "main.f", l)))
		goto out;
	body = status__report_body(
		&p, "n1", status__node_entry("n1", 7, ts, &errs, r, NULL, 0, false, 0, 0, NULL),
		2 * NS_PER_S);
	doc = cJSON_Parse(body);
	ok = ASSERT_TRUE(cJSON_IsString(kobj_get(kobj_get(doc, "status"), "lastUpdate"))) &&
	     ASSERT_STREQ(kobj_str(kobj_get(doc, "status"), "reportInterval"), "2.000s") &&
	     ASSERT_FALSE(status__seed_report(doc, 6, again)) &&
	     ASSERT_EQ(results__nrows(again), 0) &&
	     ASSERT_TRUE(status__seed_report(doc, 7, again)) && ASSERT_EQ(results__nrows(again), 1);
	results__read(again, 0, NULL, NULL, &back);
	ok = ok && ASSERT_TRUE(!memcmp(&back, l, sizeof(back)));
	/* the same entry in a probe's status.nodes[], as agents wrote it then: [index, count] pairs */
	status = cJSON_CreateObject();
	cJSON_AddItemToArray(cJSON_AddArrayToObject(status, "nodes"),
			     as_pairs(cJSON_Duplicate(kobj_get(doc, "status"), true)));
	ok = ok && ASSERT_TRUE(status__legacy_entry(status, "n1")) &&
	     ASSERT_FALSE(status__legacy_entry(status, "n2")) &&
	     ASSERT_FALSE(status__seed(status, "n2", 7, legacy)) &&
	     ASSERT_FALSE(status__seed(status, "n1", 6, legacy)) &&
	     ASSERT_TRUE(status__seed(status, "n1", 7, legacy));
	results__read(legacy, 0, NULL, NULL, &back);
	ok = ok && ASSERT_TRUE(!memcmp(&back, l, sizeof(back)));
out:
	cJSON_Delete(doc);
	cJSON_Delete(status);
	free(body);
	traceset__free(ts, NULL);
	results__free(r);
	results__free(again);
	results__free(legacy);
	free(l);
	return ok;
}

/* A pod's own latency in a function of a report, of revision rev. */
static void add_pod(cJSON *f, const char *pod, const char *rev, const struct latency *l)
{
	cJSON *arr = cJSON_GetObjectItem(f, "pods"), *o = cJSON_CreateObject();

	if (!arr)
		arr = cJSON_AddArrayToObject(f, "pods");
	cJSON_AddStringToObject(o, "name", pod);
	cJSON_AddStringToObject(o, "container", "app");
	if (rev)
		cJSON_AddStringToObject(o, "revision", rev);
	status_latency__to_json(l, o);
	cJSON_AddItemToArray(arr, o);
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

/* A FunctionProbeReport of node holding entry (taken). */
static cJSON *report_json(const char *node, cJSON *entry)
{
	cJSON *r = cJSON_CreateObject();

	cJSON_AddStringToObject(r, "node", node);
	cJSON_AddItemToObject(r, "status", entry);
	return r;
}

static const cJSON *condition(const cJSON *status, const char *type)
{
	return item_where(kobj_get(status, "conditions"), "type", type);
}

/* Adds report (taken) to s. */
static bool add_report(struct summary *s, cJSON *report)
{
	int e = summary__add_report(s, report);

	cJSON_Delete(report);
	return !e;
}

/* Every node of this generation merged exactly, once; stale generations
 * left out; entries of agents before reports merged for nodes without one. */
TEST(status_summary_merges_reports)
{
	struct status_probe p = { "uid-1", "shop", "payments", 4, false };
	struct status_state st = { .valid = true, .expires = 2000000000 };
	struct latency *fast = latency_of(1000, 100, 10), *slow = latency_of(900000, 40, 1000);
	struct latency *stale = latency_of(5, 1000, 1), merged = {}, got;
	struct summary *s = summary__new(4);
	cJSON *old = cJSON_CreateObject(), *nodes = cJSON_AddArrayToObject(old, "nodes"), *doc;
	const cJSON *sum, *fns;
	bool ok;

	/* n1 wrote a report and, before, an entry: the report counts */
	cJSON_AddItemToArray(nodes, node_json("n1", 4, true, NULL, "main.fast", slow));
	cJSON_AddItemToArray(nodes, node_json("n3", 4, true, NULL, "main.fast", fast));
	ok = ASSERT_TRUE(s) &&
	     add_report(s, report_json("n1", node_json("n1", 4, true, NULL, "main.fast", fast))) &&
	     add_report(s, report_json("n2", node_json("n2", 4, false, "pod x: broken", "main.slow",
						       slow))) &&
	     add_report(s, report_json("n2", node_json("n2", 4, false, NULL, "main.slow", slow))) &&
	     add_report(s, report_json("n4", node_json("n4", 3, true, NULL, "main.fast", stale))) &&
	     ASSERT_OK(summary__add_legacy(s, old)) && ASSERT_EQ(summary__writers(s), 4);
	doc = summary__doc(&p, &st, old, s, 3 * NS_PER_S);
	sum = kobj_get(doc, "summary");
	fns = kobj_get(sum, "functions");
	latency__merge(&merged, fast);
	latency__merge(&merged, fast);
	ok = ok && ASSERT_EQ(kobj_int(doc, "observedGeneration", -1), 4) &&
	     ASSERT_STREQ(kobj_str(doc, "reportInterval"), "3.000s") &&
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
	summary__stamp(doc);
	ok = ok && ASSERT_TRUE(kobj_str(kobj_get(doc, "summary"), "lastUpdate"));
	cJSON_Delete(doc);
	cJSON_Delete(old);
	summary__free(s);
	free(fast);
	free(slow);
	free(stale);
	return ok;
}

/*
 * A function's inlined copies: inlinedCalls adds up over the nodes, as
 * calls do; inlinedSites is the most one node probed (each probes the same
 * file's copies), and a value no agent writes is left out.
 */
TEST(status_summary_inlined_copies)
{
	struct status_probe p = { "uid-1", "shop", "payments", 4, false };
	struct status_state st = { .valid = true, .expires = 2000000000 };
	struct latency *a = latency_of(1000, 100, 10), *b = latency_of(2000, 50, 10);
	struct summary *s = summary__new(4);
	cJSON *ea, *eb, *ec, *doc = NULL;
	const cJSON *f;
	bool ok = false;

	if (!ASSERT_TRUE(a && b && s))
		goto out;
	a->inlined = 100;
	b->inlined = 20;
	ea = node_json("n1", 4, true, NULL, "main.validate", a);
	eb = node_json("n2", 4, true, NULL, "main.validate", b);
	ec = node_json("n3", 4, true, NULL, "main.validate", b);
	cJSON_AddNumberToObject(cJSON_GetArrayItem(kobj_get(ea, "functions"), 0), "inlinedSites",
				6);
	cJSON_AddNumberToObject(cJSON_GetArrayItem(kobj_get(eb, "functions"), 0), "inlinedSites",
				4);
	cJSON_AddNumberToObject(cJSON_GetArrayItem(kobj_get(ec, "functions"), 0), "inlinedSites",
				1e9);
	if (!add_report(s, report_json("n1", ea)) || !add_report(s, report_json("n2", eb)) ||
	    !add_report(s, report_json("n3", ec)))
		goto out;
	doc = summary__doc(&p, &st, NULL, s, 3 * NS_PER_S);
	f = fn_named(kobj_get(kobj_get(doc, "summary"), "functions"), "main.validate");
	ok = ASSERT_EQ(kobj_int(f, "calls", -1), 200) &&
	     ASSERT_EQ(kobj_int(f, "inlinedCalls", -1), 140) &&
	     ASSERT_EQ(kobj_int(f, "inlinedSites", -1), 6);
out:
	cJSON_Delete(doc);
	summary__free(s);
	free(a);
	free(b);
	return ok;
}

/* A cluster probe's node writes a report per namespace: the whole merges
 * each once per node and namespace, a namespace's row only its own, and the
 * status and report bodies name the ClusterFunctionProbe. */
TEST(status_summary_of_a_cluster_probe)
{
	struct status_probe p = { "uid-c", "", "every", 1, true };
	struct status_probe in_ns = { "uid-c", "shop", "every", 1, true };
	struct status_state st = { .valid = true, .expires = 2000000000 };
	struct latency *a = latency_of(1000, 100, 10), *b = latency_of(5000, 40, 100);
	struct summary *whole = summary__new(1), *row = summary__new(1);
	cJSON *ra = report_json("n1", node_json("n1", 1, true, NULL, "main.f", a));
	cJSON *rb = report_json("n1", node_json("n1", 1, true, NULL, "main.f", b));
	cJSON *doc = NULL, *r = NULL, *body = NULL;
	char *text = NULL;
	bool ok;

	ok = ASSERT_TRUE(whole && row) && ASSERT_OK(summary__add_report_as(whole, ra, "shop/n1")) &&
	     ASSERT_OK(summary__add_report_as(whole, rb, "bank/n1")) &&
	     ASSERT_OK(summary__add_report_as(whole, rb, "bank/n1")) &&
	     ASSERT_OK(summary__add_report(row, rb)) && ASSERT_OK(summary__add_report(row, ra));
	if (!ok)
		goto out;
	doc = summary__doc(&p, &st, NULL, whole, 2 * NS_PER_S);
	r = summary__row(row, "bank");
	ok = ASSERT_EQ(kobj_int(kobj_get(doc, "summary"), "calls", -1), 140) &&
	     ASSERT_EQ(kobj_int(r, "calls", -1), 40) &&
	     ASSERT_STREQ(kobj_str(r, "namespace"), "bank") &&
	     ASSERT_TRUE(kobj_str(fn_named(kobj_get(r, "functions"), "main.f"), "p99")) &&
	     ASSERT_FALSE(kobj_get(fn_named(kobj_get(r, "functions"), "main.f"), "slowestPods")) &&
	     ASSERT_FALSE(kobj_get(fn_named(kobj_get(r, "functions"), "main.f"), "bucketCounts"));
	text = status__apply_body(&p, cJSON_CreateObject());
	body = cJSON_Parse(text);
	ok = ok && ASSERT_STREQ(kobj_str(body, "kind"), "ClusterFunctionProbe") &&
	     ASSERT_FALSE(kobj_namespace(body));
	free(text);
	cJSON_Delete(body);
	text = status__report_body(&in_ns, "n1", cJSON_CreateObject(), 2 * NS_PER_S);
	body = cJSON_Parse(text);
	ok = ok && ASSERT_STREQ(kobj_namespace(body), "shop") &&
	     ASSERT_STREQ(kobj_str(kobj_get(body, "probe"), "kind"), "ClusterFunctionProbe") &&
	     ASSERT_STREQ(
		     kobj_str(cJSON_GetArrayItem(
				      kobj_get(kobj_get(body, "metadata"), "ownerReferences"), 0),
			      "kind"),
		     "ClusterFunctionProbe") &&
	     ASSERT_STREQ(
		     kobj_str(kobj_get(kobj_get(body, "metadata"), "labels"), STATUS_LABEL_CLUSTER),
		     "true");
out:
	free(text);
	cJSON_Delete(body);
	cJSON_Delete(r);
	cJSON_Delete(doc);
	cJSON_Delete(ra);
	cJSON_Delete(rb);
	summary__free(whole);
	summary__free(row);
	free(a);
	free(b);
	return ok;
}

/* A report without returnSites (valid for the schema, which does not
 * require it) leaves it out of the summary: never null, which the API
 * server refuses, so one odd report cannot stop every summary. */
TEST(status_summary_without_return_sites)
{
	struct status_probe p = { "uid-1", "shop", "payments", 4, false };
	struct status_state st = { .valid = true, .expires = 2000000000 };
	struct latency *l = latency_of(1000, 100, 10);
	struct summary *s = summary__new(4);
	cJSON *entry = node_json("n1", 4, true, NULL, "main.fast", l), *doc = NULL;
	const cJSON *f;
	char *text = NULL;
	bool ok;

	cJSON_DeleteItemFromObject(cJSON_GetArrayItem(kobj_get(entry, "functions"), 0),
				   "returnSites");
	ok = ASSERT_TRUE(s) && add_report(s, report_json("n1", entry)) &&
	     ASSERT_TRUE(doc = summary__doc(&p, &st, NULL, s, 3 * NS_PER_S));
	f = fn_named(kobj_get(kobj_get(doc, "summary"), "functions"), "main.fast");
	ok = ok && ASSERT_TRUE(f) && ASSERT_FALSE(kobj_get(f, "returnSites")) &&
	     ASSERT_EQ(kobj_int(f, "calls", -1), 100) && ASSERT_TRUE(text = cJSON_Print(doc)) &&
	     ASSERT_FALSE(strstr(text, "null"));
	free(text);
	cJSON_Delete(doc);
	summary__free(s);
	free(l);
	return ok;
}

/* Per function: the slowest pods by p99 with their node, and one row per
 * revision merged exactly over its pods on every node. */
TEST(status_summary_slowest_pods_and_revisions)
{
	struct status_probe p = { "uid-1", "shop", "payments", 1, false };
	struct status_state st = { .valid = true, .expires = 2000000000 };
	struct latency *l[5], old_rev = {}, new_rev = {}, got;
	struct summary *s = summary__new(1);
	const cJSON *f, *slowest, *revs;
	cJSON *e1, *e2, *doc;
	bool ok;

	for (int i = 0; i < 5; i++)
		l[i] = latency_of(1000 * (i + 1), 100 + i, 10);
	e1 = node_json("n1", 1, true, NULL, "main.f", l[0]);
	e2 = node_json("n2", 1, true, NULL, "main.f", l[0]);
	f = cJSON_GetArrayItem(kobj_get(e1, "functions"), 0);
	add_pod((cJSON *)f, "web-a-1", "web-a", l[0]);
	add_pod((cJSON *)f, "web-b-1", "web-b", l[3]);
	add_pod((cJSON *)f, "lone", NULL, l[1]);
	f = cJSON_GetArrayItem(kobj_get(e2, "functions"), 0);
	add_pod((cJSON *)f, "web-a-2", "web-a", l[2]);
	add_pod((cJSON *)f, "web-b-2", "web-b", l[4]);
	latency__merge(&old_rev, l[0]);
	latency__merge(&old_rev, l[2]);
	latency__merge(&new_rev, l[3]);
	latency__merge(&new_rev, l[4]);
	ok = ASSERT_TRUE(s) && add_report(s, report_json("n1", e1)) &&
	     add_report(s, report_json("n2", e2));
	doc = summary__doc(&p, &st, NULL, s, NS_PER_S);
	f = fn_named(kobj_get(kobj_get(doc, "summary"), "functions"), "main.f");
	slowest = kobj_get(f, "slowestPods");
	revs = kobj_get(f, "revisions");
	ok = ok && ASSERT_EQ(cJSON_GetArraySize(slowest), SUMMARY_SLOWEST) &&
	     ASSERT_STREQ(kobj_str(cJSON_GetArrayItem(slowest, 0), "pod"), "web-b-2") &&
	     ASSERT_STREQ(kobj_str(cJSON_GetArrayItem(slowest, 0), "node"), "n2") &&
	     ASSERT_STREQ(kobj_str(cJSON_GetArrayItem(slowest, 0), "revision"), "web-b") &&
	     ASSERT_EQ(kobj_int(cJSON_GetArrayItem(slowest, 0), "calls", -1), 104) &&
	     ASSERT_STREQ(kobj_str(cJSON_GetArrayItem(slowest, 1), "pod"), "web-b-1") &&
	     ASSERT_STREQ(kobj_str(cJSON_GetArrayItem(slowest, 1), "node"), "n1") &&
	     ASSERT_STREQ(kobj_str(cJSON_GetArrayItem(slowest, 2), "pod"), "web-a-2") &&
	     ASSERT_EQ(cJSON_GetArraySize(revs), 3) &&
	     ASSERT_STREQ(kobj_str(cJSON_GetArrayItem(revs, 0), "revision"), "unknown") &&
	     ASSERT_STREQ(kobj_str(cJSON_GetArrayItem(revs, 1), "revision"), "web-a") &&
	     ASSERT_EQ(kobj_int(cJSON_GetArrayItem(revs, 1), "pods", -1), 2) &&
	     ASSERT_EQ(kobj_int(cJSON_GetArrayItem(revs, 1), "calls", -1), 202) &&
	     ASSERT_STREQ(kobj_str(cJSON_GetArrayItem(revs, 2), "revision"), "web-b") &&
	     ASSERT_EQ(kobj_int(cJSON_GetArrayItem(revs, 2), "calls", -1), 207);
	/* each row's percentiles are those of its pods' merged buckets */
	for (int i = 1; ok && i <= 2; i++) {
		char want[LATENCY_FMT_LEN];

		latency__format_ns(latency__percentile(i == 1 ? &old_rev : &new_rev, 0.99), want,
				   sizeof(want));
		ok = ASSERT_STREQ(kobj_str(cJSON_GetArrayItem(revs, i), "p99"), want);
	}
	(void)got;
	cJSON_Delete(doc);
	summary__free(s);
	for (int i = 0; i < 5; i++)
		free(l[i]);
	return ok;
}

/* Nodes write less often as more of them report, within the write rate. */
TEST(status_summary_interval)
{
	return ASSERT_EQ(summary__interval(10, 2 * NS_PER_S, 50), 2 * NS_PER_S) &&
	       ASSERT_EQ(summary__interval(120, 2 * NS_PER_S, 10), 12 * NS_PER_S) &&
	       ASSERT_EQ(summary__interval(121, 2 * NS_PER_S, 10), 13 * NS_PER_S) &&
	       ASSERT_EQ(summary__interval(5000, 10 * NS_PER_S, 50), 100 * NS_PER_S) &&
	       ASSERT_EQ(summary__interval(5000, 10 * NS_PER_S, 0), 10 * NS_PER_S);
}

/* Conditions say what is wrong and keep their transition time while they hold. */
TEST(status_conditions)
{
	struct status_probe p = { "uid-1", "shop", "payments", 2, false };
	struct status_state invalid = { .spec_err = "spec.functions: give 1 to 64 names" };
	struct status_state expired = { .valid = true, .expired = true, .expires = 0 };
	struct status_state active = { .valid = true, .expires = 2000000000 };
	struct latency *l = latency_of(100, 1, 1);
	struct summary *s = summary__new(2);
	cJSON *old = cJSON_Parse("{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
				 "\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"},"
				 "{\"type\":\"Attached\",\"status\":\"True\","
				 "\"lastTransitionTime\":\"2026-01-02T00:00:00Z\"}]}");
	cJSON *doc = summary__doc(&p, &invalid, old, NULL, NS_PER_S);
	const cJSON *c = condition(doc, "Ready");
	bool ok = ASSERT_STREQ(kobj_str(c, "status"), "False") &&
		  ASSERT_STREQ(kobj_str(c, "reason"), "InvalidSpec") &&
		  ASSERT_STREQ(kobj_str(c, "message"), invalid.spec_err) &&
		  ASSERT_STRCONTAINS(kobj_str(c, "lastTransitionTime"), "Z") &&
		  ASSERT_TRUE(strcmp(kobj_str(c, "lastTransitionTime"), "2026-01-01T00:00:00Z")) &&
		  ASSERT_FALSE(kobj_get(doc, "summary"));

	cJSON_Delete(doc);
	doc = summary__doc(&p, &expired, old, NULL, NS_PER_S);
	ok = ok && ASSERT_STREQ(kobj_str(condition(doc, "Expired"), "reason"), "LifetimeEnded") &&
	     ASSERT_STREQ(kobj_str(condition(doc, "Attached"), "reason"), "Expired") &&
	     ASSERT_STREQ(kobj_str(condition(doc, "Ready"), "lastTransitionTime"),
			  "2026-01-01T00:00:00Z");
	cJSON_Delete(doc);
	doc = summary__doc(&p, &active, old, NULL, NS_PER_S);
	ok = ok && ASSERT_STREQ(kobj_str(condition(doc, "Attached"), "reason"), "NoMatchingPods") &&
	     ASSERT_STRCONTAINS(kobj_str(condition(doc, "Attached"), "message"), "namespace shop");
	cJSON_Delete(doc);
	ok = ok && ASSERT_TRUE(s) &&
	     add_report(s,
			report_json("n1", node_json("n1", 2, false, "pod a: no process", "f", l)));
	doc = summary__doc(&p, &active, old, s, NS_PER_S);
	ok = ok && ASSERT_STREQ(kobj_str(condition(doc, "Attached"), "reason"), "AttachFailed") &&
	     ASSERT_STREQ(kobj_str(condition(doc, "Attached"), "message"),
			  "pod a: no process (all errors: kubectl get functionprobereports -n "
			  "shop -o yaml)") &&
	     ASSERT_EQ(kobj_int(condition(doc, "Attached"), "observedGeneration", -1), 2);
	cJSON_Delete(doc);
	cJSON_Delete(old);
	summary__free(s);
	free(l);
	return ok;
}

/* Timed: true while every call counted has a duration; else which
 * functions' calls were not timed, and how many, in words. */
TEST(status_timed_condition)
{
	struct status_probe p = { "uid-1", "shop", "payments", 2, false };
	struct status_state active = { .valid = true, .expires = 2000000000 };
	struct latency *l = latency_of(100, 10, 1), *hook = latency_of(100, 10, 1);
	struct summary *s = summary__new(2), *t = summary__new(2);
	cJSON *doc = NULL;
	const cJSON *c;
	bool ok;

	/* a hook in a library left 1926 calls through a jump; 3 more too deep */
	hook->tail_exits = 1926;
	hook->calls += 1926;
	hook->lost = 3;
	ok = ASSERT_TRUE(s && t) &&
	     add_report(s, report_json("n1", node_json("n1", 2, true, NULL, "PortalRun", l)));
	if (ok)
		doc = summary__doc(&p, &active, NULL, s, NS_PER_S);
	c = condition(doc, "Timed");
	ok = ok && ASSERT_STREQ(kobj_str(c, "status"), "True") &&
	     ASSERT_STREQ(kobj_str(c, "reason"), "EveryCallTimed");
	cJSON_Delete(doc);
	doc = NULL;
	ok = ok &&
	     add_report(t, report_json("n1", node_json("n1", 2, true, NULL, "ExecutorRun", hook)));
	if (ok)
		doc = summary__doc(&p, &active, NULL, t, NS_PER_S);
	c = condition(doc, "Timed");
	ok = ok && ASSERT_STREQ(kobj_str(c, "status"), "False") &&
	     ASSERT_STREQ(kobj_str(c, "reason"), "CallsNotTimed") &&
	     ASSERT_STREQ(kobj_str(c, "message"),
			  "ExecutorRun: 1926 of its 1936 calls left through a jump to code not "
			  "probed (tailExits), 3 more entered with too many traced calls in "
			  "flight on their thread or goroutine, not counted (lost): percentiles "
			  "are of the timed calls only") &&
	     ASSERT_EQ(kobj_int(kobj_get(doc, "summary"), "calls", -1), 1936);
	cJSON_Delete(doc);
	summary__free(s);
	summary__free(t);
	free(l);
	free(hook);
	return ok;
}

TEST(status_names_and_body)
{
	struct status_probe p = { "uid-9", "shop", "payments", 1, false };
	struct status_probe q = { "uid-9", "shop", "a-b", 1, false },
			    q2 = { "uid-9", "shop", "a", 1, false };
	char key[STATUS_KEY_LEN], *path = status__path("shop", "payments");
	char *manager = status__node_manager("node-a"), *body, *rpath = NULL;
	char name[STATUS_NAME_LEN], other[STATUS_NAME_LEN], longname[300];
	struct status_probe lp = { "uid-9", "shop", longname, 1, false };
	cJSON *doc;
	bool ok;

	status__report_key("uid-9", key, sizeof(key));
	ok = ASSERT_STREQ(key, "report/uid-9");
	status__legacy_key("uid-9", key, sizeof(key));
	ok = ok && ASSERT_STREQ(key, "node/uid-9");
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
	/* reports: named by probe and node, apart when the names join alike */
	status__report_name(&p, "node-a", name, sizeof(name));
	rpath = status__report_path("shop", name);
	ok = ok && ASSERT_TRUE(!strncmp(name, "payments.node-a.", 16)) &&
	     ASSERT_EQ(strlen(name), 24) &&
	     ASSERT_TRUE(!strncmp(rpath,
				  "/apis/retwatch.io/v1alpha1/namespaces/shop/"
				  "functionprobereports/payments.node-a.",
				  77));
	status__report_name(&q, "c", name, sizeof(name));
	status__report_name(&q2, "b-c", other, sizeof(other));
	ok = ok && ASSERT_TRUE(strcmp(name, other));
	memset(longname, 'x', sizeof(longname) - 2);
	longname[109] = '-'; /* where the parts are cut */
	longname[sizeof(longname) - 1] = '\0';
	status__report_name(&lp, longname, name, sizeof(name));
	ok = ok && ASSERT_TRUE(strlen(name) <= 253) && ASSERT_FALSE(strstr(name, "-.")) &&
	     ASSERT_FALSE(strstr(name, ".."));
	body = status__report_body(&p, "node-a", cJSON_CreateObject(), NS_PER_S);
	doc = cJSON_Parse(body);
	ok = ok && ASSERT_STREQ(kobj_str(doc, "kind"), "FunctionProbeReport") &&
	     ASSERT_STREQ(kobj_str(doc, "node"), "node-a") &&
	     ASSERT_STREQ(kobj_str(kobj_get(doc, "probe"), "uid"), "uid-9") &&
	     ASSERT_STREQ(kobj_str(kobj_get(kobj_get(doc, "metadata"), "labels"),
				   STATUS_LABEL_PROBE_UID),
			  "uid-9") &&
	     ASSERT_STREQ(
		     kobj_str(kobj_get(kobj_get(doc, "metadata"), "labels"), STATUS_LABEL_NODE),
		     "node-a") &&
	     ASSERT_STREQ(
		     kobj_str(cJSON_GetArrayItem(
				      kobj_get(kobj_get(doc, "metadata"), "ownerReferences"), 0),
			      "uid"),
		     "uid-9");
	cJSON_Delete(doc);
	free(body);
	free(rpath);
	free(path);
	free(manager);
	return ok;
}

/* A function's own bias (its entry's kind's) wins over its node's, the smallest of its nodes'. */
TEST(status_summary_bias_per_function)
{
	struct status_probe p = { "uid-1", "shop", "payments", 1, false };
	struct status_state st = { .valid = true, .expires = 2000000000 };
	struct latency *l = latency_of(24000, 100, 0);
	struct summary *s = summary__new(1);
	cJSON *a = node_json("n1", 1, true, NULL, "main.f", l);
	cJSON *b = node_json("n2", 1, true, NULL, "main.f", l), *doc;
	const cJSON *sum, *f;
	bool ok;

	cJSON_AddNumberToObject(a, "probeBiasNs", 4000);
	cJSON_AddNumberToObject(b, "probeBiasNs", 4000);
	cJSON_AddNumberToObject(cJSON_GetArrayItem(kobj_get(a, "functions"), 0), "probeBiasNs",
				900);
	cJSON_AddNumberToObject(cJSON_GetArrayItem(kobj_get(b, "functions"), 0), "probeBiasNs",
				800);
	ok = ASSERT_TRUE(s) && add_report(s, report_json("n1", a)) &&
	     add_report(s, report_json("n2", b));
	doc = summary__doc(&p, &st, NULL, s, 3 * NS_PER_S);
	sum = kobj_get(doc, "summary");
	f = fn_named(kobj_get(sum, "functions"), "main.f");
	ok = ok && ASSERT_STREQ(kobj_str(f, "p99"), "23.20us") &&
	     ASSERT_STREQ(kobj_str(sum, "p50"), "23.20us") &&
	     ASSERT_STREQ(kobj_str(kobj_get(f, "raw"), "p99"), "24.00us");
	cJSON_Delete(doc);
	summary__free(s);
	free(l);
	return ok;
}

/* The summary takes out the smallest bias its nodes calibrated, and the
 * Attached condition names a function the overhead guard detached. */
TEST(status_summary_bias_and_detached)
{
	struct status_probe p = { "uid-1", "shop", "payments", 1, false };
	struct status_state st = { .valid = true, .expires = 2000000000 };
	struct latency *l = latency_of(24000, 100, 0);
	struct summary *s = summary__new(1);
	cJSON *a = node_json("n1", 1, true, NULL, "main.f", l);
	cJSON *b = node_json("n2", 1, true, NULL, "main.f", l), *doc;
	const cJSON *sum, *f, *attached;
	bool ok;

	cJSON_AddNumberToObject(a, "probeBiasNs", 5000);
	cJSON_AddNumberToObject(b, "probeBiasNs", 4000);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(b, "detached"),
			     cJSON_CreateString("main.g detached from 1 process"));
	ok = ASSERT_TRUE(s) && add_report(s, report_json("n1", a)) &&
	     add_report(s, report_json("n2", b));
	doc = summary__doc(&p, &st, NULL, s, 3 * NS_PER_S);
	sum = kobj_get(doc, "summary");
	f = fn_named(kobj_get(sum, "functions"), "main.f");
	attached = condition(doc, "Attached");
	ok = ok && ASSERT_STREQ(kobj_str(sum, "probeBias"), "4.000us") &&
	     ASSERT_STREQ(kobj_str(sum, "p50"), "20.00us") &&
	     ASSERT_STREQ(kobj_str(f, "p99"), "20.00us") &&
	     ASSERT_STREQ(kobj_str(kobj_get(f, "raw"), "p99"), "24.00us") &&
	     ASSERT_EQ(kobj_int(f, "minNs", -1), 24000) &&
	     ASSERT_STREQ(kobj_str(attached, "status"), "True") &&
	     ASSERT_STREQ(kobj_str(attached, "reason"), "OverheadLimited") &&
	     CHECK(strstr(kobj_str(attached, "message"), "main.g detached from 1 process"), "%s",
		   kobj_str(attached, "message"));
	cJSON_Delete(doc);
	summary__free(s);
	free(l);
	return ok;
}

/* A call of a report's function, as status__node_entry writes it. */
static void add_call(cJSON *entry, uint64_t ns, const char *pod)
{
	cJSON *f = kobj_get(entry, "functions")->child, *c = cJSON_CreateObject(), *arr;

	arr = (cJSON *)kobj_get(f, "slowestCalls");
	if (!arr)
		arr = cJSON_AddArrayToObject(f, "slowestCalls");
	status__set_call_duration(c, ns);
	cJSON_AddStringToObject(c, "ended", "2026-11-27T04:00:00.000001Z");
	cJSON_AddStringToObject(c, "pod", pod);
	cJSON_AddNumberToObject(c, "pid", 42);
	cJSON_AddNumberToObject(c, "tid", 43);
	cJSON_AddNumberToObject(c, "goroutine", 7);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(c, "stack"),
			     cJSON_CreateString("main.charge+0x1 (/app/x)"));
	cJSON_AddItemToArray(arr, c);
}

/* The summary's slowest calls: every node's merged, slowest first, each
 * naming its node, spec.slowCalls.keep of them; what another agent wrote is
 * checked field by field. */
TEST(status_summary_slowest_calls)
{
	struct status_probe p = { "uid-1", "shop", "payments", 1, false };
	struct status_state st = { .valid = true, .expires = 2000000000, .keep = 3 };
	struct latency *l = latency_of(1000, 100, 10);
	struct summary *s = summary__new(1);
	cJSON *a = node_json("n1", 1, true, NULL, "main.charge", l);
	cJSON *b = node_json("n2", 1, true, NULL, "main.charge", l), *forged, *doc;
	const cJSON *calls, *c;
	char long_pod[2048];
	bool ok;

	add_call(a, 50000000, "web-1");
	add_call(a, 3000, "web-1");
	add_call(b, 70000000, "web-2");
	add_call(b, 60000000, "web-3");
	memset(long_pod, 'x', sizeof(long_pod) - 1);
	long_pod[sizeof(long_pod) - 1] = 0;
	add_call(b, 10000000, long_pod);
	/* a duration past any real one, a stack of numbers, a pid out of range */
	forged = cJSON_GetArrayItem(kobj_get(kobj_get(b, "functions")->child, "slowestCalls"), 2);
	cJSON_AddItemToArray((cJSON *)kobj_get(forged, "stack"), cJSON_CreateNumber(1));
	cJSON_ReplaceItemInObject(forged, "pid", cJSON_CreateNumber(-5));
	add_call(b, (uint64_t)1 << 63, "web-9");
	ok = ASSERT_TRUE(s) && add_report(s, report_json("n1", a)) &&
	     add_report(s, report_json("n2", b));
	doc = summary__doc(&p, &st, NULL, s, NS_PER_S);
	calls = kobj_get(fn_named(kobj_get(kobj_get(doc, "summary"), "functions"), "main.charge"),
			 "slowestCalls");
	ok = ok && ASSERT_EQ(cJSON_GetArraySize(calls), 3) &&
	     ASSERT_EQ(kobj_int(cJSON_GetArrayItem(calls, 0), "durationNs", 0), 70000000) &&
	     ASSERT_STREQ(kobj_str(cJSON_GetArrayItem(calls, 0), "node"), "n2") &&
	     ASSERT_STREQ(kobj_str(cJSON_GetArrayItem(calls, 0), "duration"), "70.00ms") &&
	     ASSERT_EQ(kobj_int(cJSON_GetArrayItem(calls, 1), "durationNs", 0), 60000000) &&
	     ASSERT_EQ(kobj_int(cJSON_GetArrayItem(calls, 2), "durationNs", 0), 50000000) &&
	     ASSERT_STREQ(kobj_str(cJSON_GetArrayItem(calls, 2), "node"), "n1") &&
	     ASSERT_STREQ(kobj_str(cJSON_GetArrayItem(calls, 2), "pod"), "web-1") &&
	     ASSERT_EQ(kobj_int(cJSON_GetArrayItem(calls, 2), "goroutine", 0), 7);
	cJSON_Delete(doc);
	summary__free(s);
	/* keep 20: the forged call is there, with only what passed its checks */
	s = summary__new(1);
	st.keep = 20;
	a = node_json("n2", 1, true, NULL, "main.charge", l);
	add_call(a, 10000000, long_pod);
	forged = kobj_get(kobj_get(a, "functions")->child, "slowestCalls")->child;
	cJSON_AddItemToArray((cJSON *)kobj_get(forged, "stack"), cJSON_CreateNumber(1));
	cJSON_ReplaceItemInObject(forged, "pid", cJSON_CreateNumber(-5));
	ok = ok && ASSERT_TRUE(s) && add_report(s, report_json("n2", a));
	doc = summary__doc(&p, &st, NULL, s, NS_PER_S);
	calls = kobj_get(fn_named(kobj_get(kobj_get(doc, "summary"), "functions"), "main.charge"),
			 "slowestCalls");
	c = cJSON_GetArrayItem(calls, 0);
	ok = ok && ASSERT_EQ(cJSON_GetArraySize(calls), 1) && ASSERT_FALSE(kobj_get(c, "pod")) &&
	     ASSERT_FALSE(kobj_get(c, "pid")) && ASSERT_EQ(kobj_int(c, "tid", 0), 43) &&
	     ASSERT_EQ(cJSON_GetArraySize(kobj_get(c, "stack")), 1);
	cJSON_Delete(doc);
	summary__free(s);
	free(l);
	return ok;
}

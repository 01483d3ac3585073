// SPDX-License-Identifier: MIT
/* Reports and summaries kept within a byte budget: what is folded still adds up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "kube/kobj.h"
#include "report/reportfit.h"
#include "agent/status.h"
#include "report/summary.h"
#include "test.h"

#define NPODS 100
#define NFNS 64
#define BIAS_NS 40

static const char *revision_of_pod(int i)
{
	return i < 50 ? "web-a" : i < 90 ? "web-b" : NULL;
}

/* Pod i's calls of function f: slower as i grows, so pod 99 is the slowest. */
static void pod_latency(int f, int i, struct latency *l)
{
	memset(l, 0, sizeof(*l));
	for (int k = 0; k < 20 + i; k++)
		latency__record(l, 1000ULL * (uint64_t)(i + 1) + (uint64_t)(f * 7 + k * 13));
}

/* A node's entry as status__node_entry and status__add_bias make it: 100
 * pods, 64 functions, every pod's row in every function (2.6 MB at 100x64
 * in a real cluster; here some 2 MB). */
static cJSON *big_entry(void)
{
	cJSON *e = cJSON_CreateObject(), *pods, *fns;
	struct latency *l = calloc(2, sizeof(*l));

	cJSON_AddStringToObject(e, "node", "node-1");
	cJSON_AddNumberToObject(e, "generation", 1);
	cJSON_AddBoolToObject(e, "attached", true);
	pods = cJSON_AddArrayToObject(e, "pods");
	for (int i = 0; i < NPODS; i++) {
		cJSON *p = cJSON_CreateObject();
		char name[32];

		snprintf(name, sizeof(name), "payments-%03d", i);
		cJSON_AddStringToObject(p, "name", name);
		cJSON_AddStringToObject(p, "container", "app");
		cJSON_AddStringToObject(p, "containerID", "containerd://0123456789abcdef");
		cJSON_AddStringToObject(p, "executable", "/app/payments");
		if (revision_of_pod(i))
			cJSON_AddStringToObject(p, "revision", revision_of_pod(i));
		cJSON_AddItemToArray(cJSON_AddArrayToObject(p, "processes"),
				     cJSON_CreateNumber(1000 + i));
		cJSON_AddItemToArray(pods, p);
	}
	cJSON_AddNumberToObject(e, "processes", NPODS);
	cJSON_AddArrayToObject(e, "errors");
	fns = cJSON_AddArrayToObject(e, "functions");
	for (int f = 0; f < NFNS; f++) {
		cJSON *fn = cJSON_CreateObject(), *rows = cJSON_CreateArray();
		char name[48];

		memset(&l[1], 0, sizeof(l[1]));
		for (int i = 0; i < NPODS; i++) {
			cJSON *r = cJSON_CreateObject();
			char pod[32];

			pod_latency(f, i, &l[0]);
			latency__merge(&l[1], &l[0]);
			snprintf(pod, sizeof(pod), "payments-%03d", i);
			cJSON_AddStringToObject(r, "name", pod);
			cJSON_AddStringToObject(r, "container", "app");
			if (revision_of_pod(i))
				cJSON_AddStringToObject(r, "revision", revision_of_pod(i));
			status_latency__to_json(&l[0], r);
			status__take_bias(r, BIAS_NS);
			cJSON_AddItemToArray(rows, r);
		}
		snprintf(name, sizeof(name), "main.handler%02d", f);
		cJSON_AddStringToObject(fn, "name", name);
		status_latency__to_json(&l[1], fn);
		cJSON_AddNumberToObject(fn, "probeBiasNs", BIAS_NS);
		status__take_bias(fn, BIAS_NS);
		cJSON_AddItemToObject(fn, "pods", rows);
		cJSON_AddItemToArray(fns, fn);
	}
	free(l);
	return e;
}

static size_t size_of(const cJSON *o)
{
	char *t = cJSON_PrintUnformatted(o);
	size_t n = t ? strlen(t) : 0;

	free(t);
	return n;
}

/* The summary's status of one node's entry (taken). */
static cJSON *summary_of(cJSON *entry)
{
	struct status_probe p = { "uid-1", "shop", "payments", 1, false };
	struct status_state st = { .valid = true, .expires = 2000000000 };
	struct summary *s = summary__new(1);
	cJSON *report = cJSON_CreateObject(), *doc;

	cJSON_AddStringToObject(report, "node", "node-1");
	cJSON_AddItemToObject(report, "status", entry);
	summary__add_report(s, report);
	doc = summary__doc(&p, &st, NULL, s, NS_PER_S);
	summary__free(s);
	cJSON_Delete(report);
	return doc;
}

/* The fields of the summary's functions that must not change when pods fold. */
static bool same_summary(const cJSON *a, const cJSON *b)
{
	const cJSON *sa = kobj_get(a, "summary"), *sb = kobj_get(b, "summary");
	const cJSON *fa, *fb = kobj_get(sb, "functions")->child;
	bool ok = ASSERT_EQ(kobj_int(sa, "pods", -1), kobj_int(sb, "pods", -2)) &&
		  ASSERT_EQ(kobj_int(sa, "calls", -1), kobj_int(sb, "calls", -2));

	cJSON_ArrayForEach(fa, kobj_get(sa, "functions"))
	{
		char *ta, *tb;

		if (!ok || !ASSERT_TRUE(fb))
			return false;
		/* totals, buckets, slowest pods and revision rows: all of it */
		ta = cJSON_PrintUnformatted(fa);
		tb = cJSON_PrintUnformatted(fb);
		ok = CHECK(!strcmp(ta, tb), "%s differs folded:\n%s\n%s", kobj_str(fa, "name"), ta,
			   tb);
		free(ta);
		free(tb);
		fb = fb->next;
	}
	return ok;
}

/* Over its budget, each function keeps its slowest pods whole, folds the
 * rest by revision, and the summary of the report is what it was whole. */
TEST(reportfit_folds_pods_by_revision)
{
	const size_t budget = 256 * 1024;
	cJSON *entry = big_entry(), *whole = cJSON_Duplicate(entry, true), *fn, *sa, *sb;
	struct reportfit fit;
	bool ok;

	ok = ASSERT_OK(reportfit__entry(entry, budget, NULL, &fit)) &&
	     ASSERT_TRUE(fit.whole > 4 * budget) && ASSERT_EQ(fit.pods, NPODS) &&
	     ASSERT_TRUE(fit.kept > 0 && fit.kept < NPODS) &&
	     ASSERT_EQ(fit.bytes, size_of(entry)) &&
	     ASSERT_TRUE(fit.bytes <= budget - REPORTFIT_ENVELOPE) &&
	     ASSERT_EQ(fit.unlisted + fit.pods_left + fit.fns_left, 0) &&
	     ASSERT_STRCONTAINS(cJSON_GetArrayItem(kobj_get(entry, "errors"), 0)->valuestring,
				"folded into one row per revision");
	cJSON_ArrayForEach(fn, kobj_get(entry, "functions"))
	{
		const cJSON *row = kobj_get(fn, "pods")->child;
		uint64_t calls = 0;
		size_t folded = 0, k = 0;

		for (; ok && row; row = row->next, k++) {
			calls += (uint64_t)kobj_int(row, "calls", 0);
			if (k < fit.kept) {
				/* the slowest first, whole: pod 99, 98, ... */
				char want[32];

				snprintf(want, sizeof(want), "payments-%03zu", NPODS - 1 - k);
				ok = ASSERT_STREQ(kobj_str(row, "name"), want) &&
				     ASSERT_TRUE(kobj_get(row, "raw"));
			} else {
				ok = ASSERT_FALSE(kobj_str(row, "name")) &&
				     ASSERT_TRUE(kobj_int(row, "folded", 0) > 0) &&
				     ASSERT_TRUE(kobj_get(row, "raw"));
				folded += (size_t)kobj_int(row, "folded", 0);
			}
		}
		/* web-a, web-b and the pods of no revision: a row each */
		ok = ok && ASSERT_EQ(k, fit.kept + 3) && ASSERT_EQ(folded, NPODS - fit.kept) &&
		     ASSERT_EQ(calls, (uint64_t)kobj_int(fn, "calls", -1));
		if (!ok)
			break;
	}
	sa = summary_of(whole);
	sb = summary_of(entry);
	ok = ok && same_summary(sa, sb);
	cJSON_Delete(sa);
	cJSON_Delete(sb);
	return ok;
}

/* A budget that the folded rows overflow: rows go, then pods, then the least
 * called functions; what is left fits, and says so. */
TEST(reportfit_tiny_budget)
{
	const size_t budget = REPORTFIT_MIN_BUDGET;
	cJSON *entry = big_entry();
	struct reportfit fit;
	const char *msg;
	bool ok;

	ok = ASSERT_OK(reportfit__entry(entry, budget, NULL, &fit)) &&
	     ASSERT_TRUE(fit.bytes <= budget - REPORTFIT_ENVELOPE) && ASSERT_EQ(fit.kept, 0) &&
	     ASSERT_EQ(fit.unlisted, NPODS) && ASSERT_TRUE(fit.fns_left > 0) &&
	     ASSERT_EQ(kobj_int(entry, "functionsOmitted", -1), (int64_t)fit.fns_left);
	msg = ok ? cJSON_GetArrayItem(kobj_get(entry, "errors"), 0)->valuestring : NULL;
	ok = ok && ASSERT_STRCONTAINS(msg, "least-called functions left out") &&
	     ASSERT_STRCONTAINS(msg, "--report-budget");
	cJSON_Delete(entry);
	return ok;
}

/* Within its budget a report is left as it was. */
TEST(reportfit_within_budget_untouched)
{
	cJSON *entry = big_entry();
	char *before = cJSON_PrintUnformatted(entry), *after;
	struct reportfit fit;
	bool ok;

	ok = ASSERT_OK(reportfit__entry(entry, 64 * 1024 * 1024, NULL, &fit));
	after = cJSON_PrintUnformatted(entry);
	ok = ok && ASSERT_EQ(fit.whole, fit.bytes) && ASSERT_STREQ(before, after);
	free(before);
	free(after);
	cJSON_Delete(entry);
	return ok;
}

/* A summary over its budget loses its buckets, then its least-called functions. */
TEST(reportfit_summary_bounded)
{
	cJSON *doc = summary_of(big_entry());
	size_t whole = size_of(doc);
	bool ok;

	ok = ASSERT_TRUE(reportfit__summary(doc, 64 * 1024 * 1024)) &&
	     ASSERT_EQ(size_of(doc), whole) && ASSERT_TRUE(reportfit__summary(doc, whole / 2)) &&
	     ASSERT_TRUE(size_of(doc) <= whole / 2 - REPORTFIT_ENVELOPE) &&
	     ASSERT_FALSE(kobj_get(kobj_get(kobj_get(doc, "summary"), "functions")->child,
				   "bucketCounts")) &&
	     ASSERT_TRUE(reportfit__summary(doc, REPORTFIT_MIN_BUDGET)) &&
	     ASSERT_TRUE(kobj_int(kobj_get(doc, "summary"), "functionsOmitted", 0) > 0);
	cJSON_Delete(doc);
	return ok;
}

/* A call's arguments (spec.captureArguments): a string cut at 64 bytes, an int, a bool. */
static void add_args(cJSON *c)
{
	static const char *const args[][3] = {
		{ "customer", "string",
		  "customer-0000000000000000000000000000000000000000000000000000001" },
		{ "cents", "int64", "5017" },
		{ "express", "bool", "false" },
	};
	cJSON *arr = cJSON_AddArrayToObject(c, "arguments");

	for (size_t k = 0; k < sizeof(args) / sizeof(args[0]); k++) {
		cJSON *a = cJSON_CreateObject();

		cJSON_AddStringToObject(a, "name", args[k][0]);
		cJSON_AddStringToObject(a, "type", args[k][1]);
		cJSON_AddStringToObject(a, "value", args[k][2]);
		if (k == 0) {
			cJSON_AddNumberToObject(a, "length", 1000);
			cJSON_AddBoolToObject(a, "truncated", true);
		}
		cJSON_AddItemToArray(arr, a);
	}
}

/* A call as status__node_entry writes it, with 16 frames of 60 bytes, and
 * its arguments (three) when args. */
static cJSON *call_json(uint64_t ns, int i, bool args)
{
	cJSON *c = cJSON_CreateObject(), *stack;

	status__set_call_duration(c, ns);
	cJSON_AddStringToObject(c, "ended", "2026-11-27T04:00:00.000001Z");
	cJSON_AddStringToObject(c, "pod", "payments-000");
	cJSON_AddStringToObject(c, "container", "app");
	cJSON_AddNumberToObject(c, "pid", 1000 + i);
	cJSON_AddNumberToObject(c, "tid", 1000 + i);
	stack = cJSON_AddArrayToObject(c, "stack");
	for (int k = 0; k < 16; k++)
		cJSON_AddItemToArray(
			stack,
			cJSON_CreateString("main.(*Server).handleCharge+0x1a2 (/app/payments)"));
	if (args)
		add_args(c);
	return c;
}

/* 64 functions keeping 20 slowest calls each: over the budget the calls are
 * cut first, the same number for every function, and the pods stay whole. */
TEST(reportfit_cuts_slowest_calls_first)
{
	const size_t budget = 2600 * 1024;
	cJSON *entry = big_entry(), *fn, *args = big_entry();
	struct reportfit fit;
	size_t before, with;
	bool ok = true;

	before = size_of(entry);
	cJSON_ArrayForEach(fn, kobj_get(entry, "functions"))
	{
		cJSON *calls = cJSON_AddArrayToObject(fn, "slowestCalls");

		for (int i = 0; i < 20; i++)
			cJSON_AddItemToArray(calls,
					     call_json(5000000 - (uint64_t)i * 1000, i, false));
	}
	cJSON_ArrayForEach(fn, kobj_get(args, "functions"))
	{
		cJSON *calls = cJSON_AddArrayToObject(fn, "slowestCalls");

		for (int i = 0; i < 20; i++)
			cJSON_AddItemToArray(calls,
					     call_json(5000000 - (uint64_t)i * 1000, i, true));
	}
	with = size_of(entry);
	printf("# a report of 64 functions x 100 pods: %zu KiB, %zu KiB with 20 slowest calls "
	       "each, %zu KiB with their arguments\n",
	       before / 1024, with / 1024, size_of(args) / 1024);
	ok &= ASSERT_OK(reportfit__entry(args, budget, NULL, &fit)) &&
	      ASSERT_TRUE(fit.bytes <= budget - REPORTFIT_ENVELOPE && fit.calls_kept < 20);
	cJSON_Delete(args);
	ok &= ASSERT_TRUE(with > budget - REPORTFIT_ENVELOPE);
	ok &= ASSERT_OK(reportfit__entry(entry, budget, NULL, &fit));
	ok &= ASSERT_TRUE(fit.bytes <= budget - REPORTFIT_ENVELOPE) && ASSERT_EQ(fit.calls, 20) &&
	      ASSERT_TRUE(fit.calls_kept < 20) && ASSERT_EQ(fit.kept, 0) &&
	      ASSERT_EQ(fit.unlisted, 0);
	cJSON_ArrayForEach(fn, kobj_get(entry, "functions"))
	{
		const cJSON *calls = kobj_get(fn, "slowestCalls");

		ok &= ASSERT_EQ((size_t)cJSON_GetArraySize(calls), fit.calls_kept) &&
		      ASSERT_EQ(cJSON_GetArraySize(kobj_get(fn, "pods")), NPODS);
		/* the slowest stay */
		ok &= !calls || ASSERT_EQ(kobj_int(calls->child, "durationNs", 0), 5000000);
	}
	ok &= ASSERT_STRCONTAINS(cJSON_GetArrayItem(kobj_get(entry, "errors"), 0)->valuestring,
				 "slowest calls of 20");
	cJSON_Delete(entry);
	return ok;
}

/* An entry whose maker listed fewer slowest calls than the functions keep
 * (status__node_entry, within the budget): within the budget it is kept as
 * it is, and its error says how many calls a function had, and the whole
 * counts the ones left out. */
TEST(reportfit_counts_calls_cut_before)
{
	const struct reportfit_cut cut = { 20, 4 << 20 };
	cJSON *entry = big_entry(), *fn;
	struct reportfit fit;
	size_t before;
	bool ok = true;
	int nerrs;

	cJSON_ArrayForEach(fn, kobj_get(entry, "functions"))
	{
		cJSON *calls = cJSON_AddArrayToObject(fn, "slowestCalls");

		cJSON_AddItemToArray(calls, call_json(5000000, 0, false));
	}
	before = size_of(entry);
	nerrs = cJSON_GetArraySize(kobj_get(entry, "errors"));
	ok &= ASSERT_OK(reportfit__entry(entry, 2 * before, NULL, &fit)) &&
	      ASSERT_EQ(fit.whole, fit.bytes) &&
	      ASSERT_EQ(cJSON_GetArraySize(kobj_get(entry, "errors")), nerrs);
	ok &= ASSERT_OK(reportfit__entry(entry, 2 * before, &cut, &fit)) &&
	      ASSERT_EQ(fit.calls, 20) && ASSERT_EQ(fit.calls_kept, 1) &&
	      ASSERT_EQ(fit.whole, before + cut.bytes);
	ok &= ASSERT_STRCONTAINS(cJSON_GetArrayItem(kobj_get(entry, "errors"), nerrs)->valuestring,
				 "each function lists its 1 slowest calls of 20");
	cJSON_ArrayForEach(fn, kobj_get(entry, "functions"))
		ok &= ASSERT_EQ(cJSON_GetArraySize(kobj_get(fn, "slowestCalls")), 1) &&
		      ASSERT_EQ(cJSON_GetArraySize(kobj_get(fn, "pods")), NPODS);
	cJSON_Delete(entry);
	return ok;
}

// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kobj.h"
#include "base/clock.h"
#include "base/log.h"
#include "agent/status.h"
#include "report/statuswire.h"
#include "trace/callargs.h"

/* ---- this node's entry ---- */

struct traced_ctx {
	cJSON *pods;
	const struct pod *known;
	size_t nknown;
};

static const char *revision_of(const struct pod *pods, size_t npods, const char *name)
{
	for (size_t i = 0; i < npods; i++)
		if (!strcmp(pods[i].name, name))
			return pods[i].revision;
	return "";
}

static void add_traced(const struct traced *t, void *ctx)
{
	struct traced_ctx *tc = ctx;
	cJSON *item, *procs = NULL;

	cJSON_ArrayForEach(item, tc->pods)
	{
		if (!strcmp(kobj_str(item, "name"), t->pod) &&
		    !strcmp(kobj_str(item, "containerID"), t->cid))
			procs = cJSON_GetObjectItemCaseSensitive(item, "processes");
	}
	if (!procs) {
		const char *rev = revision_of(tc->known, tc->nknown, t->pod);

		item = cJSON_CreateObject();
		cJSON_AddItemToArray(tc->pods, item);
		cJSON_AddStringToObject(item, "name", t->pod);
		cJSON_AddStringToObject(item, "container", t->container);
		cJSON_AddStringToObject(item, "containerID", t->cid);
		cJSON_AddStringToObject(item, "executable", t->exe);
		if (*rev)
			cJSON_AddStringToObject(item, "revision", rev);
		procs = cJSON_AddArrayToObject(item, "processes");
	}
	cJSON_AddItemToArray(procs, cJSON_CreateNumber(t->pid));
}

static void add_errors(cJSON *e, struct errlist *errs)
{
	cJSON *arr = cJSON_AddArrayToObject(e, "errors");

	errlist__sort(errs);
	for (size_t i = 0; i < errs->n; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(errs->msgs[i]));
	if (errs->more) {
		char more[64];

		snprintf(more, sizeof(more), "and %zu more", errs->more);
		cJSON_AddItemToArray(arr, cJSON_CreateString(more));
	}
}

struct groups_ctx {
	struct results *r;
	size_t row;
	cJSON *arr;
	const struct pod *pods;
	size_t npods;
};

/* A function's own calls in one pod's container. */
static void add_group(const char *pod, const char *container, void *ctx)
{
	struct groups_ctx *g = ctx;
	const char *rev = revision_of(g->pods, g->npods, pod);
	cJSON *item = cJSON_CreateObject();
	struct latency l;

	results__read(g->r, g->row, pod, container, &l);
	cJSON_AddItemToArray(g->arr, item);
	cJSON_AddStringToObject(item, "name", pod);
	cJSON_AddStringToObject(item, "container", container);
	if (*rev)
		cJSON_AddStringToObject(item, "revision", rev);
	status_latency__to_json(&l, item);
}

/* What a slowest call takes in a report beyond its strings: keys, numbers, quotes. */
#define SLOW_CALL_JSON_BYTES 256

/*
 * How many slowest calls every function lists, the same number for each,
 * so that all of them take about bytes (0: no bound): a report's entry is
 * never built larger than its budget for them, however much the calls
 * kept hold. *cut says what that leaves out.
 */
static size_t calls_within(const struct results *r, size_t bytes, struct reportfit_cut *cut)
{
	const struct slow_call *calls[SLOWEST_MAX_KEEP];
	size_t by_rank[SLOWEST_MAX_KEEP] = { 0 }, most = 0, total = 0, m;

	for (size_t k = 0; k < results__nrows(r); k++) {
		size_t n = results__slowest(r, k, calls, SLOWEST_MAX_KEEP);

		for (size_t i = 0; i < n; i++)
			by_rank[i] += calls[i]->bytes + SLOW_CALL_JSON_BYTES + 3 * calls[i]->nstack;
		most = n > most ? n : most;
	}
	*cut = (struct reportfit_cut){ 0 };
	for (m = 0; m < most && (!bytes || total + by_rank[m] <= bytes); m++)
		total += by_rank[m];
	if (m < most)
		cut->calls = most;
	for (size_t i = m; i < most; i++)
		cut->bytes += by_rank[i];
	return m;
}

/* Row k's first max slowest calls kept, as measured (status__add_bias takes the bias out). */
static void add_slow_calls(cJSON *f, const struct results *r, size_t k, size_t max)
{
	const struct slow_call *calls[SLOWEST_MAX_KEEP];
	size_t n = results__slowest(r, k, calls, max < SLOWEST_MAX_KEEP ? max : SLOWEST_MAX_KEEP);
	cJSON *arr = n ? cJSON_AddArrayToObject(f, "slowestCalls") : NULL;

	for (size_t i = 0; arr && i < n; i++) {
		const struct slow_call *c = calls[i];
		cJSON *o = cJSON_CreateObject(), *stack;
		char ended[TIME_RFC3339_LEN];

		if (!o)
			return;
		cJSON_AddItemToArray(arr, o);
		status__add_duration(o, "duration", c->duration_ns);
		cJSON_AddNumberToObject(o, "durationNs", (double)c->duration_ns);
		time_rfc3339_at(c->end_ns, ended, sizeof(ended), 6);
		cJSON_AddStringToObject(o, "ended", ended);
		if (c->pod)
			cJSON_AddStringToObject(o, "pod", c->pod);
		if (c->container)
			cJSON_AddStringToObject(o, "container", c->container);
		cJSON_AddNumberToObject(o, "pid", c->pid);
		cJSON_AddNumberToObject(o, "tid", c->tid);
		if (c->goid)
			cJSON_AddNumberToObject(o, "goroutine", (double)c->goid);
		stack = cJSON_AddArrayToObject(o, "stack");
		for (size_t j = 0; stack && j < c->nstack; j++)
			cJSON_AddItemToArray(stack, cJSON_CreateString(c->stack[j]));
		/* only a probe that captures them has any (results__capture_args) */
		if (c->args.n)
			cJSON_AddItemToObject(o, "arguments", call_args__json(&c->args));
		if (c->args.n && c->args.note)
			cJSON_AddStringToObject(o, "argumentsNote", c->args.note);
	}
}

/* Row k's counts over the last window: cur less its reading a window before. */
static void add_recent(cJSON *f, struct results *r, size_t k, uint64_t window_ns,
		       const struct latency *cur)
{
	uint64_t span, now = clock__mono_ns();
	struct latency *l = malloc(sizeof(*l));
	cJSON *o;

	if (!l)
		return;
	results__recent(r, k, window_ns, now, cur, l, &span);
	o = cJSON_AddObjectToObject(f, "recent");
	if (o) {
		/* the spec's: the span itself (a window up to an interval more,
		 * less while the probe is younger) would change every write */
		status__add_duration(o, "window", window_ns);
		status_latency__to_json(l, o);
	}
	free(l);
}

/* Its inlined copies probed with it: their sites, and why a copy is not timed. */
static void add_inlined(cJSON *f, const struct results_row *row)
{
	if (row->inlined.sites)
		cJSON_AddNumberToObject(f, "inlinedSites", (double)row->inlined.sites);
	if (row->inlined.copies > row->inlined.timed && row->inlined_reason)
		cJSON_AddStringToObject(f, "inlinedNotTimed", row->inlined_reason);
}

cJSON *status__node_entry(const char *node, int64_t generation, const struct traceset *ts,
			  struct errlist *errs, struct results *r, const struct pod *pods,
			  size_t npods, bool wrote, uint64_t window_ns, size_t calls_bytes,
			  struct reportfit_cut *ret_cut)
{
	size_t ntraced = traceset__count(ts), ncalls;
	struct traced_ctx tc = { NULL, pods, npods };
	struct reportfit_cut cut;
	cJSON *e, *fns;

	if (!ntraced && !errs->n && !results__nrows(r) && !wrote)
		return NULL;
	ncalls = calls_within(r, calls_bytes, &cut);
	if (ret_cut)
		*ret_cut = cut;
	e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "node", node);
	cJSON_AddNumberToObject(e, "generation", (double)generation);
	cJSON_AddBoolToObject(e, "attached", ntraced > 0);
	tc.pods = cJSON_AddArrayToObject(e, "pods");
	traceset__foreach(ts, add_traced, &tc);
	cJSON_AddNumberToObject(e, "processes", (double)ntraced);
	add_errors(e, errs);
	fns = cJSON_AddArrayToObject(e, "functions");
	for (size_t k = 0; k < results__nrows(r); k++) {
		const struct results_row *row = results__row(r, k);
		struct groups_ctx g = { r, k, NULL, pods, npods };
		struct latency l;

		/* one reading, so the pods' calls add up to the function's; live
		 * reads (that may not) when there is no memory for it */
		(void)results__hold(r, k);
		results__read(r, k, NULL, NULL, &l);
		cJSON *f = status__function(row->name, func_mode__str(row->mode), row->reason,
					    (double)row->nreturns, &l);

		cJSON_AddItemToArray(fns, f);
		/* what part of the probes' cost its durations hold depends on it */
		cJSON_AddStringToObject(f, "probeEntry", probe_entry__str(row->entry));
		/* and where its calls end, which part of it too */
		cJSON_AddStringToObject(f, "probeReturn", row->trampoline ? "trampoline" : "ret");
		if (!row->trampoline && row->trampoline_why)
			cJSON_AddStringToObject(f, "probeReturnReason", row->trampoline_why);
		add_inlined(f, row);
		g.arr = cJSON_AddArrayToObject(f, "pods");
		results__foreach_group(r, add_group, &g);
		results__release(r);
		if (window_ns && row->mode != FUNC_MODE_ENTRY_ONLY)
			add_recent(f, r, k, window_ns, &l);
		add_slow_calls(f, r, k, ncalls);
	}
	return e;
}

/* Seeds r from entry (one node's results) when it is of generation. */
static bool seed_entry(const cJSON *entry, int64_t generation, struct results *r)
{
	const cJSON *fn;

	if (kobj_int(entry, "generation", -1) != generation)
		return false;
	cJSON_ArrayForEach(fn, kobj_get(entry, "functions"))
	{
		struct latency l;

		if (kobj_str(fn, "name") && !status_latency__from_json(fn, &l))
			results__seed(r, kobj_str(fn, "name"), &l);
	}
	return true;
}

bool status__seed_report(const cJSON *report, int64_t generation, struct results *r)
{
	return seed_entry(kobj_get(report, "status"), generation, r);
}

bool status__seed(const cJSON *status, const char *node, int64_t generation, struct results *r)
{
	const cJSON *entry = status__legacy_entry(status, node);

	return entry && seed_entry(entry, generation, r);
}

/* ---- the probes' bias and the overhead guard ---- */

void status__add_bias(cJSON *entry, const struct calibration *cal)
{
	const cJSON *fn, *pod, *call;

	if (!entry || !cal->bias_ns)
		return;
	status__add_duration(entry, "probeBias", cal->bias_ns);
	cJSON_AddNumberToObject(entry, "probeBiasNs", (double)cal->bias_ns);
	cJSON_AddNumberToObject(entry, "callCostNs", (double)cal->call_cost_ns);
	cJSON_ArrayForEach(fn, cJSON_GetObjectItemCaseSensitive(entry, "functions"))
	{
		/* its own: the bias of the kind of instruction at its entry, and
		 * of where its calls end */
		const char *ret = kobj_str(fn, "probeReturn");
		uint64_t bias = calibrate__bias(cal, probe_entry__parse(kobj_str(fn, "probeEntry")),
						ret && !strcmp(ret, "trampoline"));

		cJSON_AddNumberToObject((cJSON *)fn, "probeBiasNs", (double)bias);
		status__take_bias((cJSON *)fn, bias);
		cJSON_ArrayForEach(pod, cJSON_GetObjectItemCaseSensitive(fn, "pods"))
			status__take_bias((cJSON *)pod, bias);
		status__take_bias(cJSON_GetObjectItemCaseSensitive(fn, "recent"), bias);
		cJSON_ArrayForEach(call, cJSON_GetObjectItemCaseSensitive(fn, "slowestCalls"))
			status__set_call_duration(
				(cJSON *)call,
				latency__less((uint64_t)kobj_int(call, "durationNs", 0), bias));
	}
}

/* What the guard did to a function, in words the user can act on. */
static void detached_message(const char *name, const struct results_overhead *ov, char *buf,
			     size_t len)
{
	char where[300] = "";

	if (ov->pod)
		snprintf(where, sizeof(where), " (pod %s, container %s)", ov->pod,
			 ov->container ? ov->container : "?");
	snprintf(buf, len,
		 "%s detached from %zu process%s, first pid %d%s: %.0f calls/s cost %.2f%% of a "
		 "CPU, over spec.maxOverhead %.2f%% for two intervals; the probe's other "
		 "functions are still measured; to measure it again set spec.maxOverhead above "
		 "%.2f%% (or to 0: no limit)",
		 name, ov->ndetached, ov->ndetached == 1 ? "" : "es", ov->detached_pid, where,
		 ov->detached_rate, ov->detached_overhead * 100, ov->max * 100,
		 ov->detached_overhead * 100);
}

void status__add_overhead(cJSON *entry, struct results *r)
{
	cJSON *fns = cJSON_GetObjectItemCaseSensitive(entry, "functions"), *detached = NULL;
	size_t k = 0;
	cJSON *fn;

	if (!entry)
		return;
	cJSON_ArrayForEach(fn, fns)
	{
		struct results_overhead ov;
		char msg[1024];

		if (k >= results__nrows(r))
			break;
		results__overhead(r, k++, &ov);
		cJSON_AddNumberToObject(fn, "overhead", ov.overhead);
		cJSON_AddNumberToObject(fn, "callsPerSecond", ov.rate);
		if (!ov.ndetached)
			continue;
		detached_message(kobj_str(fn, "name") ?: "?", &ov, msg, sizeof(msg));
		cJSON_AddStringToObject(fn, "detached", msg);
		if (!detached)
			detached = cJSON_AddArrayToObject(entry, "detached");
		if (detached)
			cJSON_AddItemToArray(detached, cJSON_CreateString(msg));
	}
}

// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/params.h"
#include "base/clock.h"
#include "base/latency.h"
#include "base/log.h"
#include "kube/kobj.h"
#include "report/statuswire.h"
#include "report/summary.h"

/* More processes than one node runs (pid_max's limit): a corrupt entry. */
#define MAX_NODE_PROCESSES (1 << 22)
/* Distinct functions merged; reports name what their probe's spec lists, so
 * more is another agent's error or forgery. */
#define SUMMARY_MAX_FUNCTIONS 256
#define NO_REVISION "unknown"
/* A slowest call's fields another agent wrote, bounded: longer is a forgery. */
#define CALL_TEXT_MAX 1024
#define CALL_FRAMES_MAX 16
/* A recent window longer than a day: a forgery (spec.window is a duration,
 * but no user keeps calls for days). */
#define MAX_WINDOW_NS (86400 * NS_PER_S)

struct pod_row {
	char *pod, *container, *node, *revision;
	uint64_t calls, p50, p99;
};

struct rev_row {
	char *revision; /* SUMMARY_OTHER for the rest */
	size_t pods;
	struct latency l;
};

struct merged {
	char *name, *mode, *reason;
	double returns;
	/* its inlined copies' probe sites: the most a node probed */
	int64_t inlined_sites;
	/* the smallest bias the nodes took out of its durations (0: none):
	 * each node's for its entry's kind (probeBiasNs), else the node's */
	uint64_t bias_ns;
	struct latency l;
	/* over the last window, every node's merged (recent_ns: the longest span) */
	struct latency recent;
	uint64_t recent_ns;
	bool has_recent;
	struct pod_row slowest[SUMMARY_SLOWEST]; /* by p99, slowest first */
	size_t nslowest;
	struct rev_row revs[SUMMARY_REVISIONS + 1];
	size_t nrevs;
	/* the slowest calls over every node, slowest first, each naming its node */
	cJSON *calls[SUMMARY_MAX_CALLS];
	uint64_t call_ns[SUMMARY_MAX_CALLS];
	size_t ncalls;
};

struct summary {
	int64_t generation;
	struct merged *fns;
	size_t nfns;
	int64_t nodes, pods, processes;
	size_t writers;
	bool attached;
	char *errors[3]; /* the first few, for the Attached condition */
	size_t nerrors;
	/* the smallest probe bias the merged nodes calibrated (0: none): taken
	 * out of the summary's durations, so that no node's is overdone */
	uint64_t bias_ns;
	/* functions the overhead guard detached: the first message, and how many */
	char *detached;
	size_t ndetached;
	char **seen; /* nodes merged, so that a legacy entry is not merged twice */
	size_t nseen;
};

struct summary *summary__new(int64_t generation)
{
	struct summary *s = calloc(1, sizeof(*s));

	if (s)
		s->generation = generation;
	return s;
}

static void pod_row_clear(struct pod_row *r)
{
	free(r->pod);
	free(r->container);
	free(r->node);
	free(r->revision);
	memset(r, 0, sizeof(*r));
}

void summary__free(struct summary *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nfns; i++) {
		struct merged *m = &s->fns[i];

		free(m->name);
		free(m->mode);
		free(m->reason);
		for (size_t k = 0; k < m->nslowest; k++)
			pod_row_clear(&m->slowest[k]);
		for (size_t k = 0; k < m->nrevs; k++)
			free(m->revs[k].revision);
		for (size_t k = 0; k < m->ncalls; k++)
			cJSON_Delete(m->calls[k]);
	}
	free(s->fns);
	for (size_t i = 0; i < s->nerrors; i++)
		free(s->errors[i]);
	free(s->detached);
	for (size_t i = 0; i < s->nseen; i++)
		free(s->seen[i]);
	free(s->seen);
	free(s);
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static struct merged *fn_get(struct summary *s, const cJSON *fn)
{
	const char *name = kobj_str(fn, "name");
	struct merged *m;

	for (size_t i = 0; i < s->nfns; i++)
		if (!strcmp(s->fns[i].name, name))
			return &s->fns[i];
	if (s->nfns >= SUMMARY_MAX_FUNCTIONS)
		return NULL;
	m = realloc(s->fns, (s->nfns + 1) * sizeof(*m));
	if (!m)
		return NULL;
	s->fns = m;
	m = &s->fns[s->nfns];
	memset(m, 0, sizeof(*m));
	m->name = strdup(name);
	m->mode = dup_or_null(kobj_str(fn, "mode"));
	m->reason = dup_or_null(kobj_str(fn, "reason"));
	m->returns = cJSON_GetNumberValue(kobj_get(fn, "returnSites"));
	if (!m->name) {
		free(m->mode);
		free(m->reason);
		return NULL;
	}
	s->nfns++;
	return m;
}

/* Keeps the pod among the function's slowest few when its p99 is higher. */
static void add_slowest(struct merged *m, const cJSON *pod, const char *node, const char *rev,
			const struct latency *l)
{
	struct pod_row r = { 0 };
	size_t at;

	if (!latency__count(l))
		return;
	r.p99 = latency__percentile(l, 0.99);
	for (at = 0; at < m->nslowest && m->slowest[at].p99 >= r.p99; at++)
		;
	if (at >= SUMMARY_SLOWEST)
		return;
	r.pod = strdup(kobj_str(pod, "name"));
	r.container = dup_or_null(kobj_str(pod, "container"));
	r.node = strdup(node);
	r.revision = strdup(rev);
	if (!r.pod || !r.node || !r.revision) {
		pod_row_clear(&r);
		return;
	}
	r.calls = latency__count(l);
	r.p50 = latency__percentile(l, 0.5);
	if (m->nslowest == SUMMARY_SLOWEST)
		pod_row_clear(&m->slowest[--m->nslowest]);
	memmove(&m->slowest[at + 1], &m->slowest[at], (m->nslowest - at) * sizeof(r));
	m->slowest[at] = r;
	m->nslowest++;
}

/* Adds the calls of pods (one, or a row of folded ones) to their revision's
 * row (past the first few: "other"). */
static void add_revision(struct merged *m, const char *rev, size_t pods, const struct latency *l)
{
	struct rev_row *r = NULL;

	for (size_t i = 0; i < m->nrevs && !r; i++)
		if (!strcmp(m->revs[i].revision, rev))
			r = &m->revs[i];
	if (!r && m->nrevs < SUMMARY_REVISIONS) {
		r = &m->revs[m->nrevs];
		if (!(r->revision = strdup(rev)))
			return;
		m->nrevs++;
	}
	if (!r) {
		r = &m->revs[SUMMARY_REVISIONS];
		if (!r->revision && !(r->revision = strdup(SUMMARY_OTHER)))
			return;
		m->nrevs = SUMMARY_REVISIONS + 1;
	}
	r->pods += pods;
	latency__merge(&r->l, l);
}

/* Copies string field name of from into to when it is one of at most CALL_TEXT_MAX bytes. */
static void copy_text(cJSON *to, const cJSON *from, const char *name)
{
	const char *v = kobj_str(from, name);

	if (v && strnlen(v, CALL_TEXT_MAX + 1) <= CALL_TEXT_MAX)
		cJSON_AddStringToObject(to, name, v);
}

/* Copies integer field name of from into to when it is within [0, max]. */
static void copy_int(cJSON *to, const cJSON *from, const char *name, int64_t max)
{
	int64_t v = kobj_int(from, name, -1);

	if (v >= 0 && v <= max)
		cJSON_AddNumberToObject(to, name, (double)v);
}

/*
 * Keeps a call of a node's report among the function's slowest: what
 * another agent wrote, each field checked and copied (nothing else is), with
 * the node's name added.
 */
/* A call's arguments as an agent wrote them (call_args__json): checked, copied. */
static void copy_args(cJSON *to, const cJSON *from)
{
	const cJSON *arg;
	cJSON *arr;
	size_t n = 0;

	if (!cJSON_IsArray(kobj_get(from, "arguments")))
		return;
	arr = cJSON_AddArrayToObject(to, "arguments");
	cJSON_ArrayForEach(arg, kobj_get(from, "arguments"))
	{
		cJSON *a;

		if (n++ >= PARAMS_MAX || !kobj_str(arg, "name") || !(a = cJSON_CreateObject()))
			break;
		cJSON_AddItemToArray(arr, a);
		copy_text(a, arg, "name");
		copy_text(a, arg, "type");
		copy_text(a, arg, "value");
		copy_text(a, arg, "error");
		copy_int(a, arg, "length", (int64_t)1 << 53);
		if (cJSON_IsTrue(kobj_get(arg, "truncated")))
			cJSON_AddBoolToObject(a, "truncated", true);
		if (cJSON_IsTrue(kobj_get(arg, "redacted")))
			cJSON_AddBoolToObject(a, "redacted", true);
	}
	copy_text(to, from, "argumentsNote");
}

static void add_call(struct merged *m, const cJSON *call, const char *node)
{
	int64_t ns = kobj_int(call, "durationNs", -1);
	const cJSON *frame;
	cJSON *o, *stack;
	size_t at, n = 0;

	if (ns < 0 || ns > (int64_t)1 << 62 || !cJSON_IsObject(call))
		return;
	for (at = 0; at < m->ncalls && m->call_ns[at] >= (uint64_t)ns; at++)
		;
	if (at >= SUMMARY_MAX_CALLS || !(o = cJSON_CreateObject()))
		return;
	status__set_call_duration(o, (uint64_t)ns);
	copy_text(o, call, "ended");
	cJSON_AddStringToObject(o, "node", node);
	copy_text(o, call, "pod");
	copy_text(o, call, "container");
	copy_int(o, call, "pid", MAX_NODE_PROCESSES);
	copy_int(o, call, "tid", MAX_NODE_PROCESSES);
	copy_int(o, call, "goroutine", (int64_t)1 << 53);
	stack = cJSON_AddArrayToObject(o, "stack");
	cJSON_ArrayForEach(frame, kobj_get(call, "stack"))
	{
		if (n++ >= CALL_FRAMES_MAX)
			break;
		if (cJSON_IsString(frame) &&
		    strnlen(frame->valuestring, CALL_TEXT_MAX + 1) <= CALL_TEXT_MAX)
			cJSON_AddItemToArray(stack, cJSON_CreateString(frame->valuestring));
	}
	copy_args(o, call);
	if (m->ncalls == SUMMARY_MAX_CALLS)
		cJSON_Delete(m->calls[--m->ncalls]);
	memmove(&m->calls[at + 1], &m->calls[at], (m->ncalls - at) * sizeof(m->calls[0]));
	memmove(&m->call_ns[at + 1], &m->call_ns[at], (m->ncalls - at) * sizeof(m->call_ns[0]));
	m->calls[at] = o;
	m->call_ns[at] = (uint64_t)ns;
	m->ncalls++;
}

static void merge_fn(struct summary *s, const cJSON *fn, const char *node, uint64_t node_bias)
{
	/* written by agents; bounded all the same */
	int64_t bias = kobj_int(fn, "probeBiasNs", (int64_t)node_bias);
	const cJSON *pod, *call;
	struct merged *m;
	struct latency l;
	size_t ncalls = 0;

	if (!kobj_str(fn, "name") || status_latency__from_json(fn, &l) || !(m = fn_get(s, fn)))
		return;
	cJSON_ArrayForEach(call, kobj_get(fn, "slowestCalls"))
	{
		if (ncalls++ >= SUMMARY_MAX_CALLS)
			break;
		add_call(m, call, node);
	}
	if (bias > 0 && bias < (int64_t)NS_PER_S && (!m->bias_ns || (uint64_t)bias < m->bias_ns))
		m->bias_ns = (uint64_t)bias;
	latency__merge(&m->l, &l);
	/* written by agents: at most what one function's copies are probed at */
	if (kobj_int(fn, "inlinedSites", 0) > m->inlined_sites &&
	    kobj_int(fn, "inlinedSites", 0) <= STATUS_MAX_INLINED_SITES)
		m->inlined_sites = kobj_int(fn, "inlinedSites", 0);
	if (kobj_get(fn, "recent") && !status_latency__from_json(kobj_get(fn, "recent"), &l)) {
		uint64_t span = 0;

		latency__merge(&m->recent, &l);
		m->has_recent = true;
		if (!latency__parse_duration(kobj_str(kobj_get(fn, "recent"), "window") ?: "",
					     &span) &&
		    span > m->recent_ns && span <= MAX_WINDOW_NS)
			m->recent_ns = span;
	}
	cJSON_ArrayForEach(pod, kobj_get(fn, "pods"))
	{
		const char *rev = kobj_str(pod, "revision");
		/* pods a report over its byte budget folded into one row (reportfit.h) */
		int64_t folded = kobj_int(pod, "folded", 0);

		if (status_latency__from_json(pod, &l))
			continue;
		rev = rev && *rev ? rev : NO_REVISION;
		if (folded > 0 && folded <= MAX_NODE_PROCESSES) {
			add_revision(m, rev, (size_t)folded, &l);
			continue;
		}
		if (!kobj_str(pod, "name"))
			continue;
		add_slowest(m, pod, node, rev, &l);
		add_revision(m, rev, 1, &l);
	}
}

static bool seen(const struct summary *s, const char *node)
{
	for (size_t i = 0; i < s->nseen; i++)
		if (!strcmp(s->seen[i], node))
			return true;
	return false;
}

/* One node's results (a report's status, or a legacy status.nodes[] entry),
 * merged once per key (the node's name, or more where a node writes several). */
static int merge_entry(struct summary *s, const cJSON *entry, const char *node, const char *key)
{
	int64_t procs = kobj_int(entry, "processes", 0), bias, omitted;
	const cJSON *fn, *err;
	char **more;

	if (!node || !key || seen(s, key))
		return 0;
	more = realloc(s->seen, (s->nseen + 1) * sizeof(*more));
	if (!more)
		return -ENOMEM;
	s->seen = more;
	if (!(s->seen[s->nseen] = strdup(key)))
		return -ENOMEM;
	s->nseen++;
	s->writers++;
	if (kobj_int(entry, "generation", -1) != s->generation)
		return 0;
	s->nodes++;
	s->pods += cJSON_GetArraySize(kobj_get(entry, "pods"));
	/* pods a report over its byte budget left out of its list (reportfit.h) */
	omitted = kobj_int(entry, "podsOmitted", 0);
	s->pods += omitted > 0 && omitted <= MAX_NODE_PROCESSES ? omitted : 0;
	/* another agent wrote it: a count, bounded, or nothing */
	s->processes += procs >= 0 && procs <= MAX_NODE_PROCESSES ? procs : 0;
	s->attached |= cJSON_IsTrue(kobj_get(entry, "attached"));
	cJSON_ArrayForEach(err, kobj_get(entry, "errors"))
	{
		if (s->nerrors < sizeof(s->errors) / sizeof(s->errors[0]) && cJSON_IsString(err) &&
		    (s->errors[s->nerrors] = strdup(err->valuestring)))
			s->nerrors++;
	}
	/* written by agents; bounded all the same */
	bias = kobj_int(entry, "probeBiasNs", 0);
	if (bias > 0 && bias < (int64_t)NS_PER_S && (!s->bias_ns || (uint64_t)bias < s->bias_ns))
		s->bias_ns = (uint64_t)bias;
	cJSON_ArrayForEach(err, kobj_get(entry, "detached"))
	{
		if (!cJSON_IsString(err))
			continue;
		if (!s->ndetached++)
			s->detached = strdup(err->valuestring);
	}
	cJSON_ArrayForEach(fn, kobj_get(entry, "functions"))
		merge_fn(s, fn, node, bias > 0 && bias < (int64_t)NS_PER_S ? (uint64_t)bias : 0);
	return 0;
}

int summary__add_report(struct summary *s, const cJSON *report)
{
	const char *node = kobj_str(report, "node");

	return merge_entry(s, kobj_get(report, "status"), node, node);
}

int summary__add_report_as(struct summary *s, const cJSON *report, const char *key)
{
	return merge_entry(s, kobj_get(report, "status"), kobj_str(report, "node"), key);
}

int summary__add_legacy(struct summary *s, const cJSON *status)
{
	const cJSON *entry;
	int e = 0;

	cJSON_ArrayForEach(entry, kobj_get(status, "nodes"))
	{
		if (!e)
			e = merge_entry(s, entry, kobj_str(entry, "node"), kobj_str(entry, "node"));
	}
	return e;
}

size_t summary__writers(const struct summary *s)
{
	return s->writers;
}

uint64_t summary__interval(size_t writers, uint64_t spec_ns, double writes_per_s)
{
	double need;

	if (writes_per_s <= 0)
		return spec_ns;
	need = (double)writers / writes_per_s * (double)NS_PER_S;
	/* whole seconds: the interval others read back from the status */
	if (need > (double)spec_ns)
		return ((uint64_t)need + NS_PER_S - 1) / NS_PER_S * NS_PER_S;
	return spec_ns;
}

static cJSON *slowest_json(const struct merged *m, uint64_t bias)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; i < m->nslowest; i++) {
		const struct pod_row *r = &m->slowest[i];
		cJSON *o = cJSON_CreateObject();

		cJSON_AddItemToArray(arr, o);
		cJSON_AddStringToObject(o, "pod", r->pod);
		if (r->container)
			cJSON_AddStringToObject(o, "container", r->container);
		cJSON_AddStringToObject(o, "node", r->node);
		cJSON_AddStringToObject(o, "revision", r->revision);
		cJSON_AddNumberToObject(o, "calls", (double)r->calls);
		status__add_duration(o, "p50", latency__less(r->p50, bias));
		status__add_duration(o, "p99", latency__less(r->p99, bias));
	}
	return arr;
}

static int by_revision(const void *a, const void *b)
{
	const struct rev_row *x = a, *y = b;

	/* "other" last */
	if (!strcmp(x->revision, SUMMARY_OTHER) || !strcmp(y->revision, SUMMARY_OTHER))
		return !strcmp(x->revision, SUMMARY_OTHER) - !strcmp(y->revision, SUMMARY_OTHER);
	return strcmp(x->revision, y->revision);
}

static cJSON *revisions_json(struct merged *m, uint64_t bias)
{
	cJSON *arr = cJSON_CreateArray();
	size_t n = 0;

	for (size_t i = 0; i < m->nrevs; i++)
		if (m->revs[i].revision)
			m->revs[n++] = m->revs[i];
	m->nrevs = n;
	qsort(m->revs, n, sizeof(m->revs[0]), by_revision);
	for (size_t i = 0; i < n; i++) {
		const struct rev_row *r = &m->revs[i];
		cJSON *o = cJSON_CreateObject();

		cJSON_AddItemToArray(arr, o);
		cJSON_AddStringToObject(o, "revision", r->revision);
		cJSON_AddNumberToObject(o, "pods", (double)r->pods);
		cJSON_AddNumberToObject(o, "calls", (double)r->l.calls);
		status__add_duration(o, "p50",
				     latency__less(latency__percentile(&r->l, 0.50), bias));
		status__add_duration(o, "p95",
				     latency__less(latency__percentile(&r->l, 0.95), bias));
		status__add_duration(o, "p99",
				     latency__less(latency__percentile(&r->l, 0.99), bias));
	}
	return arr;
}

/* The function's slowest calls over every node, keep of them. */
static cJSON *calls_json(struct merged *m, size_t keep)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; arr && i < m->ncalls && i < keep; i++) {
		cJSON_AddItemToArray(arr, m->calls[i]);
		m->calls[i] = NULL;
	}
	return arr;
}

static cJSON *summary_json(struct summary *s, size_t keep)
{
	cJSON *sum = cJSON_CreateObject(), *fns = cJSON_CreateArray();
	const struct merged *slowest = NULL, *recent = NULL;
	uint64_t calls = 0, p99 = 0, recent_p99 = 0;

	cJSON_AddNumberToObject(sum, "nodes", (double)s->nodes);
	cJSON_AddNumberToObject(sum, "pods", (double)s->pods);
	cJSON_AddNumberToObject(sum, "processes", (double)s->processes);
	for (size_t i = 0; i < s->nfns; i++) {
		struct merged *m = &s->fns[i];
		uint64_t q = latency__percentile(&m->l, 0.99);
		cJSON *f = status__function(m->name, m->mode, m->reason, m->returns, &m->l);

		cJSON_AddItemToArray(fns, f);
		if (m->inlined_sites)
			cJSON_AddNumberToObject(f, "inlinedSites", (double)m->inlined_sites);
		if (m->bias_ns) {
			status__take_bias(f, m->bias_ns);
			cJSON_AddNumberToObject(f, "probeBiasNs", (double)m->bias_ns);
		}
		cJSON_AddItemToObject(f, "slowestPods", slowest_json(m, m->bias_ns));
		cJSON_AddItemToObject(f, "revisions", revisions_json(m, m->bias_ns));
		if (keep && m->ncalls)
			cJSON_AddItemToObject(f, "slowestCalls", calls_json(m, keep));
		if (m->has_recent) {
			cJSON *o = cJSON_AddObjectToObject(f, "recent");
			uint64_t q = latency__percentile(&m->recent, 0.99);

			if (o) {
				if (m->recent_ns)
					status__add_duration(o, "window", m->recent_ns);
				status_latency__to_json(&m->recent, o);
				if (m->bias_ns)
					status__take_bias(o, m->bias_ns);
			}
			if (latency__count(&m->recent) && (!recent || q > recent_p99)) {
				recent = m;
				recent_p99 = q;
			}
		}
		calls += m->l.calls;
		if (latency__count(&m->l) && (!slowest || q > p99)) {
			slowest = m;
			p99 = q;
		}
	}
	cJSON_AddNumberToObject(sum, "calls", (double)calls);
	if (slowest) {
		cJSON_AddStringToObject(sum, "slowest", slowest->name);
		status__add_duration(
			sum, "p50",
			latency__less(latency__percentile(&slowest->l, 0.5), slowest->bias_ns));
		status__add_duration(sum, "p99", latency__less(p99, slowest->bias_ns));
	}
	if (recent) {
		/* the slowest function now: the kubectl get column */
		cJSON_AddStringToObject(sum, "recentSlowest", recent->name);
		status__add_duration(sum, "recentP99", latency__less(recent_p99, recent->bias_ns));
	}
	if (s->bias_ns)
		status__add_duration(sum, "probeBias", s->bias_ns);
	cJSON_AddItemToObject(sum, "functions", fns);
	return sum;
}

cJSON *summary__row(struct summary *s, const char *ns)
{
	/* of a function in a row: what a table shows */
	static const char *const keep[] = { "name", "mode", "calls", "lost", "p50",
					    "p95",  "p99",  "max",   NULL };
	cJSON *row = summary_json(s, 0), *f, *errs;

	if (!row)
		return NULL;
	cJSON_DeleteItemFromObjectCaseSensitive(row, "recentSlowest");
	cJSON_DeleteItemFromObjectCaseSensitive(row, "recentP99");
	cJSON_DeleteItemFromObjectCaseSensitive(row, "probeBias");
	cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(row, "functions"))
		kobj_keep_only(f, keep);
	errs = cJSON_AddArrayToObject(row, "errors");
	for (size_t i = 0; errs && i < s->nerrors && i < 3; i++)
		cJSON_AddItemToArray(errs, cJSON_CreateString(s->errors[i]));
	cJSON_AddStringToObject(row, "namespace", ns);
	return row;
}

struct conds {
	cJSON *arr;
	const cJSON *old;
	int64_t gen;
};

static void add_condition(struct conds *c, const char *type, bool ok, const char *reason,
			  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void add_condition(struct conds *c, const char *type, bool ok, const char *reason,
			  const char *fmt, ...)
{
	const char *status = ok ? "True" : "False", *since = NULL;
	cJSON *cond = cJSON_CreateObject();
	const cJSON *o;
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON_ArrayForEach(o, c->old)
	{
		/* the time it last changed, not the time it was last written */
		if (kobj_str(o, "type") && !strcmp(kobj_str(o, "type"), type) &&
		    kobj_str(o, "status") && !strcmp(kobj_str(o, "status"), status))
			since = kobj_str(o, "lastTransitionTime");
	}
	cJSON_AddStringToObject(cond, "type", type);
	cJSON_AddStringToObject(cond, "status", status);
	cJSON_AddStringToObject(cond, "reason", reason);
	cJSON_AddStringToObject(cond, "message", msg);
	cJSON_AddNumberToObject(cond, "observedGeneration", (double)c->gen);
	if (since)
		cJSON_AddStringToObject(cond, "lastTransitionTime", since);
	else
		status__add_now(cond, "lastTransitionTime", 0);
	cJSON_AddItemToArray(c->arr, cond);
}

static void attached_condition(struct conds *c, const char *ns, const struct summary *s)
{
	char where[96];

	/* a cluster probe's reports are in each namespace it covers */
	snprintf(where, sizeof(where), "%s%.63s", *ns ? "-n " : "-A -l " STATUS_LABEL_CLUSTER,
		 *ns ? ns : "");
	if (s->attached && s->detached)
		add_condition(
			c, "Attached", true, "OverheadLimited",
			"probes live on %" PRId64 " processes in %" PRId64 " pods on %" PRId64
			" nodes; %.400s%s (%zu detached in all: kubectl get functionprobereports "
			"%s -o yaml)",
			s->processes, s->pods, s->nodes, s->detached,
			strlen(s->detached) > 400 ? "..." : "", s->ndetached, where);
	else if (s->attached)
		add_condition(c, "Attached", true, "Attached",
			      "probes live on %" PRId64 " processes in %" PRId64 " pods on %" PRId64
			      " nodes",
			      s->processes, s->pods, s->nodes);
	else if (s->nerrors)
		add_condition(
			c, "Attached", false, "AttachFailed",
			"%s%s%s%s%s (all errors: kubectl get functionprobereports %s -o yaml)",
			s->errors[0], s->nerrors > 1 ? "; " : "",
			s->nerrors > 1 ? s->errors[1] : "", s->nerrors > 2 ? "; " : "",
			s->nerrors > 2 ? s->errors[2] : "", where);
	else if (!*ns)
		add_condition(c, "Attached", false, "NoMatchingPods",
			      "no running pod matches spec.selector in the namespaces "
			      "spec.namespaceSelector selects");
	else
		add_condition(c, "Attached", false, "NoMatchingPods",
			      "no running pod in namespace %s matches spec.selector", ns);
}

/* The calls of m not timed, in words, at buf (empty when every call was). */
static void untimed(const struct merged *m, char *buf, size_t len)
{
	const struct latency *l = &m->l;
	size_t n = 0;

	buf[0] = '\0';
	if (l->tail_exits)
		n += (size_t)snprintf(buf + n, len - n,
				      ", %" PRIu64 " of its %" PRIu64
				      " calls left through a jump to "
				      "code not probed (tailExits)",
				      l->tail_exits, l->calls);
	if (l->inlined_untimed && n < len)
		n += (size_t)snprintf(buf + n, len - n,
				      ", %" PRIu64 " counted at the entry of an inlined copy whose "
				      "exits are not known (inlinedUntimedCalls)",
				      l->inlined_untimed);
	if (l->lost && n < len)
		snprintf(buf + n, len - n,
			 ", %" PRIu64 " more entered with too many traced calls in flight on "
			 "their thread or goroutine, not counted (lost)",
			 l->lost);
}

/*
 * Timed: whether every call entered was timed. When some were not (a hook
 * in a library left through a jump, inlined copies counted at their entry,
 * calls nested too deep), the functions and the numbers in words: a
 * function's percentiles are of its timed calls only, and a reader of the
 * table should know. Calls that never returned are orphans, not said here.
 */
static void timed_condition(struct conds *c, const struct summary *s)
{
	char msg[640], one[300], rest[48] = "";
	size_t n = 0, more = 0, shown = 0;

	msg[0] = '\0';
	for (size_t i = 0; i < s->nfns; i++) {
		untimed(&s->fns[i], one, sizeof(one));
		if (!one[0])
			continue;
		if (shown == 3 || n >= sizeof(msg)) {
			more++;
			continue;
		}
		shown++;
		n += (size_t)snprintf(msg + n, sizeof(msg) - n, "%s%.80s: %s", n ? "; " : "",
				      s->fns[i].name, one + 2);
	}
	if (more)
		snprintf(rest, sizeof(rest), " (and %zu more functions)", more);
	if (!shown)
		add_condition(c, "Timed", true, "EveryCallTimed",
			      "every call counted has a duration");
	else
		add_condition(c, "Timed", false, "CallsNotTimed",
			      "%s%s: percentiles are of the timed calls only", msg, rest);
}

static void conditions(cJSON *status, const struct status_probe *p, const struct status_state *st,
		       const struct summary *s, const cJSON *old)
{
	struct conds c = { cJSON_AddArrayToObject(status, "conditions"), old, p->generation };
	char until[32];

	clock__rfc3339(st->expires, until, sizeof(until));
	if (!st->valid) {
		add_condition(&c, "Ready", false, "InvalidSpec", "%s", st->spec_err);
		add_condition(&c, "Attached", false, "InvalidSpec",
			      "nothing is probed until the spec is fixed");
		return;
	}
	add_condition(&c, "Ready", true, "Accepted", "the spec is valid");
	if (st->expired) {
		add_condition(&c, "Expired", true, "LifetimeEnded",
			      "probes detached at %s (spec.lifetime); results stay", until);
		add_condition(&c, "Attached", false, "Expired",
			      "probes detached when the lifetime ended; raise spec.lifetime to "
			      "probe again");
		return;
	}
	add_condition(&c, "Expired", false, "Active", "probes detach at %s", until);
	if (st->list)
		add_condition(&c, "Attached", false, "ListOnly",
			      "spec.mode is List: nothing is attached; each node's report lists "
			      "the functions (kubectl get functionprobereports -n %s -o yaml)",
			      p->ns);
	else
		attached_condition(&c, p->ns, s);
	if (!st->list)
		timed_condition(&c, s);
	if (st->args_asked && st->args_denied)
		add_condition(
			&c, "ArgumentsCaptured", false, "ForbiddenByAdministrator",
			"spec.captureArguments is refused: this cluster's retwatch agents run "
			"with --argument-capture deny (the chart's allowArgumentCapture: "
			"false); the calls are reported without their arguments");
	else if (st->args_asked)
		add_condition(&c, "ArgumentsCaptured", true, "Captured",
			      "the slowest calls carry their arguments");
}

cJSON *summary__doc(const struct status_probe *p, const struct status_state *st, const cJSON *old,
		    struct summary *s, uint64_t interval_ns)
{
	cJSON *status = cJSON_CreateObject();
	struct summary none = { .generation = p->generation };
	char interval[LATENCY_FMT_LEN];

	s = s ? s : &none;
	cJSON_AddNumberToObject(status, "observedGeneration", (double)p->generation);
	conditions(status, p, st, s, kobj_get(old, "conditions"));
	if (st->valid) {
		cJSON_AddStringToObject(
			status, "reportInterval",
			latency__format_ns(interval_ns, interval, sizeof(interval)));
		cJSON_AddItemToObject(status, "summary", summary_json(s, st->keep));
	}
	return status;
}

void summary__stamp(cJSON *status)
{
	cJSON *sum = cJSON_GetObjectItemCaseSensitive(status, "summary");

	if (sum)
		status__add_now(sum, "lastUpdate", 3);
}

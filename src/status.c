// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "kobj.h"
#include "log.h"
#include "status.h"

/* More processes than one node runs (pid_max's limit): a corrupt entry. */
#define MAX_NODE_PROCESSES (1 << 22)
#define PROBE_PATH "/apis/retwatch.io/v1alpha1/namespaces/%s/functionprobes/%s/status"

void status__node_key(const char *uid, char *buf, size_t len)
{
	snprintf(buf, len, "node/%s", uid);
}

void status__summary_key(const char *uid, char *buf, size_t len)
{
	snprintf(buf, len, "summary/%s", uid);
}

char *status__path(const char *ns, const char *name)
{
	char *path;

	return asprintf(&path, PROBE_PATH, ns, name) < 0 ? NULL : path;
}

char *status__node_manager(const char *node)
{
	char *m;

	return asprintf(&m, "retwatch-agent-%s", node) < 0 ? NULL : m;
}

/* Now, in seconds (conditions) or milliseconds (the time of a report). */
static void add_now(cJSON *obj, const char *name, unsigned int digits)
{
	char ts[TIME_RFC3339_LEN];

	time_rfc3339(ts, sizeof(ts), digits);
	cJSON_AddStringToObject(obj, name, ts);
}

/* ---- latency ---- */

static int add_duration(cJSON *obj, const char *name, uint64_t ns)
{
	char buf[LATENCY_FMT_LEN];

	return cJSON_AddStringToObject(obj, name, latency__format_ns(ns, buf, sizeof(buf)))
		       ? 0
		       : -ENOMEM;
}

int status_latency__to_json(const struct latency *l, cJSON *obj)
{
	cJSON *buckets, *pair;

	if (!cJSON_AddNumberToObject(obj, "calls", (double)l->calls) ||
	    !cJSON_AddNumberToObject(obj, "orphans", (double)l->orphans) ||
	    add_duration(obj, "p50", latency__percentile(l, 0.50)) ||
	    add_duration(obj, "p95", latency__percentile(l, 0.95)) ||
	    add_duration(obj, "p99", latency__percentile(l, 0.99)) ||
	    add_duration(obj, "max", l->max_ns) ||
	    !cJSON_AddNumberToObject(obj, "minNs", (double)l->min_ns) ||
	    !cJSON_AddNumberToObject(obj, "maxNs", (double)l->max_ns) ||
	    !cJSON_AddNumberToObject(obj, "sumNs", (double)l->sum_ns) ||
	    !(buckets = cJSON_AddArrayToObject(obj, "buckets")))
		return -ENOMEM;
	for (unsigned int i = 0; i < RW_HIST_BUCKETS; i++) {
		if (!l->buckets[i])
			continue;
		pair = cJSON_CreateArray();
		if (!pair || !cJSON_AddItemToArray(buckets, pair) ||
		    !cJSON_AddItemToArray(pair, cJSON_CreateNumber(i)) ||
		    !cJSON_AddItemToArray(pair, cJSON_CreateNumber((double)l->buckets[i])))
			return -ENOMEM;
	}
	return 0;
}

/* A count: a whole number from 0 to 2^53 (what a JSON number holds exactly). */
static int count(const cJSON *v, uint64_t *ret)
{
	if (!v) {
		*ret = 0;
		return 0;
	}
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0 ||
	    v->valuedouble != (double)(uint64_t)v->valuedouble)
		return -EINVAL;
	*ret = (uint64_t)v->valuedouble;
	return 0;
}

int status_latency__from_json(const cJSON *obj, struct latency *ret)
{
	const cJSON *pair, *buckets = kobj_get(obj, "buckets");
	long prev = -1;

	memset(ret, 0, sizeof(*ret));
	if (!cJSON_IsObject(obj) || count(kobj_get(obj, "calls"), &ret->calls) ||
	    count(kobj_get(obj, "orphans"), &ret->orphans) ||
	    count(kobj_get(obj, "minNs"), &ret->min_ns) ||
	    count(kobj_get(obj, "maxNs"), &ret->max_ns) ||
	    count(kobj_get(obj, "sumNs"), &ret->sum_ns) || (buckets && !cJSON_IsArray(buckets)))
		return -EINVAL;
	cJSON_ArrayForEach(pair, buckets)
	{
		uint64_t idx, n;

		if (cJSON_GetArraySize(pair) != 2 || count(cJSON_GetArrayItem(pair, 0), &idx) ||
		    count(cJSON_GetArrayItem(pair, 1), &n) || idx >= RW_HIST_BUCKETS ||
		    (long)idx <= prev)
			return -EINVAL;
		ret->buckets[idx] = n;
		prev = (long)idx;
	}
	return 0;
}

/* ---- this node's entry ---- */

static void add_traced(const struct traced *t, void *ctx)
{
	cJSON *pods = ctx, *item, *procs = NULL;

	cJSON_ArrayForEach(item, pods)
	{
		if (!strcmp(kobj_str(item, "name"), t->pod) &&
		    !strcmp(kobj_str(item, "containerID"), t->cid))
			procs = cJSON_GetObjectItemCaseSensitive(item, "processes");
	}
	if (!procs) {
		item = cJSON_CreateObject();
		cJSON_AddItemToArray(pods, item);
		cJSON_AddStringToObject(item, "name", t->pod);
		cJSON_AddStringToObject(item, "container", t->container);
		cJSON_AddStringToObject(item, "containerID", t->cid);
		cJSON_AddStringToObject(item, "executable", t->exe);
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

/* A function's mode, returnSites and latency, as the entry and the summary hold them. */
static void add_function(cJSON *fns, const char *name, const char *mode, const char *reason,
			 double returns, const struct latency *l)
{
	cJSON *f = cJSON_CreateObject();

	cJSON_AddItemToArray(fns, f);
	cJSON_AddStringToObject(f, "name", name);
	if (mode)
		cJSON_AddStringToObject(f, "mode", mode);
	if (reason)
		cJSON_AddStringToObject(f, "reason", reason);
	cJSON_AddNumberToObject(f, "returnSites", returns);
	status_latency__to_json(l, f);
}

cJSON *status__node_entry(const char *node, int64_t generation, const struct traceset *ts,
			  struct errlist *errs, struct results *r, bool wrote)
{
	size_t ntraced = traceset__count(ts);
	cJSON *e, *fns;

	if (!ntraced && !errs->n && !results__nrows(r) && !wrote)
		return NULL;
	e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "node", node);
	cJSON_AddNumberToObject(e, "generation", (double)generation);
	cJSON_AddBoolToObject(e, "attached", ntraced > 0);
	traceset__foreach(ts, add_traced, cJSON_AddArrayToObject(e, "pods"));
	cJSON_AddNumberToObject(e, "processes", (double)ntraced);
	add_errors(e, errs);
	fns = cJSON_AddArrayToObject(e, "functions");
	for (size_t k = 0; k < results__nrows(r); k++) {
		const struct results_row *row = results__row(r, k);
		struct latency l;

		results__read(r, k, NULL, NULL, &l);
		add_function(fns, row->name, func_mode__str(row->mode), row->reason,
			     (double)row->nreturns, &l);
	}
	return e;
}

cJSON *status__node_doc(cJSON *entry)
{
	cJSON *status = cJSON_CreateObject();

	add_now(entry, "lastUpdate", 3);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(status, "nodes"), entry);
	return status;
}

bool status__seed(const cJSON *status, const char *node, int64_t generation, struct results *r)
{
	const cJSON *entry, *fn;
	bool any = false;

	cJSON_ArrayForEach(entry, kobj_get(status, "nodes"))
	{
		if (!kobj_str(entry, "node") || strcmp(kobj_str(entry, "node"), node) ||
		    kobj_int(entry, "generation", -1) != generation)
			continue;
		cJSON_ArrayForEach(fn, kobj_get(entry, "functions"))
		{
			struct latency l;

			if (kobj_str(fn, "name") && !status_latency__from_json(fn, &l))
				results__seed(r, kobj_str(fn, "name"), &l);
		}
		any = true;
	}
	return any;
}

/* ---- the summary and conditions ---- */

struct merged {
	const char *name, *mode, *reason;
	double returns;
	struct latency l;
};

struct summary {
	struct merged *fns;
	size_t nfns;
	int64_t nodes, pods, processes;
	bool attached;
	const char *errors[3]; /* the first few, for the Attached condition */
	size_t nerrors;
};

static void merge_fn(struct summary *s, const cJSON *fn)
{
	const char *name = kobj_str(fn, "name");
	struct merged *m = NULL;
	struct latency l;

	if (!name || status_latency__from_json(fn, &l))
		return;
	for (size_t i = 0; i < s->nfns && !m; i++)
		if (!strcmp(s->fns[i].name, name))
			m = &s->fns[i];
	if (!m) {
		m = realloc(s->fns, (s->nfns + 1) * sizeof(*m));
		if (!m)
			return;
		s->fns = m;
		m = &s->fns[s->nfns++];
		memset(m, 0, sizeof(*m));
		m->name = name;
		m->mode = kobj_str(fn, "mode");
		m->reason = kobj_str(fn, "reason");
		m->returns = cJSON_GetNumberValue(kobj_get(fn, "returnSites"));
	}
	latency__merge(&m->l, &l);
}

static void merge_nodes(struct summary *s, const cJSON *status, int64_t generation)
{
	const cJSON *node, *fn, *err;

	cJSON_ArrayForEach(node, kobj_get(status, "nodes"))
	{
		int64_t procs = kobj_int(node, "processes", 0);

		if (kobj_int(node, "generation", -1) != generation)
			continue;
		s->nodes++;
		s->pods += cJSON_GetArraySize(kobj_get(node, "pods"));
		/* another agent wrote it: a count, bounded, or nothing */
		s->processes += procs >= 0 && procs <= MAX_NODE_PROCESSES ? procs : 0;
		s->attached |= cJSON_IsTrue(kobj_get(node, "attached"));
		cJSON_ArrayForEach(err, kobj_get(node, "errors"))
		{
			if (s->nerrors < sizeof(s->errors) / sizeof(s->errors[0]) &&
			    cJSON_IsString(err))
				s->errors[s->nerrors++] = err->valuestring;
		}
		cJSON_ArrayForEach(fn, kobj_get(node, "functions")) merge_fn(s, fn);
	}
}

static cJSON *summary_json(const struct summary *s)
{
	cJSON *sum = cJSON_CreateObject(), *fns = cJSON_CreateArray();
	const struct merged *slowest = NULL;
	uint64_t calls = 0, p99 = 0;
	char buf[LATENCY_FMT_LEN];

	cJSON_AddNumberToObject(sum, "nodes", (double)s->nodes);
	cJSON_AddNumberToObject(sum, "pods", (double)s->pods);
	cJSON_AddNumberToObject(sum, "processes", (double)s->processes);
	for (size_t i = 0; i < s->nfns; i++) {
		const struct merged *m = &s->fns[i];
		uint64_t q = latency__percentile(&m->l, 0.99);

		add_function(fns, m->name, m->mode, m->reason, m->returns, &m->l);
		calls += m->l.calls;
		if (latency__count(&m->l) && (!slowest || q > p99)) {
			slowest = m;
			p99 = q;
		}
	}
	cJSON_AddNumberToObject(sum, "calls", (double)calls);
	if (slowest) {
		cJSON_AddStringToObject(sum, "slowest", slowest->name);
		cJSON_AddStringToObject(sum, "p50",
					latency__format_ns(latency__percentile(&slowest->l, 0.5),
							   buf, sizeof(buf)));
		cJSON_AddStringToObject(sum, "p99", latency__format_ns(p99, buf, sizeof(buf)));
	}
	cJSON_AddItemToObject(sum, "functions", fns);
	return sum;
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
		add_now(cond, "lastTransitionTime", 0);
	cJSON_AddItemToArray(c->arr, cond);
}

static void attached_condition(struct conds *c, const char *ns, const struct summary *s)
{
	if (s->attached)
		add_condition(c, "Attached", true, "Attached",
			      "probes live on %" PRId64 " processes in %" PRId64 " pods on %" PRId64
			      " nodes",
			      s->processes, s->pods, s->nodes);
	else if (s->nerrors)
		add_condition(c, "Attached", false, "AttachFailed",
			      "%s%s%s%s%s (all errors: status.nodes[].errors)", s->errors[0],
			      s->nerrors > 1 ? "; " : "", s->nerrors > 1 ? s->errors[1] : "",
			      s->nerrors > 2 ? "; " : "", s->nerrors > 2 ? s->errors[2] : "");
	else
		add_condition(c, "Attached", false, "NoMatchingPods",
			      "no running pod in namespace %s matches spec.selector", ns);
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
	attached_condition(&c, p->ns, s);
}

cJSON *status__summary_doc(const struct status_probe *p, const struct status_state *st,
			   const cJSON *old)
{
	cJSON *status = cJSON_CreateObject();
	struct summary s = { 0 };

	cJSON_AddNumberToObject(status, "observedGeneration", (double)p->generation);
	if (st->valid)
		merge_nodes(&s, old, p->generation);
	conditions(status, p, st, &s, kobj_get(old, "conditions"));
	if (st->valid)
		cJSON_AddItemToObject(status, "summary", summary_json(&s));
	free(s.fns);
	return status;
}

void status__stamp_summary(cJSON *status)
{
	cJSON *sum = cJSON_GetObjectItemCaseSensitive(status, "summary");

	if (sum)
		add_now(sum, "lastUpdate", 3);
}

char *status__apply_body(const struct status_probe *p, cJSON *status)
{
	cJSON *doc = cJSON_CreateObject(), *md;
	char *out;

	cJSON_AddStringToObject(doc, "apiVersion", "retwatch.io/v1alpha1");
	cJSON_AddStringToObject(doc, "kind", "FunctionProbe");
	md = cJSON_AddObjectToObject(doc, "metadata");
	cJSON_AddStringToObject(md, "name", p->name);
	cJSON_AddStringToObject(md, "namespace", p->ns);
	/* a probe deleted and made again under the same name is another probe */
	cJSON_AddStringToObject(md, "uid", p->uid);
	cJSON_AddItemToObject(doc, "status", status);
	out = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	return out;
}

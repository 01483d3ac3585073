// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kube/kobj.h"
#include "agent/nodeset.h"
#include "base/clock.h"
#include "base/log.h"
#include "report/reportfit.h"
#include "report/statuswire.h"
#include "agent/summarizer.h"

/* Reports per list request: a page is all the memory a summary's input takes. */
#define PAGE_LIMIT 25
#define LIST_TIMEOUT_MS 15000
/* A Retry-After is honoured up to this long. */
#define RETRY_AFTER_MAX_S 60
/* A ClusterFunctionProbe's status lists at most this many namespaces' rows
 * (the first by name; the rest are counted, and in the summary all the same). */
#define CLUSTER_MAX_ROWS 256
/* A namespace's name, with its NUL (Kubernetes': at most 63). */
#define NS_NAME_LEN 64

struct request {
	char *uid, *ns, *name, *spec_err, *status_path;
	int64_t generation;
	struct status_state st;
	cJSON *old;
	uint64_t interval_ns;
	uint64_t seq;
	bool queued;
	bool cluster;		 /* a ClusterFunctionProbe: its reports in every namespace */
	bool counted;		 /* the last summary made showed calls */
	uint64_t ignored_log_ns; /* when a report ignored was last logged (set by the thread) */
	char *last;		 /* the summary last handed to the publisher, before stamping */
	struct request *next;
};

struct summarizer {
	struct kube *k;
	struct publisher *pub;
	double writes_per_s;
	size_t budget; /* bytes of a probe's status (reportfit.h) */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	struct request *reqs;
	uint64_t seq;
	long wait_s;	      /* the thread's own: a Retry-After to honour before the next list */
	struct nodeset nodes; /* the thread's own: the cluster's nodes */
	struct summarizer_counters c;
};

/* A ClusterFunctionProbe's reports merged per namespace, beside the whole. */
struct nsrow {
	char ns[NS_NAME_LEN];
	struct summary *sum;
};

struct nsrows {
	struct nsrow *v;
	size_t n, omitted;
	char last_omitted[NS_NAME_LEN];
	int64_t generation;
};

static void nsrows_clear(struct nsrows *rows)
{
	for (size_t i = 0; i < rows->n; i++)
		summary__free(rows->v[i].sum);
	free(rows->v);
	memset(rows, 0, sizeof(*rows));
}

/* The row of namespace ns, made when there is room; NULL past the rows' bound
 * (counted) or on ENOMEM (*e). Reports come sorted by namespace. */
static struct summary *nsrow_of(struct nsrows *rows, const char *ns, int *e)
{
	struct nsrow *more;

	for (size_t i = rows->n; i > 0; i--)
		if (!strcmp(rows->v[i - 1].ns, ns))
			return rows->v[i - 1].sum;
	if (rows->n >= CLUSTER_MAX_ROWS) {
		if (strcmp(rows->last_omitted, ns)) {
			rows->omitted++;
			snprintf(rows->last_omitted, sizeof(rows->last_omitted), "%s", ns);
		}
		return NULL;
	}
	more = realloc(rows->v, (rows->n + 1) * sizeof(*more));
	if (!more || !(more[rows->n].sum = summary__new(rows->generation))) {
		if (more)
			rows->v = more;
		*e = -ENOMEM;
		return NULL;
	}
	rows->v = more;
	snprintf(more[rows->n].ns, sizeof(more[rows->n].ns), "%s", ns);
	return more[rows->n++].sum;
}

/* A cluster probe's report into the whole (once per node and namespace) and
 * its namespace's row. One with no namespace name of Kubernetes' is left out. */
static int add_cluster_report(struct summary *sum, struct nsrows *rows, const cJSON *report)
{
	const char *ns = kobj_namespace(report), *node = kobj_str(report, "node");
	char key[NS_NAME_LEN + 256];
	struct summary *row;
	int e = 0;

	if (!ns || !*ns || strlen(ns) >= NS_NAME_LEN || !node || strlen(node) > 253)
		return 0;
	snprintf(key, sizeof(key), "%s/%s", ns, node);
	e = summary__add_report_as(sum, report, key);
	row = e ? NULL : nsrow_of(rows, ns, &e);
	return row ? summary__add_report(row, report) : e;
}

static void request_free(struct request *r)
{
	free(r->uid);
	free(r->ns);
	free(r->name);
	free(r->spec_err);
	free(r->status_path);
	cJSON_Delete(r->old);
	free(r->last);
	free(r);
}

static struct request *find(struct summarizer *s, const char *uid)
{
	for (struct request *r = s->reqs; r; r = r->next)
		if (!strcmp(r->uid, uid))
			return r;
	return NULL;
}

/* One page of reports into sum; *cont gets the next page's token ("" at the end). */
/*
 * A report whose node is no node of the cluster (nodeset.h): written by a
 * token that names no node, or for one that is gone; not summed, counted,
 * and logged at most once a minute for each probe (another probe's leftovers
 * do not hide its own).
 */
static void ignore(struct summarizer *s, struct request *r, const cJSON *report)
{
	uint64_t now = clock__mono_ns();

	pthread_mutex_lock(&s->lock);
	s->c.ignored++;
	pthread_mutex_unlock(&s->lock);
	if (r->ignored_log_ns && now - r->ignored_log_ns < NODESET_EVERY_NS)
		return;
	r->ignored_log_ns = now;
	log_warn("summary of %s/%s: report %s names node %s, which is no node of the cluster: "
		 "not summed",
		 r->ns, r->name, kobj_name(report) ?: "?", kobj_str(report, "node") ?: "(none)");
}

static int list_page(struct summarizer *s, struct request *r, struct summary *sum,
		     struct nsrows *rows, char *cont, size_t cont_len, uint64_t *nreports)
{
	char sel[STATUS_KEY_LEN + 64], esc[3 * sizeof(sel)], tok[1024], why[512];
	char *path = r->cluster ? strdup(STATUS_REPORTS_ALL) : status__report_path(r->ns, NULL);
	char *url = NULL, *body = NULL;
	struct rw_error err = { "" };
	const cJSON *item;
	cJSON *doc = NULL;
	int status, e = -EIO;

	status__reports_selector(r->uid, sel, sizeof(sel));
	kube__escape(sel, esc, sizeof(esc));
	if (!path || asprintf(&url, "%s?labelSelector=%s&limit=%d%s%s", path, esc, PAGE_LIMIT,
			      *cont ? "&continue=" : "",
			      *cont ? kube__escape(cont, tok, sizeof(tok)) : "") < 0) {
		free(path);
		return -ENOMEM;
	}
	status = kube__request(s->k, "GET", url, NULL, NULL, LIST_TIMEOUT_MS, &body, &err);
	if (status == 200 && (doc = cJSON_Parse(body)) && cJSON_IsArray(kobj_get(doc, "items"))) {
		e = 0;
		cJSON_ArrayForEach(item, kobj_get(doc, "items"))
		{
			if (!nodeset__has(&s->nodes, kobj_str(item, "node"))) {
				ignore(s, r, item);
				continue;
			}
			if (!e)
				e = r->cluster ? add_cluster_report(sum, rows, item)
					       : summary__add_report(sum, item);
			++*nreports;
		}
		snprintf(cont, cont_len, "%s",
			 kobj_str(kobj_get(doc, "metadata"), "continue") ?: "");
	} else if (status < 0) {
		log_warn("summary of %s/%s: failed to list its reports: %s", r->ns, r->name,
			 err.msg);
	} else if ((status == 429 || status / 100 == 5) && kube__retry_after() > 0) {
		/* overloaded: the next list waits as long as the server asks */
		s->wait_s = kube__retry_after();
		log_warn("summary of %s/%s: failed to list its reports: API server answered %d "
			 "with Retry-After %ld s; waiting that long",
			 r->ns, r->name, status, s->wait_s);
	} else {
		log_warn("summary of %s/%s: failed to list its reports: HTTP %d: %s", r->ns,
			 r->name, status, kube__error_text(body, why, sizeof(why)));
	}
	cJSON_Delete(doc);
	free(body);
	free(url);
	free(path);
	return e;
}

/* The probe's summary from every report of it (and of a cluster probe, each
 * namespace's in rows), or NULL when a list failed. */
static struct summary *gather(struct summarizer *s, struct request *r, struct nsrows *rows)
{
	struct summary *sum = summary__new(r->generation);
	char cont[1024] = "";
	uint64_t pages = 0, reports = 0;
	int e = sum ? 0 : -ENOMEM;

	rows->generation = r->generation;
	nodeset__refresh(&s->nodes, s->k, clock__mono_ns());
	do {
		if (!e)
			e = list_page(s, r, sum, rows, cont, sizeof(cont), &reports);
		pages++;
	} while (!e && *cont);
	if (!e)
		e = summary__add_legacy(sum, kobj_get(r->old, "status"));
	pthread_mutex_lock(&s->lock);
	s->c.pages += pages;
	s->c.reports += reports;
	s->c.failures += e != 0;
	pthread_mutex_unlock(&s->lock);
	if (e) {
		summary__free(sum);
		nsrows_clear(rows);
		return NULL;
	}
	return sum;
}

/* A cluster probe's status: how many namespaces reported, a row for each
 * within half the status's budget (the summary keeps the other half; the
 * rows past it are counted). */
static void add_rows(cJSON *doc, struct nsrows *rows, size_t budget)
{
	cJSON *arr, *sum = cJSON_GetObjectItemCaseSensitive(doc, "summary");
	size_t omitted = rows->omitted, bytes = 0;

	if (sum)
		cJSON_AddNumberToObject(sum, "namespaces", (double)(rows->n + rows->omitted));
	arr = cJSON_AddArrayToObject(doc, "namespaces");
	for (size_t i = 0; arr && i < rows->n; i++) {
		cJSON *row = summary__row(rows->v[i].sum, rows->v[i].ns);
		char *text = row ? cJSON_PrintUnformatted(row) : NULL;
		size_t len = text ? strlen(text) + 1 : 0;

		free(text);
		if (!len || bytes + len > budget / 2) {
			cJSON_Delete(row);
			omitted++;
			continue;
		}
		bytes += len;
		cJSON_AddItemToArray(arr, row);
	}
	if (omitted)
		cJSON_AddNumberToObject(doc, "namespacesOmitted", (double)omitted);
}

/*
 * Makes r's summary; the text handed to the publisher, or NULL when
 * unchanged or failed. *counted: the summary shows calls (left as it was
 * when the reports could not be listed).
 */
static char *summarize(struct summarizer *s, struct request *r, const char *last, bool *counted)
{
	const cJSON *calls;
	struct status_probe p = { r->uid, r->ns, r->name, r->generation, r->cluster };
	struct nsrows rows = { 0 };
	struct summary *sum = r->st.valid ? gather(s, r, &rows) : NULL;
	uint64_t interval = r->interval_ns;
	char key[STATUS_KEY_LEN], *text, *body;
	cJSON *doc;

	if (r->st.valid && !sum)
		return NULL;
	if (sum)
		interval = summary__interval(summary__writers(sum), r->interval_ns,
					     s->writes_per_s);
	doc = summary__doc(&p, &r->st, kobj_get(r->old, "status"), sum, interval);
	if (doc && r->cluster && sum)
		add_rows(doc, &rows, s->budget);
	nsrows_clear(&rows);
	summary__free(sum);
	if (doc && !reportfit__summary(doc, s->budget))
		log_warn("the status of probe %s/%s is over its byte budget (%zu bytes) with its "
			 "summary cut down: raise --report-budget",
			 r->ns, r->name, s->budget);
	calls = kobj_get(kobj_get(doc, "summary"), "calls");
	*counted = cJSON_IsNumber(calls) && calls->valuedouble > 0;
	text = doc ? cJSON_PrintUnformatted(doc) : NULL;
	status__summary_key(r->uid, key, sizeof(key));
	if (!text || (last && !strcmp(text, last) && !publisher__failed(s->pub, key))) {
		free(text);
		cJSON_Delete(doc);
		return NULL;
	}
	summary__stamp(doc);
	body = status__apply_body(&p, doc);
	if (!body || publisher__apply(s->pub, key, r->status_path, STATUS_SUMMARY_MANAGER, body)) {
		free(text);
		text = NULL;
	}
	free(body);
	return text;
}

static struct request *oldest_queued(struct summarizer *s)
{
	struct request *best = NULL;

	for (struct request *r = s->reqs; r; r = r->next)
		if (r->queued && (!best || r->seq < best->seq))
			best = r;
	return best;
}

/* Waits out a Retry-After (bounded) before the next list; called without
 * the lock. */
static void pause_retry_after(struct summarizer *s)
{
	long ms = (s->wait_s > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : s->wait_s) * 1000;

	s->wait_s = 0;
	for (; ms > 0 && !__atomic_load_n(&s->stop, __ATOMIC_RELAXED); ms -= 100)
		usleep(100 * 1000);
}

static void *run(void *arg)
{
	struct summarizer *s = arg;

	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		struct request *r = oldest_queued(s), copy;
		bool counted;
		char *text;

		if (!r) {
			pthread_cond_wait(&s->cond, &s->lock);
			continue;
		}
		/* work on a copy: a newer request may replace this one meanwhile */
		r->queued = false;
		copy = *r;
		counted = r->counted; /* as it was, when the reports cannot be listed */
		copy.old = r->old;
		r->old = NULL;
		copy.last = r->last ? strdup(r->last) : NULL;
		copy.uid = strdup(r->uid);
		copy.spec_err = r->spec_err ? strdup(r->spec_err) : NULL;
		copy.st.spec_err = copy.spec_err;
		copy.ns = strdup(r->ns);
		copy.name = strdup(r->name);
		copy.status_path = strdup(r->status_path);
		pthread_mutex_unlock(&s->lock);
		text = copy.uid && copy.ns && copy.name && copy.status_path
			       ? summarize(s, &copy, copy.last, &counted)
			       : NULL;
		pause_retry_after(s);
		pthread_mutex_lock(&s->lock);
		s->c.summaries++;
		s->c.writes += text != NULL;
		/* the probe may have been forgotten while the lock was free */
		r = copy.uid ? find(s, copy.uid) : NULL;
		if (r) {
			r->counted = counted;
			r->ignored_log_ns = copy.ignored_log_ns;
		}
		if (r && text) {
			free(r->last);
			r->last = text;
			text = NULL;
		}
		free(text);
		copy.next = NULL;
		free(copy.uid);
		free(copy.ns);
		free(copy.name);
		free(copy.spec_err);
		free(copy.status_path);
		cJSON_Delete(copy.old);
		free(copy.last);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

struct summarizer *summarizer__start(struct kube *k, struct publisher *pub, double writes_per_s,
				     size_t budget)
{
	struct summarizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->k = k;
	s->pub = pub;
	s->writes_per_s = writes_per_s;
	s->budget = budget ? budget : REPORTFIT_DEFAULT_BUDGET;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	if (pthread_create(&s->thread, NULL, run, s)) {
		pthread_cond_destroy(&s->cond);
		pthread_mutex_destroy(&s->lock);
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	return s;
}

void summarizer__stop(struct summarizer *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	while (s->reqs) {
		struct request *r = s->reqs;

		s->reqs = r->next;
		request_free(r);
	}
	nodeset__clear(&s->nodes);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* Sets what a request asks, in place of what it asked before. */
static int fill(struct request *r, const struct status_probe *p, const struct status_state *st,
		const cJSON *old, uint64_t interval_ns)
{
	char *ns = strdup(p->ns), *name = strdup(p->name);
	char *err = st->spec_err ? strdup(st->spec_err) : NULL;
	char *path = p->cluster ? status__cluster_path(p->name) : status__path(p->ns, p->name);
	cJSON *o = cJSON_CreateObject();

	if (!ns || !name || (st->spec_err && !err) || !path || !o ||
	    (old && !cJSON_AddItemToObject(o, "status", cJSON_Duplicate(old, true)))) {
		free(ns);
		free(name);
		free(err);
		free(path);
		cJSON_Delete(o);
		return -ENOMEM;
	}
	free(r->ns);
	free(r->name);
	free(r->spec_err);
	free(r->status_path);
	cJSON_Delete(r->old);
	r->ns = ns;
	r->name = name;
	r->spec_err = err;
	r->status_path = path;
	r->old = o;
	r->generation = p->generation;
	r->cluster = p->cluster;
	r->st = *st;
	r->st.spec_err = err;
	r->interval_ns = interval_ns;
	return 0;
}

int summarizer__request(struct summarizer *s, const struct status_probe *p,
			const struct status_state *st, const cJSON *old, uint64_t interval_ns)
{
	struct request *r;
	int e = 0;

	pthread_mutex_lock(&s->lock);
	r = find(s, p->uid);
	if (!r && (r = calloc(1, sizeof(*r)))) {
		if ((r->uid = strdup(p->uid))) {
			r->next = s->reqs;
			s->reqs = r;
		} else {
			free(r);
			r = NULL;
		}
	}
	if (!r || fill(r, p, st, old, interval_ns)) {
		e = -ENOMEM;
	} else {
		if (!r->queued)
			r->seq = ++s->seq;
		r->queued = true;
		pthread_cond_signal(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
	return e;
}

void summarizer__forget(struct summarizer *s, const char *uid)
{
	struct request **pp;

	pthread_mutex_lock(&s->lock);
	for (pp = &s->reqs; *pp; pp = &(*pp)->next) {
		if (!strcmp((*pp)->uid, uid)) {
			struct request *r = *pp;

			*pp = r->next;
			request_free(r);
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
}

bool summarizer__counted(struct summarizer *s, const char *uid)
{
	struct request *r;
	bool ret;

	pthread_mutex_lock(&s->lock);
	r = find(s, uid);
	ret = r && r->counted;
	pthread_mutex_unlock(&s->lock);
	return ret;
}

void summarizer__counters(struct summarizer *s, struct summarizer_counters *ret)
{
	pthread_mutex_lock(&s->lock);
	*ret = s->c;
	pthread_mutex_unlock(&s->lock);
}

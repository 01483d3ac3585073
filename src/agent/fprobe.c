// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "agent/fprobe.h"
#include "agent/keepshare.h"
#include "base/log.h"
#include "agent/placement.h"
#include "report/reportfit.h"
#include "agent/status.h"
#include "agent/summarizer.h"

/* A new spec's first results go out this soon, later ones every interval. */
#define FIRST_WRITE_NS (NS_PER_S / 2)
/* Longer than any interval a summary writer asks for (a day): a forgery. */
#define MAX_INTERVAL_NS (86400 * NS_PER_S)

/* The traces and results of the spec before are retired over the next turns. */
static void let_go(struct fprobe *p, const char *why)
{
	if (p->traces)
		traceset__leave(p->traces, why);
	else
		results__free(p->results);
	p->traces = NULL;
	p->results = NULL;
}

static int renew(struct fprobe *p, const char *why)
{
	let_go(p, why);
	funclist__free(p->list);
	p->list = NULL;
	p->results = results__new(p->env->tracer);
	if (p->results)
		p->traces = traceset__new(p->env, p->results, p->ns, p->name);
	return p->traces ? 0 : -1;
}

struct fprobe *fprobe__new(const cJSON *obj, struct traceset_env *env, const char *node,
			   const char *cluster_uid)
{
	char report[STATUS_NAME_LEN];
	const char *uid = kobj_uid(obj), *ns = kobj_namespace(obj), *name = kobj_name(obj);
	struct fprobe *p;

	if (!uid)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->folded_kept = SIZE_MAX;
	p->uid = strdup(uid);
	p->ns = strdup(ns ? ns : "");
	p->name = strdup(name ? name : "");
	p->cluster_uid = cluster_uid ? strdup(cluster_uid) : NULL;
	p->env = env;
	p->generation = -1;
	p->created = clock__parse_rfc3339(kobj_str(kobj_get(obj, "metadata"), "creationTimestamp"));
	if (p->uid && p->ns && p->name) {
		/* named as status__report_body names it: by the uid its reports carry */
		struct status_probe sp = { cluster_uid ? cluster_uid : p->uid, p->ns, p->name, 0,
					   false };

		status__report_name(&sp, node, report, sizeof(report));
		p->report_path = status__report_path(p->ns, report);
	}
	if (!p->uid || !p->ns || !p->name || (cluster_uid && !p->cluster_uid) ||
	    !(p->status_path = status__path(p->ns, p->name)) || !p->report_path || renew(p, NULL)) {
		fprobe__free(p, NULL);
		return NULL;
	}
	return p;
}

void fprobe__free(struct fprobe *p, const char *why)
{
	if (!p)
		return;
	let_go(p, why);
	funclist__free(p->list);
	errlist__clear(&p->errors);
	probe_spec__free(&p->spec);
	free(p->uid);
	free(p->cluster_uid);
	free(p->ns);
	free(p->name);
	free(p->status_path);
	free(p->report_path);
	free(p->last_entry);
	free(p);
}

bool fprobe__captures(const struct fprobe *p)
{
	return p->valid && p->spec.capture_args && !p->env->deny_args;
}

static void apply_spec(struct fprobe *p, const cJSON *obj)
{
	struct rw_error err = { "" };

	/* the results table belongs to one generation of the spec */
	renew(p, "the probe's spec changed");
	probe_spec__free(&p->spec);
	p->generation = kobj_generation(obj) < 0 ? 0 : kobj_generation(obj);
	p->valid = !probe_spec__parse(kobj_get(obj, "spec"), &p->spec, &err);
	if (p->valid && p->results &&
	    results__keep_slowest(p->results, p->spec.keep, p->spec.window_ns, p->env->sym))
		log_warn("probe %s/%s: no memory to keep its slowest calls", p->ns, p->name);
	/* the namespace's kept calls together, within the node's (keepshare.h) */
	if (p->valid && p->results && p->spec.keep && p->env->keep)
		results__keep_budget(p->results, keepshare__budget(p->env->keep, p->ns));
	if (p->valid && p->results && fprobe__captures(p))
		results__capture_args(p->results);
	if (p->valid && p->spec.list && !(p->list = funclist__new(p->env, p->ns)))
		log_warn("probe %s/%s: no memory to list its functions", p->ns, p->name);
	snprintf(p->spec_err, sizeof(p->spec_err), "%s", p->valid ? "" : err.msg);
	p->expired = false;
	if (!p->valid)
		log_warn("probe %s/%s is not valid: %s", p->ns, p->name, err.msg);
	p->next_write = clock__mono_ns() + FIRST_WRITE_NS;
}

/* The interval this node writes at: the spec's, or the longer one the
 * summary writer asks of every node (a probe on many nodes). */
static void take_interval(struct fprobe *p, const cJSON *status)
{
	uint64_t asked = 0;
	const char *s = kobj_str(status, "reportInterval");

	p->interval_ns = p->valid ? p->spec.interval_ns : PROBE_DEFAULT_INTERVAL_NS;
	if (s && !latency__parse_duration(s, &asked) && asked > p->interval_ns &&
	    asked <= MAX_INTERVAL_NS)
		p->interval_ns = asked;
}

void fprobe__sync(struct fprobe *p, const cJSON *obj, const char *node, const cJSON *report,
		  bool fresh)
{
	const cJSON *status = kobj_get(obj, "status");

	p->seen = true;
	if (kobj_generation(obj) < 0 || kobj_generation(obj) != p->generation) {
		apply_spec(p, obj);
		/* a restarted agent carries on from its report, or from its entry
		 * in the probe's status that agents before reports wrote */
		if (fresh && p->valid &&
		    (status__seed_report(report, p->generation, p->results) ||
		     status__seed(status, node, p->generation, p->results)))
			log_info("probe %s/%s: carrying on from the results written before", p->ns,
				 p->name);
	}
	if (fresh && status__legacy_entry(status, node))
		p->legacy = true;
	take_interval(p, status);
	/* its processes are retired as a turn's time allows (fprobe__place) */
	if (p->valid && !p->expired &&
	    time(NULL) >= p->created + (time_t)(p->spec.lifetime_ns / NS_PER_S)) {
		errlist__clear(&p->errors);
		p->expired = true;
		log_info("probe %s/%s expired: its probes are detached, results kept", p->ns,
			 p->name);
	}
}

static bool selected(const struct fprobe *p, const struct pod *pod)
{
	return p->valid && !p->expired && placement__selects(&p->spec, p->ns, pod);
}

bool fprobe__selects_any(const struct fprobe *p, const struct pod *pods, size_t npods)
{
	for (size_t i = 0; i < npods; i++)
		if (selected(p, &pods[i]))
			return true;
	return false;
}

static void want(const struct placement_proc *pp, void *ctx)
{
	struct fprobe *p = ctx;

	if (p->spec.list) {
		/* a list probe attaches nothing: it reads the executable */
		if (p->list)
			funclist__want(p->list, pp, &p->spec, &p->errors);
		return;
	}
	traceset__want(p->traces, pp, &p->spec, &p->errors);
}

struct pods_view {
	const struct fprobe *p;
	const struct pod *pods;
	size_t npods;
};

/* The counts of a pod's retired processes stay while the probe selects it. */
static bool keep_pod(const char *name, void *ctx)
{
	const struct pods_view *v = ctx;

	for (size_t i = 0; i < v->npods; i++)
		if (!strcmp(v->pods[i].name, name) && selected(v->p, &v->pods[i]))
			return true;
	return false;
}

/* A kept call refused this long ago is still said in the report. */
#define KEEP_ERROR_NS (60 * NS_PER_S)

/* Slowest calls not kept lately for the memory bounds (keepshare.h): said. */
static void keep_errors(struct fprobe *p)
{
	const struct slowest_budget *b, *node;

	if (!p->spec.keep || !p->env->keep)
		return;
	b = keepshare__budget(p->env->keep, p->ns);
	node = keepshare__node(p->env->keep);
	if (!b || !b->refused || clock__mono_ns() - b->last_refused_ns > KEEP_ERROR_NS)
		return;
	errlist__add(&p->errors,
		     "slowest calls not kept: the calls the probes of namespace %s keep on this "
		     "node hold %.1f of the %.0f MiB a namespace's may, and every namespace's "
		     "%.1f of the node's %.0f MiB; %" PRIu64 " calls not kept since the agent "
		     "started: keep fewer (spec.slowCalls.keep) or trace fewer functions",
		     p->ns, (double)b->used / (1 << 20), (double)b->max / (1 << 20),
		     (double)node->used / (1 << 20), (double)node->max / (1 << 20), b->refused);
}

void fprobe__place(struct fprobe *p, const struct pod *pods, size_t npods, struct nodeprocs *np,
		   size_t max_probes)
{
	struct pods_view v = { p, pods, npods };

	errlist__clear(&p->errors);
	traceset__begin(p->traces);
	if (p->list)
		funclist__begin(p->list);
	if (p->limited)
		errlist__add(&p->errors,
			     "this node already traces %zu probes, the most its agent takes "
			     "(--max-probes, the chart's maxProbesPerNode): this probe waits for "
			     "one of them to end",
			     max_probes);
	for (size_t i = 0; i < npods && !p->limited; i++)
		if (selected(p, &pods[i]))
			placement__pod(&p->spec, &pods[i], np, &p->errors, want, p);
	results__prune_groups(p->results, keep_pod, &v);
	traceset__end(p->traces, p->limited   ? "the node's probe limit was reached"
				 : p->expired ? "the probe's lifetime ended"
					      : "its pod, container or process is gone");
	traceset__share_errors(p->traces, &p->errors);
	traceset__fork_errors(p->traces, &p->errors);
	keep_errors(p);
	/* a list is sent as soon as an executable is listed */
	if (p->list && funclist__end(p->list))
		p->next_write = 0;
	/* the pods attached over several turns are all in a report at once,
	 * not an interval later: one write more when the last is attached,
	 * whether or not a report was written meanwhile (at the agent's start
	 * the first is written before its pods are placed) */
	if (traceset__waiting(p->traces)) {
		p->write_attached = true;
	} else if (p->write_attached) {
		p->write_attached = false;
		p->next_write = 0;
	}
}

/* Oldest first, so the probes over the limit are the newest. */
static int age_cmp(const void *x, const void *y)
{
	const struct fprobe *p = *(const struct fprobe *const *)x,
			    *q = *(const struct fprobe *const *)y;

	if (p->created != q->created)
		return p->created < q->created ? -1 : 1;
	return strcmp(p->uid, q->uid);
}

/* A probe's place in fprobes__share's order: by namespace, then age. */
struct share_rank {
	const char *ns;
	size_t age;
};

static int rank_cmp(const void *x, const void *y)
{
	const struct share_rank *a = x, *b = y;
	int c = strcmp(a->ns, b->ns);

	return c ? c : (a->age > b->age) - (a->age < b->age);
}

int fprobes__share(const char *const *ns, size_t n, size_t max, bool *ret_limited)
{
	struct share_rank *r = calloc(n ? n : 1, sizeof(*r));
	size_t *rank = calloc(n ? n : 1, sizeof(*rank)), k = 0, share, admitted = 0;

	if (!r || !rank) {
		free(r);
		free(rank);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		r[i] = (struct share_rank){ ns[i], i };
	qsort(r, n, sizeof(*r), rank_cmp);
	for (size_t i = 0, run = 0; i < n; i++) {
		run = i && !strcmp(r[i].ns, r[i - 1].ns) ? run + 1 : 0;
		k += !run;
		rank[r[i].age] = run;
	}
	/* each namespace its share, its oldest first; the rest to the oldest */
	share = k ? max / k : 0;
	for (size_t i = 0; i < n; i++) {
		ret_limited[i] = max && rank[i] >= share;
		admitted += !ret_limited[i];
	}
	for (size_t i = 0; i < n && max; i++)
		if (ret_limited[i] && admitted < max) {
			ret_limited[i] = false;
			admitted++;
		}
	free(r);
	free(rank);
	return 0;
}

/* A due report's place in fprobes__write_order. */
struct write_rank {
	const char *ns;
	size_t i, round, turn;
};

static int write_cmp(const void *x, const void *y)
{
	const struct write_rank *a = x, *b = y;

	if (a->round != b->round)
		return a->round < b->round ? -1 : 1;
	if (a->turn != b->turn)
		return a->turn < b->turn ? -1 : 1;
	return (a->i > b->i) - (a->i < b->i);
}

/* By namespace, then position: the runs of each namespace. */
static int ns_cmp(const void *x, const void *y)
{
	const struct write_rank *a = x, *b = y;
	int c = strcmp(a->ns, b->ns);

	return c ? c : (a->i > b->i) - (a->i < b->i);
}

int fprobes__write_order(const char *const *ns, size_t n, const char *after, size_t *ret_order)
{
	struct write_rank *r = calloc(n ? n : 1, sizeof(*r));
	size_t k = 0, first = 0;

	if (!r)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		r[i] = (struct write_rank){ .ns = ns[i], .i = i };
	qsort(r, n, sizeof(*r), ns_cmp);
	/* each namespace's k-th due report is in round k; a namespace's turn
	 * in a round is its place in name order, from the first after `after` */
	for (size_t i = 0; i < n; i++) {
		bool new_ns = !i || strcmp(r[i].ns, r[i - 1].ns);

		r[i].round = new_ns ? 0 : r[i - 1].round + 1;
		r[i].turn = new_ns ? k++ : r[i - 1].turn;
		if (new_ns && after && strcmp(r[i].ns, after) <= 0)
			first = k;
	}
	for (size_t i = 0; i < n; i++)
		r[i].turn = (r[i].turn + k - (first % (k ? k : 1))) % (k ? k : 1);
	qsort(r, n, sizeof(*r), write_cmp);
	for (size_t i = 0; i < n; i++)
		ret_order[i] = r[i].i;
	free(r);
	return 0;
}

size_t fprobes__limit(struct fprobe *list, const struct pod *pods, size_t npods, size_t max)
{
	size_t n = 0, nwant = 0, nlimited = 0;
	struct fprobe **want;
	const char **ns;
	bool *limited;

	for (struct fprobe *p = list; p; p = p->next)
		n++;
	want = calloc(n ? n : 1, sizeof(*want));
	ns = calloc(n ? n : 1, sizeof(*ns));
	limited = calloc(n ? n : 1, sizeof(*limited));
	if (!want || !ns || !limited)
		goto out;
	for (struct fprobe *p = list; p; p = p->next) {
		if (fprobe__selects_any(p, pods, npods))
			want[nwant++] = p;
		else
			p->limited = false;
	}
	qsort(want, nwant, sizeof(*want), age_cmp);
	for (size_t i = 0; i < nwant; i++)
		ns[i] = want[i]->ns;
	if (fprobes__share(ns, nwant, max, limited))
		goto out;
	for (size_t i = 0; i < nwant; i++) {
		bool was = want[i]->limited;

		want[i]->limited = limited[i];
		nlimited += limited[i];
		if (limited[i] && !was)
			log_warn("probe %s/%s not traced: this node traces %zu probes "
				 "(--max-probes), each namespace first its share of them",
				 want[i]->ns, want[i]->name, max);
	}
out:
	free(want);
	free(ns);
	free(limited);
	return nlimited;
}

bool fprobe__may_log_slow_call(struct fprobe *p, uint64_t now, uint32_t per_sec)
{
	if (!per_sec)
		return true;
	if (now - p->slow_window_ns >= NS_PER_S) {
		p->slow_window_ns = now;
		p->slow_logged = 0;
	}
	if (p->slow_logged >= per_sec) {
		p->slow_unlogged++;
		return false;
	}
	p->slow_logged++;
	return true;
}

/* Spreads the writes of many agents and probes over the interval. */
static uint64_t jittered(uint64_t interval)
{
	return interval - interval / 10 + (uint64_t)rand() % (interval / 5 + 1);
}

static struct status_probe about(const struct fprobe *p)
{
	/* a cluster probe's reports name it, each in the namespace it covers */
	if (p->cluster_uid)
		return (struct status_probe){ p->cluster_uid, p->ns, p->name, p->generation, true };
	return (struct status_probe){ p->uid, p->ns, p->name, p->generation, false };
}

/* Takes this node's entry out of the probe's status, where agents before
 * reports wrote it (its results are in the report now). */
static void clear_legacy(struct fprobe *p, struct publisher *pub, const char *manager)
{
	struct status_probe sp = about(p);
	char key[STATUS_KEY_LEN], *body = status__apply_body(&sp, cJSON_CreateObject());

	status__legacy_key(p->uid, key, sizeof(key));
	if (body && !publisher__apply(pub, key, p->status_path, manager, body))
		p->legacy = false;
	free(body);
}

/* The overhead guard detached a function from a process, or attached it again. */
static void on_guard(const struct results_guard *g, void *ctx)
{
	const struct fprobe *p = ctx;
	cJSON *ev = log_event(g->error	    ? LOG_WARN
			      : g->detached ? LOG_WARN
					    : LOG_INFO,
			      g->error ? "over its overhead budget, but cannot be detached"
			      : g->detached
				      ? "function detached: over its overhead budget"
				      : "function attached again: within its overhead budget");

	if (!ev)
		return;
	cJSON_AddStringToObject(ev, "namespace", p->ns);
	cJSON_AddStringToObject(ev, "probe", p->name);
	if (g->pod)
		cJSON_AddStringToObject(ev, "pod", g->pod);
	if (g->container)
		cJSON_AddStringToObject(ev, "container", g->container);
	cJSON_AddNumberToObject(ev, "pid", g->pid);
	cJSON_AddStringToObject(ev, "function", g->function);
	cJSON_AddNumberToObject(ev, "calls_per_second", g->rate);
	cJSON_AddNumberToObject(ev, "overhead", g->overhead);
	cJSON_AddNumberToObject(ev, "max_overhead", g->max);
	if (g->error)
		cJSON_AddStringToObject(ev, "error", g->error);
	log_emit(ev);
}

/*
 * The report's byte budget, halved when the server refused the last one
 * for its size (its etcd takes less than the agent was told): a report is
 * made smaller and sent again, never dropped.
 */
static size_t report_budget(struct fprobe *p, struct publisher *pub, const char *key)
{
	if (!p->budget)
		p->budget = REPORTFIT_DEFAULT_BUDGET;
	if (publisher__too_large(pub, key) && p->last_bytes && p->budget > REPORTFIT_MIN_BUDGET) {
		size_t cut = p->last_bytes / 2;

		cut = cut < REPORTFIT_MIN_BUDGET ? REPORTFIT_MIN_BUDGET : cut;
		if (cut < p->budget) {
			log_warn("the API server refused the report of probe %s/%s (%zu bytes) as "
				 "too large: its budget is now %zu bytes (--report-budget is more "
				 "than this cluster's etcd takes)",
				 p->ns, p->name, p->last_bytes, cut);
			p->budget = cut;
		}
	}
	return p->budget;
}

/* Keeps the report within its budget; cut: what its making left out. */
static void fit_report(struct fprobe *p, const struct reportfit_cut *cut, cJSON *entry)
{
	struct reportfit fit;
	size_t kept;

	if (reportfit__entry(entry, p->budget, cut, &fit))
		return; /* out of memory: sent as it is */
	kept = fit.whole == fit.bytes ? SIZE_MAX : fit.kept;
	if (kept != p->folded_kept && kept != SIZE_MAX && !fit.pods)
		log_info("report of probe %s/%s over its budget (%zu bytes; %zu whole): each "
			 "function lists its %zu slowest calls of %zu",
			 p->ns, p->name, p->budget, fit.whole, fit.calls_kept, fit.calls);
	else if (kept != p->folded_kept && kept != SIZE_MAX)
		log_info("report of probe %s/%s over its budget (%zu bytes; %zu whole): each "
			 "function lists its %zu slowest of up to %zu pods, the rest folded by "
			 "revision",
			 p->ns, p->name, p->budget, fit.whole, fit.kept, fit.pods);
	p->folded_kept = kept;
}

bool fprobe__report_due(const struct fprobe *p, uint64_t now)
{
	return p->valid && now >= p->next_write;
}

/*
 * The heap's free pages go back to the system at most this often, after a
 * report's writing: reports built and freed, and slowest calls kept and
 * replaced, leave free pages inside the heap that the memory limit still
 * counts (26 MiB of 130 measured with the kept calls' bounds full).
 */
#define TRIM_EVERY_NS (10 * NS_PER_S)

static void give_back(struct traceset_env *env, uint64_t now)
{
	if (now - env->trimmed_ns >= TRIM_EVERY_NS) {
		malloc_trim(0);
		env->trimmed_ns = now;
	}
}

void fprobe__write_report(struct fprobe *p, struct publisher *pub, const char *node,
			  const char *manager, const struct pod *pods, size_t npods, uint64_t now)
{
	struct status_probe sp = about(p);
	char key[STATUS_KEY_LEN], *text, *body;
	struct reportfit_cut cut;
	cJSON *entry;

	if (!p->valid || now < p->next_write)
		return;
	p->next_write = now + jittered(p->interval_ns);
	/* the overhead guard looks once a report interval */
	if (p->env->cal.call_cost_ns)
		results__guard(p->results, now, &p->env->cal, p->spec.max_overhead, on_guard, p);
	results__tick(p->results, now);
	status__report_key(p->uid, key, sizeof(key));
	/* the slowest calls the entry lists take at most the budget: its
	 * making holds no more than that, however many the probe keeps */
	entry = status__node_entry(node, p->generation, p->traces, &p->errors, p->results, pods,
				   npods, p->wrote || (p->list && funclist__count(p->list)),
				   p->spec.window_ns, report_budget(p, pub, key), &cut);
	if (!entry)
		return;
	if (p->list)
		funclist__add_to(p->list, entry,
				 (p->budget ? p->budget : REPORTFIT_DEFAULT_BUDGET) / 2);
	if (p->slow_unlogged)
		cJSON_AddNumberToObject(entry, "slowCallsUnlogged", (double)p->slow_unlogged);
	status__add_bias(entry, &p->env->cal);
	status__add_overhead(entry, p->results);
	fit_report(p, &cut, entry);
	/* sent when it changed, or when the last send failed */
	text = cJSON_PrintUnformatted(entry);
	if (!text ||
	    (p->last_entry && !strcmp(text, p->last_entry) && !publisher__failed(pub, key))) {
		free(text);
		cJSON_Delete(entry);
		give_back(p->env, now);
		return;
	}
	body = status__report_body(&sp, node, entry, p->interval_ns);
	p->last_bytes = body ? strlen(body) : 0;
	if (body && !publisher__apply(pub, key, p->report_path, manager, body)) {
		free(p->last_entry);
		p->last_entry = text;
		text = NULL;
		p->wrote = true;
		if (p->legacy)
			clear_legacy(p, pub, manager);
	}
	free(body);
	free(text);
	give_back(p->env, now);
}

/*
 * A new probe's first summary is asked for before any node has reported a
 * call; until one shows calls, in the probe's first seconds, it is asked
 * for again soon rather than an interval later (the status showed calls
 * 2.3 s after the apply at the median, the nodes' reports 0.8 s).
 */
#define SUMMARY_EARLY_S 10
#define SUMMARY_EARLY_RETRY_NS (NS_PER_S / 4)

static bool summary_early(const struct fprobe *p, struct summarizer *sum)
{
	/* the summarizer's word, not the status: the agent's copy of it has
	 * no summary (agent.c strips it), which kept this early for 10 s */
	return time(NULL) - p->created < SUMMARY_EARLY_S && !summarizer__counted(sum, p->uid);
}

void fprobe__request_summary(struct fprobe *p, struct summarizer *sum, const cJSON *obj,
			     uint64_t now)
{
	struct status_state st = {
		.valid = p->valid,
		.expired = p->expired,
		.spec_err = p->spec_err,
		.expires = p->created + (time_t)(p->spec.lifetime_ns / NS_PER_S),
		.keep = p->valid ? p->spec.keep : 0,
		.args_asked = p->valid && p->spec.capture_args,
		.args_denied = p->env->deny_args,
		.list = p->valid && p->spec.list,
	};
	struct status_probe sp = about(p);

	if (now < p->next_summary)
		return;
	p->next_summary = now + (summary_early(p, sum) ? SUMMARY_EARLY_RETRY_NS
						       : jittered(p->interval_ns));
	summarizer__request(sum, &sp, &st, kobj_get(obj, "status"),
			    p->valid ? p->spec.interval_ns : PROBE_DEFAULT_INTERVAL_NS);
}

void fprobe__final_report(struct fprobe *p, struct publisher *pub, const char *node,
			  const char *manager)
{
	traceset__retire_all(p->traces, "the agent is stopping");
	errlist__clear(&p->errors);
	p->next_write = 0;
	fprobe__write_report(p, pub, node, manager, NULL, 0, clock__mono_ns());
}

void fprobe__unpublish(struct fprobe *p, struct publisher *pub, struct summarizer *sum)
{
	char key[STATUS_KEY_LEN];

	/* the garbage collector deletes it too (the probe owns it), when one runs */
	status__report_key(p->uid, key, sizeof(key));
	if (p->wrote)
		publisher__delete(pub, key, p->report_path);
	else
		publisher__forget(pub, key);
	status__legacy_key(p->uid, key, sizeof(key));
	publisher__forget(pub, key);
	status__summary_key(p->uid, key, sizeof(key));
	publisher__forget(pub, key);
	if (sum)
		summarizer__forget(sum, p->uid);
}

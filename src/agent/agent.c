// SPDX-License-Identifier: MIT
/*
 * The node agent's lifecycle and main loop. Each turn reconciles in
 * pipeline order:
 *   informers (FunctionProbes, this node's pods)  -> fprobe (the probe model)
 *   nodeprocs (this node's processes by container)
 *   placement (pod -> container -> process) -> traceset (attach, retire)
 *   -> results (per-function table) -> status (node entry, summary, conditions)
 *   -> publisher (server-side apply)        and metricspage (/metrics)
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "agent/agent.h"
#include "base/clock.h"
#include "agent/fprobe.h"
#include "agent/informer.h"
#include "agent/kobj.h"
#include "base/log.h"
#include "agent/metrics.h"
#include "agent/metricspage.h"
#include "agent/nodeprocs.h"
#include "agent/placement.h"
#include "agent/publisher.h"
#include "agent/status.h"
#include "agent/summarizer.h"
#include "trace/symbolize.h"
#include "trace/uprobe.h"

/* New processes of traced containers are found this often. */
#define SCAN_EVERY_NS (NS_PER_S)
/*
 * A turn of the loop spends at most about this long attaching and detaching
 * processes (and one more begun before it ran out): a process whose probes
 * are its own costs two links per function, 64 functions about 130 ms
 * (ASan build, 25 processes mapping the file), so two probes over 25 pods
 * kept the loop in turns of 2.9 and 1.7 s; detaching one takes a tenth of
 * that. The processes not reached wait for the next turn, 100 ms later:
 * /metrics, slow calls and the other probes' reports wait about this long,
 * not for every pod, and pods go live one by one.
 */
#define TURN_BUDGET_NS (NS_PER_S / 5)
#define PROBES_PATH "/apis/retwatch.io/v1alpha1/functionprobes"

struct agent {
	struct agent_opts o;
	struct kube *k;
	struct tracer *tracer;
	struct binary_cache *cache;
	struct traceset_env env;
	struct informer *probes_inf, *pods_inf;
	struct publisher *pub;
	struct summarizer *sum;
	struct metrics_page page;
	int notify_fd;
	char *manager;
	struct fprobe *probes;
	struct informer_view probes_snap, pods_snap; /* the informers' caches, copied */
	cJSON *seeds;	  /* this node's reports when the agent started, until probes take them */
	struct pod *pods; /* views of pods_snap */
	size_t npods, nlimited;
	uint64_t next_scan;
	size_t rotation; /* the probe placed first: another each turn, so each has its go */
	/* attaching over several turns: since when, the attaches made by then */
	uint64_t backlog_since_ns, backlog_tries;
	size_t backlog_turns;
	/* readiness: the first reconcile ran, and the attaches it found (waiting then)
	 * left to make */
	bool reconciled;
	size_t start_left;
	bool series_warned;
	/* calibrating again: a round a turn of the loop (recalibrate) */
	struct calibrator *calibrator;
	uint64_t next_calibration;
};

static void pods_clear(struct agent *a)
{
	for (size_t i = 0; i < a->npods; i++)
		pod__clear(&a->pods[i]);
	free(a->pods);
	a->pods = NULL;
	a->npods = 0;
}

static void pods_load(struct agent *a)
{
	const cJSON *obj;

	pods_clear(a);
	a->pods = calloc(cJSON_GetArraySize(a->pods_snap.objs) + 1, sizeof(*a->pods));
	cJSON_ArrayForEach(obj, a->pods_snap.objs)
	{
		if (!a->pods || pod__parse(obj, &a->pods[a->npods]))
			continue;
		a->npods++;
	}
}

static struct fprobe *probe_find(struct agent *a, const char *uid)
{
	for (struct fprobe *p = a->probes; p; p = p->next)
		if (uid && !strcmp(p->uid, uid))
			return p;
	return NULL;
}

/* This node's report of probe uid, as listed when the agent started. */
static const cJSON *seed_for(struct agent *a, const struct fprobe *p)
{
	const cJSON *r;

	/* this node's report of that probe, in the probe's namespace: a report
	 * another tenant wrote elsewhere naming the probe is none of its own */
	cJSON_ArrayForEach(r, a->seeds)
	{
		const char *uid = kobj_str(kobj_get(r, "probe"), "uid");
		const char *ns = kobj_namespace(r), *node = kobj_str(r, "node");

		if (uid && !strcmp(uid, p->uid) && ns && !strcmp(ns, p->ns) && node &&
		    !strcmp(node, a->o.node))
			return r;
	}
	return NULL;
}

/* Lists the reports this node wrote before (an agent restarted carries on
 * from them). Without them, counts start afresh; the log says why. */
static void load_seeds(struct agent *a)
{
	char sel[STATUS_KEY_LEN + 300], esc[3 * sizeof(sel)], tok[1024], cont[1024] = "";
	struct rw_error err = { "" };
	const cJSON *item;

	a->seeds = cJSON_CreateArray();
	if (!a->seeds || strlen(a->o.node) > STATUS_LABEL_VALUE_MAX)
		return;
	snprintf(sel, sizeof(sel), STATUS_LABEL_NODE "=%s", a->o.node);
	kube__escape(sel, esc, sizeof(esc));
	do {
		char *url = NULL, *body = NULL;
		cJSON *doc = NULL;
		int status = -ENOMEM;

		if (asprintf(&url, STATUS_REPORTS_ALL "?labelSelector=%s&limit=100%s%s", esc,
			     *cont ? "&continue=" : "",
			     *cont ? kube__escape(cont, tok, sizeof(tok)) : "") >= 0)
			status = kube__request(a->k, "GET", url, NULL, NULL, 10000, &body, &err);
		free(url);
		if (status != 200 || !(doc = cJSON_Parse(body))) {
			log_warn(
				"failed to list this node's reports (counts start afresh): %s%.200s",
				status < 0 ? err.msg : "HTTP error: ", status < 0 ? "" : body);
			free(body);
			return;
		}
		cJSON_ArrayForEach(item, kobj_get(doc, "items"))
			cJSON_AddItemToArray(a->seeds, cJSON_Duplicate(item, true));
		snprintf(cont, sizeof(cont), "%s",
			 kobj_str(kobj_get(doc, "metadata"), "continue") ?: "");
		cJSON_Delete(doc);
		free(body);
	} while (*cont);
}

/* The probes as the server has them: new ones tracked, deleted ones dropped. */
static void sync_probes(struct agent *a)
{
	struct fprobe **pp, *p;
	const cJSON *obj;

	for (p = a->probes; p; p = p->next)
		p->seen = false;
	cJSON_ArrayForEach(obj, a->probes_snap.objs)
	{
		bool fresh = false;

		p = probe_find(a, kobj_uid(obj));
		if (!p && (p = fprobe__new(obj, &a->env, a->o.node))) {
			p->budget = a->o.report_budget;
			p->next = a->probes;
			a->probes = p;
			fresh = true;
		}
		if (p)
			fprobe__sync(p, obj, a->o.node, fresh ? seed_for(a, p) : NULL, fresh);
	}
	for (pp = &a->probes; *pp;) {
		p = *pp;
		if (p->seen) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		fprobe__unpublish(p, a->pub, a->sum);
		fprobe__free(p, "the probe was deleted");
	}
}

/*
 * Places every probe, a different one first each turn: the turn's time for
 * attaching goes to the first probes with processes to attach, so a probe
 * of many pods does not hold up another's one.
 */
static void place_all(struct agent *a)
{
	struct fprobe *first = a->probes, *p;
	size_t n = 0;

	for (p = a->probes; p; p = p->next)
		n++;
	for (size_t k = n ? a->rotation++ % n : 0; k; k--)
		first = first->next;
	for (p = first; p; p = p->next)
		fprobe__place(p, a->pods, a->npods, a->env.procs, a->o.max_probes);
	for (p = a->probes; p != first; p = p->next)
		fprobe__place(p, a->pods, a->npods, a->env.procs, a->o.max_probes);
}

/* What a turn (begun at start, with tries made before it) left to attach: the log
 * says when a backlog is cleared, and readiness waits for what the first turn found. */
static void attach_progress(struct agent *a, uint64_t tries, uint64_t start)
{
	const struct traceset_env *env = &a->env;
	size_t made = env->attach_tries - tries, left = env->attach_waiting + env->attach_reading;
	uint64_t since;
	cJSON *ev;

	if (!a->reconciled || !left)
		a->start_left = left;
	else
		a->start_left -= made < a->start_left ? made : a->start_left;
	a->reconciled = true;
	if (env->attach_waiting && !a->backlog_since_ns) {
		a->backlog_since_ns = start;
		a->backlog_tries = tries;
		a->backlog_turns = 0;
	}
	if (!a->backlog_since_ns)
		return;
	a->backlog_turns++;
	if (env->attach_waiting)
		return;
	since = a->backlog_since_ns;
	a->backlog_since_ns = 0;
	ev = log_event(LOG_INFO, "attach backlog cleared: %" PRIu64 " processes in %zu turns",
		       env->attach_tries - a->backlog_tries, a->backlog_turns);
	if (!ev)
		return;
	cJSON_AddStringToObject(ev, "event", "attach_backlog_cleared");
	cJSON_AddNumberToObject(ev, "processes", (double)(env->attach_tries - a->backlog_tries));
	cJSON_AddNumberToObject(ev, "turns", (double)a->backlog_turns);
	cJSON_AddNumberToObject(ev, "seconds", (double)(clock__mono_ns() - since) / NS_PER_S);
	log_emit(ev);
}

static void reconcile(struct agent *a)
{
	uint64_t tries = a->env.attach_tries, start;

	informer__sync(a->probes_inf, &a->probes_snap);
	if (informer__sync(a->pods_inf, &a->pods_snap))
		pods_load(a);
	sync_probes(a);
	nodeprocs__scan(a->env.procs);
	a->nlimited = fprobes__limit(a->probes, a->pods, a->npods, a->o.max_probes);
	start = clock__mono_ns();
	traceset__turn(&a->env, TURN_BUDGET_NS);
	place_all(a);
	attach_progress(a, tries, start);
}

static void write_statuses(struct agent *a)
{
	uint64_t now = clock__mono_ns();
	const cJSON *obj;

	for (struct fprobe *p = a->probes; p; p = p->next)
		fprobe__write_report(p, a->pub, a->o.node, a->manager, a->pods, a->npods, now);
	if (!publisher__leader(a->pub))
		return;
	cJSON_ArrayForEach(obj, a->probes_snap.objs)
	{
		struct fprobe *p = probe_find(a, kobj_uid(obj));

		if (p)
			fprobe__request_summary(p, a->sum, obj, now);
	}
}

static void log_slow_call(struct agent *a, const struct fprobe *p, const struct results_call *rc,
			  const struct tracer_event *ev)
{
	char dur[LATENCY_FMT_LEN], frame[512];
	uint64_t pcs[UNWIND_MAX_FRAMES];
	cJSON *log, *stack;
	size_t n;

	latency__format_ns(ev->duration_ns, dur, sizeof(dur));
	log = log_event(LOG_INFO, "slow call of %s: %s", rc->function, dur);
	if (!log)
		return;
	cJSON_AddStringToObject(log, "event", "slow_call");
	cJSON_AddStringToObject(log, "namespace", p->ns);
	cJSON_AddStringToObject(log, "probe", p->name);
	cJSON_AddStringToObject(log, "pod", rc->pod);
	cJSON_AddStringToObject(log, "container", rc->container);
	cJSON_AddStringToObject(log, "function", rc->function);
	cJSON_AddStringToObject(log, "duration", dur);
	cJSON_AddNumberToObject(log, "duration_ns", (double)ev->duration_ns);
	cJSON_AddNumberToObject(log, "pid", ev->pid);
	cJSON_AddNumberToObject(log, "tid", ev->tid);
	if (ev->goid)
		cJSON_AddNumberToObject(log, "goroutine", (double)ev->goid);
	stack = cJSON_AddArrayToObject(log, "stack");
	n = symbolizer__event_stack(a->env.sym, ev, pcs, UNWIND_MAX_FRAMES);
	for (size_t k = 0; k < n; k++) {
		symbolizer__resolve(a->env.sym, ev->pid, pcs[k], k == 0, frame, sizeof(frame));
		cJSON_AddItemToArray(stack, cJSON_CreateString(frame));
	}
	log_emit(log);
}

/* Every probe of this process and function whose threshold the call passed. */
static void on_slow_call(const struct tracer_event *ev, void *ctx)
{
	struct agent *a = ctx;
	struct results_call rc;

	for (struct fprobe *p = a->probes; p; p = p->next)
		if (p->spec.threshold_ns && ev->duration_ns >= p->spec.threshold_ns &&
		    results__find_call(p->results, ev, &rc) &&
		    fprobe__may_log_slow_call(p, clock__mono_ns(), a->o.slow_calls_per_sec))
			log_slow_call(a, p, &rc, ev);
}

static void counters_read(struct agent *a, struct agent_counters *ret)
{
	memset(ret, 0, sizeof(*ret));
	informer__counters(a->probes_inf, &ret->probes);
	informer__counters(a->pods_inf, &ret->pods);
	publisher__counters(a->pub, &ret->pub);
	if (a->sum)
		summarizer__counters(a->sum, &ret->sum);
	tracer__counters(a->tracer, &ret->tracer);
	ret->inflight = tracer__inflight(a->tracer);
	ret->api_requests = kube__requests(a->k);
	ret->attach_failures = a->env.attach_failures;
	ret->nlimited = a->nlimited;
	ret->ns_refused = a->env.ns_refused;
	ret->attach_pending = a->env.attach_waiting + a->env.attach_reading;
	ret->detach_pending = a->env.detach_waiting;
	analyzer__counters(a->env.analyzer, &ret->analyzer);
	ret->leader = publisher__leader(a->pub);
	ret->bpf_links = uprobe_links__open();
	open_files__read(&ret->files);
	for (struct fprobe *p = a->probes; p; p = p->next) {
		ret->nprobes++;
		ret->ntraces += traceset__count(p->traces);
	}
}

/*
 * Ready: it has listed the probes and pods, and attached the processes it
 * found then (or tried as many attaches: pods that come meanwhile do not
 * hold it back). Attaching later changes nothing: liveness is the loop's.
 */
static bool ready(const struct agent *a, char *why_not, size_t len)
{
	if (!informer__synced(a->probes_inf) || !informer__synced(a->pods_inf)) {
		snprintf(
			why_not, len,
			"waiting for the first list of FunctionProbes and pods from the API server");
		return false;
	}
	if (a->reconciled && !a->start_left)
		return true;
	if (!a->reconciled)
		snprintf(why_not, len, "placing the probes on this node's pods");
	else
		snprintf(why_not, len, "attaching %zu processes found at start", a->start_left);
	return false;
}

static void serve_metrics(struct agent *a)
{
	struct metrics_server *ms = a->o.metrics;
	struct agent_counters c;
	char why_not[128];
	size_t len = 0;
	char *text;

	if (!ms)
		return;
	metrics_server__beat(ms, ready(a, why_not, sizeof(why_not)), why_not);
	if (!metrics_server__wanted(ms))
		return;
	counters_read(a, &c);
	text = metrics_page__render(&a->page, a->probes, &c, &len);
	if (text && a->page.dropped && !a->series_warned)
		log_warn("metrics: %zu series left out: more than %zu (raise --metrics-max-series)",
			 a->page.dropped, a->o.max_series);
	a->series_warned = text ? a->page.dropped > 0 : a->series_warned;
	metrics_server__publish(ms, text, len);
}

/* The merged summary, the largest part of a probe's status, is written by
 * the summary writer from the reports and read by no agent. Of a pod, the
 * agent reads its metadata's names, labels and owners and its containers'
 * statuses (kobj.c). Of a probe, it reads its metadata's names, generation
 * and creation time, and of its spec what probe_spec__trim keeps: a spec
 * over the bounds a tenant may write costs every agent only the message that
 * says so. */
static const char *const probe_strip[] = { "status.summary", "metadata.annotations",
					   "metadata.labels", NULL };
static const char *const pod_strip[] = { "spec", "metadata.annotations", "status.conditions",
					 NULL };

static void probe_trim(cJSON *obj)
{
	probe_spec__trim(cJSON_GetObjectItemCaseSensitive(obj, "spec"));
}

static int start_watching(struct agent *a)
{
	char query[512], esc[384], sel[300];

	a->pub = publisher__start(a->k, a->o.node, a->o.lease_ns, STATUS_LEASE_NAME, a->o.lease_s);
	a->sum = a->pub ? summarizer__start(a->k, a->pub, a->o.report_writes, a->o.report_budget)
			: NULL;
	snprintf(sel, sizeof(sel), "spec.nodeName=%s", a->o.node);
	snprintf(query, sizeof(query), "fieldSelector=%s", kube__escape(sel, esc, sizeof(esc)));
	/* status writes (this agent's among them) need no reconcile */
	a->probes_inf = informer__start(a->k, "functionprobes", PROBES_PATH, NULL, true,
					a->notify_fd, a->o.list_page, probe_strip, probe_trim);
	a->pods_inf = informer__start(a->k, "pods", "/api/v1/pods", query, false, a->notify_fd,
				      a->o.list_page, pod_strip, NULL);
	return a->pub && a->sum && a->probes_inf && a->pods_inf ? 0 : -ENOMEM;
}

static void log_calibration(const struct calibration *cal, const char *msg)
{
	cJSON *ev = log_event(LOG_INFO, "%s", msg), *by;

	if (!ev)
		return;
	cJSON_AddNumberToObject(ev, "bias_ns", (double)cal->bias_ns);
	cJSON_AddNumberToObject(ev, "bias_lo_ns", (double)cal->bias_lo_ns);
	cJSON_AddNumberToObject(ev, "bias_hi_ns", (double)cal->bias_hi_ns);
	cJSON_AddNumberToObject(ev, "call_cost_ns", (double)cal->call_cost_ns);
	cJSON_AddNumberToObject(ev, "entry_only_call_cost_ns", (double)cal->entry_only_cost_ns);
	by = cJSON_AddObjectToObject(ev, "bias_by_entry_ns");
	for (int k = 0; by && k < PROBE_ENTRY__N; k++)
		cJSON_AddNumberToObject(by, probe_entry__str(k), (double)cal->entry_bias_ns[k]);
	log_emit(ev);
}

/* How much of a measured duration is the probes' own, and what a traced
 * call costs: measured here, and again every --calibrate-every (recalibrate);
 * without it durations stay as measured and the overhead guard is off. */
static void calibrate_probes(struct agent *a)
{
	struct rw_error err = { "" };

	a->next_calibration = clock__mono_ns() + a->o.calibrate_every_ns;
	if (calibrate__run(a->tracer, &a->env.cal, &err)) {
		log_warn("cannot calibrate the probes' bias and cost (durations are reported as "
			 "measured, the overhead guard is off): %s",
			 err.msg);
		return;
	}
	a->page.calibrations++;
	log_calibration(&a->env.cal, "probes calibrated");
}

/* Rounds of a calibration run at most this often: a burst of load slows a few. */
#define CALIBRATION_ROUND_GAP_NS (NS_PER_S / 50)

/*
 * The bias and cost follow the machine (its load, its CPU's frequency): a
 * calibration again every --calibrate-every, a round (a few milliseconds)
 * per turn of the loop, so that nothing waits for it. The figures in use
 * change only when it completes; a failed one leaves them as they were.
 */
static void recalibrate(struct agent *a, uint64_t now)
{
	struct rw_error err = { "" };
	struct calibration cal;
	int e;

	if (!a->o.calibrate_every_ns || now < a->next_calibration)
		return;
	if (!a->calibrator)
		e = calibrator__start(a->tracer, &a->calibrator, &err);
	else
		e = calibrator__step(a->calibrator, &cal, &err);
	if (!e) { /* started, or rounds remain */
		a->next_calibration = now + CALIBRATION_ROUND_GAP_NS;
		return;
	}
	calibrator__free(a->calibrator);
	a->calibrator = NULL;
	a->next_calibration = now + a->o.calibrate_every_ns;
	if (e < 0) {
		log_warn("cannot calibrate the probes again (the figures of the last calibration "
			 "stay in use): %s",
			 err.msg);
		return;
	}
	a->env.cal = cal;
	a->page.calibrations++;
	log_calibration(&a->env.cal, "probes calibrated again");
}

/*
 * The namespace whose probes select the pod process pid runs in
 * (tracer_opts.tenant_of), about to trace it: a probe's functions stay
 * probed once for every replica of an image while its new replicas are
 * attached, not while pods it does not select run the image. NULL while
 * the process or its pod is not known yet (a pod starting).
 */
static const char *tenant_of(pid_t pid, void *ctx)
{
	struct agent *a = ctx;
	const char *uid = nodeprocs__pod_of(a->env.procs, pid);
	const struct pod *pod = NULL;

	if (!uid || !*uid)
		return uid; /* not listed yet; in no pod: no tenant's */
	for (size_t i = 0; !pod && i < a->npods; i++)
		if (!strcmp(a->pods[i].uid, uid))
			pod = &a->pods[i];
	if (!pod)
		return NULL;
	for (const struct fprobe *p = a->probes; p; p = p->next)
		if (p->valid && !p->expired && !p->limited && !strcmp(p->ns, pod->ns) &&
		    placement__selects(&p->spec, pod->ns, pod))
			return pod->ns;
	return "";
}

struct agent *agent__new(struct kube *k, const struct agent_opts *o, struct rw_error *err)
{
	struct tracer_opts topts = { .attach_mode = o->attach_mode,
				     .partial = true,
				     .slow_calls_per_sec = o->slow_calls_per_sec,
				     .share_contexts = o->ns_inflight,
				     .share_slow_calls_per_sec = o->ns_slow_calls_per_sec,
				     .tenant_of = tenant_of };
	struct agent *a = calloc(1, sizeof(*a));

	if (!a)
		goto nomem;
	topts.tenant_ctx = a;
	a->o = *o;
	a->k = k;
	a->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	a->cache = binary_cache__new(64);
	a->env.sym = symbolizer__new(a->cache);
	a->env.procs = nodeprocs__new("/proc");
	a->env.max_ns_funcs = o->max_ns_funcs;
	a->env.analyzer = analyzer__new(a->notify_fd, o->analysis_timeout_ns);
	a->manager = status__node_manager(o->node);
	if (a->notify_fd < 0 || !a->cache || !a->env.sym || !a->env.procs || !a->env.analyzer ||
	    !a->manager)
		goto nomem;
	topts.cache = a->cache;
	a->tracer = a->env.tracer = tracer__new(&topts, err);
	if (!a->tracer)
		goto fail;
	a->page = (struct metrics_page){ .version = o->version,
					 .attach_mode = tracer__attach_mode(a->tracer),
					 .max_series = o->max_series,
					 .cal = &a->env.cal };
	calibrate_probes(a);
	tracer__set_event_fn(a->tracer, on_slow_call, a);
	if (start_watching(a))
		goto nomem;
	log_info("agent on node %s: watching FunctionProbes and this node's pods at %s "
		 "(attach mode %s)",
		 o->node, kube__server(k), tracer__attach_mode(a->tracer));
	return a;
nomem:
	rw_error_set(err, ENOMEM, "out of memory");
fail:
	agent__free(a);
	return NULL;
}

static bool woken(struct agent *a)
{
	uint64_t n;

	return read(a->notify_fd, &n, sizeof(n)) == sizeof(n);
}

/* Waits up to timeout_ms for slow calls or a scrape, then delivers the calls. */
static int wait_events(struct agent *a, int timeout_ms)
{
	struct pollfd fds[2] = {
		{ .fd = tracer__fd(a->tracer), .events = POLLIN },
		{ .fd = a->o.metrics ? metrics_server__fd(a->o.metrics) : -1, .events = POLLIN },
	};

	if (poll(fds, 2, timeout_ms) < 0 && errno != EINTR)
		return -errno;
	return tracer__poll(a->tracer, 0);
}

int agent__run(struct agent *a, const volatile sig_atomic_t *exiting,
	       const volatile sig_atomic_t *pause)
{
	serve_metrics(a); /* alive from the start, not after the first wait */
	while (!*exiting && !*pause) {
		uint64_t now;
		int e = wait_events(a, 100);

		if (e < 0 && e != -EINTR) {
			log_error("failed to read slow calls: %s", strerror(-e));
			return e;
		}
		now = clock__mono_ns();
		serve_metrics(a);
		/* nothing is probed before both lists are in: a half view would detach */
		if (!informer__synced(a->probes_inf) || !informer__synced(a->pods_inf))
			continue;
		if (!a->seeds)
			load_seeds(a);
		/* processes left to attach or detach: the next turn goes on, not a scan later */
		if (woken(a) || now >= a->next_scan || a->env.attach_waiting ||
		    a->env.detach_waiting) {
			reconcile(a);
			/* the probes there were took theirs */
			cJSON_Delete(a->seeds);
			a->seeds = cJSON_CreateArray();
			a->next_scan = now + SCAN_EVERY_NS;
		}
		tracer__tick(a->tracer);
		recalibrate(a, now);
		write_statuses(a);
	}
	return 0;
}

void agent__log_stats(struct agent *a)
{
	struct agent_counters c;
	cJSON *ev;

	counters_read(a, &c);
	ev = log_event(LOG_INFO, "counters");
	if (!ev)
		return;
	cJSON_AddStringToObject(ev, "event", "stats");
	cJSON_AddNumberToObject(ev, "api_requests", (double)c.api_requests);
	cJSON_AddNumberToObject(ev, "lists", (double)(c.probes.lists + c.pods.lists));
	cJSON_AddNumberToObject(ev, "list_pages", (double)(c.probes.pages + c.pods.pages));
	cJSON_AddNumberToObject(ev, "cache_copies", (double)(c.probes.copies + c.pods.copies));
	cJSON_AddNumberToObject(ev, "watches", (double)(c.probes.watches + c.pods.watches));
	cJSON_AddNumberToObject(ev, "watch_events", (double)(c.probes.events + c.pods.events));
	cJSON_AddNumberToObject(ev, "gone", (double)(c.probes.gone + c.pods.gone));
	cJSON_AddNumberToObject(ev, "request_failures",
				(double)(c.probes.failures + c.pods.failures));
	cJSON_AddNumberToObject(ev, "status_patches", (double)c.pub.patches);
	cJSON_AddNumberToObject(ev, "status_patch_failures", (double)c.pub.failures);
	cJSON_AddNumberToObject(ev, "lease_requests", (double)c.pub.lease_requests);
	cJSON_AddNumberToObject(ev, "probes", (double)c.nprobes);
	cJSON_AddNumberToObject(ev, "traced_processes", (double)c.ntraces);
	cJSON_AddBoolToObject(ev, "summary_writer", c.leader);
	cJSON_AddNumberToObject(ev, "analyses", (double)c.analyzer.analyses);
	cJSON_AddNumberToObject(ev, "analysis_timeouts", (double)c.analyzer.timeouts);
	cJSON_AddNumberToObject(ev, "analyses_abandoned_running", (double)c.analyzer.abandoned);
	cJSON_AddNumberToObject(ev, "bpf_links", (double)c.bpf_links);
	cJSON_AddNumberToObject(ev, "open_files", (double)c.files.open);
	cJSON_AddNumberToObject(ev, "open_files_limit", (double)c.files.soft);
	log_emit(ev);
}

void agent__free(struct agent *a)
{
	if (!a)
		return;
	informer__stop(a->probes_inf);
	informer__stop(a->pods_inf);
	summarizer__stop(a->sum);
	for (struct fprobe *p = a->probes; p && a->pub; p = p->next)
		fprobe__final_report(p, a->pub, a->o.node, a->manager);
	while (a->probes) {
		struct fprobe *p = a->probes;

		a->probes = p->next;
		fprobe__free(p, "the agent is stopping");
	}
	traceset__finish(&a->env);
	publisher__stop(a->pub);
	analyzer__free(a->env.analyzer);
	calibrator__free(a->calibrator);
	tracer__free(a->tracer);
	symbolizer__free(a->env.sym);
	nodeprocs__free(a->env.procs);
	binary_cache__free(a->cache);
	pods_clear(a);
	informer_view__clear(&a->probes_snap);
	informer_view__clear(&a->pods_snap);
	cJSON_Delete(a->seeds);
	free(a->manager);
	if (a->notify_fd >= 0)
		close(a->notify_fd);
	free(a);
}

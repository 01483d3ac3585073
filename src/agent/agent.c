// SPDX-License-Identifier: MIT
/*
 * The node agent's lifecycle and main loop. Each turn reconciles in
 * pipeline order:
 *   informers (FunctionProbes, this node's pods)  -> fprobe (the probe model)
 *   nodeprocs (this node's processes by container)
 *   placement (pod -> container -> process) -> traceset (attach, retire)
 *   -> results (per-function table) -> status (node entry, summary, conditions)
 *   -> publisher (server-side apply)        and metricspage (/metrics)
 * Beside it (agent_impl.h): agent_seeds.c (the reports it carries on
 * from), agent_slow.c (slow calls logged), agent_health.c (readiness,
 * /metrics, counters), agent_calib.c (the probes' bias, calibrated again).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/agent_impl.h"
#include "base/clock.h"
#include "agent/fprobe.h"
#include "agent/keepshare.h"
#include "kube/informer.h"
#include "kube/kobj.h"
#include "base/log.h"
#include "agent/http/metrics.h"
#include "agent/http/metricspage.h"
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
/* A turn's report writing (write_reports): at least one, then until this is spent. */
#define WRITE_BUDGET_NS (NS_PER_S / 10)
#define PROBES_PATH "/apis/retwatch.io/v1alpha1/functionprobes"

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

/* The probe of obj (cluster_uid: of that ClusterFunctionProbe), tracked from now on. */
static void sync_one(struct agent *a, const cJSON *obj, const char *cluster_uid)
{
	struct fprobe *p = probe_find(a, kobj_uid(obj));
	bool fresh = false;

	if (!p && (p = fprobe__new(obj, &a->env, a->o.node, cluster_uid))) {
		p->budget = a->o.report_budget;
		p->next = a->probes;
		a->probes = p;
		fresh = true;
	}
	if (p)
		fprobe__sync(p, obj, a->o.node, fresh ? agent_seeds__for(a, p) : NULL, fresh);
}

/* The probes as the server has them: new ones tracked, deleted ones dropped;
 * a ClusterFunctionProbe's, one per namespace it selects, beside them. */
static void sync_probes(struct agent *a)
{
	cJSON *cluster = agent_cluster__probes(a);
	struct fprobe **pp, *p;
	const cJSON *obj;

	for (p = a->probes; p; p = p->next)
		p->seen = p->cluster_uid && !cluster; /* kept while their lists are not in */
	cJSON_ArrayForEach(obj, a->probes_snap.objs) sync_one(a, obj, NULL);
	cJSON_ArrayForEach(obj, cluster) sync_one(a, obj, kobj_str(obj, CFPROBE_UID_FIELD));
	cJSON_Delete(cluster);
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
	keepshare__sweep(a->env.keep);
	start = clock__mono_ns();
	traceset__turn(&a->env, TURN_BUDGET_NS);
	place_all(a);
	attach_progress(a, tries, start);
}

/*
 * The due reports, written until the turn's budget is spent (a report over
 * its byte budget is folded, 130-200 ms for a large one): one of each
 * namespace in turn, from the one after the namespace the last turn ended
 * with, so that one tenant's many or large reports cannot hold the loop or
 * keep the others' waiting. The rest wait for the next turn.
 */
static void write_reports(struct agent *a, uint64_t now)
{
	size_t n = 0, k = 0, *order = NULL;
	struct fprobe **due = NULL;
	const char **ns = NULL;
	uint64_t start = clock__mono_ns();

	for (struct fprobe *p = a->probes; p; p = p->next)
		n += fprobe__report_due(p, now);
	if (!n)
		return;
	due = calloc(n, sizeof(*due));
	ns = calloc(n, sizeof(*ns));
	order = calloc(n, sizeof(*order));
	if (!due || !ns || !order)
		goto out;
	for (struct fprobe *p = a->probes; p && k < n; p = p->next)
		if (fprobe__report_due(p, now)) {
			ns[k] = p->ns;
			due[k++] = p;
		}
	if (fprobes__write_order(ns, k, a->last_write_ns, order))
		goto out;
	for (size_t i = 0; i < k; i++) {
		struct fprobe *p = due[order[i]];

		fprobe__write_report(p, a->pub, a->o.node, a->manager, a->pods, a->npods, now);
		snprintf(a->last_write_ns, sizeof(a->last_write_ns), "%s", p->ns);
		if (clock__mono_ns() - start >= WRITE_BUDGET_NS)
			break;
	}
out:
	free(due);
	free(ns);
	free(order);
}

static void write_statuses(struct agent *a)
{
	uint64_t now = clock__mono_ns();
	const cJSON *obj;

	write_reports(a, now);
	if (!publisher__leader(a->pub))
		return;
	cJSON_ArrayForEach(obj, a->probes_snap.objs)
	{
		struct fprobe *p = probe_find(a, kobj_uid(obj));

		if (p)
			fprobe__request_summary(p, a->sum, obj, now);
	}
	agent_cluster__summaries(a, now);
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
	return a->pub && a->sum && a->probes_inf && a->pods_inf && !agent_cluster__start(a)
		       ? 0
		       : -ENOMEM;
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

static bool layer_root(pid_t pid, char *buf, size_t len)
{
	nodeprocs__host_root(pid, buf, len);
	return true;
}

struct agent *agent__new(struct kube *k, const struct agent_opts *o, struct rw_error *err)
{
	struct tracer_opts topts = { .attach_mode = o->attach_mode,
				     .trampoline = o->trampoline,
				     .partial = true,
				     .slow_calls_per_sec = o->slow_calls_per_sec,
				     .share_contexts = o->ns_inflight,
				     .share_slow_calls_per_sec = o->ns_slow_calls_per_sec,
				     .tenant_of = tenant_of,
				     .capture_args = !o->deny_args,
				     /* a pre-fork server's workers (a PostgreSQL
				      * backend) can live less than a scan of /proc
				      * apart: counted from their fork */
				     .follow = true,
				     /* and a program a container starts again
				      * and again, beside a traced run of it */
				     .follow_started = true,
				     .hook_fn = traceset__hook_said };
	struct agent *a = calloc(1, sizeof(*a));
	struct utsname u;

	if (!a)
		goto nomem;
	topts.tenant_ctx = a;
	a->o = *o;
	a->k = k;
	a->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	a->cache = binary_cache__new(64);
	if (a->cache) {
		binary_cache__set_max_bytes(a->cache, o->analysis_cache_bytes);
		binary_cache__set_max_total(a->cache, o->analysis_max_bytes,
					    "the agent's --analysis-max-bytes");
	}
	a->env.sym = symbolizer__new(a->cache);
	/* the pods of one image share one analysis of each file in the cache */
	if (a->env.sym)
		symbolizer__set_root_fn(a->env.sym, layer_root);
	a->env.procs = nodeprocs__new("/proc");
	a->env.max_ns_funcs = o->max_ns_funcs;
	a->env.deny_args = o->deny_args;
	a->env.analyzer = analyzer__new(a->notify_fd, o->analysis_timeout_ns);
	a->env.keep = keepshare__new(o->max_ns_kept, o->max_kept);
	a->manager = status__node_manager(o->node);
	if (a->notify_fd < 0 || !a->cache || !a->env.sym || !a->env.procs || !a->env.analyzer ||
	    !a->env.keep || !a->manager)
		goto nomem;
	topts.cache = a->cache;
	if (agent_kernel__tracer(a, &topts, err))
		goto fail;
	a->page = (struct metrics_page){ .version = o->version,
					 .attach_mode = a->tracer ? tracer__attach_mode(a->tracer)
								  : "none",
					 .max_series = o->max_series,
					 .cal = &a->env.cal };
	if (a->tracer) {
		agent_calib__run(a);
		tracer__set_event_fn(a->tracer, agent_slow__on_call, a);
	}
	if (start_watching(a))
		goto nomem;
	log_info("agent on node %s: watching FunctionProbes and this node's pods at %s "
		 "(and ClusterFunctionProbes); kernel %s: %s",
		 o->node, kube__server(k), uname(&u) ? "unknown" : u.release,
		 a->tracer ? tracer__attach_why(a->tracer) : a->no_tracer);
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
		{ .fd = a->tracer ? tracer__fd(a->tracer) : -1, .events = POLLIN },
		{ .fd = a->o.metrics ? metrics_server__fd(a->o.metrics) : -1, .events = POLLIN },
	};

	if (poll(fds, 2, timeout_ms) < 0 && errno != EINTR)
		return -errno;
	return a->tracer ? tracer__poll(a->tracer, 0) : 0;
}

int agent__run(struct agent *a, const volatile sig_atomic_t *exiting,
	       const volatile sig_atomic_t *pause)
{
	agent_health__serve(a); /* alive from the start, not after the first wait */
	while (!*exiting && !*pause) {
		uint64_t now;
		int e = wait_events(a, 100);

		if (e < 0 && e != -EINTR) {
			log_error("failed to read slow calls: %s", strerror(-e));
			return e;
		}
		now = clock__mono_ns();
		agent_health__serve(a);
		/* nothing is probed before both lists are in: a half view would detach */
		if (!informer__synced(a->probes_inf) || !informer__synced(a->pods_inf))
			continue;
		if (!a->seeds)
			agent_seeds__load(a);
		/* processes left to attach or detach: the next turn goes on, not a scan later */
		if (woken(a) || now >= a->next_scan || a->env.attach_waiting ||
		    a->env.detach_waiting) {
			reconcile(a);
			/* the probes there were took theirs */
			cJSON_Delete(a->seeds);
			a->seeds = cJSON_CreateArray();
			a->next_scan = now + SCAN_EVERY_NS;
		}
		if (a->tracer) {
			tracer__tick(a->tracer);
			agent_calib__tick(a, now);
		}
		write_statuses(a);
	}
	return 0;
}

void agent__free(struct agent *a)
{
	if (!a)
		return;
	informer__stop(a->probes_inf);
	informer__stop(a->pods_inf);
	agent_cluster__stop(a);
	summarizer__stop(a->sum);
	for (struct fprobe *p = a->probes; p && a->pub; p = p->next)
		fprobe__final_report(p, a->pub, a->o.node, a->manager);
	while (a->probes) {
		struct fprobe *p = a->probes;

		a->probes = p->next;
		fprobe__free(p, "the agent is stopping");
	}
	traceset__finish(&a->env);
	keepshare__free(a->env.keep);
	publisher__stop(a->pub);
	analyzer__free(a->env.analyzer);
	calibrator__free(a->calibrator);
	tracer__free(a->tracer);
	free(a->no_tracer);
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
